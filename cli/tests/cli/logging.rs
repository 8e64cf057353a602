//! `-v`, `-vv` and `RUST_LOG`: what the store does, on stderr only.

use crate::support::{Run, Sandbox};

#[test]
fn verbose_logs_each_store_call_on_stderr_and_leaves_stdout_alone() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    let quiet = sandbox.run(&["--json", "status", &id]);
    assert_eq!(quiet.code, 0);
    assert_eq!(quiet.stderr, "", "nothing is logged without -v");

    let verbose = sandbox.run(&["--json", "-v", "status", &id]);
    assert_eq!(verbose.code, 0, "{verbose:?}");
    assert_eq!(verbose.stdout, quiet.stdout, "stdout is the same JSON");
    let line = verbose
        .stderr
        .lines()
        .find(|line| line.contains("get_interactive_handoff"))
        .unwrap_or_else(|| panic!("no span of the call in {:?}", verbose.stderr));
    assert!(line.contains("backend=\"sqlite\""), "{line}");
    assert!(line.contains(&format!("handoff={id}")), "{line}");
    assert!(line.contains("duration_us="), "{line}");
    assert!(
        !verbose.stderr.contains("sqlx::query"),
        "-v shows calls only"
    );

    let very = sandbox.run(&["-vv", "attach", &id, "--print"]);
    assert_eq!(very.code, 0, "{very:?}");
    assert!(very.stderr.contains("sqlx::query"), "{}", very.stderr);
    assert!(
        very.stderr.contains("attach_interactive_handoff"),
        "{}",
        very.stderr
    );
}

#[test]
fn rust_log_chooses_what_is_logged_and_a_bad_one_is_reported() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    let run = Run::from_output(
        sandbox
            .command(&["status", &id])
            .env("RUST_LOG", "sqlx=debug")
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0);
    assert!(run.stderr.contains("sqlx::query"), "{}", run.stderr);
    assert!(!run.stderr.contains("duration_us"), "{}", run.stderr);

    let bad = Run::from_output(
        sandbox
            .command(&["status", &id])
            .env("RUST_LOG", "lf_handoff=notalevel")
            .output()
            .unwrap(),
    );
    assert_eq!(bad.code, 0, "a bad RUST_LOG does not stop the command");
    assert!(bad.stderr.contains("ignoring RUST_LOG"), "{}", bad.stderr);
}
