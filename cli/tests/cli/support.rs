//! Running the `lf-handoff` binary in a sandbox: a temporary directory
//! that holds the store, the config and data directories and `HOME`, so no
//! test sees the user's own registry or another test's.
//!
//! A failing command is judged by its exit code and, run with `--json`, by
//! the kind of its JSON error; never by the text of its message.

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
    /// The store every command names (`LF_HANDOFF_STORE`), when not the
    /// default one.
    store: Option<String>,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("lf-cli-test-")
            .tempdir()
            .unwrap();
        Self { dir, store: None }
    }

    /// A sandbox whose commands all use a sled store inside it.
    pub fn sled() -> Self {
        let mut sandbox = Self::new();
        sandbox.store = Some(format!("sled://{}", sandbox.path("sled").display()));
        sandbox
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
            .env_remove("LF_HANDOFF_ACTOR")
            .env_remove("RUST_LOG")
            .env_remove("XDG_DATA_HOME")
            .env_remove("COLUMNS")
            // A test run inside tmux must not change what `attach` does.
            .env_remove("TMUX")
            .env("LF_HOME", self.path("lf"))
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .stdin(Stdio::null());
        if let Some(store) = &self.store {
            command.env("LF_HANDOFF_STORE", store);
        }
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
        let stdout = self.ok(&with_json(args));
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{:?} printed invalid JSON ({e}): {stdout}", shown(args)))
    }

    /// Runs the failing command `args` twice, and decides by exit code and
    /// error kind, never by message text: without `--json` it must exit
    /// `code` with one `error:` line; with `--json` exit `code` with the
    /// JSON error of `kind`. Returns that error's message, for checks that
    /// it names what it is about.
    pub fn fails<S: AsRef<OsStr>>(&self, args: &[S], code: i32, kind: &str) -> String {
        self.fails_with(args, code, kind, |_| {})
    }

    /// [`fails`](Self::fails), with `setup` applied to both commands (an
    /// environment change, say).
    pub fn fails_with<S: AsRef<OsStr>>(
        &self,
        args: &[S],
        code: i32,
        kind: &str,
        setup: impl Fn(&mut Command),
    ) -> String {
        let what = format!("{:?}", shown(args));
        let mut command = self.command(args);
        setup(&mut command);
        let run = Run::from_output(command.output().unwrap());
        assert_error(&run, code, &what);
        let mut command = self.command(&with_json(args));
        setup(&mut command);
        let run = Run::from_output(command.output().unwrap());
        assert_kind(&run, code, kind, &format!("--json {what}"))
    }

    /// Creates a wave, opens a handoff on it (cwd: the sandbox) with the
    /// `extra` flags of `open` (a deadline, say), and returns the
    /// handoff's JSON.
    pub fn open_with(&self, extra: &[&str]) -> Value {
        let parent = format!("wave:{}", self.wave());
        let opened = self.json(&self.open_args(&parent, extra));
        assert_eq!(opened["created"], true, "{opened}");
        opened["handoff"].clone()
    }

    /// The arguments of an `open` on `parent` (cwd: the sandbox) with the
    /// `extra` flags of `open`, attaching with `tmux attach`.
    pub fn open_args(&self, parent: &str, extra: &[&str]) -> Vec<String> {
        let cwd = self.dir.path().to_str().unwrap();
        let mut args = vec![
            "open",
            "--parent",
            parent,
            "--home",
            "jack@local",
            "--cwd",
            cwd,
            "--provider",
            "codex",
            "--generation",
            "1",
            "--reason",
            "OAuth login requires a human",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "tmux", "attach"]);
        args.into_iter().map(String::from).collect()
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

/// Asserts a failed run without `--json`: exit `code`, empty stdout, one
/// `error:` line. Says nothing of the message.
pub fn assert_error(run: &Run, code: i32, what: &str) {
    assert_eq!(run.code, code, "{what}: {run:?}");
    assert_eq!(run.stdout, "", "{what}: an error prints nothing on stdout");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: stderr must be one line: {run:?}");
    assert!(lines[0].starts_with("error: "), "{what}: {run:?}");
}

/// The error a failed `--json` run printed: stderr is exactly one line,
/// `{"error": {"kind", "category", "code", "message"}}`.
#[derive(Debug)]
pub struct JsonError {
    pub kind: String,
    pub category: String,
    pub code: i64,
    pub message: String,
}

/// Parses the one line of JSON a failed `--json` run printed on stderr,
/// and asserts its shape: nothing on stdout, exactly those four fields,
/// `code` the exit code, and a `category` that goes with the code (and
/// with the kind, where the kind fixes it).
pub fn json_error(run: &Run, what: &str) -> JsonError {
    assert_eq!(run.stdout, "", "{what}: an error prints nothing on stdout");
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: stderr must be one line: {run:?}");
    let value: Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("{what}: stderr is not JSON ({e}): {run:?}"));
    assert_eq!(keys(&value), sorted(&["error"]), "{what}: {value}");
    let error = &value["error"];
    assert_eq!(
        keys(error),
        sorted(&["kind", "category", "code", "message"]),
        "{what}: {value}"
    );
    let text = |field: &str| {
        error[field]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: {field} is not a string: {value}"))
            .to_string()
    };
    let error = JsonError {
        kind: text("kind"),
        category: text("category"),
        code: error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{what}: code is not an integer: {value}")),
        message: text("message"),
    };
    assert_eq!(
        error.code,
        i64::from(run.code),
        "{what}: code is the exit code"
    );
    let codes: &[i64] = match error.category.as_str() {
        "usage" | "invalid_input" => &[2],
        "not_found" => &[3],
        "conflict" | "timeout" => &[4],
        "unavailable" => &[5],
        "attach" => &[126, 127],
        other => panic!("{what}: unknown category {other:?}: {value}"),
    };
    assert!(codes.contains(&error.code), "{what}: {value}");
    let category = match error.kind.as_str() {
        kind @ ("usage" | "invalid_input" | "not_found" | "timeout") => kind,
        "cannot_execute" | "command_not_found" => "attach",
        _ => error.category.as_str(),
    };
    assert_eq!(error.category, category, "{what}: {value}");
    error
}

/// Asserts a failed `--json` run: exit `code` and error `kind`. Returns
/// the error's message.
pub fn assert_kind(run: &Run, code: i32, kind: &str, what: &str) -> String {
    assert_eq!(run.code, code, "{what}: {run:?}");
    let error = json_error(run, what);
    assert_eq!(error.kind, kind, "{what}: {error:?}");
    error.message
}

/// `--json` followed by `args`: first, so it is not taken for part of an
/// argv after `--`.
fn with_json<S: AsRef<OsStr>>(args: &[S]) -> Vec<&OsStr> {
    let mut all: Vec<&OsStr> = vec![OsStr::new("--json")];
    all.extend(args.iter().map(AsRef::as_ref));
    all
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
