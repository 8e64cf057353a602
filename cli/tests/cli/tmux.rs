//! `attach` and tmux: from a terminal that is a tmux client, a handoff
//! whose command attaches to a session of the same tmux server switches
//! that client (`tmux switch-client`), one of another server runs nested
//! with `TMUX` unset; outside tmux the command runs as stored. First with
//! a stand-in `tmux` that records what it is given, then against real tmux
//! servers (skipped, saying why, where tmux is not installed, unless
//! `LF_HANDOFF_TEST_REQUIRE_TMUX` is set, as in CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{binary, script, Run, Sandbox};

/// A stand-in `tmux` on `PATH` that records its arguments and `$TMUX`.
fn fake_tmux(sandbox: &Sandbox) -> (PathBuf, PathBuf) {
    let bin = sandbox.mkdir("bin");
    let out = sandbox.mkdir("out");
    script(
        &bin.join("tmux"),
        r#"printf '%s\n' "$@" > "$OUT/args"
printf '%s' "${TMUX-unset}" > "$OUT/tmux"
"#,
    );
    (bin, out)
}

fn with_path(command: &mut Command, bin: &Path, out: &Path) {
    let path = std::env::var("PATH").unwrap_or_default();
    command
        .env("PATH", format!("{}:{path}", bin.display()))
        .env("OUT", out);
}

#[test]
fn inside_tmux_an_attach_to_the_same_server_switches_the_client() {
    let sandbox = Sandbox::new();
    let (bin, out) = fake_tmux(&sandbox);
    let work = sandbox.mkdir("work");
    let handoff = sandbox.open_on_wave(
        &work,
        &[],
        &[
            "tmux",
            "-S",
            "/run/agents.sock",
            "attach-session",
            "-t",
            "agent",
        ],
    );
    let id = handoff["id"].as_str().unwrap();

    let mut command = sandbox.command(&["attach", id]);
    with_path(&mut command, &bin, &out);
    command.env("TMUX", "/run/agents.sock,4242,0");
    let run = Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(out.join("args")).unwrap(),
        "-S\n/run/agents.sock\nswitch-client\n-t\nagent\n"
    );
    assert!(
        run.stderr.contains(
            "switching this tmux client to it: tmux -S /run/agents.sock switch-client -t agent"
        ),
        "{run:?}"
    );

    // --print shows the switch as what it would run, and runs nothing.
    std::fs::remove_file(out.join("args")).unwrap();
    let mut command = sandbox.command(&["attach", "--print", id]);
    with_path(&mut command, &bin, &out);
    command.env("TMUX", "/run/agents.sock,4242,0");
    let run = Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    let run_line = run
        .stdout
        .lines()
        .find(|line| line.starts_with("run"))
        .unwrap();
    assert!(
        run_line.ends_with("  tmux -S /run/agents.sock switch-client -t agent"),
        "{run:?}"
    );
    assert!(!out.join("args").exists(), "--print runs nothing");
}

#[test]
fn inside_tmux_another_server_nests_and_outside_the_command_runs_as_stored() {
    let sandbox = Sandbox::new();
    let (bin, out) = fake_tmux(&sandbox);
    let work = sandbox.mkdir("work");
    let argv = ["tmux", "-S", "/run/agents.sock", "attach", "-dt", "agent"];
    let handoff = sandbox.open_on_wave(&work, &[], &argv);
    let id = handoff["id"].as_str().unwrap();
    let stored = "-S\n/run/agents.sock\nattach\n-dt\nagent\n";

    let mut command = sandbox.command(&["attach", id]);
    with_path(&mut command, &bin, &out);
    command.env("TMUX", "/run/mine.sock,4242,0");
    let run = Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(out.join("args")).unwrap(), stored);
    assert_eq!(
        std::fs::read_to_string(out.join("tmux")).unwrap(),
        "unset",
        "a nested client runs with TMUX unset"
    );
    assert!(run.stderr.contains("runs nested in this pane"), "{run:?}");

    let mut command = sandbox.command(&["attach", id]);
    with_path(&mut command, &bin, &out);
    let run = Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(out.join("args")).unwrap(), stored);
    assert!(!run.stderr.contains("nested"), "{run:?}");
}

/// A tmux server of the test's own, on a socket in the sandbox, killed
/// when dropped.
struct TmuxServer {
    socket: PathBuf,
}

impl TmuxServer {
    fn new(socket: PathBuf) -> Self {
        Self { socket }
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.tmux(args);
        assert!(output.status.success(), "tmux {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The sessions this server's clients are attached to.
    fn client_sessions(&self) -> Vec<String> {
        let output = self.tmux(&["list-clients", "-F", "#{client_session}"]);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(ToString::to_string)
            .collect()
    }

    fn screen(&self, target: &str) -> String {
        self.ok(&["capture-pane", "-p", "-t", target])
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// Waits up to 20 s for `done`, then fails with `what` and `state()`.
fn eventually(what: &str, mut done: impl FnMut() -> bool, state: impl Fn() -> String) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: still not so after 20 s; {}",
            state()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn tmux_installed() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        assert!(
            std::env::var_os("LF_HANDOFF_TEST_REQUIRE_TMUX").is_none(),
            "tmux is required (LF_HANDOFF_TEST_REQUIRE_TMUX) but not installed"
        );
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
    }
    found
}

/// The line a person types in their shell: `attach`, then a marker with
/// its exit code.
fn attach_line(sandbox: &Sandbox, id: &str) -> String {
    format!(
        "LF_HOME='{}' HOME='{}' '{}' attach {id}; echo \"RETURNED-$?\"",
        sandbox.path("lf").display(),
        sandbox.path("home").display(),
        binary().display()
    )
}

#[test]
fn outside_tmux_a_real_attach_joins_the_session_and_detaching_returns_to_the_shell() {
    if !tmux_installed() {
        return;
    }
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work");
    let agents = TmuxServer::new(sandbox.path("agents.sock"));
    agents.ok(&["new-session", "-d", "-s", "agent", "sh"]);
    let socket = agents.socket.to_str().unwrap().to_string();
    let handoff = sandbox.open_on_wave(
        &work,
        &[],
        &["tmux", "-S", &socket, "attach-session", "-t", "agent"],
    );
    let id = handoff["id"].as_str().unwrap();

    // The person's terminal: a pane of another server, whose shell is
    // not inside tmux (TMUX unset), as a terminal emulator's would be.
    let terminal = TmuxServer::new(sandbox.path("terminal.sock"));
    terminal.ok(&[
        "new-session",
        "-d",
        "-s",
        "person",
        "-x",
        "160",
        "-y",
        "40",
        "env -u TMUX sh",
    ]);
    terminal.ok(&[
        "send-keys",
        "-t",
        "person",
        &attach_line(&sandbox, id),
        "Enter",
    ]);
    eventually(
        "the person's terminal is a client of the agent's session",
        || agents.client_sessions() == ["agent"],
        || terminal.screen("person"),
    );
    assert_eq!(sandbox.json(&["status", id])["status"], "attached");

    agents.ok(&["detach-client", "-s", "agent"]);
    eventually(
        "detaching returns to the person's shell",
        || terminal.screen("person").contains("RETURNED-0"),
        || terminal.screen("person"),
    );
    assert!(agents.client_sessions().is_empty());
}

#[test]
fn inside_tmux_a_real_attach_switches_the_person_client_to_the_session() {
    if !tmux_installed() {
        return;
    }
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work");
    let server = TmuxServer::new(sandbox.path("shared.sock"));
    server.ok(&["new-session", "-d", "-s", "agent", "sh"]);
    server.ok(&[
        "new-session",
        "-d",
        "-s",
        "home",
        "-x",
        "160",
        "-y",
        "40",
        "sh",
    ]);
    let socket = server.socket.to_str().unwrap().to_string();
    let handoff = sandbox.open_on_wave(
        &work,
        &[],
        &["tmux", "-S", &socket, "attach-session", "-t", "agent"],
    );
    let id = handoff["id"].as_str().unwrap();

    // The person's terminal (a pane of an outer server) runs a client of
    // the shared server, on the person's own session `home`.
    let outer = TmuxServer::new(sandbox.path("outer.sock"));
    let client = format!("env -u TMUX tmux -S '{socket}' attach-session -t home");
    outer.ok(&[
        "new-session",
        "-d",
        "-s",
        "terminal",
        "-x",
        "160",
        "-y",
        "40",
        &client,
    ]);
    eventually(
        "the person's client is on their own session",
        || server.client_sessions() == ["home"],
        || outer.screen("terminal"),
    );

    // In that session's shell ($TMUX set by tmux), the person attaches.
    server.ok(&[
        "send-keys",
        "-t",
        "home",
        &attach_line(&sandbox, id),
        "Enter",
    ]);
    eventually(
        "the person's client switched to the agent's session",
        || server.client_sessions() == ["agent"],
        || format!("{}\n{}", server.screen("home"), outer.screen("terminal")),
    );
    eventually(
        "attach returned at once in the person's shell",
        || server.screen("home").contains("RETURNED-0"),
        || server.screen("home"),
    );
    assert!(
        server
            .screen("home")
            .contains("switching this tmux client to it"),
        "{}",
        server.screen("home")
    );
    assert_eq!(sandbox.json(&["status", id])["status"], "attached");
}
