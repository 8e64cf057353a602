//! The upgrade trials of the crash harness (docs/CONTRACT.md, "Upgrading
//! stores"): a SIGKILL while a process opens, and so upgrades, a store of
//! an earlier release (0.1.0 unless told otherwise) leaves a store that the
//! next open upgrades or finds upgraded, with every record as that release
//! wrote it.
//!
//! One trial copies the backend's fixture of the release
//! (`tests/fixtures/v1` to `tests/fixtures/v4`), starts a
//! child that only opens the store and prints `opened`, and kills it at a
//! random moment within one and a half times a measured open. Before
//! reopening, the harness reads the stored format itself (SQLite
//! `user_version`, the sled marker, PostgreSQL's `lf_handoff_meta`), so the
//! figures show how many kills left the store at the old format; then it
//! opens the store and compares every handoff with the fixture's manifest.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::str::FromStr;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_conformance::backends::{postgres, sled, sqlite};
use lf_handoff_conformance::upgrade::{fixtures, Release};
use lf_handoff_conformance::Backend;
use lf_handoff_domain::id::InteractiveHandoffId;
use serde_json::Value;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::problems::Problems;
use crate::rng::Rng;

/// The first argument that makes the harness binary open a store and print
/// `opened`.
pub const OPEN_CHILD_ARG: &str = "__upgrade-child";

/// How long an open may take before the trial fails.
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);

/// The child: opens the store at `args[0]` and prints `opened`.
///
/// # Errors
/// A bad URL or a failed open, as text.
pub async fn child(args: &[String]) -> Result<(), String> {
    let [url] = args else {
        return Err(format!("usage: {OPEN_CHILD_ARG} <store url>"));
    };
    let config = StorageConfig::from_url(url).map_err(|e| e.to_string())?;
    let _store = open_store(&config).await.map_err(|e| e.to_string())?;
    println!("opened");
    Ok(())
}

/// The figures of one backend's upgrade trials.
#[derive(Debug, Default)]
pub struct UpgradeFigures {
    /// The backend.
    pub backend: &'static str,
    /// Children killed before they printed `opened`.
    pub killed: u64,
    /// Children that printed `opened` before their kill.
    pub finished: u64,
    /// The stored format found right after each kill that landed before
    /// `opened`, by version.
    pub found: BTreeMap<i64, u64>,
    /// Manifest handoffs missing or different after the reopen. Must be 0.
    pub lost: u64,
    /// Reopens that failed, unreadable formats, harness failures. Must be 0.
    pub errors: u64,
    /// The first problems, described.
    pub problems: Problems,
}

impl UpgradeFigures {
    /// True if and only if nothing was lost and nothing failed.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.errors == 0
    }

    fn fail(&mut self, message: String) {
        self.problems.count(&mut self.errors, message);
    }

    fn lose(&mut self, message: String) {
        self.problems
            .count(&mut self.lost, format!("lost: {message}"));
    }

    /// The report: the figures line, then the problems.
    pub fn report(&self) -> String {
        let b = self.backend;
        let count = |version| self.found.get(&version).copied().unwrap_or(0);
        let mut versions = format!("{} found at version 1, {} at version 2", count(1), count(2));
        for (version, n) in self.found.range(3..) {
            versions += &format!(", {n} at version {version}");
        }
        let mut out = format!(
            "[{b}] upgrade kills: {} killed ({versions}), {} finished first, {} records lost\n",
            self.killed, self.finished, self.lost
        );
        self.problems.report(&mut out, &format!("[{b}] upgrade: "));
        out
    }
}

/// Runs `trials` upgrade trials of `release`'s stores on each of
/// `backends`, printing each backend's figures. `exe` acts as the child
/// when given [`OPEN_CHILD_ARG`].
pub async fn run(
    backends: &[&'static str],
    release: Release,
    trials: u64,
    seed: u64,
    exe: &Path,
) -> Vec<UpgradeFigures> {
    let mut rng = Rng::new(seed ^ 0x0013_0013);
    let mut all = Vec::new();
    for backend in backends {
        let mut figures = UpgradeFigures {
            backend,
            ..UpgradeFigures::default()
        };
        let made = match *backend {
            "sqlite" => sqlite().await,
            "sled" => sled().await,
            "postgres" => postgres().await,
            other => Err(format!("no fixture of {release} for {other}")),
        };
        match made {
            Ok(fixture) => {
                run_backend(
                    fixture.as_ref(),
                    release,
                    trials,
                    exe,
                    rng.fork(),
                    &mut figures,
                )
                .await;
                fixture.cleanup().await;
            }
            Err(message) => figures.fail(message),
        }
        print!("{}", figures.report());
        all.push(figures);
    }
    all
}

async fn run_backend(
    fixture: &dyn Backend,
    release: Release,
    trials: u64,
    exe: &Path,
    mut rng: Rng,
    figures: &mut UpgradeFigures,
) {
    let manifest = match read_manifest(fixture.name(), release) {
        Ok(manifest) => manifest,
        Err(message) => return figures.fail(message),
    };
    // One open that is not killed: how long an open takes.
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => return figures.fail(format!("cannot make a temporary directory: {e}")),
    };
    let config = fixture.release_store(release, dir.path()).await;
    let started = Instant::now();
    if let Err(message) = open_in_child(exe, &config, None).await {
        return figures.fail(message);
    }
    let span = started.elapsed().max(Duration::from_millis(1));
    for trial in 0..trials {
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => return figures.fail(format!("cannot make a temporary directory: {e}")),
        };
        let config = fixture.release_store(release, dir.path()).await;
        let span_us = u64::try_from(span.as_micros()).unwrap_or(u64::MAX);
        let delay = Duration::from_micros(rng.below(span_us.saturating_mul(3) / 2 + 1));
        match open_in_child(exe, &config, Some(delay)).await {
            Ok(true) => figures.finished += 1,
            Ok(false) => {
                figures.killed += 1;
                match stored_version(&config).await {
                    Ok(version) => *figures.found.entry(version).or_default() += 1,
                    Err(message) => figures.fail(format!("trial {trial}: {message}")),
                }
            }
            Err(message) => {
                figures.fail(format!("trial {trial}: {message}"));
                continue;
            }
        }
        for problem in compare(&config, release, &manifest).await {
            match problem {
                Problem::Lost(message) => figures.lose(format!("trial {trial}: {message}")),
                Problem::Error(message) => figures.fail(format!("trial {trial}: {message}")),
            }
        }
    }
}

/// The handoffs the fixture of `release` holds for `backend`, as JSON.
///
/// # Errors
/// A missing or unreadable manifest, as text.
pub(crate) fn read_manifest(backend: &str, release: Release) -> Result<Vec<Value>, String> {
    let path = fixtures(release).join(format!("{backend}.handoffs.json"));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match serde_json::from_str(&text) {
        Ok(Value::Array(handoffs)) => Ok(handoffs),
        Ok(_) => Err(format!("{} is not a JSON array", path.display())),
        Err(e) => Err(format!("{} is not JSON: {e}", path.display())),
    }
}

/// Starts a child opening `config`; with `kill_after`, kills it then unless
/// it printed `opened` first. Returns whether it printed `opened`.
async fn open_in_child(
    exe: &Path,
    config: &StorageConfig,
    kill_after: Option<Duration>,
) -> Result<bool, String> {
    let mut child = Command::new(exe)
        .arg(OPEN_CHILD_ARG)
        .arg(config.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "the child has no stdout".to_string())?;
    let mut lines = BufReader::new(stdout).lines();
    let limit = kill_after.unwrap_or(OPEN_TIMEOUT);
    let opened = match tokio::time::timeout(limit, lines.next_line()).await {
        Ok(Ok(Some(line))) if line == "opened" => true,
        Ok(line) => {
            child.start_kill().ok();
            child.wait().await.ok();
            return Err(format!("the child did not open the store: {line:?}"));
        }
        Err(_) if kill_after.is_some() => false,
        Err(_) => return Err(format!("the child did not open the store in {limit:?}")),
    };
    child
        .start_kill()
        .map_err(|e| format!("cannot kill the child: {e}"))?;
    child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for the child: {e}"))?;
    Ok(opened)
}

/// The stored format, read without lf-handoff.
async fn stored_version(config: &StorageConfig) -> Result<i64, String> {
    match config {
        StorageConfig::Sqlite(sqlite) => {
            let mut conn = SqliteConnectOptions::new()
                .filename(&sqlite.path)
                .read_only(true)
                .connect()
                .await
                .map_err(|e| format!("cannot open {} read-only: {e}", sqlite.path.display()))?;
            let version = sqlx::query_scalar::<_, i64>("PRAGMA user_version")
                .fetch_one(&mut conn)
                .await
                .map_err(|e| format!("cannot read user_version: {e}"));
            conn.close().await.ok();
            version
        }
        StorageConfig::Sled(sled) => {
            let path = sled.path.join("lf-handoff-store");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            text.lines()
                .find_map(|line| line.strip_prefix("format "))
                .and_then(|n| n.trim().parse().ok())
                .ok_or_else(|| format!("{} names no format: {text:?}", path.display()))
        }
        StorageConfig::Postgres(postgres) => {
            let mut conn = PgConnectOptions::from_str(&postgres.connection)
                .map_err(|e| format!("bad PostgreSQL URL: {e}"))?
                .connect()
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            let query = format!(
                "SELECT value FROM \"{}\".lf_handoff_meta WHERE name = 'schema_version'",
                postgres.schema
            );
            let value = sqlx::query_scalar::<_, i64>(&query)
                .fetch_one(&mut conn)
                .await
                .map_err(|e| format!("cannot read schema_version: {e}"));
            conn.close().await.ok();
            value
        }
        other => Err(format!("no format reader for {other}")),
    }
}

/// What a comparison with a manifest found.
pub(crate) enum Problem {
    /// A record missing or different.
    Lost(String),
    /// A failure to read or open.
    Error(String),
}

/// Opens the store and compares every manifest handoff with the stored one
/// (whose fields added after `release` must have the value an upgraded
/// record of `release` has).
pub(crate) async fn compare(
    config: &StorageConfig,
    release: Release,
    manifest: &[Value],
) -> Vec<Problem> {
    let store = match open_store(config).await {
        Ok(store) => store,
        Err(e) => return vec![Problem::Error(format!("the reopen failed: {e}"))],
    };
    let mut problems = Vec::new();
    for expected in manifest {
        let Some(id) = expected["id"]
            .as_str()
            .and_then(|id| InteractiveHandoffId::parse(id).ok())
        else {
            problems.push(Problem::Error(format!(
                "a manifest entry has no id: {expected}"
            )));
            continue;
        };
        let stored = match store.get_interactive_handoff(&id).await {
            Ok(Some(stored)) => stored,
            Ok(None) => {
                problems.push(Problem::Lost(format!("handoff {id} is gone")));
                continue;
            }
            Err(e) => {
                problems.push(Problem::Error(format!("cannot read handoff {id}: {e}")));
                continue;
            }
        };
        let mut value = match serde_json::to_value(&stored) {
            Ok(value) => value,
            Err(e) => {
                problems.push(Problem::Error(format!("handoff {id} as JSON: {e}")));
                continue;
            }
        };
        let mut later = Vec::new();
        if let Some(fields) = value.as_object_mut() {
            for (field, upgraded) in release.later_handoff_fields() {
                match fields.remove(field) {
                    Some(value) if value == upgraded => {}
                    other => later.push(format!("{field} {other:?}")),
                }
            }
        }
        // `status --json` of 0.3.0 on prints `due`, which is computed when
        // read, not stored: none of the fixtures' handoffs was due.
        let mut expected = expected.clone();
        if let Some(fields) = expected.as_object_mut() {
            if fields.get("due") == Some(&Value::Bool(false)) {
                fields.remove("due");
            }
        }
        if !later.is_empty() || value != expected {
            problems.push(Problem::Lost(format!(
                "handoff {id} differs: stored {value} (and {later:?}), written {expected}"
            )));
        }
    }
    problems
}
