//! The cost of idle waiters (issue 16): 100 tasks of this process, each in
//! `Store::wait` on a different waiting handoff that nobody finishes, for
//! a few seconds (the wait's timeout).
//!
//! Three settings per backend, each on the same 100 waiting handoffs:
//! the store handles open but nobody waiting (the baseline), all 100
//! waiters on one shared store handle, and the waiters spread over
//! several handles (one each on SQLite and sled; ten handles of ten on
//! PostgreSQL, where a handle holds a pool and a listening connection and
//! a hundred would pass the server's connection limit).
//!
//! What is counted, in the waiting window only: it begins [`SETTLE`]
//! after the waiters started, so the figure is what idle waiters cost
//! while they wait, hour after hour, not their start: each waiter's first
//! read, and each handle's first safety re-check of its change signal 5 s
//! in, which on SQLite opens the signal's own connection (about a
//! millisecond of CPU per handle, once; a window of a few seconds that
//! held it would spread a hundred of them over its seconds):
//!
//! - this process's CPU time (user + system, `/proc/self/stat`) and read
//!   system calls (`syscr`, `/proc/self/io`) per second: what the
//!   waiters cost the machine that waits (on SQLite, before issue 20,
//!   mainly the `PRAGMA data_version` poll every 10 ms of each handle with
//!   a waiter; now a look at the store's files once a second, the reads
//!   waiting for a file notification);
//! - on PostgreSQL, the server's scans of the store's tables
//!   (`pg_stat_user_tables`, sequential + index scans of every table of
//!   the store's schema) and the database's committed transactions
//!   (`pg_stat_database.xact_commit`, database-wide, so other users of the
//!   server count too). The handles are closed before the second reading,
//!   so their sessions have reported their statistics.

use std::str::FromStr as _;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, StorageConfig, Store, Waited};
use lf_handoff_domain::id::InteractiveHandoffId;
use serde::Serialize;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _, Row as _};

use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult, Context};
use crate::lifecycle::{create_waves, request};
use crate::stats::ratio;

/// How long the waiters run before the window opens: past every
/// handle's first safety re-check (the adapters' 5 s `RECHECK`).
const SETTLE: Duration = Duration::from_secs(6);

/// Waiters of the figure.
pub const WAITERS: usize = 100;

/// The idle-waiter figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct IdleFigures {
    /// Waiters per setting (0 in the baseline).
    pub waiters: usize,
    /// How long they waited, s.
    pub seconds: f64,
    /// One row per setting.
    pub rows: Vec<IdleRow>,
}

/// One setting's costs.
#[derive(Debug, Clone, Serialize)]
pub struct IdleRow {
    /// Waiters and handles.
    pub setting: String,
    /// Store handles open.
    pub handles: usize,
    /// Waiters.
    pub waiters: usize,
    /// Wall time of the window, s.
    pub seconds: f64,
    /// This process's CPU time per second of wall time, ms.
    pub cpu_ms_per_sec: f64,
    /// This process's read system calls per second.
    pub read_syscalls_per_sec: f64,
    /// PostgreSQL: scans of the store's tables per second.
    pub server_scans_per_sec: Option<f64>,
    /// PostgreSQL: committed transactions of the database per second.
    pub server_commits_per_sec: Option<f64>,
    /// How the waits ended: all should time out.
    pub timed_out: usize,
}

/// Measures the settings on `backend`, each waiting `seconds`.
pub async fn measure(backend: &dyn BenchBackend, seconds: f64) -> BenchResult<IdleFigures> {
    let config = backend.new_store("idle").await?;
    let ids = {
        let setup = open_store(&config).await.context("open store")?;
        let waves = create_waves(&setup, WAITERS).await?;
        let mut ids = Vec::with_capacity(WAITERS);
        for wave in &waves {
            let (handoff, _) = setup
                .open_interactive_handoff(request(wave))
                .await
                .context("open")?;
            ids.push(handoff.id);
        }
        ids
    };
    // Let the setup handle's sessions close and report.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let spread = if backend.name() == "postgres" {
        10
    } else {
        WAITERS
    };
    let window = Duration::from_secs_f64(seconds);
    let mut rows = Vec::new();
    for (setting, handles, waiters) in [
        ("nobody waiting, 1 handle open (baseline)".to_string(), 1, 0),
        (format!("{WAITERS} waiters on 1 shared handle"), 1, WAITERS),
        (
            format!(
                "{WAITERS} waiters on {spread} handles ({} each)",
                WAITERS / spread
            ),
            spread,
            WAITERS,
        ),
    ] {
        let row = one_setting(&config, &ids, handles, waiters, window).await;
        rows.push(IdleRow { setting, ..row? });
    }
    backend.remove(&config).await;
    Ok(IdleFigures {
        waiters: WAITERS,
        seconds,
        rows,
    })
}

async fn one_setting(
    config: &StorageConfig,
    ids: &[InteractiveHandoffId],
    handles: usize,
    waiters: usize,
    window: Duration,
) -> BenchResult<IdleRow> {
    let mut stores: Vec<Store> = Vec::with_capacity(handles);
    for _ in 0..handles {
        let store = open_store(config).await.context("open a handle")?;
        // Open each handle's connection before the window.
        store
            .get_interactive_handoff(&ids[0])
            .await
            .context("first read")?;
        stores.push(store);
    }
    let mut tasks = Vec::with_capacity(waiters);
    for (n, id) in ids.iter().take(waiters).enumerate() {
        let store = stores[n % handles].clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            store.wait(&id, Some(SETTLE + window)).await
        }));
    }
    tokio::time::sleep(SETTLE).await;
    let server_before = server_counts(config).await?;
    let process_before = ProcessCounts::now();
    let started = Instant::now();
    let mut timed_out = 0;
    if waiters == 0 {
        tokio::time::sleep(window).await;
    }
    for task in tasks {
        match task.await.context("waiter task")? {
            Ok(Waited::TimedOut(_)) => timed_out += 1,
            Ok(Waited::Ended(handoff)) => {
                return fail(format!("handoff {} ended while idle", handoff.id))
            }
            Err(error) => return fail(format!("a waiter failed: {error}")),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let process_after = ProcessCounts::now();
    drop(stores);
    let server = match server_before {
        Some(before) => {
            // Closed sessions report their statistics as they exit.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            server_counts(config).await?.map(|after| {
                (
                    ratio((after.0 - before.0) as f64, seconds),
                    ratio((after.1 - before.1) as f64, seconds),
                )
            })
        }
        None => None,
    };
    Ok(IdleRow {
        setting: String::new(),
        handles,
        waiters,
        seconds,
        cpu_ms_per_sec: ratio(
            (process_after.cpu_seconds - process_before.cpu_seconds) * 1000.0,
            seconds,
        ),
        read_syscalls_per_sec: ratio(
            process_after
                .read_syscalls
                .saturating_sub(process_before.read_syscalls) as f64,
            seconds,
        ),
        server_scans_per_sec: server.map(|s| s.0),
        server_commits_per_sec: server.map(|s| s.1),
        timed_out,
    })
}

/// This process's CPU time and read system calls so far.
#[derive(Debug, Clone, Copy)]
struct ProcessCounts {
    cpu_seconds: f64,
    read_syscalls: u64,
}

impl ProcessCounts {
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let read_syscalls = std::fs::read_to_string("/proc/self/io")
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("syscr:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        Self {
            cpu_seconds: cpu_seconds(&stat).unwrap_or(0.0),
            read_syscalls,
        }
    }
}

/// The CPU time (user + system), s, in a `/proc/PID/stat` line; `None`
/// when the line does not hold it.
pub(crate) fn cpu_seconds(stat: &str) -> Option<f64> {
    // Fields after the command name, which is in parentheses: state is
    // field 3, utime 14 and stime 15 (1-based).
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some((ticks(14)? + ticks(15)?) as f64 / clock_ticks())
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .filter(|ticks: &f64| *ticks > 0.0)
            .unwrap_or(100.0)
    })
}

/// PostgreSQL: scans of the store's tables and the database's commits;
/// `None` on other backends.
async fn server_counts(config: &StorageConfig) -> BenchResult<Option<(i64, i64)>> {
    let StorageConfig::Postgres(postgres) = config else {
        return Ok(None);
    };
    let mut conn = PgConnectOptions::from_str(&postgres.connection)
        .context("postgres URL")?
        .connect()
        .await
        .context("statistics connection")?;
    let scans: i64 = sqlx::query(
        "SELECT COALESCE(SUM(COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0)), 0)::bigint \
         FROM pg_stat_user_tables WHERE schemaname = $1",
    )
    .bind(&postgres.schema)
    .fetch_one(&mut conn)
    .await
    .and_then(|row| row.try_get(0))
    .context("pg_stat_user_tables")?;
    let commits: i64 =
        sqlx::query("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            .fetch_one(&mut conn)
            .await
            .and_then(|row| row.try_get(0))
            .context("pg_stat_database")?;
    conn.close().await.ok();
    Ok(Some((scans, commits)))
}
