//! The soak's CI form (C29): `lf-handoff-soak` for 30 s on SQLite and on
//! PostgreSQL at once (one test each, so they run side by side): a mixed
//! legitimate load through `serve` while a peer trickles bodies on every
//! connection it may hold and another floods idle connections. It must
//! pass: no error of the legitimate client, every kind of request served,
//! the store's invariants and every acknowledged change held, and the
//! server's resident set within 50% of what it was after the warm-up (a
//! generous bound for a short run; the long form's is 10%,
//! `docs/RELIABILITY.md`). Nothing here judges speed.
//!
//! A third test shows the soak can fail (a lost acknowledged open).
//!
//! The body deadline is 5 s rather than `serve`'s 30 s, so that the
//! trickling peer is cut several times within the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// Runs the soak on `backend` and checks its report.
fn soak(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lf-handoff-soak"))
        .args([
            "--backends",
            backend,
            "--duration",
            "30s",
            "--warm-up",
            "6s",
        ])
        .args([
            "--body-timeout",
            "5s",
            "--max-rss-growth",
            "50",
            "--seed",
            "1",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let errors = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{text}\n{errors}");
    assert!(text.contains("soak: PASSED"), "{text}");
    let line = |label: &str| {
        text.lines()
            .find(|line| line.starts_with(&format!("[{backend}] {label}")))
            .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"))
            .to_string()
    };
    assert!(line("legitimate errors:").ends_with(": 0"), "{text}");
    assert!(
        line("store:").contains("invariant violations 0, acknowledged changes lost 0"),
        "{text}"
    );
    // The hostile peers were there, and were cut and refused.
    assert!(line("trickling peer").contains("cut (400)"), "{text}");
    assert!(!line("trickling peer").contains("cut (400) 0,"), "{text}");
    assert!(
        !line("flooding peer").contains("refused (503) 0,"),
        "{text}"
    );
    eprintln!("{text}");
}

/// The soak can fail: told that an open it never made was acknowledged,
/// its store check reports it lost and the run exits 1.
#[test]
fn a_soak_that_lost_an_acknowledged_open_fails() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lf-handoff-soak"))
        .args([
            "--backends",
            "sqlite",
            "--duration",
            "3s",
            "--max-rss-growth",
            "1000",
        ])
        .arg("--self-test-fake-acks")
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("acknowledged changes lost 1,"), "{text}");
    assert!(text.contains("[sqlite] legitimate errors: 0"), "{text}");
    assert!(text.contains("soak: FAILED"), "{text}");
}

#[test]
fn the_service_holds_a_mixed_load_under_attack_on_sqlite() {
    soak("sqlite");
}

#[test]
fn the_service_holds_a_mixed_load_under_attack_on_postgres() {
    if std::env::var("LF_HANDOFF_TEST_POSTGRES_URL").is_err() {
        eprintln!(
            "skipped: LF_HANDOFF_TEST_POSTGRES_URL is unset (CI sets it; set it to soak \
             PostgreSQL too)"
        );
        return;
    }
    soak("postgres");
}
