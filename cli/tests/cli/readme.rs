//! The "Using lf-handoff" walk-through and the "Serving the registry"
//! walk work as shown: their shell lines are run, in order, with `sh -e`.

use crate::support::{binary, Run, Sandbox};

/// The repository's root.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The walk-through's text: its section of README.md.
fn walkthrough() -> String {
    section("## Using lf-handoff")
}

/// The README's section that starts with `heading`, to the next `## `.
fn section(heading: &str) -> String {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("README.md has a {heading:?} section"));
    let rest = &readme[start + 2..];
    let end = rest.find("\n## ").map_or(rest.len(), |end| end + 1);
    rest[..end].to_string()
}

/// The lines of its `sh` blocks, less the build and PATH set-up (the test
/// puts the binary under test on PATH itself).
fn shell_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside && line.trim_start() == "```sh";
            continue;
        }
        if inside && !line.starts_with("cargo build") && !line.starts_with("export PATH=") {
            lines.push(line.to_string());
        }
    }
    lines
}

/// Runs `command` (a shell running README lines) with the binary under
/// test first on PATH, a scratch HOME and TMPDIR, and none of the settings
/// that would choose another store or token.
fn run_in(sandbox: &Sandbox, mut command: std::process::Command) -> Run {
    let bin = binary().parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    command
        .env("PATH", path)
        .env("TMPDIR", sandbox.mkdir("tmp"))
        .env("HOME", sandbox.path("home"))
        .env_remove("LF_HOME")
        .env_remove("LF_HANDOFF_STORE")
        .env_remove("LF_HANDOFF_TOKEN")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME");
    Run::from_output(command.output().unwrap())
}

#[test]
fn the_walkthrough_runs_line_by_line() {
    let sandbox = Sandbox::new();
    let lines = shell_lines(&walkthrough());
    assert!(
        lines.len() >= 15,
        "the walk-through has its commands: {lines:?}"
    );
    for needed in [
        "wave create",
        "project create",
        "task create",
        "open ",
        "--step ",
        "list",
        "attach",
        "--print",
        "back ",
        "claim-wake",
        "--expires-in ",
        "history ",
    ] {
        assert!(
            lines.iter().any(|line| line.contains(needed)),
            "it shows {needed}"
        );
    }
    let script = lines.join("\n");
    let mut command = std::process::Command::new("sh");
    command.args(["-e", "-c", &script]);
    let run = run_in(&sandbox, command);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("token abc123 in "),
        "attach ran the command: {run:?}"
    );
    assert!(run.stdout.contains("not claimed: generation 2"), "{run:?}");
    assert!(
        run.stdout.contains("claimed: generation 3 holds the wake"),
        "generation 3 took the wake over: {run:?}"
    );
    assert!(
        run.stdout
            .contains("not claimed: generation 3 already holds"),
        "generation 2's retry is refused: {run:?}"
    );
    assert!(
        run.stderr.contains("reused: task:") && run.stderr.contains("is handed back"),
        "the re-run step got the finished handoff back: {run:?}"
    );
    // The re-run printed an id, alone on its line: the one `list` showed.
    let ids: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("ih_") && line.len() == 39)
        .collect();
    assert_eq!(ids.len(), 1, "{run:?}");
    assert!(
        run.stdout
            .lines()
            .any(|line| line.len() > 39 && line.starts_with(ids[0])),
        "the re-run got the listed handoff back: {run:?}"
    );
    assert!(
        run.stdout.contains("expires in 7h 59m") || run.stdout.contains("expires in 8h 0m"),
        "list shows the deadline: {run:?}"
    );
    let history: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.contains(" UTC  "))
        .filter_map(|line| line.split_whitespace().nth(3))
        .collect();
    assert_eq!(
        history,
        [
            "opened",
            "attached",
            "finished",
            "wake_claimed",
            "wake_taken_over"
        ],
        "history shows each change once: {run:?}"
    );
    assert!(!run.stderr.contains("error:"), "{run:?}");
}

/// The service walk ("Serving the registry"): its `sh` lines, run in order
/// with `sh -e` at the repository's root, start `serve` in the background,
/// define the three tokens from what it prints, and go through a handoff
/// and the Python example with the scope each step needs. The only change
/// is the port: a free one instead of 7381, which another service may hold.
#[test]
fn the_service_walk_runs_line_by_line() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: the service walk runs python3, which is not installed");
        return;
    }
    let sandbox = Sandbox::new();
    let lines = shell_lines(&section("## Serving the registry"));
    let script = lines.join("\n");
    for needed in [
        "lf-handoff serve --listen 127.0.0.1:7381 > ",
        "eval \"$(grep '^LF_HANDOFF_[A-Z]*_TOKEN='",
        "$LF_HANDOFF_AGENT_TOKEN",
        "$LF_HANDOFF_PERSON_TOKEN",
        "/v1/handoffs/$ID/wait",
        "openssl rand",
        "examples/python/handoff.py",
        "kill \"$SERVE_PID\"",
    ] {
        assert!(script.contains(needed), "it shows {needed}: {script}");
    }
    // Every variable is defined before it is used: `sh -u` says so.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    // A failing line must not leave the service or the agent running.
    let script = format!(
        "trap 'kill ${{SERVE_PID:-}} ${{AGENT_PID:-}} 2>/dev/null || true' EXIT\n{}",
        script.replace("127.0.0.1:7381", &format!("127.0.0.1:{port}"))
    );
    let mut command = std::process::Command::new("timeout");
    command
        .args(["120", "sh", "-eu", "-c", &script])
        .current_dir(ROOT);
    let run = run_in(&sandbox, command);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "lf-handoff serve: http://127.0.0.1:{port} (store sqlite://"
        )),
        "the start line names the store: {run:?}"
    );
    assert!(
        run.stdout.contains("claimed: generation 2 holds the wake"),
        "{run:?}"
    );
    assert!(run.stdout.contains("\"ended\":true"), "{run:?}");
    assert!(
        run.stdout.contains(r#""claimed": true"#),
        "the Python example claimed its wake: {run:?}"
    );
    assert!(!run.stderr.contains("error:"), "{run:?}");
}
