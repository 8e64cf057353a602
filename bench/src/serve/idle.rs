//! What idle clients cost an `lf-handoff serve` process (issue 22):
//! 1,000 event streams and 1,000 long polls held open, nothing happening.
//!
//! The server is the `lf-handoff` binary (`serve`, with its connection and
//! stream limits raised above the count), a process of its own, so its
//! memory (resident set, `VmRSS`, and its peak, `VmHWM`, from
//! `/proc/PID/status`) and its CPU time (user + system from
//! `/proc/PID/stat`) are its alone. Two windows of the same length are
//! measured: the server with nobody connected (the baseline), and the
//! server holding every stream and long poll, once its metrics count them
//! all. Each stream and long poll is a keep-alive connection of its own
//! from this process; a stream that ends or a long poll that answers
//! during the window is a failure (nothing happened to end them). The
//! long polls wait on 100 handoffs (ten each for 1,000), opened through
//! the service beforehand.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use lf_handoff_conformance::serve_child::ServeChild;
use serde::Serialize;
use tokio::process::Command;
use tokio::task::JoinSet;

use super::load::Connection;
use super::Access;
use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::idle::cpu_seconds;
use crate::lifecycle::{create_waves, request};
use crate::stats::ratio;

/// Handoffs the long polls wait on (at most; fewer for fewer polls).
const POLLED_HANDOFFS: usize = 100;

/// Connections opened at once while the clients connect.
const BATCH: usize = 100;

/// How long the server may take to start, and to count every client.
const PATIENCE: Duration = Duration::from_secs(60);

/// Open files beyond the clients', for each process.
const SPARE_FILES: u64 = 256;

/// The figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct ServeIdleFigures {
    /// Event streams held open.
    pub streams: usize,
    /// Long polls pending.
    pub long_polls: usize,
    /// The soft limit of open files of this process and the server (the
    /// server inherits it), after raising it if it was too low.
    pub open_files_limit: u64,
    /// Whether this run raised it.
    pub raised_open_files_limit: bool,
    /// Nobody connected.
    pub baseline: IdleWindow,
    /// Every stream and long poll open.
    pub held: IdleWindow,
}

/// One window's costs of the server process.
#[derive(Debug, Clone, Serialize)]
pub struct IdleWindow {
    /// Wall time, s.
    pub seconds: f64,
    /// CPU time (user + system) per second of wall time, ms.
    pub cpu_ms_per_sec: f64,
    /// Resident memory at the end of the window, bytes.
    pub rss_bytes: u64,
    /// The process's peak resident memory so far, bytes.
    pub peak_rss_bytes: u64,
}

/// Measures the server of `cli` over a fresh store of `backend` holding
/// `streams` event streams and `long_polls` long polls, each window
/// `seconds` long.
///
/// # Errors
/// When the server cannot start, a client cannot connect, or a stream
/// ends or a long poll answers while nothing happens.
pub async fn measure(
    backend: &dyn BenchBackend,
    access: &Access,
    cli: Option<&Path>,
    streams: usize,
    long_polls: usize,
    seconds: f64,
) -> BenchResult<ServeIdleFigures> {
    let Some(cli) = cli.filter(|path| path.exists()) else {
        return fail(
            "the lf-handoff binary is not beside this program; build it (cargo build --release \
             -p lf-handoff-cli) or pass --cli",
        );
    };
    let clients = (streams + long_polls) as u64;
    let (open_files_limit, raised) = open_files_limit(clients + SPARE_FILES)?;
    let config = backend.new_store("serve-idle").await?;
    let mut server = Server::start(cli, &config.url(), access, clients).await?;
    let result = hold(&server, access, streams, long_polls, seconds).await;
    server.stop().await;
    backend.remove(&config).await;
    let (baseline, held) = result?;
    Ok(ServeIdleFigures {
        streams,
        long_polls,
        open_files_limit,
        raised_open_files_limit: raised,
        baseline,
        held,
    })
}

/// The two windows: nobody connected, then every client connected.
async fn hold(
    server: &Server,
    access: &Access,
    streams: usize,
    long_polls: usize,
    seconds: f64,
) -> BenchResult<(IdleWindow, IdleWindow)> {
    let client = access.client(server.served.url()).await?;
    let handoffs = POLLED_HANDOFFS.min(long_polls.max(1));
    let waves = create_waves(&client, handoffs).await?;
    let mut paths = Vec::with_capacity(handoffs);
    for wave in &waves {
        let (handoff, _) = client
            .open_interactive_handoff(request(wave))
            .await
            .context("open")?;
        paths.push(format!(
            "/v1/handoffs/{}/wait?timeout=5m",
            handoff.id.as_str()
        ));
    }
    drop(client);
    let window = Duration::from_secs_f64(seconds);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let baseline = server.window(window).await?;

    let ended = Arc::new(AtomicUsize::new(0));
    let mut held = JoinSet::new();
    for batch in (0..streams + long_polls).collect::<Vec<_>>().chunks(BATCH) {
        let mut opening = JoinSet::new();
        for &n in batch {
            let (addr, token) = (server.served.addr(), access.token().to_string());
            let path = if n < streams {
                "/v1/events".to_string()
            } else {
                paths[n % paths.len()].clone()
            };
            let ended = ended.clone();
            opening.spawn(async move {
                let mut connection = Connection::open(addr, &token).await?;
                if n < streams {
                    let response = connection.get(&path).await?;
                    if response.status() != 200 {
                        return fail(format!("GET /v1/events answered {}", response.status()));
                    }
                    let mut body = response.into_body();
                    Ok(Box::pin(async move {
                        // Keep-alive comments may come; the end may not.
                        while let Some(Ok(_)) = body.frame().await {}
                        ended.fetch_add(1, Ordering::SeqCst);
                        drop(connection);
                    })
                        as std::pin::Pin<
                            Box<dyn std::future::Future<Output = ()> + Send>,
                        >)
                } else {
                    Ok(Box::pin(async move {
                        let _ = connection.get(&path).await;
                        ended.fetch_add(1, Ordering::SeqCst);
                    })
                        as std::pin::Pin<
                            Box<dyn std::future::Future<Output = ()> + Send>,
                        >)
                }
            });
        }
        while let Some(opened) = opening.join_next().await {
            held.spawn(opened.context("a client task")??);
        }
    }
    server.await_counts(access, streams, long_polls).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = server.window(window).await?;
    let ended = ended.load(Ordering::SeqCst);
    held.abort_all();
    if ended > 0 {
        return fail(format!(
            "{ended} event stream(s) or long poll(s) ended while nothing happened"
        ));
    }
    Ok((baseline, during))
}

/// The `lf-handoff serve` process.
struct Server {
    served: ServeChild,
}

impl Server {
    /// Starts `cli serve` over `store_url` on `127.0.0.1:0`, its limits
    /// above `clients`, and reads where it listens from its first line.
    async fn start(
        cli: &Path,
        store_url: &str,
        access: &Access,
        clients: u64,
    ) -> BenchResult<Self> {
        let limit = (clients + SPARE_FILES).to_string();
        let mut command = Command::new(cli);
        command
            .arg("--store")
            .arg(store_url)
            .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
            .arg(access.tokens_file())
            // Every idle client comes from 127.0.0.1: the per-peer share
            // (C29) would refuse all but an eighth of them.
            .args(["--max-connections", &limit, "--max-streams", &limit])
            .args(["--max-connections-per-peer", &limit]);
        match ServeChild::start(&mut command, PATIENCE).await {
            Ok(served) => Ok(Self { served }),
            Err(error) => fail(format!("{} serve: {error}", cli.display())),
        }
    }

    /// The server's CPU time and memory over `window`.
    async fn window(&self, window: Duration) -> BenchResult<IdleWindow> {
        let before = self.cpu_seconds()?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let after = self.cpu_seconds()?;
        let seconds = started.elapsed().as_secs_f64();
        let (rss_bytes, peak_rss_bytes) =
            crate::memory::resident_of(&self.served.pid().to_string())?;
        Ok(IdleWindow {
            seconds,
            cpu_ms_per_sec: ratio((after - before) * 1000.0, seconds),
            rss_bytes,
            peak_rss_bytes,
        })
    }

    fn cpu_seconds(&self) -> BenchResult<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.served.pid()))
            .context("read the server's /proc stat")?;
        match cpu_seconds(&stat) {
            Some(seconds) => Ok(seconds),
            None => fail("the server's /proc stat holds no CPU times"),
        }
    }

    /// Waits until the server's metrics count `streams` event streams and
    /// `long_polls` long polls.
    async fn await_counts(
        &self,
        access: &Access,
        streams: usize,
        long_polls: usize,
    ) -> BenchResult<()> {
        let deadline = Instant::now() + PATIENCE;
        let mut connection = Connection::open(self.served.addr(), access.token()).await?;
        loop {
            let (status, body) = connection.get_body("/metrics").await?;
            let text = String::from_utf8_lossy(&body);
            let gauge = |name: &str| {
                text.lines()
                    .find_map(|line| line.strip_prefix(name))
                    .and_then(|rest| rest.trim().parse::<usize>().ok())
            };
            let counts = (
                gauge("lf_handoff_event_streams "),
                gauge("lf_handoff_long_polls "),
            );
            if status == 200 && counts == (Some(streams), Some(long_polls)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return fail(format!(
                    "the server counts {counts:?} event streams and long polls, not \
                     {streams} and {long_polls} (/metrics answered {status})"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn stop(&mut self) {
        let _ = self.served.child.kill().await;
    }
}

/// The soft limit of open files, raised to `needed` (within the hard
/// limit) when it is lower; and whether it was raised.
fn open_files_limit(needed: u64) -> BenchResult<(u64, bool)> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if current >= needed {
        return Ok((current, false));
    }
    let maximum = limit.maximum.unwrap_or(u64::MAX);
    if maximum < needed {
        return fail(format!(
            "the idle clients need {needed} open files, and the hard limit is {maximum}; raise \
             it (ulimit -Hn) or pass fewer --serve-idle-streams / --serve-idle-polls"
        ));
    }
    setrlimit(
        Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(needed),
            maximum: limit.maximum,
        },
    )
    .context("raise the soft limit of open files")?;
    Ok((needed, true))
}
