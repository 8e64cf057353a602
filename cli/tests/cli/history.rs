//! History (C15) from the command line: `history ID`, and the actor each
//! change names (`--actor`, `LF_HANDOFF_ACTOR`, the default).

use serde_json::Value;

use crate::deadlines::EVENT_FIELDS;
use crate::support::{assert_timestamp, keys, sorted, Sandbox};

#[test]
fn history_lists_every_change_in_order_with_its_actor() {
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&["--actor", "opener-bot", "--expires-in", "1h"]);
    let id = handoff["id"].as_str().unwrap();
    // The variable names the actor...
    let mut attach = sandbox.command(&["attach", id, "--print"]);
    attach.env("LF_HANDOFF_ACTOR", "alice@laptop");
    assert!(attach.output().unwrap().status.success());
    // ...and the flag wins over it.
    let mut complete = sandbox.command(&["complete", id, "--summary", "done", "--actor", "bob"]);
    complete.env("LF_HANDOFF_ACTOR", "alice@laptop");
    assert!(complete.output().unwrap().status.success());
    // A replay changes nothing and adds no event.
    sandbox.ok(&["complete", id, "--summary", "done"]);
    // The default: user@host (pid N); an empty variable counts as unset.
    let mut claim = sandbox.command(&["claim-wake", id, "--generation", "1"]);
    claim.env("LF_HANDOFF_ACTOR", "");
    assert!(claim.output().unwrap().status.success());
    sandbox.ok(&["claim-wake", id, "--generation", "1"]);

    let events = sandbox.json(&["history", id]);
    let events = events.as_array().unwrap();
    let summary: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["status_after"].as_str().unwrap(),
                e["actor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary[..3],
        [
            ("opened", "waiting", "opener-bot"),
            ("attached", "attached", "alice@laptop"),
            ("finished", "completed", "bob"),
        ],
        "{events:?}"
    );
    assert_eq!(summary.len(), 4, "{events:?}");
    assert_eq!(summary[3].0, "wake_claimed");
    let default = summary[3].2;
    assert!(
        default.contains('@') && default.contains(" (pid "),
        "the default actor is user@host (pid N): {default}"
    );

    let mut position = 0;
    for (n, event) in events.iter().enumerate() {
        assert_eq!(keys(event), sorted(EVENT_FIELDS), "{event}");
        assert_eq!(event["handoff_id"], id);
        assert_eq!(event["seq"], n as u64 + 1, "numbered 1, 2, 3 ...");
        let at = event["position"].as_u64().unwrap();
        assert!(at > position, "positions grow: {events:?}");
        position = at;
        assert_timestamp(&event["at"]);
    }
    assert!(events[0]["status_before"].is_null());
    assert!(events[0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("expires "));
    assert_eq!(events[1]["status_before"], "waiting");
    assert_eq!(events[2]["status_before"], "attached");
    assert_eq!(events[3]["detail"], "generation 1");

    let table = sandbox.ok(&["history", id]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    for title in ["TIME", "EVENT", "STATUS", "ACTOR", "DETAIL"] {
        assert!(lines[0].contains(title), "{table}");
    }
    assert!(lines[1].contains("opened") && lines[1].contains("opener-bot"));
    assert!(lines[2].contains("waiting -> attached") && lines[2].contains("alice@laptop"));
    assert!(lines[3].contains("attached -> completed") && lines[3].contains("bob"));
    assert!(lines[4].contains("wake_claimed") && lines[4].contains("generation 1"));
    assert!(lines[1].contains(" UTC "), "{table}");
}

#[test]
fn bad_actors_are_usage_errors_and_change_nothing() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    let long = "a".repeat(201);
    for bad in ["", "   ", long.as_str(), "tab\there"] {
        let actor = format!("--actor={bad}");
        let error = sandbox.fails(&["complete", &id, "--summary", "s", &actor], 2, "usage");
        assert!(error.contains("actor"), "{bad:?}: {error}");
    }
    for bad in ["   ", long.as_str(), "new\nline"] {
        let error = sandbox.fails_with(
            &["complete", &id, "--summary", "s"],
            2,
            "usage",
            |command| {
                command.env("LF_HANDOFF_ACTOR", bad);
            },
        );
        assert!(error.contains("LF_HANDOFF_ACTOR"), "{bad:?}: {error}");
    }
    // With the flag given the variable is not read, so a bad one is no
    // matter.
    let mut command = sandbox.command(&["attach", &id, "--print", "--actor", "carol"]);
    command.env("LF_HANDOFF_ACTOR", "   ");
    assert!(command.output().unwrap().status.success());
    let status: Value = sandbox.json(&["status", &id]);
    assert_eq!(
        status["status"], "attached",
        "only the good attach happened"
    );
    let events = sandbox.json(&["history", &id]);
    let actors: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["actor"].as_str().unwrap())
        .collect();
    assert_eq!(actors.len(), 2, "{events}");
    assert_eq!(actors[1], "carol");
}

#[test]
fn history_of_an_unknown_handoff_exits_3() {
    let sandbox = Sandbox::new();
    sandbox.handoff();
    let unknown = "ih_01a23770-7ddd-7406-89b2-f78da53555de";
    let error = sandbox.fails(&["history", unknown], 3, "not_found");
    assert!(error.contains(unknown), "{error}");
    sandbox.fails(&["history", "not-an-id"], 2, "usage");
}
