//! Listing a large registry and pruning it (C17) from the command line:
//! `list --status/--home/--older-than/--limit/--after` and `prune
//! --finished-before [--dry-run]`.

use std::time::Duration;

use serde_json::Value;

use crate::support::{assert_timestamp, keys, sorted, Sandbox};

/// Opens a handoff on a new wave at `home`; returns its id.
fn open_at(sandbox: &Sandbox, home: &str) -> String {
    let wave = sandbox.wave();
    let parent = format!("wave:{wave}");
    let cwd = sandbox.dir.path().to_str().unwrap().to_string();
    let opened = sandbox.json(&[
        "open",
        "--parent",
        &parent,
        "--home",
        home,
        "--cwd",
        &cwd,
        "--provider",
        "codex",
        "--generation",
        "1",
        "--reason",
        "OAuth login requires a human",
        "--",
        "tmux",
        "attach",
    ]);
    opened["handoff"]["id"].as_str().unwrap().to_string()
}

/// The ids `list --json` with `args` prints.
fn listed(sandbox: &Sandbox, args: &[&str]) -> Vec<String> {
    let mut all = vec!["list"];
    all.extend_from_slice(args);
    sandbox
        .json(&all)
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["session_id"].as_str().unwrap().to_string())
        .collect()
}

const REMOTE: &str = "ssh://jill@build.example:2222";

#[test]
fn list_filters_by_status_home_and_age_and_pages_with_limit_and_after() {
    let sandbox = Sandbox::new();
    let completed = open_at(&sandbox, "jack@local");
    sandbox.ok(&["complete", &completed, "--summary", "done"]);
    let waiting = open_at(&sandbox, REMOTE);
    let attached = open_at(&sandbox, "jack@local");
    sandbox.ok(&["attach", &attached, "--print"]);
    let failed = open_at(&sandbox, "jill@build.example:2222");
    sandbox.ok(&["fail", &failed, "--reason", "portal down"]);
    let all = [&completed, &waiting, &attached, &failed].map(String::clone);

    assert_eq!(listed(&sandbox, &[]), all);
    assert_eq!(
        listed(&sandbox, &["--status", "waiting"]),
        vec![waiting.clone()]
    );
    assert_eq!(
        listed(&sandbox, &["--status", "failed", "--status", "completed"]),
        [completed.clone(), failed.clone()]
    );
    // The shorthand of a home is the same home.
    for home in [REMOTE, "jill@build.example:2222"] {
        assert_eq!(
            listed(&sandbox, &["--home", home]),
            [waiting.clone(), failed.clone()]
        );
    }
    assert_eq!(
        listed(
            &sandbox,
            &["--home", "jack@local", "--status", "attached", "--active"]
        ),
        vec![attached.clone()]
    );
    assert_eq!(
        listed(&sandbox, &["--active", "--status", "completed"]),
        Vec::<String>::new()
    );

    // Nothing is an hour old; a person is told so on stderr.
    assert_eq!(
        listed(&sandbox, &["--older-than", "1h"]),
        Vec::<String>::new()
    );
    let run = sandbox.run(&["list", "--older-than", "1h"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    assert_eq!(run.stderr.trim(), "no handoffs match");
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(listed(&sandbox, &["--older-than", "1s"]), all);

    // Pages: a full one says where the next starts; the last is empty.
    assert_eq!(
        listed(&sandbox, &["--limit", "3"]),
        [completed.clone(), waiting.clone(), attached.clone()]
    );
    let run = sandbox.run(&["list", "--limit", "2"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&completed) && run.stdout.contains(&waiting));
    assert!(
        run.stderr.contains(&format!("--after {waiting}")),
        "{run:?}"
    );
    assert_eq!(
        listed(&sandbox, &["--limit", "2", "--after", &waiting]),
        [attached.clone(), failed.clone()]
    );
    assert_eq!(
        listed(&sandbox, &["--home", REMOTE, "--after", &completed]),
        [waiting.clone(), failed.clone()]
    );
    assert_eq!(
        listed(&sandbox, &["--after", &failed]),
        Vec::<String>::new()
    );
    let run = sandbox.run(&["list", "--after", &failed]);
    assert_eq!(run.stderr.trim(), "no more handoffs", "{run:?}");

    // Newest first: the same handoffs backwards, and pages towards older
    // ones, the note of a full page saying how to go on.
    let mut backwards = all.to_vec();
    backwards.reverse();
    assert_eq!(listed(&sandbox, &["--newest-first"]), backwards);
    let run = sandbox.run(&["list", "--newest-first", "--limit", "2"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&failed) && run.stdout.contains(&attached));
    assert!(!run.stdout.contains(&completed), "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("--after {attached} --newest-first")),
        "{run:?}"
    );
    assert_eq!(
        listed(
            &sandbox,
            &["--newest-first", "--limit", "2", "--after", &attached]
        ),
        [waiting.clone(), completed.clone()]
    );
    assert_eq!(
        listed(&sandbox, &["--newest-first", "--home", REMOTE]),
        [failed.clone(), waiting.clone()]
    );
    assert_eq!(
        listed(&sandbox, &["--newest-first", "--after", &completed]),
        Vec::<String>::new()
    );

    // An `--after` that names no handoff is not found; bad values are
    // usage errors, before the store is read.
    let unknown = "ih_0190a000-0000-7000-8000-000000000001";
    let error = sandbox.fails(&["list", "--after", unknown], 3, "not_found");
    assert!(error.contains(unknown), "{error}");
    for bad in [
        &["list", "--status", "done"][..],
        &["list", "--status", "Waiting"][..],
        &["list", "--limit", "0"][..],
        &["list", "--limit", "-1"][..],
        &["list", "--older-than", "90"][..],
        &["list", "--home", "nowhere"][..],
        &["list", "--after", "wv_0190a000-0000-7000-8000-000000000001"][..],
    ] {
        sandbox.fails(bad, 2, "usage");
    }
}

#[test]
fn prune_removes_claimed_finished_handoffs_and_says_how_many() {
    let sandbox = Sandbox::new();
    let claimed = open_at(&sandbox, "jack@local");
    sandbox.ok(&["complete", &claimed, "--summary", "done"]);
    sandbox.ok(&["claim-wake", &claimed, "--generation", "1"]);
    let unclaimed = open_at(&sandbox, "jack@local");
    sandbox.ok(&["back", &unclaimed, "--summary", "continue"]);
    let active = open_at(&sandbox, REMOTE);

    // Nothing finished an hour ago.
    let run = sandbox.run(&["prune", "--finished-before", "1h"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "removed 0 handoffs and 0 events\n");
    assert!(run.stderr.contains("finished before "), "{run:?}");

    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(
        sandbox.ok(&["prune", "--finished-before", "1s", "--dry-run"]),
        "would remove 1 handoff and 3 events\n"
    );
    let dry = sandbox.json(&["prune", "--finished-before", "1s", "--dry-run"]);
    assert_eq!(
        keys(&dry),
        sorted(&["handoffs", "events", "dry_run", "finished_before"])
    );
    assert_eq!(
        (&dry["handoffs"], &dry["events"], &dry["dry_run"]),
        (&Value::from(1), &Value::from(3), &Value::from(true))
    );
    assert_timestamp(&dry["finished_before"]);
    assert_eq!(listed(&sandbox, &[]).len(), 3, "a dry run removes nothing");

    assert_eq!(
        sandbox.ok(&["prune", "--finished-before", "1s"]),
        "removed 1 handoff and 3 events\n"
    );
    sandbox.fails(&["status", &claimed], 3, "not_found");
    sandbox.fails(&["history", &claimed], 3, "not_found");
    assert_eq!(listed(&sandbox, &[]), [unclaimed.clone(), active.clone()]);

    // A time works too; nothing is left to remove.
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let again = sandbox.json(&["prune", "--finished-before", &now]);
    assert_eq!(
        (&again["handoffs"], &again["events"], &again["dry_run"]),
        (&Value::from(0), &Value::from(0), &Value::from(false))
    );

    // The cutoff is required, a duration or an RFC 3339 time, and not in
    // the future; refused before anything is removed.
    sandbox.ok(&["claim-wake", &unclaimed, "--generation", "1"]);
    for bad in [
        &["prune"][..],
        &["prune", "--finished-before", "tomorrow"][..],
        &["prune", "--finished-before", "0s"][..],
        &["prune", "--finished-before", "2001-13-01T00:00:00Z"][..],
        &["prune", "--finished-before", "2099-01-01T00:00:00Z"][..],
    ] {
        sandbox.fails(bad, 2, "usage");
    }
    assert_eq!(listed(&sandbox, &[]), [unclaimed, active]);
}
