//! `watch`: prints history events as they commit (C16), and can run a
//! program for each.
//!
//! Each event is one line: human (`POSITION TIME HANDOFF EVENT STATUS
//! ACTOR`) or, with `--json`, one JSON object per line. Every line carries
//! the event's position; `--from POS` resumes after it, so a watcher that
//! stopped misses nothing and repeats nothing. Without `--from` it starts
//! with the events committed from now on; `--from 0` replays the whole
//! history first. When it stops (`--count` reached, stdout closed, an
//! error) it says on stderr where to resume.
//!
//! `--exec PROG ARGS...` runs `PROG` for every event, never through a
//! shell, with the event as one JSON line on its standard input; a program
//! that cannot start or fails is reported on stderr and watching goes on.
//!
//! It sleeps on the store's change signal (C16). The command line opens
//! every store shared with other processes
//! (`StorageConfig::shared_with_other_processes`), so on sled, which one
//! process may open at a time, the store is held only while it reads and
//! other commands run meanwhile.

use lf_handoff_adapters::WatchFrom;
use std::ffi::OsString;
use std::io::{self, Write};
use std::process::Stdio;

use lf_handoff_adapters::{UnavailableKind, WatchFilter};
use lf_handoff_domain::interactive_handoff::HandoffEvent;
use tokio::io::AsyncWriteExt;

use crate::args::WatchArgs;
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{note, printable, status_change, timestamp};

/// Why a watch stopped without an error.
enum Stop {
    /// `--count` events were printed.
    Counted,
    /// Nobody reads stdout any more.
    Closed,
}

/// Watches the store `ctx` holds.
///
/// # Errors
/// Exit 5 when the store fails or goes away (after saying where to resume).
pub async fn watch(ctx: &Context, args: &WatchArgs) -> CliResult<()> {
    let filter = filter(args);
    let opened = match args.from {
        Some(from) => ctx.store.watch(WatchFrom::After(from), filter).await,
        None => ctx.store.watch(WatchFrom::Now, filter).await,
    };
    let mut watcher = opened.map_err(|e| ctx.fail(e))?;
    let mut printed = 0_u64;
    // After the last event passed on (an event left out by the filter
    // since then is read again on resuming, and left out again).
    let mut resume = watcher.position();
    let outcome = loop {
        let event = match watcher.next().await {
            Ok(event) => event,
            Err(error) => break Err(ctx.fail(error)),
        };
        match pass_on(&event, args, ctx.json, &mut printed).await {
            Ok(stop) => {
                resume = watcher.position();
                if let Some(stop) = stop {
                    break Ok(stop);
                }
            }
            Err(error) => break Err(error),
        }
    };
    finish(outcome, Some(resume))
}

fn filter(args: &WatchArgs) -> WatchFilter {
    WatchFilter {
        parent: args.parent.clone(),
        ..WatchFilter::default()
    }
}

/// Prints `event`, runs `--exec` for it, and says whether to stop.
async fn pass_on(
    event: &HandoffEvent,
    args: &WatchArgs,
    json_lines: bool,
    printed: &mut u64,
) -> CliResult<Option<Stop>> {
    let json = serde_json::to_string(event).map_err(|e| {
        CliError::unavailable(UnavailableKind::Other, format!("cannot encode JSON: {e}"))
    })?;
    let line = if json_lines {
        json.clone()
    } else {
        human(event)
    };
    if !print_line(&line)? {
        return Ok(Some(Stop::Closed));
    }
    if let Some((program, rest)) = args.exec.split_first() {
        run_for(program, rest, &json, event).await;
    }
    *printed += 1;
    Ok(args
        .count
        .filter(|count| *printed >= *count)
        .map(|_| Stop::Counted))
}

/// One event as a line for people.
fn human(event: &HandoffEvent) -> String {
    format!(
        "{}  {}  {}  {}  {}  {}",
        event.position,
        timestamp(event.at),
        event.handoff_id,
        event.kind.as_str(),
        status_change(event),
        printable(event.actor.as_str())
    )
}

/// Writes `line` to stdout and flushes it; `false` when stdout is closed.
fn print_line(line: &str) -> CliResult<bool> {
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(error) => Err(CliError::unavailable(
            UnavailableKind::of_io_error(&error),
            format!("cannot write to stdout: {error}"),
        )),
    }
}

/// Runs `program` with `args` (no shell), `json` and a newline on its
/// stdin; a failure is reported on stderr, never fatal.
async fn run_for(program: &OsString, args: &[OsString], json: &str, event: &HandoffEvent) {
    let shown = program.to_string_lossy();
    let what = format!("event at position {}", event.position);
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            note(&format!(
                "watch: cannot run {shown} for the {what}: {error}"
            ));
            return;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A program that does not read its input is not a failure.
        let _ = stdin.write_all(format!("{json}\n").as_bytes()).await;
        drop(stdin);
    }
    match child.wait().await {
        Ok(status) if status.success() => {}
        Ok(status) => note(&format!(
            "watch: {shown} failed for the {what} ({status}); watching on"
        )),
        Err(error) => note(&format!(
            "watch: {shown} for the {what}: {error}; watching on"
        )),
    }
}

/// Says where to resume (when the watch got as far as a position), then
/// ends as `outcome` says.
fn finish(outcome: CliResult<Stop>, resume: Option<u64>) -> CliResult<()> {
    let hint = || {
        if let Some(resume) = resume {
            note(&format!("resume with: lf-handoff watch --from {resume}"));
        }
    };
    match outcome {
        Ok(Stop::Counted) => {
            hint();
            Ok(())
        }
        Ok(Stop::Closed) => Ok(()),
        Err(error) => {
            hint();
            Err(error)
        }
    }
}
