//! `lf-handoff hook` as the agents run it (C27): a stand-in agent passes
//! the hook input on stdin with its environment, reads stdout, and kills
//! the hook at its timeout. A person answers through the command line (or
//! the service); the agent's next hook event ends what a person answered
//! at the terminal instead. Whatever goes wrong, the hook exits 0 with
//! nothing on stdout and one line on stderr. Then `hook install` and
//! `hook uninstall` on settings files with other content.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::Serving;
use crate::support::{Run, Sandbox};

/// What the stand-in agent saw of one hook run.
#[derive(Debug)]
struct Hooked {
    run: Run,
    /// The agent killed it at its timeout.
    killed: bool,
}

/// Runs `lf-handoff hook AGENT ARGS` as the agent does: `input` on stdin,
/// killed after `timeout`. `setup` changes the command (environment).
fn hook(
    sandbox: &Sandbox,
    agent: &str,
    args: &[&str],
    input: &str,
    timeout: Duration,
    setup: impl Fn(&mut Command),
) -> Hooked {
    let mut command = sandbox.command(&[&["hook", agent], args].concat());
    setup(&mut command);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // An agent that writes a large input may find the hook gone: fine.
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    let start = Instant::now();
    let mut killed = false;
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > timeout {
            child.kill().unwrap();
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Hooked {
        run: Run::from_output(child.wait_with_output().unwrap()),
        killed,
    }
}

/// The hook decided nothing: exit 0, nothing on stdout, one log line.
fn assert_no_decision(hooked: &Hooked, what: &str) -> String {
    assert!(!hooked.killed, "{what}: {hooked:?}");
    assert_eq!(hooked.run.code, 0, "{what}: {hooked:?}");
    assert_eq!(hooked.run.stdout, "", "{what}: {hooked:?}");
    let lines: Vec<&str> = hooked.run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one log line: {hooked:?}");
    assert!(
        lines[0].starts_with("lf-handoff hook "),
        "{what}: {hooked:?}"
    );
    lines[0].to_string()
}

fn claude_permission(cwd: &Path, session: &str, command: &str) -> String {
    json!({
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "what the agent wants"},
    })
    .to_string()
}

fn claude_event(cwd: &Path, session: &str, event: &str, extra: Value) -> String {
    let mut input = json!({
        "session_id": session,
        "transcript_path": "/tmp/transcript.jsonl",
        "cwd": cwd,
        "hook_event_name": event,
    });
    if let (Some(input), Value::Object(extra)) = (input.as_object_mut(), extra) {
        input.extend(extra);
    }
    input.to_string()
}

fn active(sandbox: &Sandbox) -> Vec<Value> {
    sandbox
        .json(&["list", "--active"])
        .as_array()
        .unwrap()
        .clone()
}

/// Waits until the store has an active handoff; returns its id.
fn first_active(sandbox: &Sandbox) -> String {
    let start = Instant::now();
    loop {
        if let Some(handoff) = active(sandbox).first() {
            return handoff["id"].as_str().unwrap().to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no handoff opened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A permission hook waiting (`--wait 30s`) in a thread, answered by
/// `answer` (what the person does, given the handoff's id).
fn answered_by(sandbox: &Sandbox, answer: impl FnOnce(&str)) -> (Hooked, String) {
    let input = claude_permission(sandbox.dir.path(), "s-answer", "cargo publish");
    let hooked = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            hook(
                sandbox,
                "claude-code",
                &["--wait", "30s"],
                &input,
                Duration::from_secs(60),
                |_| {},
            )
        });
        let id = first_active(sandbox);
        answer(&id);
        waiting.join().unwrap()
    });
    let id = sandbox.json(&["list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (hooked, id)
}

/// The person runs `args` on the handoff `id` (`args[0]` the command).
fn person<'a>(sandbox: &'a Sandbox, args: &'a [&'a str]) -> impl FnOnce(&str) + 'a {
    move |id| {
        let mut args = args.to_vec();
        args.insert(1, id);
        sandbox.ok(&args);
    }
}

fn decision(hooked: &Hooked) -> Value {
    assert!(!hooked.killed && hooked.run.code == 0, "{hooked:?}");
    assert_eq!(hooked.run.stdout.lines().count(), 1, "{hooked:?}");
    serde_json::from_str(&hooked.run.stdout).unwrap()
}

#[test]
fn a_person_allows_through_the_command_line() {
    let sandbox = Sandbox::new();
    let allow = ["answer", "--choice", "allow"];
    let (hooked, id) = answered_by(&sandbox, person(&sandbox, &allow));
    assert_eq!(
        decision(&hooked),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"}}})
    );
    let handoff = sandbox.json(&["status", &id]);
    assert_eq!(handoff["provider"], "claude-code");
    assert_eq!(handoff["provider_session_id"], "s-answer");
    let reason = handoff["reason"].as_str().unwrap();
    assert!(
        reason.contains("Bash") && reason.contains("cargo publish"),
        "{reason}"
    );
    assert!(
        handoff["expires_at"].is_string(),
        "the default deadline: {handoff}"
    );
    assert_eq!(handoff["answer"], "allow", "{handoff}");
    assert_eq!(handoff["choices"][1]["value"], "deny", "{handoff}");
}

#[test]
fn a_person_denies_with_the_persons_words_as_the_message() {
    let sandbox = Sandbox::new();
    let deny = [
        "answer",
        "--choice",
        "deny",
        "--summary",
        "not before the release",
    ];
    let (hooked, _) = answered_by(&sandbox, person(&sandbox, &deny));
    assert_eq!(
        decision(&hooked)["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "not before the release"})
    );
    let sandbox = Sandbox::new();
    let (hooked, _) = answered_by(&sandbox, person(&sandbox, &["answer", "--choice", "deny"]));
    let message = decision(&hooked)["hookSpecificOutput"]["decision"]["message"].clone();
    assert_eq!(message, "A person denied this through lf-handoff.");
}

#[test]
fn a_person_denies_with_a_reason_and_a_hand_back_denies_with_its_summary() {
    let sandbox = Sandbox::new();
    let (hooked, _) = answered_by(
        &sandbox,
        person(&sandbox, &["fail", "--reason", "not on a Friday"]),
    );
    assert_eq!(
        decision(&hooked)["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "not on a Friday"})
    );
    let sandbox = Sandbox::new();
    let back = ["back", "--summary", "use --dry-run first"];
    let (hooked, _) = answered_by(&sandbox, person(&sandbox, &back));
    assert_eq!(
        decision(&hooked)["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "use --dry-run first"})
    );
}

#[test]
fn no_answer_in_time_prints_nothing_and_leaves_the_handoff_open() {
    let sandbox = Sandbox::new();
    let input = claude_permission(sandbox.dir.path(), "s-slow", "make deploy");
    let hooked = hook(
        &sandbox,
        "claude-code",
        &["--wait", "1s"],
        &input,
        Duration::from_secs(30),
        |_| {},
    );
    let line = assert_no_decision(&hooked, "timeout");
    assert!(line.contains("stays open"), "{line}");
    let open = active(&sandbox);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["status"], "waiting");
}

#[test]
fn a_deadline_that_answers_deny_denies_when_nobody_answers() {
    let sandbox = Sandbox::new();
    let input = claude_permission(sandbox.dir.path(), "s-expiry", "make deploy");
    let args = ["--wait", "20s", "--expires-in", "1s", "--on-expiry", "deny"];
    let hooked = hook(
        &sandbox,
        "claude-code",
        &args,
        &input,
        Duration::from_secs(30),
        |_| {},
    );
    let decided = decision(&hooked)["hookSpecificOutput"]["decision"].clone();
    assert_eq!(decided["behavior"], "deny", "{decided}");
    assert!(
        decided["message"].as_str().unwrap().contains("deadline"),
        "{decided}"
    );
    let handoff = &sandbox.json(&["list"])[0];
    assert_eq!(handoff["status"], "expired", "{handoff}");
}

#[test]
fn an_agent_that_kills_the_hook_at_its_timeout_leaves_the_handoff_open() {
    let sandbox = Sandbox::new();
    let input = claude_permission(sandbox.dir.path(), "s-killed", "make deploy");
    let hooked = hook(
        &sandbox,
        "claude-code",
        &["--wait", "60s"],
        &input,
        Duration::from_secs(2),
        |_| {},
    );
    assert!(hooked.killed, "{hooked:?}");
    assert_eq!(hooked.run.stdout, "");
    assert_eq!(active(&sandbox).len(), 1);
}

/// The late-answer path: no decision in time, the person answers at the
/// agent's own prompt, and the session's next hook event ends the
/// handoff as the actor `terminal`.
#[test]
fn a_late_answer_at_the_terminal_ends_the_handoff_as_terminal() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.dir.path();
    let wait = ["--wait", "1s"];
    let long = Duration::from_secs(30);
    let first = claude_permission(cwd, "s-late", "rm -rf target");
    assert_no_decision(
        &hook(&sandbox, "claude-code", &wait, &first, long, |_| {}),
        "first",
    );
    let id = first_active(&sandbox);
    // The person allowed it at the terminal, and the agent asks again for
    // another command: the first handoff ends, a second one waits.
    let second = claude_permission(cwd, "s-late", "cargo clean");
    assert_no_decision(
        &hook(&sandbox, "claude-code", &wait, &second, long, |_| {}),
        "second",
    );
    let ended = sandbox.json(&["status", &id]);
    assert_eq!(ended["status"], "handed_back", "{ended}");
    let history = sandbox.json(&["history", &id]);
    let last = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["actor"], "terminal", "{history}");
    let second_id = first_active(&sandbox);
    assert_ne!(second_id, id);
    // The person answers that one at the terminal too, then types a prompt.
    let prompt = claude_event(
        cwd,
        "s-late",
        "UserPromptSubmit",
        json!({"prompt": "go on"}),
    );
    let hooked = hook(&sandbox, "claude-code", &[], &prompt, long, |_| {});
    assert!(
        hooked.run.code == 0 && hooked.run.stdout.is_empty(),
        "{hooked:?}"
    );
    assert!(active(&sandbox).is_empty());
    let history = sandbox.json(&["history", &second_id]);
    assert_eq!(
        history.as_array().unwrap().last().unwrap()["actor"],
        "terminal"
    );
}

#[test]
fn an_idle_agent_waits_in_one_handoff_that_its_next_prompt_ends() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.dir.path();
    let idle = claude_event(
        cwd,
        "s-idle",
        "Notification",
        json!({"message": "Claude is waiting for your input", "notification_type": "idle_prompt"}),
    );
    let long = Duration::from_secs(30);
    for _ in 0..2 {
        let hooked = hook(&sandbox, "claude-code", &[], &idle, long, |_| {});
        assert!(
            hooked.run.code == 0 && hooked.run.stdout.is_empty(),
            "{hooked:?}"
        );
    }
    let open = active(&sandbox);
    assert_eq!(
        open.len(),
        1,
        "a second notification opens nothing: {open:?}"
    );
    let id = open[0]["id"].as_str().unwrap();
    let argv = &sandbox.json(&["status", id])["attach_argv"];
    assert_eq!(argv[0], "echo", "outside tmux: {argv}");
    let end = claude_event(cwd, "s-idle", "SessionEnd", json!({"reason": "logout"}));
    assert_eq!(
        hook(&sandbox, "claude-code", &[], &end, long, |_| {})
            .run
            .code,
        0
    );
    let ended = sandbox.json(&["status", id]);
    assert_eq!(ended["status"], "failed", "{ended}");
}

#[test]
fn inside_tmux_the_attach_command_is_the_agents_session() {
    let sandbox = Sandbox::new();
    let bin = sandbox.mkdir("bin");
    let tmux = bin.join("tmux");
    std::fs::write(&tmux, "#!/bin/sh\necho agent-session\n").unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&tmux)
        .status()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let input = claude_permission(sandbox.dir.path(), "s-tmux", "ls");
    let hooked = hook(
        &sandbox,
        "claude-code",
        &["--wait", "1s"],
        &input,
        Duration::from_secs(30),
        |c| {
            c.env("TMUX", "/tmp/tmux-1000/default,1,0")
                .env("TMUX_PANE", "%3")
                .env("PATH", &path);
        },
    );
    assert_no_decision(&hooked, "tmux");
    let id = first_active(&sandbox);
    assert_eq!(
        sandbox.json(&["status", &id])["attach_argv"],
        json!(["tmux", "attach-session", "-t", "agent-session"])
    );
}

#[test]
fn codex_asks_with_its_turn_and_its_notify_program_waits_for_a_prompt() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.dir.path();
    let input = json!({
        "session_id": "codex-1", "turn_id": "turn-7", "transcript_path": null,
        "cwd": cwd, "hook_event_name": "PermissionRequest", "model": "gpt-5-codex",
        "permission_mode": "default", "tool_name": "Bash",
        "tool_input": {"command": "git push --force"},
    })
    .to_string();
    let long = Duration::from_secs(30);
    assert_no_decision(
        &hook(&sandbox, "codex", &["--wait", "1s"], &input, long, |_| {}),
        "codex",
    );
    let id = first_active(&sandbox);
    let step = sandbox.json(&["status", &id])["step"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(step.starts_with("codex:codex-1:turn:turn-7:"), "{step}");
    // The same call again finds the same handoff.
    assert_no_decision(
        &hook(&sandbox, "codex", &["--wait", "1s"], &input, long, |_| {}),
        "again",
    );
    assert_eq!(active(&sandbox).len(), 1);
    // The turn ends: Codex's notify program gets its payload as an argument.
    let notify = json!({"type": "agent-turn-complete", "thread-id": "codex-1",
        "turn-id": "turn-7", "cwd": cwd, "input-messages": [], "last-assistant-message": null});
    let hooked = hook(&sandbox, "codex", &[&notify.to_string()], "", long, |_| {});
    assert!(
        hooked.run.code == 0 && hooked.run.stdout.is_empty(),
        "{hooked:?}"
    );
    let open = active(&sandbox);
    assert_eq!(open.len(), 1);
    assert_ne!(
        open[0]["id"],
        id.as_str(),
        "the idle handoff replaced the request"
    );
}

#[test]
fn hostile_inputs_exit_zero_with_one_log_line_naming_the_cause() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.dir.path();
    let codex_input = json!({"session_id": "s", "turn_id": "t", "cwd": cwd, "model": "m",
        "hook_event_name": "PermissionRequest", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "permission_mode": "default", "transcript_path": null})
    .to_string();
    let huge = format!(r#"{{"x": "{}"}}"#, "a".repeat(9 * 1024 * 1024));
    let long = Duration::from_secs(30);
    for (agent, input, cause) in [
        ("claude-code", "", "no hook input"),
        ("claude-code", "\u{0}\u{1}garbage", "not JSON"),
        ("claude-code", "[1, 2]", "not a JSON object"),
        ("claude-code", codex_input.as_str(), "hook codex"),
        (
            "codex",
            &claude_permission(cwd, "s", "ls"),
            "hook claude-code",
        ),
        (
            "claude-code",
            &claude_event(cwd, "s", "Bogus", json!({})),
            "Bogus",
        ),
        (
            "claude-code",
            r#"{"hook_event_name": "UserPromptSubmit"}"#,
            "session_id",
        ),
        ("claude-code", &huge, "bytes"),
    ] {
        let line = assert_no_decision(&hook(&sandbox, agent, &[], input, long, |_| {}), cause);
        assert!(line.contains(cause), "{cause}: {line}");
    }
    let input = claude_permission(cwd, "s", "ls");
    let with = |key: &'static str, value: &'static str| {
        move |command: &mut Command| {
            command.env(key, value);
        }
    };
    for (setup, cause) in [
        (with("LF_HANDOFF_PARENT", "task:nope"), "LF_HANDOFF_PARENT"),
        (with("LF_HANDOFF_HOOK_WAIT", "soon"), "LF_HANDOFF_HOOK_WAIT"),
        (with("LF_HANDOFF_STORE", "mysql://x/y"), "store"),
        (with("LF_HANDOFF_STORE", "http://127.0.0.1:9/"), "store"),
    ] {
        let hooked = hook(&sandbox, "claude-code", &[], &input, long, setup);
        let line = assert_no_decision(&hooked, cause);
        assert!(line.contains(cause), "{cause}: {line}");
    }
    let hooked = hook(&sandbox, "claude-code", &["--bogus"], &input, long, |_| {});
    assert_no_decision(&hooked, "a usage error");
    assert!(active(&sandbox).is_empty(), "nothing was opened");
}

#[test]
fn through_the_service_the_agent_token_asks_and_a_person_answers() {
    let sandbox = Sandbox::new();
    let serving = Serving::start(&sandbox, &[]);
    let url = format!("http://{}", serving.address);
    let agent = serving.token("agent");
    let person = serving.token("person");
    let input = claude_permission(sandbox.dir.path(), "s-served", "terraform apply");
    let hooked = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            hook(
                &sandbox,
                "claude-code",
                &["--wait", "30s"],
                &input,
                Duration::from_secs(60),
                |c| {
                    c.env("LF_HANDOFF_STORE", &url)
                        .env("LF_HANDOFF_TOKEN", &agent);
                },
            )
        });
        let start = Instant::now();
        let id = loop {
            let (_, body) = serving.request("GET", "/v1/handoffs?active=true", Some(&person), None);
            let listed: Value = serde_json::from_str(&body).unwrap();
            if let Some(id) = listed.get(0).and_then(|h| h["id"].as_str()) {
                break id.to_string();
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "nothing opened: {body}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut command = sandbox.command(&["--store", &url, "answer", &id, "--choice", "allow"]);
        command.env("LF_HANDOFF_TOKEN", &person);
        let answered = Run::from_output(command.output().unwrap());
        assert_eq!(answered.code, 0, "{answered:?}");
        waiting.join().unwrap()
    });
    assert_eq!(
        decision(&hooked)["hookSpecificOutput"]["decision"]["behavior"],
        "allow"
    );
    // A refused token decides nothing, in one line.
    let hooked = hook(
        &sandbox,
        "claude-code",
        &["--wait", "1s"],
        &input,
        Duration::from_secs(30),
        |c| {
            c.env("LF_HANDOFF_STORE", &url)
                .env("LF_HANDOFF_TOKEN", "lfh_not-a-token");
        },
    );
    assert_no_decision(&hooked, "refused token");
}

#[test]
fn hooks_of_one_session_racing_make_one_wave() {
    let sandbox = Sandbox::new();
    let cwd = sandbox.dir.path();
    let idle = claude_event(
        cwd,
        "s-race",
        "Notification",
        json!({"notification_type": "idle_prompt"}),
    );
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    hook(
                        &sandbox,
                        "claude-code",
                        &[],
                        &idle,
                        Duration::from_secs(30),
                        |_| {},
                    )
                })
            })
            .collect();
        for run in runs {
            assert_eq!(run.join().unwrap().run.code, 0);
        }
    });
    let waves = sandbox.json(&["parents", "--kind", "wave"]);
    assert_eq!(waves.as_array().unwrap().len(), 1, "{waves}");
}

fn settings(sandbox: &Sandbox, relative: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(sandbox.path(relative)).unwrap()).unwrap()
}

#[test]
fn install_merges_into_a_settings_file_once_and_uninstall_removes_only_ours() {
    let sandbox = Sandbox::new();
    let file = sandbox.mkdir("home/.claude").join("settings.json");
    let before = json!({"model": "opus", "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]}});
    std::fs::write(&file, serde_json::to_string_pretty(&before).unwrap()).unwrap();
    let printed = sandbox.ok(&["hook", "install", "claude-code"]);
    assert!(printed.contains("added PermissionRequest"), "{printed}");
    let after = settings(&sandbox, "home/.claude/settings.json");
    assert_eq!(after["model"], "opus");
    assert_eq!(after["permissions"], before["permissions"]);
    assert_eq!(after["hooks"]["PreToolUse"], before["hooks"]["PreToolUse"]);
    let command = after["hooks"]["PermissionRequest"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert!(
        command.ends_with("lf-handoff hook claude-code"),
        "{command}"
    );
    assert_eq!(
        after["hooks"]["PermissionRequest"][0]["hooks"][0]["timeout"],
        60
    );
    assert_eq!(after["hooks"]["Notification"][0]["matcher"], "idle_prompt");
    let backup = sandbox.path("home/.claude/settings.json.lf-handoff.bak");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(backup).unwrap()).unwrap();
    assert_eq!(kept, before);
    // Twice is once.
    let printed = sandbox.ok(&["hook", "install", "claude-code", "--user"]);
    assert!(printed.contains("unchanged"), "{printed}");
    assert_eq!(settings(&sandbox, "home/.claude/settings.json"), after);
    let printed = sandbox.ok(&["hook", "uninstall", "claude-code"]);
    assert_eq!(printed.matches("removed").count(), 4, "{printed}");
    assert_eq!(settings(&sandbox, "home/.claude/settings.json"), before);
}

#[test]
fn install_for_codex_writes_its_hooks_json_in_a_project_and_refuses_a_broken_file() {
    let sandbox = Sandbox::new();
    let project = sandbox.mkdir("project");
    let run = |args: &[&str]| {
        let mut command = sandbox.command(args);
        command.current_dir(&project);
        Run::from_output(command.output().unwrap())
    };
    let installed = run(&["hook", "install", "codex", "--project", "--wait", "100s"]);
    assert_eq!(installed.code, 0, "{installed:?}");
    let written = settings(&sandbox, "project/.codex/hooks.json");
    let permission = &written["hooks"]["PermissionRequest"][0]["hooks"][0];
    assert!(permission["command"]
        .as_str()
        .unwrap()
        .ends_with("hook codex --wait 100s"));
    assert_eq!(permission["timeout"], 110);
    assert!(written["hooks"]["Stop"].is_array() && written["hooks"]["UserPromptSubmit"].is_array());
    let broken = project.join(".codex/hooks.json");
    std::fs::write(&broken, "{\"hooks\": {").unwrap();
    let refused = run(&["hook", "install", "codex", "--project"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.starts_with("error: "), "{refused:?}");
    assert_eq!(std::fs::read_to_string(&broken).unwrap(), "{\"hooks\": {");
    let refused = run(&["hook", "uninstall", "codex", "--project"]);
    assert_eq!(refused.code, 2, "{refused:?}");
}
