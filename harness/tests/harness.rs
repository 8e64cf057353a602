//! The harness binaries, run as a user runs them: they pass on a sound
//! store and print their figures, and they fail (exit 1) when a child lies
//! about an acknowledged write, the crash harness is shown a history with
//! an event too few or too many, or a racer lies about winning, which shows
//! the checks can fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

/// Runs a harness binary with its stores in a directory of the test's own,
/// so a store kept after a (deliberate) failure is removed with it.
fn harness(binary: &str, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(binary)
        .args(args)
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap()
}

fn crash(args: &[&str]) -> Output {
    harness(env!("CARGO_BIN_EXE_lf-handoff-crash"), args)
}

fn race(args: &[&str]) -> Output {
    harness(env!("CARGO_BIN_EXE_lf-handoff-race"), args)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The number after `label` on the line that contains it.
fn figure(text: &str, label: &str) -> u64 {
    let line = text
        .lines()
        .find(|line| line.contains(label))
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"));
    let rest = &line[line.find(label).unwrap() + label.len()..];
    rest.trim()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {label:?} in {line:?}"))
}

#[test]
fn crash_harness_passes_on_sqlite_and_prints_its_figures() {
    let output = crash(&[
        "--backends",
        "sqlite",
        "--trials",
        "4",
        "--seed",
        "7",
        "--min-acks",
        "5",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(figure(&text, "[sqlite] trials run:"), 4, "{text}");
    assert!(
        figure(&text, "[sqlite] transitions acknowledged:") >= 20,
        "{text}"
    );
    assert_eq!(figure(&text, "[sqlite] transitions lost:"), 0, "{text}");
    assert_eq!(figure(&text, "[sqlite] invariant violations:"), 0, "{text}");
    assert_eq!(figure(&text, "[sqlite] harness errors:"), 0, "{text}");
    assert!(
        figure(&text, "records checked after the last trial:") >= 4,
        "{text}"
    );
    assert_history_figures(&text, "sqlite");
    assert!(text.contains("crash harness: PASSED"), "{text}");
}

/// The history figures of a passing run: events were checked, and every
/// change had its event and every event its change.
fn assert_history_figures(text: &str, backend: &str) {
    assert!(
        figure(text, &format!("[{backend}] events checked:")) >= 20,
        "{text}"
    );
    for label in [
        "changes without their event:",
        "events without their change:",
        "history violations (malformed, wrong actor):",
    ] {
        assert_eq!(figure(text, &format!("[{backend}] {label}")), 0, "{text}");
    }
}

#[test]
fn crash_harness_exercises_deadlines_and_checks_their_history() {
    // Two deadline lanes that live long enough to sweep what the previous
    // child left due, extend deadlines and let handoffs expire.
    let output = crash(&[
        "--backends",
        "sqlite",
        "--trials",
        "4",
        "--seed",
        "11",
        "--min-acks",
        "40",
        "--max-delay",
        "500ms",
        "--deadline-lanes",
        "2",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(figure(&text, "expire ") >= 1, "{text}");
    assert!(figure(&text, " expired ") >= 1, "{text}");
    assert_history_figures(&text, "sqlite");
}

#[test]
fn crash_harness_runs_on_postgres_when_a_server_is_named() {
    if std::env::var("LF_HANDOFF_TEST_POSTGRES_URL").is_err() {
        eprintln!("skipped: LF_HANDOFF_TEST_POSTGRES_URL names no PostgreSQL server");
        return;
    }
    let output = crash(&[
        "--backends",
        "postgres",
        "--trials",
        "6",
        "--seed",
        "5",
        "--min-acks",
        "10",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(figure(&text, "[postgres] transitions lost:"), 0, "{text}");
    assert_history_figures(&text, "postgres");
}

#[test]
fn crash_harness_counts_a_change_without_its_event_and_an_event_without_its_change() {
    // The harness drops the last event of one history it reads after each
    // trial and adds a second `opened` to another.
    let output = crash(&[
        "--backends",
        "sqlite",
        "--trials",
        "2",
        "--min-acks",
        "12",
        "--self-test-fake-history",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        figure(&text, "[sqlite] changes without their event:") >= 1,
        "{text}"
    );
    assert!(
        figure(&text, "[sqlite] events without their change:") >= 1,
        "{text}"
    );
    assert!(
        text.contains("change without its event: handoff ih_"),
        "{text}"
    );
    assert!(text.contains("a second `opened` event"), "{text}");
    assert_eq!(figure(&text, "[sqlite] transitions lost:"), 0, "{text}");
    assert!(text.contains("crash harness: FAILED"), "{text}");
}

#[test]
fn crash_harness_plays_the_crash_story_and_prints_its_two_figures() {
    // The fast form CI runs, on the embedded backends, fewer trials.
    let mut taken_over = 0;
    for backend in ["sqlite", "sled"] {
        let output = crash(&["--backends", backend, "--trials", "12", "--seed", "1"]);
        let text = stdout(&output);
        assert_eq!(output.status.code(), Some(0), "{text}");
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("[{backend}] crash story: 2 parents, ")))
            .unwrap_or_else(|| panic!("no crash story line: {text}"));
        assert!(figure(line, "2 parents,") >= 1, "steps were opened: {text}");
        // Nearly every kill lands inside a step, which the next generation
        // then runs again.
        assert!(
            figure(line, "steps opened,") >= 1,
            "steps were run again: {text}"
        );
        assert_eq!(
            figure(
                &text,
                &format!("[{backend}] duplicate handoffs for one step:")
            ),
            0,
            "{text}"
        );
        assert_eq!(
            figure(
                &text,
                &format!("[{backend}] wakes held by two generations:")
            ),
            0,
            "{text}"
        );
        assert!(text.contains("0 duplicate handoffs for one step"), "{text}");
        assert!(text.contains("0 wakes held by two generations"), "{text}");
        // "... (N finished), M wakes taken over, ..."
        taken_over += figure(line, "finished),");
    }
    // The zeros above mean something only if wakes did change hands.
    assert!(taken_over >= 1, "no wake was taken over in the fast form");
}

#[test]
fn crash_harness_counts_a_second_handoff_for_a_step_and_a_wake_won_back() {
    let output = crash(&[
        "--backends",
        "sqlite",
        "--trials",
        "2",
        "--lanes",
        "1",
        "--min-acks",
        "12",
        "--self-test-fake-steps",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        figure(&text, "[sqlite] duplicate handoffs for one step:") >= 1,
        "{text}"
    );
    assert!(
        figure(&text, "[sqlite] wakes held by two generations:") >= 1,
        "{text}"
    );
    assert!(text.contains("duplicate: "), "{text}");
    assert!(
        text.contains("wake held by two generations: handoff ih_"),
        "{text}"
    );
    assert!(text.contains("crash harness: FAILED"), "{text}");
}

#[test]
fn crash_harness_counts_an_acknowledged_write_that_is_not_stored_as_lost() {
    // With one lane (and no story) the first three acknowledgements are a
    // wave, its open and the phantom open, so every trial has at least one
    // lie to catch.
    let output = crash(&[
        "--backends",
        "sqlite",
        "--trials",
        "2",
        "--lanes",
        "1",
        "--story-parents",
        "0",
        "--deadline-lanes",
        "0",
        "--min-acks",
        "3",
        "--self-test-fake-acks",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(figure(&text, "[sqlite] transitions lost:") >= 2, "{text}");
    assert!(text.contains("is missing"), "{text}");
    assert!(text.contains("crash harness: FAILED"), "{text}");
    assert!(text.contains("kept for inspection"), "{text}");
}

#[test]
fn race_harness_finds_exactly_one_winner_per_race() {
    let output = race(&[
        "--backends",
        "sqlite",
        "--processes",
        "3",
        "--handoffs",
        "6",
        "--seed",
        "3",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("[sqlite] racers: 3 separate OS processes x 6 handoffs"),
        "{text}"
    );
    assert_eq!(
        figure(&text, "open races with exactly one creator:"),
        6,
        "{text}"
    );
    assert_eq!(
        figure(&text, "finish races with exactly one winner:"),
        6,
        "{text}"
    );
    assert_eq!(
        figure(&text, "claim races with exactly one winner:"),
        6,
        "{text}"
    );
    assert_eq!(figure(&text, "[sqlite] errors:"), 0, "{text}");
    assert_eq!(figure(&text, "losing answers: conflict"), 12, "{text}");
    assert!(text.contains("race harness: PASSED"), "{text}");
}

#[test]
fn race_harness_races_store_handles_when_asked() {
    let output = race(&[
        "--backends",
        "sqlite",
        "--processes",
        "4",
        "--handoffs",
        "4",
        "--mode",
        "handles",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("store handles in one process"), "{text}");
    assert_eq!(
        figure(&text, "finish races with exactly one winner:"),
        4,
        "{text}"
    );
}

#[test]
fn race_harness_reports_a_double_winner() {
    let output = race(&[
        "--backends",
        "sqlite",
        "--processes",
        "3",
        "--handoffs",
        "2",
        "--self-test-false-wins",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert_eq!(
        figure(&text, "finish races with exactly one winner:"),
        0,
        "{text}"
    );
    let finish = text
        .lines()
        .find(|line| line.contains("finish races"))
        .unwrap();
    assert_eq!(figure(finish, "several winners"), 2, "{text}");
    assert!(text.contains("race harness: FAILED"), "{text}");
}

#[test]
fn harnesses_stopped_by_the_time_limit_say_so_and_exit_3() {
    let output = crash(&["--backends", "sqlite", "--time-limit", "0s"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(
        text.contains("[sqlite] trials run: 0 (stopped by the time limit)"),
        "{text}"
    );
    let output = race(&["--backends", "sqlite", "--time-limit", "0s"]);
    assert_eq!(output.status.code(), Some(3), "{}", stdout(&output));
}

#[test]
fn unknown_backends_and_bad_counts_are_usage_errors() {
    let output = crash(&["--backends", "oracle"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown backend \"oracle\""), "{stderr}");
    assert!(stderr.contains("sqlite"), "{stderr}");
    assert_eq!(race(&["--processes", "1"]).status.code(), Some(2));
    assert_eq!(race(&["--processes", "65"]).status.code(), Some(2));
    assert_eq!(crash(&["--max-delay", "soon"]).status.code(), Some(2));
}

#[test]
fn sled_is_crashed_and_raced_with_handles_in_one_process() {
    let output = crash(&["--backends", "sled", "--trials", "3", "--min-acks", "3"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(figure(&text, "[sled] trials run:"), 3, "{text}");
    assert_eq!(figure(&text, "[sled] transitions lost:"), 0, "{text}");

    let output = race(&["--backends", "sled", "--processes", "3", "--handoffs", "3"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("sled allows one process per store, so a cross-process race does not apply"),
        "{text}"
    );
    assert_eq!(
        figure(&text, "claim races with exactly one winner:"),
        3,
        "{text}"
    );

    let output = race(&[
        "--backends",
        "sled",
        "--mode",
        "processes",
        "--handoffs",
        "1",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("race it with handles instead"), "{text}");
}

#[test]
fn crash_harness_kills_upgrades_of_release_1_stores_and_loses_nothing() {
    let output = crash(&[
        "--backends",
        "sqlite,sled",
        "--trials",
        "0",
        "--upgrade-trials",
        "6",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    for backend in ["sqlite", "sled"] {
        let label = format!("[{backend}] upgrade kills:");
        let line = text.lines().find(|line| line.contains(&label));
        assert!(
            line.is_some_and(|line| line.ends_with(", 0 records lost")),
            "{text}"
        );
    }
    assert!(!text.contains("trials run:"), "no crash trials ran: {text}");
}

#[test]
fn crash_harness_kills_upgrades_of_release_2_stores_and_loses_nothing() {
    let output = crash(&[
        "--backends",
        "sqlite,sled",
        "--trials",
        "0",
        "--upgrade-trials",
        "4",
        "--upgrade-from",
        "2",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("upgrade trials per backend of release 0.2.0 stores"),
        "{text}"
    );
    for backend in ["sqlite", "sled"] {
        let label = format!("[{backend}] upgrade kills:");
        let line = text.lines().find(|line| line.contains(&label));
        assert!(
            line.is_some_and(|line| line.ends_with(", 0 records lost")),
            "{text}"
        );
    }
}

#[test]
fn the_kill_loop_kills_creation_open_writes_and_upgrades_and_every_store_opens() {
    let output = crash(&[
        "--backends",
        "sqlite,sled",
        "--trials",
        "0",
        "--kills",
        "16",
        "--kills-per-store",
        "4",
        "--seed",
        "3",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    for backend in ["sqlite", "sled"] {
        assert_eq!(
            figure(&text, &format!("[{backend}] kill loop:")),
            16,
            "{text}"
        );
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("[{backend}] kill loop:")))
            .unwrap();
        // Four stores: three made fresh (creation killed), one release
        // 0.1.0 copy (upgrade killed), each killed four times.
        assert!(line.contains("16 kills on 4 stores"), "{line}");
        assert!(
            figure(&text, &format!("[{backend}] acknowledged writes checked:")) > 0,
            "{text}"
        );
        assert_eq!(
            figure(&text, &format!("[{backend}] unopenable stores:")),
            0,
            "{text}"
        );
        assert_eq!(
            figure(&text, &format!("[{backend}] acknowledged writes lost:")),
            0,
            "{text}"
        );
        assert_eq!(
            figure(&text, &format!("[{backend}] harness errors:")),
            0,
            "{text}"
        );
    }
    assert!(text.contains("crash harness: PASSED"), "{text}");
}

#[test]
fn the_kill_loop_counts_an_acknowledged_write_that_is_not_stored_as_lost() {
    let output = crash(&[
        "--backends",
        "sled",
        "--trials",
        "0",
        "--kills",
        "8",
        "--kills-per-store",
        "8",
        "--self-test-fake-acks",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        figure(&text, "[sled] acknowledged writes lost:") > 0,
        "{text}"
    );
    assert!(text.contains("crash harness: FAILED"), "{text}");
}
