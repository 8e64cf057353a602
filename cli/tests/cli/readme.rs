//! The "Using lf-handoff" walk-through works as shown: its shell lines are
//! run, in order, with `sh -e`.

use crate::support::{binary, Run, Sandbox};

/// The walk-through's text: its section of README.md.
fn walkthrough() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let start = readme
        .find("## Using lf-handoff")
        .expect("README.md has a \"Using lf-handoff\" section");
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
    let bin = binary().parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = std::process::Command::new("sh");
    command
        .args(["-e", "-c", &script])
        .env("PATH", path)
        .env("TMPDIR", sandbox.mkdir("tmp"))
        .env("HOME", sandbox.path("home"))
        .env_remove("LF_HOME")
        .env_remove("LF_HANDOFF_STORE")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME");
    let run = Run::from_output(command.output().unwrap());
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
