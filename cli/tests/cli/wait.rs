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

/// On sled, which one process may open at a time, `wait` holds the store
/// only while it reads: the person finishes the handoff from another
/// process meanwhile, and both succeed.
#[test]
fn wait_on_sled_leaves_the_store_to_other_processes() {
    let sandbox = Sandbox::sled();
    let id = sandbox.handoff();
    let waiter = sandbox
        .command(&["wait", &id, "--timeout", "10m", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // Commands of other processes run while it waits: the waiter holds the
    // store only while it reads. An open waits up to a second for the
    // lock; on a loaded machine one read can hold it longer, and the
    // command is then refused as locked and run again, as a person would.
    let taking_turns = |args: &[&str]| {
        for _ in 0..20 {
            let run = sandbox.run(args);
            if run.code == 5 && run.stderr.contains("locked by another process") {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            assert_eq!(run.code, 0, "{args:?}: {run:?}");
            return;
        }
        panic!("{args:?} never found the store free while the waiter waited");
    };
    taking_turns(&["list"]);
    taking_turns(&["attach", &id, "--print"]);
    taking_turns(&["complete", &id, "--summary", "logged in"]);
    let run = Run::from_output(waiter.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let handoff: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(handoff["status"], "completed");
    assert_eq!(handoff["outcome"]["summary"], "logged in");
}

/// `watch` prints each event as it commits (JSON lines with `--json`),
/// runs `--exec` per event with the event on its stdin (a failing program
/// is reported and watching goes on), stops after `--count`, and says
/// where to resume; `--from` resumes after a position.
#[test]
fn watch_prints_events_as_they_commit_and_runs_a_program_for_each() {
    for sandbox in [Sandbox::new(), Sandbox::sled()] {
        let id = sandbox.handoff();
        let received = sandbox.path("received.jsonl");
        let program = format!("cat >> '{}'; exit 3", received.display());
        let watcher = sandbox
            .command(&[
                "watch", "--from", "0", "--count", "3", "--json", "--exec", "sh", "-c", &program,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        sandbox.ok(&["attach", &id, "--print"]);
        sandbox.ok(&["complete", &id, "--summary", "done"]);
        let run = Run::from_output(watcher.wait_with_output().unwrap());
        assert_eq!(run.code, 0, "{run:?}");
        let events: Vec<serde_json::Value> = run
            .stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["opened", "attached", "finished"], "{run:?}");
        for event in &events {
            assert_eq!(event["handoff_id"], id.as_str());
        }
        // The program got each event, whole, on its stdin.
        let given: Vec<serde_json::Value> = std::fs::read_to_string(&received)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(given, events);
        assert_eq!(run.stderr.matches("watching on").count(), 3, "{run:?}");
        let last = events[2]["position"].as_u64().unwrap();
        assert!(
            run.stderr
                .contains(&format!("resume with: lf-handoff watch --from {last}")),
            "{run:?}"
        );
        // Resuming after the attach prints the finish, in human form.
        let attached = events[1]["position"].as_u64().unwrap().to_string();
        let resumed = sandbox.ok(&["watch", "--from", &attached, "--count", "1"]);
        assert!(resumed.starts_with(&format!("{last}  ")), "{resumed}");
        assert!(
            resumed.contains("finished  attached -> completed"),
            "{resumed}"
        );
    }
}
