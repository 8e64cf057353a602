//! The agents' hooks (C27), as an agent runs them: a fresh `lf-handoff
//! hook claude-code` process per permission request, its input on stdin.
//!
//! - **start**: process start to exit of a hook that opens its handoff
//!   and leaves at once (`--wait 0s`): an upper bound of "process start
//!   to handoff opened", in a session that already has its wave (each
//!   request also ends the one before, as the person answered it at the
//!   terminal);
//! - **answer to exit**: a hook waits; a person's answer (`allow`) is
//!   given through the library, and the time runs from just before the
//!   answer to the hook's exit with the decision printed; on the local
//!   store, and with the hook and the person both through a server of
//!   this process (`lf-handoff serve`'s code) on it.
//!
//! Runs on SQLite only: the goals are SQLite's.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, ListQuery, Store, WatchFilter, WatchFrom};
use lf_handoff_domain::interactive_handoff::{Answer, InteractiveHandoffOutcome};
use serde::Serialize;
use tokio::io::AsyncWriteExt;

use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::serve::{Access, Service};
use crate::stats::Summary;

/// The hooks' figures.
#[derive(Debug, Clone, Serialize)]
pub struct HookFigures {
    /// Hook process start to exit with its handoff opened (`--wait 0s`).
    pub start: Summary,
    /// A person's answer to the waiting hook's exit, local store.
    pub answer_local: Summary,
    /// The same with the hook and the person through the service.
    pub answer_serve: Summary,
}

/// Measures `samples` hooks of each kind with the `lf-handoff` at `cli`.
///
/// # Errors
/// When the store, the server or a hook fails, or a hook prints no allow.
pub async fn measure(
    backend: &dyn BenchBackend,
    cli: &Path,
    samples: usize,
) -> BenchResult<HookFigures> {
    let config = backend
        .new_store("hooks")
        .await?
        .shared_with_other_processes();
    let store = open_store(&config).await.context("open store")?;
    let url = config.url();
    let env = [("LF_HANDOFF_STORE", url.clone())];
    // The session's first request makes its wave: untimed.
    run_hook(cli, &env, "start", 0, &["--wait", "0s"]).await?;
    let mut start = Vec::with_capacity(samples);
    for n in 1..=samples {
        let began = Instant::now();
        run_hook(cli, &env, "start", n, &["--wait", "0s"]).await?;
        start.push(began.elapsed());
    }
    // A hook exits 0 whatever fails: count what it opened.
    let opened = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .context("list")?
        .len();
    if opened != samples + 1 {
        return fail(format!(
            "{} hooks opened {opened} handoffs; run one by hand to see why",
            samples + 1
        ));
    }
    let answer_local = answered(cli, &env, &store, &store, "local", samples).await?;
    let access = Access::create()?;
    let service = Service::start(store.clone(), &access, None).await?;
    let served_env = [
        ("LF_HANDOFF_STORE", service.url().to_string()),
        ("LF_HANDOFF_TOKEN", access.token().to_string()),
    ];
    let person = access.client(service.url()).await?;
    let answer_serve = answered(cli, &served_env, &store, &person, "serve", samples).await;
    service.stop().await;
    backend.remove(&config).await;
    Ok(HookFigures {
        start: Summary::of(&start),
        answer_local: Summary::of(&answer_local),
        answer_serve: Summary::of(&answer_serve?),
    })
}

/// `samples` waiting hooks, each answered `allow` by `person`; the time
/// from the answer to the hook's exit. `store` watches for the openings.
async fn answered(
    cli: &Path,
    env: &[(&str, String)],
    store: &Store,
    person: &Store,
    session: &str,
    samples: usize,
) -> BenchResult<Vec<Duration>> {
    let mut timings = Vec::with_capacity(samples);
    for n in 0..=samples {
        let mut watcher = store
            .watch(WatchFrom::Now, WatchFilter::default())
            .await
            .context("watch")?;
        let mut child = spawn_hook(cli, env, session, n, &["--wait", "30s"]).await?;
        let opened = tokio::time::timeout(Duration::from_secs(30), watcher.next())
            .await
            .context("no handoff opened within 30 s")?
            .context("watch")?;
        // Let the hook reach its wait.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let began = Instant::now();
        let done = InteractiveHandoffOutcome::Completed {
            summary: "go ahead".into(),
        };
        person
            .finish_interactive_handoff(&opened.handoff_id, &done, Some(&Answer::choice("allow")))
            .await
            .context("answer")?;
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .context("the hook did not exit within 30 s")?
            .context("wait for the hook")?;
        let elapsed = began.elapsed();
        let mut printed = String::new();
        if let Some(mut stdout) = child.stdout.take() {
            use tokio::io::AsyncReadExt;
            stdout.read_to_string(&mut printed).await.context("read")?;
        }
        if !status.success() || !printed.contains("\"allow\"") {
            return fail(format!("the hook printed {printed:?} ({status})"));
        }
        // The first is a warm-up.
        if n > 0 {
            timings.push(elapsed);
        }
    }
    Ok(timings)
}

fn input(session: &str, n: usize) -> String {
    serde_json::json!({
        "session_id": format!("bench-{session}"),
        "transcript_path": "/tmp/bench.jsonl",
        "cwd": "/tmp",
        "permission_mode": "default",
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": format!("echo {n}")},
    })
    .to_string()
}

async fn spawn_hook(
    cli: &Path,
    env: &[(&str, String)],
    session: &str,
    n: usize,
    args: &[&str],
) -> BenchResult<tokio::process::Child> {
    let mut command = tokio::process::Command::new(cli);
    command
        .args(["hook", "claude-code"])
        .args(args)
        .env_remove("TMUX")
        .env_remove("LF_HANDOFF_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().context(format!("run {}", cli.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input(session, n).as_bytes())
            .await
            .context("write the hook input")?;
    }
    Ok(child)
}

async fn run_hook(
    cli: &Path,
    env: &[(&str, String)],
    session: &str,
    n: usize,
    args: &[&str],
) -> BenchResult<()> {
    let child = spawn_hook(cli, env, session, n, args).await?;
    let output = child
        .wait_with_output()
        .await
        .context("wait for the hook")?;
    if !output.status.success() {
        return fail(format!("the hook exited {}", output.status));
    }
    Ok(())
}
