//! `export` and `import` (C17) from the command line: a registry moved
//! from SQLite to sled and back through files and pipes, byte for byte;
//! the files an export writes and refuses to overwrite; the refusals of
//! an import (a damaged line, a newer format, a store that is not empty),
//! each changing nothing.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::support::{keys, sorted, Run, Sandbox};

/// A registry with a finished, claimed handoff at a step, an active one
/// with a deadline, and a task with its PR, in the sandbox's default
/// (SQLite) store. Returns the active handoff's id.
fn registry(sandbox: &Sandbox) -> String {
    let wave = sandbox.wave();
    let project = sandbox.ok(&[
        "project",
        "create",
        "--wave",
        &wave,
        "--name",
        "Loopflow «API»",
        "--provider",
        "codex",
        "--generation",
        "1",
    ]);
    let worktree = sandbox.mkdir("worktree");
    let task = sandbox.ok(&[
        "task",
        "create",
        "--project",
        project.trim(),
        "--worktree",
        worktree.to_str().unwrap(),
        "--provider",
        "codex",
        "--generation",
        "2",
        "--identifier",
        "W2-175",
    ]);
    let task = format!("task:{}", task.trim());
    let open = |step: &str| {
        let opened = sandbox.json(&[
            "open",
            "--parent",
            &task,
            "--step",
            step,
            "--expires-in",
            "2h",
            "--home",
            "jack@local",
            "--cwd",
            worktree.to_str().unwrap(),
            "--provider",
            "codex",
            "--generation",
            "2",
            "--reason",
            "it's \"quoted\"; $(x) 🦀",
            "--env",
            "TOKEN=a=b",
            "--",
            "tmux",
            "attach",
        ]);
        opened["handoff"]["id"].as_str().unwrap().to_string()
    };
    let first = open("login@turn-1");
    sandbox.ok(&["attach", &first, "--print", "--actor", "alice"]);
    sandbox.ok(&["back", &first, "--summary", "token in the vault"]);
    sandbox.ok(&["claim-wake", &first, "--generation", "2"]);
    open("deploy@turn-9")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// Runs `args` with `input` on stdin.
fn with_stdin(sandbox: &Sandbox, args: &[&str], input: &[u8]) -> Run {
    with_stdin_env(sandbox, args, input, ("LF_HANDOFF_UNUSED", ""))
}

/// Runs `args` with `input` on stdin, given in pieces with pauses as a
/// pipe from another program gives it, and `variable` set; a refusal may
/// end the command before it read everything.
fn with_stdin_env(sandbox: &Sandbox, args: &[&str], input: &[u8], variable: (&str, &str)) -> Run {
    use std::io::Write as _;
    let mut command = sandbox.command(args);
    command
        .env(variable.0, variable.1)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for piece in input.chunks(64 * 1024) {
        if stdin.write_all(piece).is_err() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(stdin);
    Run::from_output(child.wait_with_output().unwrap())
}

#[test]
fn export_and_import_move_a_registry_between_sqlite_and_sled() {
    let sandbox = Sandbox::new();
    let active = registry(&sandbox);
    let file = sandbox.path("registry.jsonl");
    let run = sandbox.run(&["export", "--output", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .starts_with("exported 3 parents, 1 task PR, 2 handoffs, 5 events to "),
        "{run:?}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "an export holds secrets");
    let exported = read(&file);
    let lines: Vec<&str> = exported.lines().collect();
    assert_eq!(lines[0], r#"{"format":"lf-handoff-export","version":2}"#);
    assert!(lines.last().unwrap().starts_with(r#"{"end":{"parents":3,"#));

    // Into sled from the file, with --json counts on stdout.
    let sled = format!("sled://{}", sandbox.path("sled").display());
    let counts = sandbox.json(&[
        "--store",
        &sled,
        "import",
        "--input",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        keys(&counts),
        sorted(&["parents", "task_prs", "handoffs", "events", "last_position"])
    );
    assert_eq!(
        (
            &counts["parents"],
            &counts["task_prs"],
            &counts["handoffs"],
            &counts["events"]
        ),
        (
            &Value::from(3),
            &Value::from(1),
            &Value::from(2),
            &Value::from(5)
        )
    );
    assert_eq!(counts["last_position"], 5);
    // Out of sled to stdout: the same bytes; the counts on stderr.
    let run = sandbox.run(&["--store", &sled, "export"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, exported);
    assert!(run.stderr.starts_with("exported 3 parents"), "{run:?}");
    let run = sandbox.run(&["--json", "--store", &sled, "export"]);
    assert_eq!(run.stdout, exported);
    let counted: Value = serde_json::from_str(run.stderr.trim()).unwrap();
    assert_eq!(counted, counts);

    // Back into a new SQLite store through a pipe.
    let back = format!("sqlite://{}", sandbox.path("back.db").display());
    let run = with_stdin(&sandbox, &["--store", &back, "import"], exported.as_bytes());
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.starts_with("imported 3 parents"), "{run:?}");
    assert_eq!(sandbox.ok(&["--store", &back, "export"]), exported);

    // The stores answer alike, and the imported ones go on working.
    for store in [&sled, &back] {
        assert_eq!(
            sandbox.json(&["--store", store, "history", &active]),
            sandbox.json(&["history", &active])
        );
        // Every field but the age, which the clock moves between the runs.
        let ageless = |mut rows: Value| {
            for row in rows.as_array_mut().unwrap() {
                row.as_object_mut().unwrap().remove("age_secs");
            }
            rows
        };
        assert_eq!(
            ageless(sandbox.json(&["--store", store, "list"])),
            ageless(sandbox.json(&["list"]))
        );
        sandbox.ok(&["--store", store, "complete", &active, "--summary", "done"]);
        let history = sandbox.json(&["--store", store, "history", &active]);
        let last = history.as_array().unwrap().last().unwrap().clone();
        assert_eq!(
            (&last["seq"], &last["position"]),
            (&Value::from(2), &Value::from(6))
        );
    }
}

#[test]
fn an_export_file_is_whole_or_absent_and_not_overwritten_without_force() {
    let sandbox = Sandbox::new();
    sandbox.handoff();
    let file = sandbox.path("backup.jsonl");
    std::fs::write(&file, "keep me\n").unwrap();
    let args = ["export", "--output", file.to_str().unwrap()];
    let message = sandbox.fails(&args, 2, "usage");
    assert!(message.contains("--force"), "{message}");
    assert_eq!(read(&file), "keep me\n");
    sandbox.ok(&["export", "--output", file.to_str().unwrap(), "--force"]);
    assert!(read(&file).starts_with(r#"{"format":"lf-handoff-export""#));
    sandbox.fails(&["export", "--force"], 2, "usage");
    sandbox.fails(
        &[
            "export",
            "--output",
            sandbox.path("no/such/dir/x.jsonl").to_str().unwrap(),
        ],
        2,
        "usage",
    );

    // A store that cannot be read leaves no file, and no temporary one.
    let out = sandbox.mkdir("out");
    let garbage = sandbox.path("garbage.db");
    std::fs::write(&garbage, "this is not a database\n".repeat(200)).unwrap();
    let store = format!("sqlite://{}", garbage.display());
    let target = out.join("never.jsonl");
    sandbox.fails(
        &[
            "--store",
            &store,
            "export",
            "--output",
            target.to_str().unwrap(),
        ],
        5,
        "damaged",
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing left in {out:?}"
    );
}

#[test]
fn a_damaged_or_newer_file_is_exit_2_and_imports_nothing() {
    let sandbox = Sandbox::new();
    registry(&sandbox);
    let exported = sandbox.ok(&["export"]);
    let target = format!("sqlite://{}", sandbox.path("target.db").display());
    let empty = sandbox.ok(&["--store", &target, "export"]);
    let write = |name: &str, text: &str| {
        let path = sandbox.path(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let mut lines: Vec<&str> = exported.lines().collect();
    let count = lines.len();
    // A line that is not a record, late in the file: named by its number.
    lines[count - 2] = "{\"event\": 42}";
    let damaged = write("damaged.jsonl", &(lines.join("\n") + "\n"));
    let message = sandbox.fails(
        &[
            "--store",
            &target,
            "import",
            "--input",
            damaged.to_str().unwrap(),
        ],
        2,
        "invalid_input",
    );
    assert!(
        message.contains(&format!("line {}", count - 1)),
        "{message}"
    );
    // Cut short.
    let cut = write("cut.jsonl", &exported[..exported.len() / 2]);
    sandbox.fails(
        &[
            "--store",
            &target,
            "import",
            "--input",
            cut.to_str().unwrap(),
        ],
        2,
        "invalid_input",
    );
    // A newer format.
    let newer = write(
        "newer.jsonl",
        &exported.replacen(r#""version":2}"#, r#""version":7}"#, 1),
    );
    let message = sandbox.fails(
        &[
            "--store",
            &target,
            "import",
            "--input",
            newer.to_str().unwrap(),
        ],
        2,
        "invalid_input",
    );
    assert!(
        message.contains("newer") && message.contains("7"),
        "{message}"
    );
    // A file that is not there.
    sandbox.fails(
        &[
            "--store",
            &target,
            "import",
            "--input",
            sandbox.path("missing").to_str().unwrap(),
        ],
        2,
        "usage",
    );
    assert_eq!(sandbox.ok(&["--store", &target, "export"]), empty);
    // The good file still goes in.
    let good = write("good.jsonl", &exported);
    sandbox.ok(&[
        "--store",
        &target,
        "import",
        "--input",
        good.to_str().unwrap(),
    ]);
    assert_eq!(sandbox.ok(&["--store", &target, "export"]), exported);
}

#[test]
fn a_store_that_is_not_empty_is_exit_4_not_empty_and_unchanged() {
    let sandbox = Sandbox::new();
    registry(&sandbox);
    let exported = sandbox.ok(&["export"]);
    let file = sandbox.path("registry.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let message = sandbox.fails(
        &["import", "--input", file.to_str().unwrap()],
        4,
        "not_empty",
    );
    assert!(message.contains("not empty"), "{message}");
    assert_eq!(sandbox.ok(&["export"]), exported);
}

/// C17 through the service (C24): `import` with an `http://` store reads
/// stdin given in pieces, and the served store then exports the same
/// bytes; a second import is the same refusal, and exit code, as on the
/// store itself.
#[test]
fn import_through_the_service_reads_stdin_and_answers_as_on_the_store() {
    let source = Sandbox::new();
    registry(&source);
    let exported = source.ok(&["export"]);
    let target = Sandbox::new();
    let serving = crate::serve::Serving::start(&target, &[]);
    let url = format!("http://{}", serving.address);
    let token = serving.token("operator");
    let import = |input: &[u8]| {
        with_stdin_env(
            &target,
            &["--store", &url, "import"],
            input,
            ("LF_HANDOFF_TOKEN", &token),
        )
    };
    let run = import(exported.as_bytes());
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.starts_with("imported 3 parents"), "{run:?}");
    assert_eq!(target.ok(&["export"]), exported);
    let again = import(exported.as_bytes());
    assert_eq!(again.code, 4, "{again:?}");
    assert!(again.stderr.contains("not empty"), "{again:?}");
    assert_eq!(target.ok(&["export"]), exported);

    // Over 1 MiB, the input goes out as it is read, on the command line's
    // one-thread runtime; a damaged one is refused as on the store.
    let empty = Sandbox::new();
    let serving = crate::serve::Serving::start(&empty, &[]);
    let mut damaged = b"not an export\n".to_vec();
    damaged.resize(3 * 1024 * 1024, b'\n');
    let url = format!("http://{}", serving.address);
    let run = with_stdin_env(
        &empty,
        &["--store", &url, "import"],
        &damaged,
        ("LF_HANDOFF_TOKEN", &serving.token("operator")),
    );
    let local = with_stdin(&empty, &["import"], &damaged);
    assert_eq!((run.code, local.code), (2, 2), "{run:?} {local:?}");
}
