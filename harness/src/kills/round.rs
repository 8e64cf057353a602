//! One round of the kill loop: a crash child killed while it opens the
//! store or while it writes, or the command line's `complete` killed.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffParent};
use serde_json::Value;
use tokio::process::Command;

use super::{Begun, KilledStore, Runner, FIRST_OPEN};
use crate::crash::{parse_event, ChildOutput, Event};
use crate::crash_child::{CHILD_ARG, FAKE_ACK_ARG, TRIAL_ARG};

/// How long a child may take to open the store before the round fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Lifecycle lanes in each child: two, so a kill may land while writes
/// of both are in flight.
const CHILD_LANES: usize = 2;
/// The command line's `complete` is killed within this many milliseconds
/// of its start, at least.
const CLI_KILL_MS: u64 = 30;

/// What a round kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// A crash child, while it opens (creates, upgrades) the store.
    Open,
    /// A crash child, while it writes.
    Write,
    /// A crash child, as it enters a system call picked at random (the
    /// `n`th call of one of [`SYSCALLS`]), by strace's fault injection.
    Syscall,
    /// The command line's `complete`.
    Cli,
}

/// The system calls a `Syscall` round kills at, with the highest call
/// number it picks and the call's weight: what changes the store's files
/// (creating them, writing, syncing, renaming, removing, shortening;
/// `write` also prints the child's lines). The number is picked on a log
/// scale, so the first calls, those of the open, are picked about as often
/// as the many of the writes after it; the calls that write the files'
/// contents weigh more.
const SYSCALLS: &[(&str, u64, u64)] = &[
    ("write", 16, 4),
    ("pwrite64", 32, 2),
    ("openat", 24, 1),
    ("fsync", 8, 1),
    ("fdatasync", 16, 1),
    ("rename", 2, 1),
    ("unlink", 2, 1),
    ("ftruncate", 2, 1),
    ("mkdir", 2, 1),
];
/// The least time a `Syscall` round lets the child run before it kills
/// it anyway (its call may never come).
const SYSCALL_PATIENCE: Duration = Duration::from_millis(100);

/// What one kill left to check.
#[derive(Debug, Default)]
pub(super) struct Killed {
    /// Where the kill landed.
    pub phase: String,
    /// The crash child's whole lines (`ready`, `begin`, `ack`).
    pub lines: Vec<String>,
    /// What the command line acknowledged.
    pub cli: Vec<CliAck>,
    /// The child's time from its `opening` to `ready`, when it got there.
    pub open_time: Option<Duration>,
    /// The system call strace killed the child at.
    pub syscall: Option<&'static str>,
    /// A child or command that failed by itself.
    pub error: Option<String>,
}

/// A write the command line acknowledged: it printed the record and
/// exited 0.
#[derive(Debug)]
pub(super) enum CliAck {
    /// `wave create`: the wave must exist.
    Wave(InteractiveHandoffParent),
    /// `open` or `complete`: the handoff as the command printed it.
    Handoff(Box<InteractiveHandoff>),
}

impl Runner<'_> {
    /// Runs `round` on `store` and kills it.
    pub(super) async fn kill_in(
        &mut self,
        round: Round,
        store: &KilledStore,
        kill: u64,
    ) -> Result<Killed, String> {
        match round {
            Round::Open | Round::Write => self.kill_child(round, store, kill).await,
            Round::Syscall => self.kill_at_syscall(store, kill).await,
            Round::Cli => self.kill_cli(store, kill).await,
        }
    }

    /// Starts a crash child on the store and kills it: within one and a
    /// half times the last measured open from its `opening` (`Open`: the
    /// child prints it right before it opens the store, so the kills spread
    /// over the open, not over the program's start), or 0 to `--max-delay`
    /// after its `ready` (`Write`).
    async fn kill_child(
        &mut self,
        round: Round,
        store: &KilledStore,
        kill: u64,
    ) -> Result<Killed, String> {
        let seed = self.rng.next_u64();
        let open_estimate = self
            .open_times
            .get(&store.begun)
            .copied()
            .unwrap_or(FIRST_OPEN);
        let window = if round == Round::Open {
            open_estimate.saturating_mul(3) / 2
        } else {
            self.options.max_delay
        };
        let window_us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        let delay = Duration::from_micros(self.rng.below(window_us.saturating_add(1)));
        let mut child = Command::new(self.exe)
            .args(child_args(store, seed, kill, self.options.fake_acks))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the child {}: {e}", self.exe.display()))?;
        let mut output = ChildOutput::read(&mut child)?;
        let mut killed = Killed::default();
        let until = if round == Round::Open {
            "opening"
        } else {
            "ready"
        };
        let Some(opening) = read_until(&mut output, until, &mut killed).await else {
            end_child(&mut child, output, &mut killed).await?;
            return Err(format!(
                "the child did not print {until:?} within {} s: {}",
                READY_TIMEOUT.as_secs(),
                killed.error.unwrap_or_default()
            ));
        };
        let deadline = tokio::time::Instant::now() + delay;
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, output.lines.recv()).await {
            if line == "ready" {
                killed.open_time = Some(opening.elapsed());
            }
            killed.lines.push(line);
        }
        end_child(&mut child, output, &mut killed).await?;
        if round == Round::Open && killed.open_time.is_none() {
            // Not open yet: aim a little later next time, so kills keep
            // landing all through an open, up to its end.
            let later = open_estimate.mul_f64(1.1);
            self.open_times.insert(store.begun, later);
        }
        killed.phase = phase(store.begun, &killed.lines);
        Ok(killed)
    }

    /// Starts a crash child on the store under strace, which sends it
    /// SIGKILL as it enters the `n`th call of a system call picked at
    /// random; a child whose call does not come in time is killed anyway.
    async fn kill_at_syscall(&mut self, store: &KilledStore, kill: u64) -> Result<Killed, String> {
        let strace = self
            .options
            .strace
            .clone()
            .ok_or("no strace to kill at a system call")?;
        let total: u64 = SYSCALLS.iter().map(|(_, _, weight)| weight).sum();
        let mut pick = self.rng.below(total);
        let (call, most, _) = SYSCALLS
            .iter()
            .copied()
            .find(|(_, _, weight)| {
                let found = pick < *weight;
                pick = pick.saturating_sub(*weight);
                found
            })
            .unwrap_or(SYSCALLS[0]);
        let nth = log_scale(self.rng.next_u64(), most);
        // Long enough for an open and a few writes: the call may come in
        // either, or never.
        let open_estimate = self.open_times.get(&store.begun).copied();
        let patience = open_estimate
            .unwrap_or(FIRST_OPEN)
            .saturating_mul(3)
            .max(SYSCALL_PATIENCE)
            + self.options.max_delay;
        let seed = self.rng.next_u64();
        let mut command = Command::new(&strace);
        command
            .args(["-f", "-qq", "-o", "/dev/null", "-e"])
            .arg(format!("trace={call}"))
            .arg("-e")
            .arg(format!("inject={call}:signal=KILL:when={nth}"))
            .arg(self.exe)
            .args(child_args(store, seed, kill, self.options.fake_acks))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: strace and the child are killed
            // together when the call does not come.
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", strace.display()))?;
        let group = child.id();
        let output = ChildOutput::read(&mut child)?;
        let mut killed = Killed::default();
        let status = match tokio::time::timeout(patience, child.wait()).await {
            Ok(status) => status.map_err(|e| format!("cannot wait for strace: {e}"))?,
            Err(_) => {
                if let Some(group) = group {
                    kill_group(group).await?;
                }
                child
                    .wait()
                    .await
                    .map_err(|e| format!("cannot wait for strace: {e}"))?
            }
        };
        let stderr = output.finish(&mut killed.lines).await;
        if !was_killed(status) {
            killed.error = Some(format!(
                "the child under strace ended by itself ({status}): {}",
                stderr.trim()
            ));
        }
        killed.phase = phase(store.begun, &killed.lines);
        if self.options.verbose {
            killed.phase += &format!(" (at {call} #{nth})");
        }
        killed.syscall = Some(call);
        Ok(killed)
    }

    /// The reproduction: the command line creates a wave and opens
    /// a handoff on it, `complete` is started and killed 0 to 30 ms later
    /// (or within one and a half times what `open` took, if longer: a
    /// debug build starts slower), and `status` must then answer.
    async fn kill_cli(&mut self, store: &KilledStore, kill: u64) -> Result<Killed, String> {
        let cli = Cli::new(&self.options.cli, store)?;
        let mut killed = Killed::default();
        let (id, span) = cli.open_on_new_wave(kill, &mut killed).await?;
        let window_ms = u64::try_from(span.saturating_mul(3).as_millis() / 2)
            .unwrap_or(u64::MAX)
            .max(CLI_KILL_MS);
        let complete = cli
            .command(&["complete", &id, "--summary", "done in the kill loop"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", cli.binary.display()))?;
        let delay = Duration::from_millis(self.rng.below(window_ms + 1));
        tokio::time::sleep(delay).await;
        let finished = kill_and_collect(complete).await?;
        killed.phase = if finished.status.signal() == Some(9) {
            "cli complete".to_string()
        } else {
            "cli complete (finished first)".to_string()
        };
        if finished.status.success() {
            let record: InteractiveHandoff = serde_json::from_slice(&finished.stdout)
                .map_err(|e| format!("complete printed an unreadable handoff: {e}"))?;
            killed.cli.push(CliAck::Handoff(Box::new(record)));
        } else if finished.status.signal() != Some(9) {
            killed.error = Some(format!(
                "complete failed by itself ({}): {}",
                finished.status,
                String::from_utf8_lossy(&finished.stderr).trim()
            ));
        }
        let status = cli.command(&["status", &id]).output().await;
        if let Err(message) = json_of(status, "status after the kill") {
            killed.error = Some(message);
        }
        Ok(killed)
    }
}

/// The command line binary, on one store.
struct Cli {
    binary: PathBuf,
    url: String,
    cwd: String,
}

impl Cli {
    fn new(binary: &Option<PathBuf>, store: &KilledStore) -> Result<Self, String> {
        Ok(Self {
            binary: binary.clone().ok_or("no command line binary to kill")?,
            url: store.config.url(),
            cwd: store.dir.path().display().to_string(),
        })
    }

    /// `lf-handoff --store <url> --json <args>`.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(["--store", &self.url, "--json"])
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Creates a wave and opens a handoff on it (both acknowledged in
    /// `killed`); returns the handoff's id and how long `open` took.
    async fn open_on_new_wave(
        &self,
        kill: u64,
        killed: &mut Killed,
    ) -> Result<(String, Duration), String> {
        let name = format!("kill {kill}");
        let create = ["wave", "create", "--name", &name, "--repo", &self.cwd];
        let wave = json_of(self.command(&create).output().await, "wave create")?;
        let reference = wave["id"]
            .as_str()
            .map(|id| format!("wave:{id}"))
            .ok_or_else(|| format!("wave create printed no id: {wave}"))?;
        let parent = InteractiveHandoffParent::parse(&reference).map_err(|e| e.to_string())?;
        killed.cli.push(CliAck::Wave(parent));
        let open = [
            "open",
            "--parent",
            &reference,
            "--home",
            "jack@local",
            "--cwd",
            &self.cwd,
            "--provider",
            "codex",
            "--generation",
            "1",
            "--reason",
            "kill loop",
            "--",
            "true",
        ];
        let started = Instant::now();
        let opened = json_of(self.command(&open).output().await, "open")?;
        let span = started.elapsed();
        let handoff: InteractiveHandoff = serde_json::from_value(opened["handoff"].clone())
            .map_err(|e| format!("open printed an unreadable handoff: {e}: {opened}"))?;
        let id = handoff.id.to_string();
        killed.cli.push(CliAck::Handoff(Box::new(handoff)));
        Ok((id, span))
    }
}

/// Reads the child's lines until `until` (`opening` or `ready`), noting
/// the time from `opening` to `ready`; returns when it printed `opening`,
/// or `None` if it did not print `until` within [`READY_TIMEOUT`].
async fn read_until(output: &mut ChildOutput, until: &str, killed: &mut Killed) -> Option<Instant> {
    let reached = tokio::time::timeout(READY_TIMEOUT, async {
        let mut opening = None;
        while let Some(line) = output.lines.recv().await {
            let seen = line.clone();
            killed.lines.push(line);
            match seen.as_str() {
                "opening" => opening = Some(Instant::now()),
                "ready" => killed.open_time = opening.map(|at| at.elapsed()),
                _ => {}
            }
            if seen == until {
                return opening;
            }
        }
        None
    })
    .await;
    reached.ok().flatten()
}

/// Sends SIGKILL to the child (it may have failed by itself already),
/// reads the rest of what it printed, and notes in `killed` a child that
/// ended otherwise.
async fn end_child(
    child: &mut tokio::process::Child,
    output: ChildOutput,
    killed: &mut Killed,
) -> Result<(), String> {
    let _ = child.start_kill();
    let status = child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for the child: {e}"))?;
    let stderr = output.finish(&mut killed.lines).await;
    if !was_killed(status) {
        killed.error = Some(format!(
            "the child ended by itself ({status}) before the kill: {}",
            stderr.trim()
        ));
    }
    Ok(())
}

/// True for a process SIGKILL ended (strace ends so too, or exits 137,
/// when its child was killed).
fn was_killed(status: std::process::ExitStatus) -> bool {
    status.signal() == Some(9) || status.code() == Some(128 + 9)
}

/// The crash child's arguments: the store, a seed, two lanes, the store's
/// directory for the handoffs' cwd, the kill's number as its trial, and
/// the self-test's lie when asked.
fn child_args(
    store: &KilledStore,
    seed: u64,
    kill: u64,
    fake_acks: bool,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec![
        CHILD_ARG.into(),
        store.config.url().into(),
        seed.to_string().into(),
        CHILD_LANES.to_string().into(),
        store.dir.path().into(),
        format!("{TRIAL_ARG}{kill}").into(),
    ];
    if fake_acks {
        args.push(FAKE_ACK_ARG.into());
    }
    args
}

/// A number from 1 to `most`, picked on a log scale from `random`.
fn log_scale(random: u64, most: u64) -> u64 {
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64;
    let picked = ((most as f64 + 1.0).ln() * unit).exp().floor() as u64;
    picked.clamp(1, most)
}

/// Sends SIGKILL to every process of the process group `group` (strace
/// and the child it traces).
async fn kill_group(group: u32) -> Result<(), String> {
    let status = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status()
        .await
        .map_err(|e| format!("cannot run kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill of process group {group} failed ({status})"))
    }
}

/// Sends SIGKILL to `child` (unless it exited already) and collects its
/// output.
async fn kill_and_collect(mut child: tokio::process::Child) -> Result<Output, String> {
    // An exited child is not killed: that is its status then.
    let _ = child.start_kill();
    child
        .wait_with_output()
        .await
        .map_err(|e| format!("cannot wait for the command: {e}"))
}

/// The JSON a command printed when it exited 0.
fn json_of(output: std::io::Result<Output>, what: &str) -> Result<Value, String> {
    let output = output.map_err(|e| format!("cannot run {what}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what} exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("{what} printed no JSON: {e}"))
}

/// Where a child's kill landed: before its `ready` (creating, upgrading or
/// opening the store, by how the store began), in a write (the kind of
/// the first lane's write begun and not acknowledged), or between writes.
fn phase(begun: Begun, lines: &[String]) -> String {
    if !lines.iter().any(|line| line == "ready") {
        return match begun {
            Begun::Fresh => "create",
            Begun::Release1 => "upgrade",
            Begun::Opened => "open",
        }
        .to_string();
    }
    let mut in_flight = std::collections::BTreeMap::new();
    for line in lines {
        match parse_event(line) {
            Ok(Event::Begin { lane, kind, .. }) => {
                in_flight.insert(lane, kind);
            }
            Ok(Event::Ack { lane, .. }) => {
                in_flight.remove(&lane);
            }
            _ => {}
        }
    }
    match in_flight.into_values().next() {
        Some(kind) => format!("write {kind}"),
        None => "between writes".to_string(),
    }
}
