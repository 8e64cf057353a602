//! `parents`: waves, project sessions and task sessions, as a table and
//! as JSON, filtered by kind, wave and project and paged.

use serde_json::Value;

use crate::support::{assert_error, keys, sorted, Sandbox};

/// Creates a project named `name` under `wave`; its id.
fn project(sandbox: &Sandbox, wave: &str, name: &str) -> String {
    let args = ["project", "create", "--wave", wave, "--name", name];
    let rest = ["--provider", "codex", "--generation", "2"];
    let project = sandbox.json(&[&args[..], &rest[..]].concat());
    project["id"].as_str().unwrap().to_string()
}

/// Creates a task titled `title` under `project`; its id.
fn task(sandbox: &Sandbox, project: &str, title: &str) -> String {
    let worktree = sandbox.mkdir(title);
    let task = sandbox.json(&[
        "task",
        "create",
        "--project",
        project,
        "--worktree",
        worktree.to_str().unwrap(),
        "--provider",
        "codex",
        "--generation",
        "1",
        "--title",
        title,
    ]);
    task["id"].as_str().unwrap().to_string()
}

/// The ids of a `parents --json` answer, in its order.
fn ids(listed: &Value) -> Vec<String> {
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|parent| {
            assert_eq!(keys(parent), sorted(&["kind", "value"]), "{parent}");
            parent["value"]["id"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn parents_lists_a_wave_with_its_projects_and_tasks() {
    let sandbox = Sandbox::new();
    let wave = sandbox.wave();
    let other = sandbox.wave();
    let api = project(&sandbox, &wave, "Loopflow API");
    let elsewhere = project(&sandbox, &other, "Elsewhere");
    let first = task(&sandbox, &api, "first-task");
    let second = task(&sandbox, &api, "second-task");
    task(&sandbox, &elsewhere, "elsewhere-task");

    let mut under_wave = vec![wave.clone(), api.clone(), first.clone(), second.clone()];
    under_wave.sort();
    let listed = sandbox.json(&["parents", "--wave", &wave]);
    assert_eq!(ids(&listed), under_wave);
    assert_eq!(listed[0]["kind"], "project", "ps_ sorts before ts_ and wv_");
    assert_eq!(
        listed[0]["value"]["launch"]["project"]["name"],
        "Loopflow API"
    );

    let mut tasks = vec![first.clone(), second.clone()];
    tasks.sort();
    let listed = sandbox.json(&["parents", "--project", &api, "--kind", "task"]);
    assert_eq!(ids(&listed), tasks);
    let listed = sandbox.json(&["parents", "--kind", "wave"]);
    let mut waves = vec![wave.clone(), other.clone()];
    waves.sort();
    assert_eq!(ids(&listed), waves);
    assert_eq!(ids(&sandbox.json(&["parents"])).len(), 7);

    let table = sandbox.ok(&["parents", "--wave", &format!("wave:{wave}")]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    for column in ["ID", "KIND", "WAVE", "PROJECT", "BODY", "STATUS", "NAME"] {
        assert!(lines[0].contains(column), "{table}");
    }
    let row = |id: &str| *lines.iter().find(|line| line.starts_with(id)).unwrap();
    let api_row: Vec<&str> = row(&api).split_whitespace().collect();
    assert_eq!(
        api_row,
        [
            api.as_str(),
            "project",
            wave.as_str(),
            "-",
            "2",
            "running",
            "Loopflow",
            "API"
        ]
    );
    let task_row: Vec<&str> = row(&first).split_whitespace().collect();
    assert_eq!(&task_row[1..4], ["task", wave.as_str(), api.as_str()]);
    assert_eq!(task_row.last(), Some(&"first-task"));
    assert!(row(&wave).contains(" wave "), "{table}");

    // A page, and the next one from its last id.
    let run = sandbox.run(&["parents", "--wave", &wave, "--limit", "3"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.lines().count(), 4, "{run:?}");
    let next = format!("--after {}", under_wave[2]);
    assert!(run.stderr.contains(&next), "{run:?}");
    let rest = ["--limit", "3", "--after", &under_wave[2]];
    let listed = sandbox.json(&[&["parents", "--wave", &wave][..], &rest[..]].concat());
    assert_eq!(ids(&listed), under_wave[3..]);

    let run = sandbox.run(&["parents", "--project", &api, "--kind", "wave"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    assert!(run.stderr.contains("no parents match"), "{run:?}");
}

#[test]
fn parents_refuses_bad_filters_and_unknown_parents() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["parents"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    assert!(run.stderr.contains("no parents"), "{run:?}");
    for args in [
        &["parents", "--kind", "handoff"][..],
        &[
            "parents",
            "--wave",
            "ps_01a23770-7ddd-7406-89b2-f78da53555de",
        ],
        &["parents", "--project", "not-an-id"],
        &["parents", "--limit", "0"],
    ] {
        assert_error(&sandbox.run(args), 2, &args.join(" "));
    }
    let missing = "wv_01a23770-7ddd-7406-89b2-f78da53555de";
    let error = sandbox.fails(&["parents", "--wave", missing], 3, "not_found");
    assert!(error.contains(missing), "{error}");
    let missing = "ps_01a23770-7ddd-7406-89b2-f78da53555de";
    sandbox.fails(&["parents", "--project", missing], 3, "not_found");
}
