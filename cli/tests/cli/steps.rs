//! Step keys and the wake hand-over on the command line (docs/CONTRACT.md,
//! C12 and C13): `open --step`, the step in `status` and `list`, and
//! `claim-wake` after `task body` replaced the body that held the wake.

use serde_json::Value;

use crate::handoffs::{assert_handoff_shape, open_task_args, task};
use crate::support::Sandbox;

/// `open` on `task` by body `generation` at `step`.
fn open_at<'a>(task: &'a str, generation: &'a str, step: &'a str) -> Vec<&'a str> {
    let mut args = open_task_args(task, "/work/tree", generation);
    args.splice(1..1, ["--step", step]);
    args
}

fn id(handoff: &Value) -> &str {
    handoff["id"].as_str().unwrap()
}

#[test]
fn open_at_a_step_returns_the_same_handoff_even_after_it_finished() {
    let sandbox = Sandbox::new();
    let task = task(&sandbox, "/work/tree");
    let opened = sandbox.json(&open_at(&task, "4", "oauth-login@turn-17"));
    assert_eq!(opened["created"], true);
    let handoff = opened["handoff"].clone();
    assert_handoff_shape(&handoff);
    assert_eq!(handoff["step"], "oauth-login@turn-17");

    let again = sandbox.json(&open_at(&task, "4", "oauth-login@turn-17"));
    assert_eq!(again["created"], false);
    assert_eq!(again["handoff"], handoff, "nothing was written");
    let run = sandbox.run(&open_at(&task, "4", "oauth-login@turn-17"));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), id(&handoff));
    assert!(run.stderr.starts_with("reused"), "{run:?}");
    assert!(run.stderr.contains("oauth-login@turn-17"), "{run:?}");

    let status = sandbox.json(&["status", id(&handoff)]);
    assert_eq!(status, handoff);
    let block = sandbox.ok(&["status", id(&handoff)]);
    let line = block
        .lines()
        .find(|line| line.starts_with("step"))
        .unwrap_or_else(|| panic!("no step line: {block}"));
    assert!(line.ends_with("  oauth-login@turn-17"), "{line}");
    let rows = sandbox.json(&["list"]);
    assert_eq!(rows[0]["session_id"], handoff["id"]);
    assert_eq!(rows[0]["step"], "oauth-login@turn-17");

    // A person finishes; the body crashes and its replacement (generation
    // 5, recorded by the orchestrator) re-runs the step: it gets the
    // finished handoff back, and no person is asked again.
    sandbox.ok(&["complete", id(&handoff), "--summary", "logged in"]);
    let finished = sandbox.json(&["status", id(&handoff)]);
    let same = sandbox.json(&open_at(&task, "4", "oauth-login@turn-17"));
    assert_eq!(same["created"], false);
    assert_eq!(same["handoff"], finished);
    sandbox.ok(&["task", "body", &task, "--generation", "5"]);
    let rerun = sandbox.json(&open_at(&task, "5", "oauth-login@turn-17"));
    assert_eq!(rerun["created"], false);
    assert_eq!(rerun["handoff"], finished);
    assert_eq!(rerun["handoff"]["status"], "completed");
    assert_eq!(rerun["handoff"]["body_generation"], 4);
    let run = sandbox.run(&open_at(&task, "5", "oauth-login@turn-17"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.starts_with("reused") && run.stderr.contains("completed"),
        "{run:?}"
    );
    let rows = sandbox.json(&["list", "--parent", &task]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "one handoff: {rows}");

    // The stale generation still gets nothing (C2 before C12).
    sandbox.fails(
        &open_at(&task, "4", "oauth-login@turn-17"),
        4,
        "stale_generation",
    );
}

#[test]
fn another_step_while_the_parent_is_busy_exits_4_parent_busy() {
    let sandbox = Sandbox::new();
    let task = task(&sandbox, "/work/tree");
    let first = sandbox.json(&open_at(&task, "4", "step-a"));
    assert_eq!(first["created"], true);
    let busy = id(&first["handoff"]).to_string();

    let error = sandbox.fails(&open_at(&task, "4", "step-b"), 4, "parent_busy");
    assert!(error.contains(&busy), "names the active handoff: {error}");
    // Without a step, an open replays the active handoff whatever its step.
    let plain = sandbox.json(&open_task_args(&task, "/work/tree", "4"));
    assert_eq!(plain["created"], false);
    assert_eq!(plain["handoff"]["id"], busy.as_str());

    sandbox.ok(&["back", &busy, "--summary", "continue"]);
    let second = sandbox.json(&open_at(&task, "4", "step-b"));
    assert_eq!(second["created"], true);
    assert_ne!(id(&second["handoff"]), busy);
    assert_eq!(second["handoff"]["step"], "step-b");
    // And step A still gives the first handoff back.
    let again = sandbox.json(&open_at(&task, "4", "step-a"));
    assert_eq!(again["created"], false);
    assert_eq!(again["handoff"]["id"], busy.as_str());

    let table = sandbox.ok(&["list", "--parent", &task]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    let step_column = lines[0].find("STEP").unwrap();
    assert!(lines[1][step_column..].starts_with("step-a "), "{table}");
    assert!(lines[2][step_column..].starts_with("step-b "), "{table}");
}

#[test]
fn a_long_step_is_cut_in_the_table_only_on_a_terminal() {
    let sandbox = Sandbox::new();
    let task = task(&sandbox, "/work/tree");
    let step = format!("login@{}", "turn-".repeat(30));
    sandbox.ok(&open_at(&task, "4", &step));
    let mut command = sandbox.command(&["list"]);
    command.env("COLUMNS", "160");
    let run = crate::support::Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let row = run.stdout.lines().nth(1).unwrap();
    assert!(row.chars().count() <= 160, "{row}");
    assert!(!row.contains(&step), "{row}");
    assert!(row.contains("login@turn-turn-"), "{row}");
    assert!(row.contains("…"), "{row}");
    assert!(row.contains("a credential is needed"), "{row}");
    let piped = sandbox.ok(&["list"]);
    assert!(piped.contains(&step), "no cut without a terminal: {piped}");
}

#[test]
fn a_bad_step_is_a_usage_error_and_opens_nothing() {
    let sandbox = Sandbox::new();
    let task = task(&sandbox, "/work/tree");
    let long = "s".repeat(201);
    for bad in ["", "   ", "a\nb", "tab\there", long.as_str()] {
        let error = sandbox.fails(&open_at(&task, "4", bad), 2, "usage");
        assert!(error.contains("step"), "{bad:?}: {error}");
    }
    assert_eq!(sandbox.json(&["list"]), serde_json::json!([]));
}

#[test]
fn claim_wake_hands_the_wake_to_the_parents_new_generation() {
    let sandbox = Sandbox::new();
    let task = task(&sandbox, "/work/tree");
    let opened = sandbox.json(&open_at(&task, "4", "oauth-login@turn-17"));
    let handoff = id(&opened["handoff"]).to_string();
    sandbox.ok(&["back", &handoff, "--summary", "continue"]);

    // Generation 4 claims the wake, then crashes before it moves on.
    let first = sandbox.json(&["claim-wake", &handoff, "--generation", "4"]);
    assert_eq!(first["claimed"], true);
    assert_eq!(first["holder"], 4);
    // Generation 5 is not the parent's body yet: no hand-over.
    let early = sandbox.json(&["claim-wake", &handoff, "--generation", "5"]);
    assert_eq!(early["claimed"], false);
    assert_eq!(early["holder"], 4);

    // The orchestrator records generation 5, which re-runs the step and
    // takes the wake over.
    sandbox.ok(&["task", "body", &task, "--generation", "5"]);
    let rerun = sandbox.json(&open_at(&task, "5", "oauth-login@turn-17"));
    assert_eq!(rerun["created"], false);
    assert_eq!(rerun["handoff"]["id"], handoff.as_str());
    let taken = sandbox.json(&["claim-wake", &handoff, "--generation", "5"]);
    assert_eq!(taken["claimed"], true);
    assert_eq!(taken["holder"], 5);
    assert_eq!(taken["handoff"]["wake_claimed_by_generation"], 5);
    assert_eq!(
        sandbox.json(&["claim-wake", &handoff, "--generation", "5"]),
        taken,
        "the new holder may retry"
    );

    // Generation 4's retry is refused from now on, and so is a generation
    // the parent has not recorded.
    let old = sandbox.json(&["claim-wake", &handoff, "--generation", "4"]);
    assert_eq!(old["claimed"], false);
    assert_eq!(old["holder"], 5);
    assert_eq!(old["handoff"], taken["handoff"], "nothing was written");
    let human = sandbox.ok(&["claim-wake", &handoff, "--generation", "4"]);
    assert!(human.starts_with("not claimed"), "{human}");
    assert!(human.contains("generation 5"), "{human}");
    let unknown = sandbox.json(&["claim-wake", &handoff, "--generation", "6"]);
    assert_eq!(unknown["claimed"], false);
    assert_eq!(unknown["holder"], 5);
    let block = sandbox.ok(&["status", &handoff]);
    assert!(block.contains("claimed by generation 5"), "{block}");
    let rows = sandbox.json(&["list", "--parent", &task]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
}
