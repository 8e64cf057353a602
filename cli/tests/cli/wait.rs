//! `wait`: blocks until another process finishes the handoff, or times out
//! with exit 4.

use std::process::Stdio;
use std::time::Duration;

use crate::support::{assert_kind, keys, Run, Sandbox};

#[test]
fn wait_returns_when_another_process_finishes_the_handoff() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    // The timeout only keeps a broken build from hanging the suite.
    let mut waiter = sandbox
        .command(&["wait", &id, "--timeout", "10m", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Give the waiter time to start polling; it must still be waiting,
    // because nothing has finished the handoff yet.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "wait returned while the handoff was still waiting"
    );
    sandbox.ok(&["attach", &id, "--print"]);
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "attached is not finished"
    );

    sandbox.ok(&["back", &id, "--summary", "continue from the login"]);
    let run = Run::from_output(waiter.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stderr, "", "no spinner without a terminal: {run:?}");
    let handoff: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(keys(&handoff).contains(&"outcome".to_string()));
    assert_eq!(handoff["id"], id.as_str());
    assert_eq!(handoff["status"], "handed_back");
    assert_eq!(handoff["outcome"]["summary"], "continue from the login");
}

#[test]
fn wait_times_out_with_exit_4() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    let error = sandbox.fails(&["wait", &id, "--timeout", "300ms"], 4, "timeout");
    assert!(error.contains(&id), "{error}");
    // `--json` after the command counts as well.
    let run = sandbox.run(&["wait", &id, "--timeout", "0s", "--json"]);
    assert_kind(&run, 4, "timeout", "wait --timeout 0s --json");
}

#[test]
fn wait_on_a_finished_handoff_prints_it_at_once() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    let finished = sandbox.json(&["fail", &id, "--reason", "no credentials"]);
    let waited = sandbox.json(&["wait", &id, "--timeout", "0s"]);
    assert_eq!(waited, finished);
    let block = sandbox.ok(&["wait", &id]);
    assert!(block.contains("failed: no credentials"), "{block}");
    sandbox.fails(
        &["wait", "ih_01a23770-7ddd-7406-89b2-f78da53555de"],
        3,
        "not_found",
    );
}
