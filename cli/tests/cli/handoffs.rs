//! open, list, status, attach --print, complete / back / fail, claim-wake.

use serde_json::Value;

use crate::support::{assert_timestamp, json_error, keys, sorted, Run, Sandbox};

const HANDOFF_FIELDS: &[&str] = &[
    "id",
    "parent",
    "wave_id",
    "home",
    "cwd",
    "provider",
    "provider_session_id",
    "body_generation",
    "reason",
    "environment",
    "attach_argv",
    "status",
    "outcome",
    "created_at",
    "updated_at",
    "attached_at",
    "terminal_at",
    "wake_claimed_at",
    "wake_claimed_by_generation",
    "step",
    "expires_at",
    "choices",
    "form",
    "on_expiry",
    "answer",
    "due",
];

const ROW_FIELDS: &[&str] = &[
    "id",
    "session_id",
    "parent_kind",
    "parent_id",
    "wave_id",
    "status",
    "provider",
    "provider_session_id",
    "home",
    "cwd",
    "reason",
    "created_at",
    "updated_at",
    "age_secs",
    "step",
    "expires_at",
    "due",
    "asks",
    "answer",
];

pub fn assert_handoff_shape(handoff: &Value) {
    assert_eq!(keys(handoff), sorted(HANDOFF_FIELDS), "{handoff}");
    assert!(handoff["id"].as_str().unwrap().starts_with("ih_"));
    assert_eq!(keys(&handoff["parent"]), sorted(&["kind", "id"]));
    assert_timestamp(&handoff["created_at"]);
    assert_timestamp(&handoff["updated_at"]);
    assert!(handoff["due"].is_boolean(), "{handoff}");
}

/// A project and a task whose worktree is `worktree`; returns the task id.
pub fn task(sandbox: &Sandbox, worktree: &str) -> String {
    let wave = sandbox.wave();
    let project = sandbox.ok(&[
        "project",
        "create",
        "--wave",
        &wave,
        "--name",
        "p",
        "--provider",
        "codex",
        "--generation",
        "1",
    ]);
    let task = sandbox.ok(&[
        "task",
        "create",
        "--project",
        project.trim(),
        "--worktree",
        worktree,
        "--provider",
        "codex",
        "--provider-session",
        "task-thread",
        "--generation",
        "4",
    ]);
    task.trim().to_string()
}

/// `open` on `task` by body `generation` with a credential reason, an
/// environment and a tmux argv.
pub fn open_task_args<'a>(task: &'a str, cwd: &'a str, generation: &'a str) -> Vec<&'a str> {
    vec![
        "open",
        "--parent",
        task,
        "--home",
        "ssh://jack@build-1:2222",
        "--cwd",
        cwd,
        "--provider",
        "codex",
        "--provider-session",
        "task-thread",
        "--generation",
        generation,
        "--reason",
        "a credential is needed",
        "--env",
        "LF_HOME=/tmp/lf",
        "--env",
        "TOKEN=s3cret=with=equals",
        "--",
        "tmux",
        "attach-session",
        "-t",
        "lf x",
    ]
}

#[test]
fn open_prints_created_and_the_handoff_field_by_field() {
    let sandbox = Sandbox::new();
    let task_id = task(&sandbox, "/work/tree");
    let parent = format!("task:{task_id}");
    let opened = sandbox.json(&open_task_args(&parent, "/work/tree/", "4"));
    assert_eq!(keys(&opened), sorted(&["created", "handoff"]));
    assert_eq!(opened["created"], true);
    let handoff = &opened["handoff"];
    assert_handoff_shape(handoff);
    assert_eq!(handoff["parent"]["kind"], "task");
    assert_eq!(handoff["parent"]["id"], task_id.as_str());
    assert!(handoff["wave_id"].as_str().unwrap().starts_with("wv_"));
    assert_eq!(handoff["home"], "ssh://jack@build-1:2222");
    assert_eq!(handoff["cwd"], "/work/tree/");
    assert_eq!(handoff["provider"], "codex");
    assert_eq!(handoff["provider_session_id"], "task-thread");
    assert_eq!(handoff["body_generation"], 4);
    assert_eq!(handoff["reason"], "a credential is needed");
    assert_eq!(
        handoff["environment"],
        serde_json::json!({"LF_HOME": "/tmp/lf", "TOKEN": "s3cret=with=equals"})
    );
    assert_eq!(
        handoff["attach_argv"],
        serde_json::json!(["tmux", "attach-session", "-t", "lf x"])
    );
    assert_eq!(handoff["status"], "waiting");
    for empty in [
        "outcome",
        "attached_at",
        "terminal_at",
        "wake_claimed_at",
        "wake_claimed_by_generation",
        "step",
    ] {
        assert!(handoff[empty].is_null(), "{empty}: {handoff}");
    }
    assert_eq!(handoff["created_at"], handoff["updated_at"]);

    let replayed = sandbox.json(&open_task_args(&task_id, "/work/tree", "4"));
    assert_eq!(replayed["created"], false);
    assert_eq!(&replayed["handoff"], handoff, "a replay changes nothing");

    let run = sandbox.run(&open_task_args(&parent, "/work/tree", "4"));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), handoff["id"].as_str().unwrap());
    assert!(run.stderr.starts_with("reused"), "{run:?}");

    let other = task(&sandbox, "/work/other");
    let run = sandbox.run(&open_task_args(&other, "/work/other", "4"));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.trim().starts_with("ih_"), "{run:?}");
    assert!(run.stderr.starts_with("opened"), "{run:?}");
}

#[test]
fn open_refuses_bad_input_and_what_the_parent_refuses() {
    let sandbox = Sandbox::new();
    let task_id = task(&sandbox, "/work/tree");
    let mut duplicate = open_task_args(&task_id, "/work/tree", "4");
    duplicate.splice(1..1, ["--env", "TOKEN=again"]);
    let error = sandbox.fails(&duplicate, 2, "usage");
    assert!(error.contains("TOKEN"), "{error}");
    let mut blank = open_task_args(&task_id, "/work/tree", "4");
    blank.splice(1..1, ["--env", " =x"]);
    sandbox.fails(&blank, 2, "usage");
    let mut no_equals = open_task_args(&task_id, "/work/tree", "4");
    no_equals.splice(1..1, ["--env", "JUSTAKEY"]);
    sandbox.fails(&no_equals, 2, "usage");
    let mut no_argv = open_task_args(&task_id, "/work/tree", "4");
    no_argv.truncate(no_argv.len() - 5);
    let error = sandbox.fails(&no_argv, 2, "usage");
    assert!(error.contains("ARGV"), "{error}");
    let mut empty_arg = open_task_args(&task_id, "/work/tree", "4");
    empty_arg.push("");
    sandbox.fails(&empty_arg, 2, "invalid_input");
    sandbox.fails(
        &open_task_args(&task_id, "relative/tree", "4"),
        2,
        "invalid_input",
    );
    sandbox.fails(
        &open_task_args(&task_id, "/work/tree", "0"),
        2,
        "invalid_input",
    );

    let error = sandbox.fails(
        &open_task_args(&task_id, "/work/elsewhere", "4"),
        4,
        "worktree_mismatch",
    );
    assert!(error.contains(&task_id), "{error}");
    sandbox.fails(
        &open_task_args(&task_id, "/work/tree", "3"),
        4,
        "stale_generation",
    );
    let unknown = "ts_01a23770-7ddd-7406-89b2-f78da53555de";
    let error = sandbox.fails(
        &open_task_args(&format!("task:{unknown}"), "/work/tree", "4"),
        3,
        "not_found",
    );
    assert!(error.contains(unknown), "{error}");
    let rows = sandbox.json(&["list"]);
    assert_eq!(rows, serde_json::json!([]), "nothing was opened");
}

#[test]
fn list_rows_never_carry_environment_or_argv() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.mkdir("work");
    let first = sandbox.open_on_wave(
        &cwd,
        &["SECRET=hunter2"],
        &["tmux", "attach", "-t", "argvmark"],
    );
    let second = sandbox.open_on_wave(&cwd, &[], &["true"]);
    sandbox.ok(&[
        "complete",
        second["id"].as_str().unwrap(),
        "--summary",
        "done",
    ]);

    for args in [&["--json", "list"][..], &["--json", "list", "--active"][..]] {
        let raw = sandbox.ok(args);
        for secret in ["hunter2", "SECRET", "argvmark", "tmux"] {
            assert!(!raw.contains(secret), "{args:?} shows {secret}: {raw}");
        }
    }
    let rows = sandbox.json(&["list"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(keys(row), sorted(ROW_FIELDS), "{row}");
        assert_timestamp(&row["created_at"]);
        assert_timestamp(&row["updated_at"]);
        assert!(row["age_secs"].as_i64().unwrap() >= 0);
    }
    assert_eq!(rows[0]["id"], first["id"], "oldest first");
    // `session_id` is kept, the same id, for one release.
    for row in rows {
        assert_eq!(row["session_id"], row["id"], "{row}");
    }
    assert_eq!(rows[0]["parent_kind"], "wave");
    assert_eq!(rows[0]["parent_id"], first["parent"]["id"]);
    assert_eq!(rows[0]["wave_id"], first["wave_id"]);
    assert_eq!(rows[0]["status"], "waiting");
    assert_eq!(rows[0]["home"], "jack@local");
    assert_eq!(rows[0]["cwd"], cwd.to_str().unwrap());
    assert_eq!(rows[0]["reason"], "OAuth login requires a human");
    assert_eq!(rows[1]["status"], "completed");
    assert!(rows[0]["step"].is_null(), "opened without a step");

    let active = sandbox.json(&["list", "--active"]);
    assert_eq!(active.as_array().unwrap().len(), 1);
    assert_eq!(active[0]["id"], first["id"]);
    let parent = format!("wave:{}", second["parent"]["id"].as_str().unwrap());
    let mine = sandbox.json(&["list", "--parent", &parent]);
    assert_eq!(mine.as_array().unwrap().len(), 1);
    assert_eq!(mine[0]["id"], second["id"]);
    let none = sandbox.json(&["list", "--parent", &parent, "--active"]);
    assert_eq!(none, serde_json::json!([]));

    let table = sandbox.ok(&["list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    for title in ["ID", "PARENT", "STATUS", "CHANGED", "REASON"] {
        assert!(lines[0].contains(title), "{table}");
    }
    // The column says what it measures: the time since the last change.
    let changed = lines[0].find("CHANGED").unwrap();
    assert!(lines[1][changed..].contains(" ago"), "{table}");
    assert!(!lines[0].contains("STEP"), "no handoff has a step: {table}");
    let status_column = lines[0].find("STATUS").unwrap();
    assert_eq!(&lines[1][status_column..status_column + 7], "waiting");
    assert_eq!(&lines[2][status_column..status_column + 9], "completed");
    assert!(lines[1].starts_with(first["id"].as_str().unwrap()));
    assert!(
        lines[1].ends_with("OAuth login requires a human"),
        "{table}"
    );
    assert!(lines[1].contains("0s") || lines[1].contains("1s") || lines[1].contains('m'));
    for secret in ["hunter2", "SECRET", "argvmark", "tmux"] {
        assert!(!table.contains(secret), "list shows {secret}: {table}");
    }

    let empty = sandbox.run(&["list", "--parent", &parent, "--active"]);
    assert_eq!(empty.code, 0);
    assert_eq!(empty.stdout, "");
    assert!(empty.stderr.contains("no active handoffs"), "{empty:?}");
}

#[test]
fn list_cuts_reasons_to_the_terminal_width() {
    let sandbox = Sandbox::new();
    let wave = sandbox.wave();
    let reason = "a very long reason ".repeat(20);
    sandbox.ok(&[
        "open",
        "--parent",
        &wave,
        "--home",
        "jack@local",
        "--cwd",
        "/w",
        "--provider",
        "codex",
        "--generation",
        "1",
        "--reason",
        &reason,
        "--",
        "true",
    ]);
    for width in [80, 120, 200] {
        let mut command = sandbox.command(&["list"]);
        command.env("COLUMNS", width.to_string());
        let run = Run::from_output(command.output().unwrap());
        for line in run.stdout.lines() {
            assert!(line.chars().count() <= width, "{width}: {line:?}");
        }
        let row = run.stdout.lines().nth(1).unwrap();
        assert!(row.ends_with('…'), "{row}");
        assert!(
            row.contains("  a very"),
            "{width}: the reason is cut, not dropped: {row}"
        );
        // Id, parent, status and age take 101 columns; the parent is
        // shortened only when that leaves fewer than 24 for the reason.
        let parent_whole = row.contains(&format!("wave:{wave}"));
        assert_eq!(parent_whole, width >= 125, "{width}: {row}");
    }
    let piped = sandbox.ok(&["list"]);
    assert!(
        piped.contains(reason.trim_end()),
        "no cut without a terminal"
    );
}

#[test]
fn status_prints_the_handoff_or_exits_3() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.mkdir("work");
    let opened = sandbox.open_on_wave(&cwd, &["SECRET=hunter2"], &["tmux", "attach"]);
    let id = opened["id"].as_str().unwrap();
    let status = sandbox.json(&["status", id]);
    assert_handoff_shape(&status);
    assert_eq!(status, opened);

    let block = sandbox.ok(&["status", id]);
    for (label, value) in [
        ("id", id),
        ("status", "waiting"),
        ("home", "jack@local"),
        ("reason", "OAuth login requires a human"),
        ("command", "tmux attach"),
        ("environment", "SECRET"),
        ("body generation", "1"),
        ("step", "-"),
    ] {
        let line = block
            .lines()
            .find(|line| line.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line: {block}"));
        assert!(line.ends_with(value) || line.contains(value), "{line}");
    }
    assert!(!block.contains("hunter2"), "values stay hidden: {block}");

    let unknown = "ih_01a23770-7ddd-7406-89b2-f78da53555de";
    let error = sandbox.fails(&["status", unknown], 3, "not_found");
    assert!(error.contains(unknown), "{error}");
    // As a script writes it: `--json` after the id.
    let nil = "ih_00000000-0000-7000-8000-000000000000";
    let run = sandbox.run(&["status", nil, "--json"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    let error = json_error(&run, "status --json of a nil id");
    assert_eq!(
        (error.kind.as_str(), error.code),
        ("not_found", 3),
        "{run:?}"
    );
}

#[test]
fn attach_print_records_the_attach_and_prints_the_descriptor() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.mkdir("work");
    let opened = sandbox.open_on_wave(&cwd, &["K=v w"], &["tmux", "attach", "-t", "x"]);
    let id = opened["id"].as_str().unwrap();
    let descriptor = sandbox.json(&["attach", id, "--print"]);
    assert_eq!(
        keys(&descriptor),
        sorted(&[
            "id",
            "session_id",
            "status",
            "cwd",
            "host",
            "environment",
            "argv"
        ])
    );
    assert_eq!(descriptor["id"], id);
    assert_eq!(
        descriptor["session_id"], id,
        "the old name, for one release"
    );
    assert_eq!(descriptor["status"], "attached");
    assert_eq!(descriptor["cwd"], cwd.to_str().unwrap());
    assert_eq!(descriptor["host"], "localhost");
    assert_eq!(descriptor["environment"], serde_json::json!({"K": "v w"}));
    assert_eq!(
        descriptor["argv"],
        serde_json::json!(["tmux", "attach", "-t", "x"])
    );

    let status = sandbox.json(&["status", id]);
    assert_eq!(status["status"], "attached");
    assert_timestamp(&status["attached_at"]);
    let again = sandbox.json(&["attach", id, "--print"]);
    assert_eq!(again, descriptor, "attaching again changes nothing");
    assert_eq!(sandbox.json(&["status", id]), status);

    let text = sandbox.ok(&["attach", id, "--print"]);
    assert!(text.contains("host         localhost"), "{text}");
    assert!(text.contains("'K=v w'"), "{text}");
    assert!(text.contains("tmux attach -t x"), "{text}");

    sandbox.ok(&["fail", id, "--reason", "no token"]);
    let error = sandbox.fails(&["attach", id, "--print"], 4, "already_finished");
    assert!(error.contains(id), "{error}");
    sandbox.fails(
        &[
            "attach",
            "ih_01a23770-7ddd-7406-89b2-f78da53555de",
            "--print",
        ],
        3,
        "not_found",
    );
}

#[test]
fn finishing_prints_the_outcome_and_keeps_the_first() {
    let sandbox = Sandbox::new();
    for (command, flag, kind, status, field) in [
        ("complete", "--summary", "completed", "completed", "summary"),
        ("back", "--summary", "handed_back", "handed_back", "summary"),
        ("fail", "--reason", "failed", "failed", "reason"),
    ] {
        let id = sandbox.handoff();
        let finished = sandbox.json(&[command, &id, flag, "the text"]);
        assert_handoff_shape(&finished);
        assert_eq!(finished["status"], status);
        assert_eq!(keys(&finished["outcome"]), sorted(&["kind", field]));
        assert_eq!(finished["outcome"]["kind"], kind);
        assert_eq!(finished["outcome"][field], "the text");
        assert_timestamp(&finished["terminal_at"]);
        assert!(finished["wake_claimed_at"].is_null());

        let replay = sandbox.json(&[command, &id, flag, "the text"]);
        assert_eq!(replay, finished, "{command}: an equal finish is a replay");
        let error = sandbox.fails(&[command, &id, flag, "other text"], 4, "other_outcome");
        assert!(error.contains(&id), "{error}");
        assert_eq!(
            sandbox.json(&["status", &id]),
            finished,
            "the first outcome stays"
        );
        let human = sandbox.ok(&[command, &id, flag, "the text"]);
        assert!(
            human.starts_with(&id) && human.contains("the text"),
            "{human}"
        );
    }
    let id = sandbox.handoff();
    sandbox.fails(&["complete", &id, "--summary", "  "], 2, "invalid_input");
    sandbox.fails(
        &[
            "back",
            "ih_01a23770-7ddd-7406-89b2-f78da53555de",
            "--summary",
            "x",
        ],
        3,
        "not_found",
    );
    sandbox.fails(&["complete", &id], 2, "usage");
}

#[test]
fn claim_wake_says_who_holds_the_wake_and_exits_0_either_way() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    let error = sandbox.fails(&["claim-wake", &id, "--generation", "2"], 4, "not_finished");
    assert!(error.contains(&id), "{error}");
    sandbox.ok(&["back", &id, "--summary", "continue"]);
    sandbox.fails(
        &["claim-wake", &id, "--generation", "0"],
        2,
        "invalid_input",
    );

    let claimed = sandbox.json(&["claim-wake", &id, "--generation", "2"]);
    assert_eq!(keys(&claimed), sorted(&["claimed", "holder", "handoff"]));
    assert_eq!(claimed["claimed"], true);
    assert_eq!(claimed["holder"], 2);
    assert_handoff_shape(&claimed["handoff"]);
    assert_eq!(claimed["handoff"]["wake_claimed_by_generation"], 2);
    assert_timestamp(&claimed["handoff"]["wake_claimed_at"]);

    let retry = sandbox.json(&["claim-wake", &id, "--generation", "2"]);
    assert_eq!(retry, claimed, "the same generation may retry");
    let lost = sandbox.json(&["claim-wake", &id, "--generation", "3"]);
    assert_eq!(lost["claimed"], false);
    assert_eq!(lost["holder"], 2, "generation 2 still holds it");
    assert_eq!(lost["handoff"], claimed["handoff"]);

    let human = sandbox.ok(&["claim-wake", &id, "--generation", "3"]);
    assert!(human.starts_with("not claimed"), "{human}");
    assert!(human.contains("generation 2"), "{human}");
    let human = sandbox.ok(&["claim-wake", &id, "--generation", "2"]);
    assert!(human.starts_with("claimed"), "{human}");
    sandbox.fails(
        &[
            "claim-wake",
            "ih_01a23770-7ddd-7406-89b2-f78da53555de",
            "--generation",
            "2",
        ],
        3,
        "not_found",
    );
}

/// `claim-wake --require` lets a script branch on the exit code alone: 0
/// and the claim's line when this generation holds the wake (also on a
/// retry), exit 4 of kind `not_claimed` naming the holder when another
/// generation does.
#[test]
fn claim_wake_require_exits_4_when_another_generation_holds_the_wake() {
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    sandbox.ok(&["back", &id, "--summary", "continue"]);
    for _ in 0..2 {
        let won = sandbox.ok(&["claim-wake", &id, "--generation", "2", "--require"]);
        assert!(won.starts_with("claimed: generation 2"), "{won}");
    }
    let json = sandbox.json(&["claim-wake", &id, "--generation", "2", "--require"]);
    assert_eq!(json["claimed"], true);
    let message = sandbox.fails(
        &["claim-wake", &id, "--generation", "3", "--require"],
        4,
        "not_claimed",
    );
    assert!(
        message.starts_with("not claimed: generation 2 already holds the wake"),
        "{message}"
    );
    // Nothing was written by the lost claims.
    let history = sandbox.json(&["history", &id]);
    assert_eq!(history.as_array().unwrap().len(), 3, "{history}");
}
