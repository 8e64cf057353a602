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
//! sled lets one process open a store, so on sled the waiter is a task of
//! this process with a second store handle (sharing the `Db`, as handles
//! in one process do), and the latency is taken when the task's wait
//! returns; there is no command-line figure.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::InteractiveHandoffOutcome;
use lf_handoff_adapters::{open_store, StorageConfig, Store, Waited};
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
    let config = backend.new_store("wake").await?;
    let store = open_store(&config).await.context("open store")?;
    let max_delay_ms = max_delay_ms.max(MIN_DELAY_MS + 1);
    let cross_process = backend.name() != "sled";
    let mut waiters = Vec::new();
    let rows: Vec<(String, BenchResult<Vec<Duration>>)> = if cross_process {
        let mut rows = Vec::new();
        for mode in [Mode::StoreWait, Mode::Poll] {
            let name = match mode {
                Mode::StoreWait => "Store::wait, other process",
                Mode::Poll => "polling get (50 ms doubling to 1 s), other process",
            };
            let result = child_samples(&store, &config, mode, samples, max_delay_ms).await;
            rows.push((name.to_string(), result));
        }
        let cli_row = match cli.filter(|path| path.is_file()) {
            Some(cli) => cli_samples(&store, &config, &cli, samples, max_delay_ms).await,
            None => fail(
                "CLI not built; build it with `cargo build --release -p lf-handoff-cli` \
                 (or pass --cli PATH)",
            ),
        };
        rows.push(("`lf-handoff wait ID` process".to_string(), cli_row));
        rows
    } else {
        let mut rows = Vec::new();
        for mode in [Mode::StoreWait, Mode::Poll] {
            let name = match mode {
                Mode::StoreWait => "Store::wait, second handle, same process",
                Mode::Poll => "polling get (50 ms doubling to 1 s), same process",
            };
            let result = task_samples(&store, &config, mode, samples, max_delay_ms).await;
            rows.push((name.to_string(), result));
        }
        rows.push((
            "`lf-handoff wait ID` process".to_string(),
            fail("sled allows one process per store; this one holds it"),
        ));
        rows
    };
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
        setting: if cross_process {
            "the waiter in another process, the finish in this one".into()
        } else {
            "sled: one process per store, so the waiter is a task with a second store handle \
             (sharing the Db) in this process"
                .into()
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

async fn finish(store: &Store, id: &InteractiveHandoffId) -> BenchResult<()> {
    store
        .finish_interactive_handoff(
            id,
            &InteractiveHandoffOutcome::Completed {
                summary: "woken".into(),
            },
        )
        .await
        .context("finish")?;
    Ok(())
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

/// A child process and the lines it prints, each with when it was read.
struct ChildWaiter {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
}

impl ChildWaiter {
    fn spawn(config: &StorageConfig) -> BenchResult<Self> {
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

async fn child_samples(
    store: &Store,
    config: &StorageConfig,
    mode: Mode,
    samples: usize,
    max_delay_ms: u64,
) -> BenchResult<Vec<Duration>> {
    let mut child = ChildWaiter::spawn(config)?;
    let mut timings = Vec::with_capacity(samples);
    // One untimed sample first: the child's store handle opens then.
    let plan = plan(samples, max_delay_ms);
    for (n, delay) in plan.into_iter().enumerate() {
        let id = active_handoff(store).await?;
        child.send(&format!("{} {id}", mode.word()))?;
        expect_line(&mut child.lines, &format!("ready {id}")).await?;
        tokio::time::sleep(delay).await;
        let start = Instant::now();
        finish(store, &id).await?;
        let at = expect_line(&mut child.lines, &format!("ended {id}")).await?;
        if n > 0 {
            timings.push(at.saturating_duration_since(start));
        }
    }
    Ok(timings)
}

async fn cli_samples(
    store: &Store,
    config: &StorageConfig,
    cli: &std::path::Path,
    samples: usize,
    max_delay_ms: u64,
) -> BenchResult<Vec<Duration>> {
    let mut timings = Vec::with_capacity(samples);
    let plan = plan(samples, max_delay_ms);
    for (n, delay) in plan.into_iter().enumerate() {
        let id = active_handoff(store).await?;
        let mut child = Command::new(cli)
            .arg("--store")
            .arg(config.url())
            .arg("wait")
            .arg(id.as_str())
            .arg("--timeout")
            .arg("30s")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context(format!("start {}", cli.display()))?;
        let Some(stdout) = child.stdout.take() else {
            return fail("the CLI has no stdout pipe");
        };
        let mut lines = read_lines(stdout);
        // The CLI cannot say when it is waiting; the delay (at least
        // 300 ms) covers its start (a few ms, see the cold start).
        tokio::time::sleep(delay).await;
        let start = Instant::now();
        finish(store, &id).await?;
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
        let Some(at) = first else {
            return fail("`lf-handoff wait` printed nothing");
        };
        if n > 0 {
            timings.push(at.saturating_duration_since(start));
        }
    }
    Ok(timings)
}

/// sled: the waiter is a task with a second handle of this process.
async fn task_samples(
    store: &Store,
    config: &StorageConfig,
    mode: Mode,
    samples: usize,
    max_delay_ms: u64,
) -> BenchResult<Vec<Duration>> {
    let waiter = open_store(config).await.context("open a second handle")?;
    let mut timings = Vec::with_capacity(samples);
    let plan = plan(samples, max_delay_ms);
    for (n, delay) in plan.into_iter().enumerate() {
        let id = active_handoff(store).await?;
        let (store_b, id_b) = (waiter.clone(), id.clone());
        let task = tokio::spawn(async move {
            wait_once(&store_b, &id_b, mode).await?;
            Ok::<Instant, crate::error::Failure>(Instant::now())
        });
        tokio::time::sleep(delay).await;
        let start = Instant::now();
        finish(store, &id).await?;
        let at = tokio::time::timeout(REPORT_PATIENCE, task)
            .await
            .context("the waiting task took too long")?
            .context("waiting task")??;
        if n > 0 {
            timings.push(at.saturating_duration_since(start));
        }
    }
    Ok(timings)
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
