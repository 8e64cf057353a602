//! Running the `lf-handoff` binary in a sandbox: a temporary directory
//! that holds the store, the config and data directories and `HOME`, so no
//! test sees the user's own registry or another test's.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

/// The `lf-handoff` binary of this package, which cargo builds before the
/// tests.
pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_lf-handoff"))
}

/// What one run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from_output(output: Output) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// A temporary home for one test: `LF_HOME`, `HOME` and the XDG
/// directories all point inside it.
#[derive(Debug)]
pub struct Sandbox {
    pub dir: TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("lf-cli-test-")
            .tempdir()
            .unwrap();
        Self { dir }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// A directory inside the sandbox, created.
    pub fn mkdir(&self, relative: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// The default store of this sandbox (`$LF_HOME/registry.db`).
    pub fn default_store(&self) -> PathBuf {
        self.path("lf/registry.db")
    }

    /// A command running the binary with `args` and the sandbox's
    /// environment; the store variables of the caller's environment are
    /// removed.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut command = Command::new(binary());
        command
            .args(args)
            .env_remove("LF_HANDOFF_STORE")
            .env_remove("XDG_DATA_HOME")
            .env_remove("COLUMNS")
            .env("LF_HOME", self.path("lf"))
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .stdin(Stdio::null());
        command
    }

    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        Run::from_output(self.command(args).output().unwrap())
    }

    /// Runs `args`, asserts exit 0, returns stdout.
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let run = self.run(args);
        assert_eq!(run.code, 0, "{:?} failed: {run:?}", shown(args));
        run.stdout
    }

    /// Runs `--json` and `args`, asserts exit 0, parses stdout.
    pub fn json<S: AsRef<OsStr>>(&self, args: &[S]) -> Value {
        // First, so it is not taken for part of an argv after `--`.
        let mut all: Vec<&OsStr> = vec![OsStr::new("--json")];
        all.extend(args.iter().map(AsRef::as_ref));
        let stdout = self.ok(&all);
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{:?} printed invalid JSON ({e}): {stdout}", shown(args)))
    }

    /// Runs `args`, asserts exit `code` with nothing on stdout and exactly
    /// one `error:` line on stderr; returns that line.
    pub fn fails<S: AsRef<OsStr>>(&self, args: &[S], code: i32) -> String {
        let run = self.run(args);
        assert_error(&run, code, &format!("{:?}", shown(args)));
        run.stderr.trim_end().to_string()
    }

    /// Creates a wave and returns its id.
    pub fn wave(&self) -> String {
        self.ok(&["wave", "create", "--name", "w", "--repo", "/srv/repo"])
            .trim()
            .to_string()
    }

    /// Creates a wave, opens a handoff on it with `cwd` and `argv`, and
    /// returns the handoff's JSON.
    pub fn open_on_wave(&self, cwd: &Path, env: &[&str], argv: &[&str]) -> Value {
        let wave = self.wave();
        let mut args: Vec<String> = [
            "open",
            "--parent",
            &format!("wave:{wave}"),
            "--home",
            "jack@local",
            "--cwd",
            cwd.to_str().unwrap(),
            "--provider",
            "codex",
            "--generation",
            "1",
            "--reason",
            "OAuth login requires a human",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        for pair in env {
            args.push("--env".into());
            args.push((*pair).into());
        }
        args.push("--".into());
        args.extend(argv.iter().map(ToString::to_string));
        let opened = self.json(&args);
        assert_eq!(opened["created"], true);
        opened["handoff"].clone()
    }

    /// A handoff id of a fresh handoff on a new wave (cwd: the sandbox).
    pub fn handoff(&self) -> String {
        let handoff = self.open_on_wave(self.dir.path(), &[], &["tmux", "attach"]);
        handoff["id"].as_str().unwrap().to_string()
    }
}

/// Asserts a failed run: exit `code`, empty stdout, one `error:` line.
pub fn assert_error(run: &Run, code: i32, what: &str) {
    assert_eq!(run.code, code, "{what}: {run:?}");
    assert_eq!(run.stdout, "", "{what}: an error prints nothing on stdout");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: stderr must be one line: {run:?}");
    assert!(lines[0].starts_with("error: "), "{what}: {run:?}");
}

fn shown<S: AsRef<OsStr>>(args: &[S]) -> Vec<String> {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect()
}

/// The keys of a JSON object, sorted.
pub fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// `names` sorted, for comparing with [`keys`].
pub fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(ToString::to_string).collect();
    names.sort();
    names
}

/// Asserts `value` is an RFC 3339 timestamp string.
pub fn assert_timestamp(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{text:?} is not RFC 3339: {e}"));
}

/// Writes an executable shell script.
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
