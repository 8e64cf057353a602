//! Deadlines (C14) from the command line: `open --expires-in` /
//! `--expires-at`, the deadline in `status` and `list`, `expire`, `extend`,
//! writes on a due handoff, `wait` on one, and bad durations.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::handoffs::assert_handoff_shape;
use crate::support::{keys, sorted, Run, Sandbox};

/// A JSON timestamp as a time.
fn time_of(value: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(value.as_str().unwrap(), &Rfc3339).unwrap()
}

/// The `label` line of a `status` block.
fn status_line(sandbox: &Sandbox, id: &str, label: &str) -> String {
    let block = sandbox.ok(&["status", id]);
    block
        .lines()
        .find(|line| line.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} line: {block}"))
        .to_string()
}

/// Sleeps until `at` (plus a little) has passed.
fn sleep_past(at: OffsetDateTime) {
    let left = at - OffsetDateTime::now_utc();
    let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
    std::thread::sleep(left + Duration::from_millis(100));
}

#[test]
fn open_with_a_deadline_shows_it_in_status_and_list() {
    let sandbox = Sandbox::new();
    let before = OffsetDateTime::now_utc();
    let handoff = sandbox.open_with(&["--expires-in", "2h"]);
    let after = OffsetDateTime::now_utc();
    assert_handoff_shape(&handoff);
    let deadline = time_of(&handoff["expires_at"]);
    let two_hours = time::Duration::hours(2);
    assert!(
        deadline >= before + two_hours - time::Duration::SECOND && deadline <= after + two_hours,
        "{handoff}"
    );
    assert_eq!(handoff["due"], false);
    let id = handoff["id"].as_str().unwrap();

    let status = sandbox.json(&["status", id]);
    assert_eq!(status["expires_at"], handoff["expires_at"]);
    assert_eq!(status["due"], false);
    let line = status_line(&sandbox, id, "deadline");
    assert!(
        line.contains("expires in 1h 59m") || line.contains("expires in 2h 0m"),
        "{line}"
    );
    assert!(line.contains(" UTC"), "{line}");

    let rows = sandbox.json(&["list"]);
    assert_eq!(rows[0]["expires_at"], handoff["expires_at"]);
    assert_eq!(rows[0]["due"], false);
    let table = sandbox.ok(&["list"]);
    let lines: Vec<&str> = table.lines().collect();
    let column = lines[0]
        .find("DEADLINE")
        .unwrap_or_else(|| panic!("{table}"));
    assert!(lines[1][column..].starts_with("expires in "), "{table}");

    // --expires-at: the time given, in UTC.
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&["--expires-at", "2099-06-01T12:30:00+02:00"]);
    assert_eq!(handoff["expires_at"], "2099-06-01T10:30:00Z");
    let id = handoff["id"].as_str().unwrap();
    let line = status_line(&sandbox, id, "deadline");
    assert!(
        line.contains("2099-06-01 10:30:00 UTC (expires in "),
        "{line}"
    );

    // Without a deadline: none shown, and no DEADLINE column.
    let sandbox = Sandbox::new();
    let id = sandbox.handoff();
    assert!(sandbox.json(&["status", id.as_str()])["expires_at"].is_null());
    assert!(status_line(&sandbox, &id, "deadline").ends_with(" -"));
    assert!(!sandbox.ok(&["list"]).contains("DEADLINE"));
}

#[test]
fn open_refuses_two_deadlines_and_one_in_the_past() {
    let sandbox = Sandbox::new();
    let wave = sandbox.wave();
    let parent = format!("wave:{wave}");
    let open = |extra: &[&str]| {
        let mut args = vec![
            "open",
            "--parent",
            &parent,
            "--home",
            "jack@local",
            "--cwd",
            "/tmp",
            "--provider",
            "codex",
            "--generation",
            "1",
            "--reason",
            "r",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        args.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    sandbox.fails(
        &open(&["--expires-in", "1h", "--expires-at", "2099-01-01T00:00:00Z"]),
        2,
        "usage",
    );
    sandbox.fails(&open(&["--expires-at", "tomorrow"]), 2, "usage");
    let error = sandbox.fails(
        &open(&["--expires-at", "2001-01-01T00:00:00Z"]),
        2,
        "invalid_input",
    );
    assert!(error.contains("deadline"), "{error}");
    assert_eq!(
        sandbox.json(&["list"]),
        serde_json::json!([]),
        "nothing opened"
    );
}

#[test]
fn a_handoff_past_its_deadline_is_overdue_until_expire_expires_it() {
    let sandbox = Sandbox::new();
    let due = sandbox.open_with(&["--expires-in", "1s"]);
    let id = due["id"].as_str().unwrap();
    let other = sandbox.open_with(&["--expires-in", "1h"]);
    sleep_past(time_of(&due["expires_at"]));

    // Reading never writes: it is still waiting, but due.
    let status = sandbox.json(&["status", id]);
    assert_eq!(status["status"], "waiting");
    assert_eq!(status["due"], true);
    let line = status_line(&sandbox, id, "deadline");
    assert!(line.contains("overdue"), "{line}");
    let rows = sandbox.json(&["list"]);
    assert_eq!(rows[0]["due"], true);
    assert_eq!(rows[1]["due"], false);
    let table = sandbox.ok(&["list"]);
    assert!(table.lines().nth(1).unwrap().contains("overdue"), "{table}");

    let expired = sandbox.json(&["expire"]);
    let expired = expired.as_array().unwrap();
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(keys(&expired[0]), keys(&rows[0]), "a list row");
    assert_eq!(expired[0]["session_id"], id);
    assert_eq!(expired[0]["status"], "expired");
    assert_eq!(expired[0]["due"], false);

    let status = sandbox.json(&["status", id]);
    assert_eq!(status["status"], "expired");
    assert_eq!(status["outcome"], serde_json::json!({"kind": "expired"}));
    assert_eq!(status["due"], false);
    let line = status_line(&sandbox, id, "deadline");
    assert!(line.ends_with("(expired)"), "{line}");
    assert!(status_line(&sandbox, id, "outcome").ends_with("expired"));
    let table = sandbox.ok(&["list"]);
    assert!(table.lines().nth(1).unwrap().contains("expired"), "{table}");

    // Nothing is due any more: nothing on stdout, a note on stderr.
    let run = sandbox.run(&["expire"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    assert!(run.stderr.contains("nothing was due"), "{run:?}");
    assert_eq!(sandbox.json(&["expire"]), serde_json::json!([]));

    // The human form: one line per expired handoff, with its parent.
    let third = sandbox.open_with(&["--expires-in", "1s"]);
    sleep_past(time_of(&third["expires_at"]));
    let lines = sandbox.ok(&["expire"]);
    assert_eq!(lines.lines().count(), 1, "{lines}");
    let line = lines.lines().next().unwrap();
    assert!(line.starts_with(third["id"].as_str().unwrap()), "{line}");
    let parent = format!("wave:{}", third["parent"]["id"].as_str().unwrap());
    assert!(line.contains(&parent) && line.contains("expired"), "{line}");
    assert_eq!(
        sandbox.json(&["status", other["id"].as_str().unwrap()])["status"],
        "waiting",
        "a handoff not due yet stays"
    );

    // Its wake is claimed like any finished handoff's.
    let claimed = sandbox.json(&["claim-wake", id, "--generation", "1"]);
    assert_eq!(claimed["claimed"], true);
}

#[test]
fn writes_on_a_due_or_expired_handoff_fail_with_kind_expired() {
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&["--expires-in", "1s"]);
    let id = handoff["id"].as_str().unwrap();
    sleep_past(time_of(&handoff["expires_at"]));
    // The first refusal expires the due handoff; `fails` runs each command
    // twice, so the second run meets an expired one.
    let error = sandbox.fails(&["complete", id, "--summary", "done"], 4, "expired");
    assert!(error.contains(id), "{error}");
    assert_eq!(sandbox.json(&["status", id])["status"], "expired");
    sandbox.fails(&["back", id, "--summary", "s"], 4, "expired");
    sandbox.fails(&["fail", id, "--reason", "r"], 4, "expired");
    sandbox.fails(&["attach", id, "--print"], 4, "expired");
    sandbox.fails(&["extend", id, "--by", "1h"], 4, "expired");
    assert_eq!(sandbox.json(&["status", id])["status"], "expired");

    // attach on a due one expires it as well.
    let handoff = sandbox.open_with(&["--expires-in", "1s"]);
    let id = handoff["id"].as_str().unwrap();
    sleep_past(time_of(&handoff["expires_at"]));
    sandbox.fails(&["attach", id, "--print"], 4, "expired");
    assert_eq!(sandbox.json(&["status", id])["status"], "expired");
}

#[test]
fn extend_moves_the_deadline_from_now_and_the_history_shows_it() {
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&["--expires-in", "1h"]);
    let id = handoff["id"].as_str().unwrap();
    let first = time_of(&handoff["expires_at"]);

    let before = OffsetDateTime::now_utc();
    let extended = sandbox.json(&["extend", id, "--by", "3h"]);
    assert_handoff_shape(&extended);
    let moved = time_of(&extended["expires_at"]);
    assert!(moved >= before + time::Duration::hours(3) - time::Duration::SECOND);
    assert!(moved > first);
    assert_eq!(extended["status"], "waiting");

    // --by counts from now: a shorter span moves it earlier, with a note.
    let run = sandbox.run(&["extend", id, "--by", "30m"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with(id), "{run:?}");
    assert!(run.stdout.contains("expires in 29m") || run.stdout.contains("expires in 30m"));
    assert!(run.stderr.contains("earlier"), "{run:?}");

    let until = "2099-01-02T03:04:05Z";
    let extended = sandbox.json(&["extend", id, "--until", until]);
    assert_eq!(extended["expires_at"], until);
    let line = status_line(&sandbox, id, "deadline");
    assert!(line.starts_with("deadline") && line.contains("2099-01-02 03:04:05 UTC"));

    let events = sandbox.json(&["history", id]);
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["opened", "extended", "extended", "extended"]);
    assert_eq!(events[3]["detail"], format!("until {until}"));
    assert_eq!(events[3]["status_before"], "waiting");
    assert_eq!(events[3]["status_after"], "waiting");
    let table = sandbox.ok(&["history", id]);
    assert_eq!(table.lines().filter(|l| l.contains("extended")).count(), 3);
    assert!(table.contains(&format!("until {until}")), "{table}");

    // A handoff without a deadline gets one.
    let plain = sandbox.handoff();
    let extended = sandbox.json(&["extend", &plain, "--by", "1d"]);
    assert!(extended["expires_at"].is_string(), "{extended}");

    // Refusals.
    sandbox.fails(&["extend", id], 2, "usage");
    sandbox.fails(&["extend", id, "--by", "1h", "--until", until], 2, "usage");
    sandbox.fails(
        &["extend", id, "--until", "2001-01-01T00:00:00Z"],
        2,
        "invalid_input",
    );
    sandbox.ok(&["complete", &plain, "--summary", "done"]);
    sandbox.fails(&["extend", &plain, "--by", "1h"], 4, "already_finished");
    sandbox.fails(
        &[
            "extend",
            "ih_01a23770-7ddd-7406-89b2-f78da53555de",
            "--by",
            "1h",
        ],
        3,
        "not_found",
    );
}

#[test]
fn wait_expires_a_handoff_whose_deadline_passes() {
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&["--expires-in", "2s"]);
    let id = handoff["id"].as_str().unwrap();
    // The timeout only keeps a broken build from hanging the suite.
    let waiter = sandbox
        .command(&["wait", id, "--timeout", "1m", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = Run::from_output(waiter.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "an expiry is an end like any other: {run:?}");
    let waited: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(waited["id"], id);
    assert_eq!(waited["status"], "expired");
    assert_eq!(waited["outcome"]["kind"], "expired");
    assert!(
        OffsetDateTime::now_utc() - time_of(&handoff["expires_at"]) < time::Duration::seconds(20),
        "wait returned soon after the deadline"
    );
    assert_eq!(sandbox.json(&["status", id])["status"], "expired");
    // An expired handoff is printed at once.
    let block = sandbox.ok(&["wait", id, "--timeout", "0s"]);
    assert!(block.contains("expired"), "{block}");
    let rows = sandbox.json(&["list", "--active"]);
    assert_eq!(rows, serde_json::json!([]));
}

#[test]
fn list_due_within_shows_the_active_handoffs_due_by_then() {
    let sandbox = Sandbox::new();
    let soon = sandbox.open_with(&["--expires-in", "10m"]);
    let later = sandbox.open_with(&["--expires-in", "3h"]);
    let undated = sandbox.open_with(&[]);
    let finished = sandbox.open_with(&["--expires-in", "5m"]);
    sandbox.ok(&[
        "complete",
        finished["id"].as_str().unwrap(),
        "--summary",
        "done",
    ]);
    let ids = |rows: &Value| -> Vec<String> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|row| row["session_id"].as_str().unwrap().to_string())
            .collect()
    };
    let id = |handoff: &Value| handoff["id"].as_str().unwrap().to_string();
    assert_eq!(
        ids(&sandbox.json(&["list", "--due-within", "1h"])),
        [id(&soon)]
    );
    assert_eq!(
        ids(&sandbox.json(&["list", "--due-within", "1d", "--newest-first"])),
        [id(&later), id(&soon)]
    );
    assert_eq!(
        ids(&sandbox.json(&["list", "--due-within", "1d", "--status", "attached"])),
        Vec::<String>::new()
    );
    // Nothing is due within a minute; the table says the filters passed
    // none.
    assert_eq!(
        ids(&sandbox.json(&["list", "--due-within", "1m"])),
        Vec::<String>::new()
    );
    let run = sandbox.run(&["list", "--due-within", "1m"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(run.stderr.contains("no handoffs match"), "{run:?}");
    for bad in ["soon", "-1h", "0s", "99999999w"] {
        let error = sandbox.fails(&["list", &format!("--due-within={bad}")], 2, "usage");
        assert!(error.contains("due-within"), "{bad:?}: {error}");
    }
    // The undated and the finished handoff are there, never due.
    let everything = ids(&sandbox.json(&["list"]));
    assert_eq!(everything.len(), 4);
    assert!(everything.contains(&id(&undated)) && everything.contains(&id(&finished)));
}

#[test]
fn bad_durations_are_usage_errors_and_change_nothing() {
    let sandbox = Sandbox::new();
    let handoff = sandbox.open_with(&[]);
    let id = handoff["id"].as_str().unwrap();
    let wave = sandbox.wave();
    let parent = format!("wave:{wave}");
    for bad in [
        "", "0s", "90", "1x", "500ms", "30m1h", "1h 30m", "-5m", "99999w", "1.5h",
    ] {
        let args = [
            "open",
            "--parent",
            &parent,
            "--home",
            "jack@local",
            "--cwd",
            "/tmp",
            "--provider",
            "codex",
            "--generation",
            "1",
            "--reason",
            "r",
            &format!("--expires-in={bad}"),
            "--",
            "true",
        ];
        let error = sandbox.fails(&args, 2, "usage");
        assert!(error.contains("expires-in"), "{bad:?}: {error}");
        sandbox.fails(&["extend", id, &format!("--by={bad}")], 2, "usage");
    }
    let rows = sandbox.json(&["list"]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "nothing opened: {rows}");
    assert!(rows[0]["expires_at"].is_null(), "nothing extended: {rows}");
    let events = sandbox.json(&["history", id]);
    assert_eq!(events.as_array().unwrap().len(), 1, "{events}");
    assert_eq!(keys(&events[0]), sorted(EVENT_FIELDS));
}

/// The fields of a history event in JSON.
pub const EVENT_FIELDS: &[&str] = &[
    "position",
    "handoff_id",
    "seq",
    "at",
    "kind",
    "status_before",
    "status_after",
    "actor",
    "detail",
    "answer",
];

#[test]
fn a_reused_open_says_the_deadline_it_was_given_was_not_applied() {
    let sandbox = Sandbox::new();
    let parent = format!("wave:{}", sandbox.wave());
    let first =
        sandbox.run(&sandbox.open_args(&parent, &["--step", "login", "--expires-in", "8h"]));
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stderr.starts_with("opened:"), "{first:?}");
    assert!(!first.stderr.contains("not applied"), "{first:?}");
    let id = first.stdout.trim().to_string();
    // The README's walk-through runs this `open` again: the same handoff,
    // and a second line saying the deadline given was not applied.
    let again =
        sandbox.run(&sandbox.open_args(&parent, &["--step", "login", "--expires-in", "1h"]));
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(again.stdout.trim(), id, "{again:?}");
    let lines: Vec<&str> = again.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{again:?}");
    assert!(lines[0].starts_with("reused:"), "{again:?}");
    assert!(
        lines[1]
            .starts_with("the deadline given was not applied: a reused handoff keeps its own (")
            && lines[1].ends_with(&format!("`lf-handoff extend {id}` moves it")),
        "{again:?}"
    );
    // Without a deadline, a reused open says nothing more.
    let plain = sandbox.run(&sandbox.open_args(&parent, &["--step", "login"]));
    assert_eq!(plain.stderr.lines().count(), 1, "{plain:?}");
}
