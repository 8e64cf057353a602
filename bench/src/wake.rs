//! Wake latency (issue 16): how long after a finish a waiter in another
//! process learns of it.
//!
//! A waiter is one of:
//!
//! - `Store::wait` in a child process: this program re-executed as
//!   `lf-handoff-bench wake-child STORE_URL` (see [`child_main`]), which
//!   waits for each handoff id it reads on stdin and prints `ended ID` on
//!   stdout the moment the wait returns;
//! - the polling loop the command line used before `Store::wait` (a `get`,
//!   then 50 ms doubling to 1 s between `get`s), in the same child;
//! - a fresh `lf-handoff wait ID` process (whatever the CLI binary does at
//!   the time of the run), one per sample.
//!
//! One sample: open and attach a handoff, hand its id to the waiter, let it
//! wait for a pseudo-random delay (the same delays for every waiter; the
//! polling loop's latency depends on how long it has waited), then finish
//! the handoff through the parent's own store handle. The latency is from
//! just before the finish call to the moment the parent's reader thread
//! reads the waiter's line: it includes the finish's own commit and the
//! pipe, which every real waiter pays too.
//!
//! sled lets one process hold a store at a time, so on sled every process
//! (this one, which finishes, and each waiter) opens the store as the
//! command line does ([`StorageConfig::shared_with_other_processes`]:
//! `hold=calls`, the database held only during calls): the figures are
//! those of several processes sharing a sled store, the command line's
//! `wait` among them.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, StorageConfig, Store, Waited};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffOutcome;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::lifecycle::{create_waves, request};
use crate::stats::{Rng, Summary};

/// The hidden first argument that makes this program a wake child.
pub const CHILD_ARG: &str = "wake-child";

/// The polling loop's first pause, as the command line had it.
pub const FIRST_POLL: Duration = Duration::from_millis(50);
/// The polling loop's longest pause.
pub const LONGEST_POLL: Duration = Duration::from_secs(1);

/// How long a sample waits at least before its finish.
const MIN_DELAY_MS: u64 = 300;

/// How long a waiter may take to report a finish before the sample fails.
const REPORT_PATIENCE: Duration = Duration::from_secs(15);

/// The wake latency figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct WakeFigures {
    /// Where the waiter ran.
    pub setting: String,
    /// The delays between the start of a wait and its finish: from
    /// [`MIN_DELAY_MS`] to this, pseudo-random, the same for every waiter.
    pub max_delay_ms: u64,
    /// One row per waiter.
    pub waiters: Vec<WakeRow>,
}

/// The waiter of the `Store::wait` row, which the goals table reads.
pub const STORE_WAIT_ROW: &str = "Store::wait, other process";

/// The waiter of the command line's row, which the goals table reads.
pub const CLI_WAIT_ROW: &str = "`lf-handoff wait ID` process";

/// One waiter's latencies, or why it was not measured.
#[derive(Debug, Clone, Serialize)]
pub struct WakeRow {
    /// What waited.
    pub waiter: String,
    /// Finish to report, when measured.
    pub latency: Option<Summary>,
    /// Why not, when not.
    pub missing: Option<String>,
}

/// Which waiter a child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    StoreWait,
    Poll,
}

impl Mode {
    fn word(self) -> &'static str {
        match self {
            Mode::StoreWait => "wait",
            Mode::Poll => "poll",
        }
    }
}

/// Measures wake latency on `backend`, `samples` finishes per waiter.
pub async fn measure(
    backend: &dyn BenchBackend,
    samples: usize,
    max_delay_ms: u64,
    cli: Option<std::path::PathBuf>,
) -> BenchResult<WakeFigures> {
    let config = backend
        .new_store("wake")
        .await?
        .shared_with_other_processes();
    let store = open_store(&config).await.context("open store")?;
    let max_delay_ms = max_delay_ms.max(MIN_DELAY_MS + 1);
    let cli = cli.filter(|path| path.is_file());
    let finisher = match &cli {
        Some(cli) if backend.name() == "sled" => Finisher::Cli {
            cli,
            config: &config,
        },
        _ => Finisher::Store,
    };
    let mut waiters = Vec::new();
    let mut rows: Vec<(String, BenchResult<Vec<Duration>>)> = Vec::new();
    for (mode, name) in [
        (Mode::StoreWait, STORE_WAIT_ROW),
        (
            Mode::Poll,
            "polling get (50 ms doubling to 1 s), other process",
        ),
    ] {
        let result = match ChildWaiter::spawn(&config, mode) {
            Ok(mut waiter) => timed(&store, &finisher, &mut waiter, samples, max_delay_ms).await,
            Err(error) => Err(error),
        };
        rows.push((name.to_string(), result));
    }
    let cli_row = if let Some(cli) = &cli {
        let mut waiter = CliWaiter {
            cli,
            config: &config,
        };
        timed(&store, &finisher, &mut waiter, samples, max_delay_ms).await
    } else {
        fail(
            "CLI not built; build it with `cargo build --release -p lf-handoff-cli` \
             (or pass --cli PATH)",
        )
    };
    rows.push((CLI_WAIT_ROW.to_string(), cli_row));
    for (waiter, result) in rows {
        waiters.push(match result {
            Ok(timings) => WakeRow {
                waiter,
                latency: Some(Summary::of(&timings)),
                missing: None,
            },
            Err(error) => WakeRow {
                waiter,
                latency: None,
                missing: Some(error.to_string()),
            },
        });
    }
    drop(store);
    backend.remove(&config).await;
    Ok(WakeFigures {
        setting: if let Finisher::Cli { .. } = finisher {
            "sled: the waiter in another process, the finish an `lf-handoff complete` process; \
             every process holds the store only during its calls (hold=calls, as the command \
             line does)"
                .into()
        } else if backend.name() == "sled" {
            "sled: the waiter in another process, the finish in this one; every process holds \
             the store only during its calls (hold=calls, as the command line does)"
                .into()
        } else {
            "the waiter in another process, the finish in this one".into()
        },
        max_delay_ms,
        waiters,
    })
}

/// A fresh active (attached) handoff on a wave of its own.
async fn active_handoff(store: &Store) -> BenchResult<InteractiveHandoffId> {
    let wave = create_waves(store, 1)
        .await?
        .pop()
        .ok_or_else(|| crate::error::Failure("no wave created".into()))?;
    let (handoff, _) = store
        .open_interactive_handoff(request(&wave))
        .await
        .context("open")?;
    store
        .attach_interactive_handoff(&handoff.id)
        .await
        .context("attach")?;
    Ok(handoff.id)
}

/// Who finishes each sample's handoff.
enum Finisher<'a> {
    /// This process, through its own store handle.
    Store,
    /// A fresh `lf-handoff complete ID` process, as a person's: on sled,
    /// where a process that holds the store only during calls keeps it
    /// [`SLED_LINGER`](lf_handoff_adapters::SLED_LINGER) after its last
    /// one, this is the case the command line's `wait` serves (a
    /// long-running program owns its sled store and waits in-process).
    Cli {
        cli: &'a std::path::Path,
        config: &'a StorageConfig,
    },
}

impl Finisher<'_> {
    async fn finish(&self, store: &Store, id: &InteractiveHandoffId) -> BenchResult<()> {
        match self {
            Self::Store => {
                store
                    .finish_interactive_handoff(
                        id,
                        &InteractiveHandoffOutcome::Completed {
                            summary: "woken".into(),
                        },
                        None,
                    )
                    .await
                    .context("finish")?;
            }
            Self::Cli { cli, config } => {
                let output = tokio::process::Command::new(cli)
                    .arg("--store")
                    .arg(config.url())
                    .arg("complete")
                    .arg(id.as_str())
                    .arg("--summary")
                    .arg("woken")
                    .stdin(Stdio::null())
                    .kill_on_drop(true)
                    .output()
                    .await
                    .context(format!("start {}", cli.display()))?;
                if !output.status.success() {
                    return fail(format!(
                        "`lf-handoff complete` exited with {}: {}",
                        output.status,
                        String::from_utf8_lossy(&output.stderr).trim()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The waits before each finish: one untimed sample at the shortest wait,
/// then `samples` pseudo-random ones (the same for every waiter).
fn plan(samples: usize, max_delay_ms: u64) -> Vec<Duration> {
    let mut rng = Rng::new(16);
    std::iter::once(Duration::from_millis(MIN_DELAY_MS))
        .chain(
            (0..samples).map(|_| {
                Duration::from_millis(MIN_DELAY_MS + rng.below(max_delay_ms - MIN_DELAY_MS))
            }),
        )
        .collect()
}

/// A wake child (of `mode`) and the lines it prints, each with when it was
/// read.
struct ChildWaiter {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    mode: Mode,
}

impl ChildWaiter {
    fn spawn(config: &StorageConfig, mode: Mode) -> BenchResult<Self> {
        let exe = std::env::current_exe().context("this program's path")?;
        let mut child = Command::new(exe)
            .arg(CHILD_ARG)
            .arg(config.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("start the wake child")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return fail("the wake child has no pipes");
        };
        Ok(Self {
            child,
            stdin,
            lines: read_lines(stdout),
            mode,
        })
    }

    fn send(&mut self, line: &str) -> BenchResult<()> {
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .context("write to the wake child")
    }
}

impl Drop for ChildWaiter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread that reads `stdout` line by line and stamps each line with the
/// moment it was read.
fn read_lines(
    stdout: impl std::io::Read + Send + 'static,
) -> mpsc::UnboundedReceiver<(Instant, String)> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send((Instant::now(), line.trim().to_string())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

/// The next line starting with `prefix`, with when it was read.
async fn expect_line(
    lines: &mut mpsc::UnboundedReceiver<(Instant, String)>,
    prefix: &str,
) -> BenchResult<Instant> {
    let deadline = Instant::now() + REPORT_PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, lines.recv()).await {
            Ok(Some((at, line))) if line.starts_with(prefix) => return Ok(at),
            Ok(Some((_, line))) if line.starts_with("error") => {
                return fail(format!("the waiter failed: {line}"))
            }
            Ok(Some(_)) => {}
            Ok(None) => return fail(format!("the waiter exited before printing {prefix:?}")),
            Err(_) => return fail(format!("no {prefix:?} within {REPORT_PATIENCE:?}")),
        }
    }
}

/// A waiter that samples hand their handoffs to.
trait Waiter {
    /// What a wait in progress is followed through.
    type Waiting;

    /// Starts waiting for `id` to end.
    async fn start(&mut self, id: &InteractiveHandoffId) -> BenchResult<Self::Waiting>;

    /// When the waiter reported that `id` ended.
    async fn ended(
        &mut self,
        waiting: Self::Waiting,
        id: &InteractiveHandoffId,
    ) -> BenchResult<Instant>;
}

/// The latencies of `waiter`: for each delay of the [`plan`], a fresh
/// active handoff handed to the waiter, the delay, then the finish and
/// the time from just before it to the waiter's report. The first sample
/// is not timed (the waiter's store handle opens then).
async fn timed(
    store: &Store,
    finisher: &Finisher<'_>,
    waiter: &mut impl Waiter,
    samples: usize,
    max_delay_ms: u64,
) -> BenchResult<Vec<Duration>> {
    let mut timings = Vec::with_capacity(samples);
    for (n, delay) in plan(samples, max_delay_ms).into_iter().enumerate() {
        let id = active_handoff(store).await?;
        let waiting = waiter.start(&id).await?;
        tokio::time::sleep(delay).await;
        let start = Instant::now();
        finisher.finish(store, &id).await?;
        let at = waiter.ended(waiting, &id).await?;
        if n > 0 {
            timings.push(at.saturating_duration_since(start));
        }
    }
    Ok(timings)
}

/// The wake child: told the handoff, it answers `ready` when it waits.
impl Waiter for ChildWaiter {
    type Waiting = ();

    async fn start(&mut self, id: &InteractiveHandoffId) -> BenchResult<()> {
        self.send(&format!("{} {id}", self.mode.word()))?;
        expect_line(&mut self.lines, &format!("ready {id}")).await?;
        Ok(())
    }

    async fn ended(&mut self, (): (), id: &InteractiveHandoffId) -> BenchResult<Instant> {
        expect_line(&mut self.lines, &format!("ended {id}")).await
    }
}

/// A fresh `lf-handoff wait ID` process per handoff.
struct CliWaiter<'a> {
    cli: &'a std::path::Path,
    config: &'a StorageConfig,
}

impl Waiter for CliWaiter<'_> {
    type Waiting = (
        std::process::Child,
        mpsc::UnboundedReceiver<(Instant, String)>,
    );

    async fn start(&mut self, id: &InteractiveHandoffId) -> BenchResult<Self::Waiting> {
        let mut child = Command::new(self.cli)
            .arg("--store")
            .arg(self.config.url())
            .arg("wait")
            .arg(id.as_str())
            .arg("--timeout")
            .arg("30s")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context(format!("start {}", self.cli.display()))?;
        let Some(stdout) = child.stdout.take() else {
            return fail("the CLI has no stdout pipe");
        };
        // The CLI cannot say when it is waiting; the delay (at least
        // 300 ms) covers its start (a few ms, see the cold start).
        Ok((child, read_lines(stdout)))
    }

    async fn ended(
        &mut self,
        (child, mut lines): Self::Waiting,
        _: &InteractiveHandoffId,
    ) -> BenchResult<Instant> {
        let deadline = Instant::now() + REPORT_PATIENCE;
        let mut first = None;
        while first.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, lines.recv()).await {
                Ok(Some((at, line))) if !line.is_empty() => first = Some(at),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .context("CLI wait task")?
            .context("CLI wait")?;
        if !output.status.success() {
            return fail(format!(
                "`lf-handoff wait` exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        match first {
            Some(at) => Ok(at),
            None => fail("`lf-handoff wait` printed nothing"),
        }
    }
}

/// Waits for `id` to end, by `Store::wait` or by the polling loop.
async fn wait_once(store: &Store, id: &InteractiveHandoffId, mode: Mode) -> BenchResult<()> {
    match mode {
        Mode::StoreWait => match store
            .wait(id, Some(Duration::from_secs(60)))
            .await
            .context("Store::wait")?
        {
            Waited::Ended(_) => Ok(()),
            Waited::TimedOut(_) => fail(format!("Store::wait on {id} timed out")),
        },
        Mode::Poll => poll_until_ended(store, id).await,
    }
}

/// The command line's wait before `Store::wait`: `get`, and if the handoff
/// is still active, sleep 50 ms, then 100, 200, ... up to 1 s between
/// reads. (It also expired a due handoff; these have no deadline.)
pub async fn poll_until_ended(store: &Store, id: &InteractiveHandoffId) -> BenchResult<()> {
    let mut backoff = FIRST_POLL;
    loop {
        let handoff = store
            .get_interactive_handoff(id)
            .await
            .context("get")?
            .ok_or_else(|| crate::error::Failure(format!("handoff {id} is gone")))?;
        if !handoff.is_active() {
            return Ok(());
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(LONGEST_POLL);
    }
}

/// The wake child: opens the store named by its one argument, then for
/// each `wait ID` or `poll ID` line on stdin prints `ready ID`, waits for
/// the handoff to end, and prints `ended ID` (or `error ...`).
pub async fn child_main(url: &str) -> BenchResult<()> {
    let config = StorageConfig::from_url(url).context("store URL")?;
    let store = open_store(&config).await.context("open store")?;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut out = std::io::stdout();
    while let Some(line) = rx.recv().await {
        let Some((word, id)) = line.trim().split_once(' ') else {
            continue;
        };
        let mode = match word {
            "wait" => Mode::StoreWait,
            "poll" => Mode::Poll,
            _ => continue,
        };
        let id = match InteractiveHandoffId::parse(id) {
            Ok(id) => id,
            Err(error) => {
                let _ = writeln!(out, "error {id}: {error}");
                continue;
            }
        };
        let _ = writeln!(out, "ready {id}");
        let _ = out.flush();
        let line = match wait_once(&store, &id, mode).await {
            Ok(()) => format!("ended {id}"),
            Err(error) => format!("error {id}: {error}"),
        };
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    Ok(())
}
