//! Parents, usage errors, help, completions, the demo and storage errors.

use lf_handoff_adapters::StorageConfig;
use lf_handoff_conformance::backends::{SledBackend, SqliteBackend};
use lf_handoff_conformance::Backend;

use crate::support::{assert_timestamp, keys, sorted, Sandbox};

#[test]
fn wave_create_prints_the_id_or_the_wave() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["wave", "create", "--name", "product", "--repo", "/srv/repo"]);
    assert_eq!(run.code, 0, "{run:?}");
    let id = run.stdout.trim();
    assert!(id.starts_with("wv_"), "{run:?}");
    assert_eq!(run.stdout, format!("{id}\n"), "stdout holds only the id");
    assert!(run.stderr.contains("created wave"), "{run:?}");

    let wave = sandbox.json(&["wave", "create", "--name", "product", "--repo", "/srv/repo"]);
    assert_eq!(
        keys(&wave),
        sorted(&["id", "name", "repo", "status", "latest_process"])
    );
    assert!(wave["id"].as_str().unwrap().starts_with("wv_"));
    assert_eq!(wave["name"], "product");
    assert_eq!(wave["repo"], "/srv/repo");
    assert_eq!(wave["status"], "active");
    assert!(wave["latest_process"].is_null());

    sandbox.fails(
        &["wave", "create", "--name", " ", "--repo", "/r"],
        2,
        "invalid_input",
    );
}

#[test]
fn project_and_task_create_print_the_created_sessions() {
    let sandbox = Sandbox::new();
    let wave = sandbox.wave();
    let project = sandbox.json(&[
        "project",
        "create",
        "--wave",
        &wave,
        "--name",
        "Loopflow API",
        "--provider",
        "codex",
        "--provider-session",
        "thread-1",
        "--generation",
        "3",
    ]);
    let project_id = project["id"].as_str().unwrap().to_string();
    assert!(project_id.starts_with("ps_"));
    assert_eq!(project["wave_id"], wave.as_str());
    assert_eq!(project["provider"], "codex");
    assert_eq!(project["provider_session_id"], "thread-1");
    assert_eq!(project["status"], "running");
    assert_eq!(project["launch"]["project"]["name"], "Loopflow API");
    assert_eq!(project["launch"]["project"]["slug"], "loopflow-api");
    assert_eq!(project["latest_process"]["generation"], 3);
    assert_eq!(project["latest_process"]["provider"], "codex");
    assert_eq!(project["latest_process"]["provider_session_id"], "thread-1");
    assert_timestamp(&project["created_at"]);

    let worktree = sandbox.mkdir("worktree");
    let task = sandbox.json(&[
        "task",
        "create",
        "--project",
        &project_id,
        "--worktree",
        worktree.to_str().unwrap(),
        "--provider",
        "codex",
        "--provider-session",
        "task-thread",
        "--generation",
        "4",
        "--identifier",
        "W2-175",
        "--title",
        "Hand work to a human",
    ]);
    assert!(task["id"].as_str().unwrap().starts_with("ts_"));
    assert_eq!(task["project_session_id"], project_id.as_str());
    assert_eq!(task["wave_id"], wave.as_str());
    assert_eq!(task["worktree"], worktree.to_str().unwrap());
    assert_eq!(task["provider_session_id"], "task-thread");
    assert_eq!(task["latest_process"]["generation"], 4);
    assert_eq!(task["launch"]["issue"]["identifier"], "W2-175");
    assert_eq!(task["launch"]["issue"]["title"], "Hand work to a human");
    assert_eq!(task["launch"]["project"]["name"], "Loopflow API");
    assert_eq!(task["workspace_slug"], "w2-175");

    let missing = "ps_01a23770-7ddd-7406-89b2-f78da53555de";
    let error = sandbox.fails(
        &[
            "task",
            "create",
            "--project",
            missing,
            "--worktree",
            "/w",
            "--provider",
            "codex",
            "--generation",
            "1",
        ],
        3,
        "not_found",
    );
    assert!(error.contains(missing), "{error}");
    sandbox.fails(
        &[
            "task",
            "create",
            "--project",
            &project_id,
            "--worktree",
            "relative",
            "--provider",
            "codex",
            "--generation",
            "1",
        ],
        2,
        "invalid_input",
    );
    sandbox.fails(
        &[
            "project",
            "create",
            "--wave",
            "wv_01a23770-7ddd-7406-89b2-f78da53555de",
            "--name",
            "p",
            "--provider",
            "codex",
            "--generation",
            "1",
        ],
        3,
        "not_found",
    );
}

#[test]
fn task_body_records_higher_generations_and_replays_the_current_one() {
    let sandbox = Sandbox::new();
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
        "/w",
        "--provider",
        "codex",
        "--provider-session",
        "t-1",
        "--generation",
        "1",
    ]);
    let task = task.trim();

    let recorded = sandbox.json(&["task", "body", task, "--generation", "2"]);
    assert_eq!(recorded["id"], task);
    assert_eq!(recorded["latest_process"]["generation"], 2);
    assert_eq!(recorded["latest_process"]["provider"], "codex");
    assert_eq!(
        recorded["latest_process"]["provider_session_id"], "t-1",
        "the conversation is inherited"
    );

    let replayed = sandbox.json(&["task", "body", &format!("task:{task}"), "--generation", "2"]);
    assert_eq!(
        replayed, recorded,
        "recording the current body again writes nothing"
    );
    let human = sandbox.ok(&["task", "body", task, "--generation", "2"]);
    assert!(human.contains("already at body generation 2"), "{human}");

    sandbox.fails(
        &["task", "body", task, "--generation", "1"],
        4,
        "generation_not_newer",
    );
    sandbox.fails(
        &[
            "task",
            "body",
            task,
            "--generation",
            "3",
            "--provider",
            "claude",
        ],
        4,
        "provider_mismatch",
    );
    sandbox.fails(
        &[
            "task",
            "body",
            "ts_01a23770-7ddd-7406-89b2-f78da53555de",
            "--generation",
            "2",
        ],
        3,
        "not_found",
    );
    let error = sandbox.fails(
        &["task", "body", &wave, "--generation", "2"],
        2,
        "invalid_input",
    );
    assert!(error.contains(&wave), "{error}");
    let recorded = sandbox.json(&[
        "task",
        "body",
        &wave,
        "--generation",
        "2",
        "--provider",
        "codex",
    ]);
    assert_eq!(recorded["latest_process"]["generation"], 2);
}

#[test]
fn usage_errors_exit_2_with_one_error_line() {
    let sandbox = Sandbox::new();
    let cases: &[&[&str]] = &[
        &[],
        &["frobnicate"],
        &["wave"],
        &["status"],
        &["status", "not-an-id"],
        &["status", "wv_01a23770-7ddd-7406-89b2-f78da53555de"],
        &["list", "--parent", "nobody"],
        &["list", "--bogus"],
        &[
            "wait",
            "ih_01a23770-7ddd-7406-89b2-f78da53555de",
            "--timeout",
            "soon",
        ],
        &[
            "claim-wake",
            "ih_01a23770-7ddd-7406-89b2-f78da53555de",
            "--generation",
            "-1",
        ],
        &["completions", "tcsh"],
    ];
    for args in cases {
        sandbox.fails(args, 2, "usage");
    }
    assert!(
        !sandbox.default_store().exists(),
        "a usage error opens no store"
    );
}

/// Usage errors that a newcomer meets say the next step: where `open`'s
/// attach command goes, and the whole-number form of a duration.
#[test]
fn usage_errors_say_what_to_type_instead() {
    let sandbox = Sandbox::new();
    let parent = format!("wave:{}", sandbox.wave());
    let mut open = sandbox.open_args(&parent, &[]);
    let dashes = open.iter().position(|arg| arg == "--").unwrap();
    open.truncate(dashes);
    let message = sandbox.fails(&open, 2, "usage");
    assert!(
        message.contains("the attach command goes last, after `--`"),
        "without it: {message}"
    );
    open.extend(["tmux".to_string(), "attach".to_string()]);
    let message = sandbox.fails(&open, 2, "usage");
    assert!(
        message.contains("the attach command goes last, after `--`"),
        "with it but no `--`: {message}"
    );
    let id = sandbox.handoff();
    let message = sandbox.fails(&["extend", &id, "--by", "1.5h"], 2, "usage");
    assert!(message.contains("write 1h30m"), "{message}");
    let message = sandbox.fails(&["open", "--help-me"], 2, "usage");
    assert!(!message.contains("attach command"), "{message}");
}

#[test]
fn help_and_version_exit_0() {
    let sandbox = Sandbox::new();
    let help = sandbox.ok(&["--help"]);
    for command in [
        "wave",
        "project",
        "task",
        "open",
        "list",
        "status",
        "attach",
        "complete",
        "back",
        "fail",
        "claim-wake",
        "wait",
        "demo",
        "completions",
    ] {
        assert!(help.contains(command), "--help lists {command}: {help}");
    }
    let help = sandbox.ok(&["open", "--help"]);
    assert!(help.contains("--env"), "{help}");
    let version = sandbox.ok(&["--version"]);
    // The release's own version (tests/fixtures/vN/make.sh checks it).
    assert_eq!(
        version.trim_end(),
        format!("lf-handoff {}", env!("CARGO_PKG_VERSION")),
        "{version}"
    );
}

#[test]
fn completions_print_a_script_for_each_shell() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = sandbox.ok(&["completions", shell]);
        assert!(script.contains("lf-handoff"), "{shell}");
        assert!(script.contains("claim-wake"), "{shell}");
    }
    assert!(
        !sandbox.default_store().exists(),
        "completions open no store"
    );
}

#[test]
fn demo_narrates_every_step_on_a_throwaway_store() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    for phrase in [
        "throwaway sqlite store",
        "Created wave wv_",
        "Created project session ps_",
        "Created task session ts_",
        "opened handoff ih_",
        "created=false",
        "A person attached",
        "DEMO_TOKEN=",
        "handed the work back",
        "generation 2",
        "claimed=true",
        "claimed=false",
        "step oauth-login",
        "took the wake over",
        "census row",
        "handed_back",
        "expires in 1h",
        "wake_taken_over",
    ] {
        assert!(
            run.stdout.contains(phrase),
            "demo says {phrase:?}: {}",
            run.stdout
        );
    }
    assert!(
        !sandbox.default_store().exists(),
        "the demo leaves the configured store alone"
    );

    let steps = sandbox.json(&["demo"]);
    let actions: Vec<&str> = steps
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "open_store",
            "create_wave",
            "create_project",
            "create_task",
            "open",
            "replay_open",
            "attach",
            "hand_back",
            "new_body",
            "claim_wake",
            "claim_retry",
            "claim_lost",
            "rerun_step",
            "take_over",
            "old_retry",
            "census",
            "history",
        ]
    );
    assert_eq!(steps[4]["data"]["step"], "oauth-login");
    assert_eq!(steps[5]["data"]["created"], false);
    assert_eq!(steps[9]["data"]["claimed"], true);
    assert_eq!(steps[11]["data"]["claimed"], false);
    assert_eq!(steps[12]["data"]["created"], false);
    assert_eq!(steps[12]["data"]["handoff"]["status"], "handed_back");
    assert_eq!(steps[13]["data"]["claimed"], true);
    assert_eq!(steps[13]["data"]["holder"], 3);
    assert_eq!(steps[14]["data"]["claimed"], false);
    assert_eq!(
        steps[14]["data"]["handoff"]["wake_claimed_by_generation"],
        3
    );
    assert_eq!(steps[15]["data"]["status"], "handed_back");
    assert_eq!(steps[15]["data"]["step"], "oauth-login");
    assert!(steps[4]["data"]["expires_at"].is_string(), "a deadline");
    let kinds: Vec<&str> = steps[16]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| event["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "opened",
            "attached",
            "finished",
            "wake_claimed",
            "wake_taken_over"
        ]
    );
}

#[test]
fn demo_runs_on_the_store_given_with_the_flag() {
    let sandbox = Sandbox::new();
    let store = sandbox.path("demo.db");
    let url = format!("sqlite://{}", store.display());
    let run = sandbox.run(&["demo", "--store", &url]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(&url), "{}", run.stdout);
    let rows = sandbox.json(&["list", "--store", &url]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "the records stay there");
}

/// Every store the conformance suite's C11 refuses for SQLite and sled
/// (corrupt, truncated, garbage, a newer schema or format, another
/// program's, locked by another process): reading, opening and finishing
/// through it each exit 5 with the kind of the problem and a message
/// naming the store, and every one of its files is byte-for-byte as
/// before.
#[test]
fn storage_failures_exit_5_and_leave_the_file_alone() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The locked sled store is held by this test process; the binary is
    // the other process.
    let backends: Vec<Box<dyn Backend>> = vec![
        Box::new(SqliteBackend),
        Box::new(SledBackend::holding_here()),
    ];
    let ghost = "ih_0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    for backend in backends {
        let sandbox = Sandbox::new();
        let cases = runtime.block_on(backend.unusable_stores(sandbox.dir.path()));
        assert!(
            cases.len() >= 4,
            "{} prepares {} cases",
            backend.name(),
            cases.len()
        );
        for case in &cases {
            let url = case.config.url();
            let store_name = store_name(&case.config);
            let before: Vec<Vec<u8>> = case
                .guarded
                .iter()
                .map(|p| std::fs::read(p).unwrap())
                .collect();
            for args in [
                vec!["list"],
                vec!["status", ghost],
                vec!["complete", ghost, "--summary", "done"],
                vec![
                    "open",
                    "--parent",
                    "wave:wv_0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
                    "--home",
                    "jack@local",
                    "--cwd",
                    "/srv",
                    "--provider",
                    "codex",
                    "--generation",
                    "1",
                    "--reason",
                    "r",
                    "--",
                    "true",
                ],
            ] {
                let mut all = vec!["--store", url.as_str()];
                all.extend(args);
                let error = sandbox.fails(&all, 5, case.kind.as_str());
                assert!(
                    error.contains(&store_name),
                    "{} {}: {error:?} does not name {store_name:?}",
                    backend.name(),
                    case.what,
                );
            }
            let after: Vec<Vec<u8>> = case
                .guarded
                .iter()
                .map(|p| std::fs::read(p).unwrap())
                .collect();
            assert!(
                before == after,
                "{} {}: a file was modified",
                backend.name(),
                case.what
            );
        }
        runtime.block_on(backend.cleanup());
    }
}

/// The last component of the store's file or directory, which its errors
/// name.
fn store_name(config: &StorageConfig) -> String {
    let path = match config {
        StorageConfig::Sqlite(sqlite) => &sqlite.path,
        StorageConfig::Sled(sled) => &sled.path,
        other => panic!("not a file store: {other:?}"),
    };
    path.file_name().unwrap().to_string_lossy().into_owned()
}
