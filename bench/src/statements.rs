//! Statements per lifecycle on PostgreSQL (issue 23): what the store sends
//! the server for one lifecycle (open, attach, finish, claim_wake) against
//! what the raw side sends, counted by the server's `pg_stat_statements`.
//!
//! The extension must be loaded when the server starts
//! (`shared_preload_libraries`), which the shared test server is not, so
//! this phase starts a server of its own (`initdb`, as
//! `tests/src/own_postgres.rs` does for the tests) with it loaded, and
//! counts there: the counts do not depend on the server's speed, and
//! nobody else's statements are mixed in. Each side runs with
//! [`CALLERS`] callers at once (each its own store handle, or its own raw
//! connection), as the 16-caller figure does, after one untimed warm-up
//! lifecycle per caller (which prepares each statement on each
//! connection). The statistics are reset just before each side's
//! lifecycles and read just after.
//!
//! Every statement here is one round trip (the store's pool lends
//! connections without a ping unless one was idle for a second, which
//! does not happen in a run); so the counts are the round trips, too.

use std::sync::Arc;

use lf_handoff_adapters::{open_store, StorageConfig, Store};
use lf_handoff_conformance::own_postgres::OwnPostgres;
use lf_handoff_domain::wave::Wave;
use serde::Serialize;
use sqlx::postgres::PgConnection;
use sqlx::{ConnectOptions as _, Connection as _, Row as _};
use std::str::FromStr;

use crate::backends::{BenchBackend, PostgresBench, RawEngine};
use crate::error::{fail, BenchResult, Context};
use crate::lifecycle::{create_waves, raw_lifecycle, store_lifecycle};

/// Callers at once on each side.
pub const CALLERS: usize = 16;

/// Lifecycles per caller and side.
const PER_CALLER: usize = 8;

/// What each side sent per lifecycle.
#[derive(Debug, Clone, Serialize)]
pub struct StatementFigures {
    /// Where they were counted.
    pub server: String,
    /// Callers at once.
    pub callers: usize,
    /// Lifecycles per side.
    pub lifecycles: usize,
    /// Through the store.
    pub store: SideCounts,
    /// Raw statements.
    pub raw: SideCounts,
}

/// One side's statements per lifecycle, in all and by statement.
#[derive(Debug, Clone, Serialize)]
pub struct SideCounts {
    /// Statements per lifecycle (each one round trip).
    pub per_lifecycle: f64,
    /// Each statement's executions per lifecycle, most frequent first.
    pub statements: Vec<StatementCount>,
}

/// One statement's executions per lifecycle.
#[derive(Debug, Clone, Serialize)]
pub struct StatementCount {
    /// Executions per lifecycle.
    pub per_lifecycle: f64,
    /// The statement, shortened, its schema left out.
    pub statement: String,
}

/// Counts both sides on a server of this phase's own.
///
/// # Errors
/// When the server cannot be started (no PostgreSQL installation here),
/// or a lifecycle or the count fails.
pub async fn measure(scratch: std::path::PathBuf) -> BenchResult<StatementFigures> {
    let server = tokio::task::spawn_blocking(|| {
        OwnPostgres::start_with(&["shared_preload_libraries=pg_stat_statements"])
    })
    .await
    .context("start a server")?
    .map_err(|reason| crate::error::Failure(format!("no server of its own: {reason}")))?;
    let url = server.url("");
    let mut admin = sqlx::postgres::PgConnectOptions::from_str(&url)
        .context("server URL")?
        .connect()
        .await
        .context("connect to the server of its own")?;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut admin)
        .await
        .context("create pg_stat_statements")?;
    let bench = PostgresBench::connect(&url, scratch).await?;
    let lifecycles = CALLERS * PER_CALLER;
    let store = count_side(&bench, &mut admin, Side::Store, lifecycles).await?;
    let raw = count_side(&bench, &mut admin, Side::Raw, lifecycles).await?;
    admin.close().await.ok();
    drop(server);
    Ok(StatementFigures {
        server: "a PostgreSQL server of its own (initdb) with pg_stat_statements".into(),
        callers: CALLERS,
        lifecycles,
        store,
        raw,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Store,
    Raw,
}

async fn count_side(
    bench: &PostgresBench,
    admin: &mut PgConnection,
    side: Side,
    lifecycles: usize,
) -> BenchResult<SideCounts> {
    let label = match side {
        Side::Store => "statements-store",
        Side::Raw => "statements-raw",
    };
    let config = bench.new_store(label).await?;
    let setup = open_store(&config).await.context("open a store")?;
    let waves = create_waves(&setup, lifecycles + CALLERS).await?;
    drop(setup);
    let (warm, timed) = waves.split_at(CALLERS);
    let mut callers: Vec<Caller> = Vec::with_capacity(CALLERS);
    for _ in 0..CALLERS {
        callers.push(match side {
            Side::Store => Caller::Store(open_store(&config).await.context("open a handle")?),
            Side::Raw => Caller::Raw(Arc::from(bench.raw(&config).await?)),
        });
    }
    run(&callers, warm).await?;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&mut *admin)
        .await
        .context("reset pg_stat_statements")?;
    run(&callers, timed).await?;
    let rows = sqlx::query(
        "SELECT s.calls, s.query FROM pg_stat_statements s \
         JOIN pg_database d ON d.oid = s.dbid \
         WHERE d.datname = current_database() AND s.userid = (SELECT oid FROM pg_roles \
           WHERE rolname = current_user) \
           AND s.query NOT ILIKE '%pg_stat_statements%' \
         ORDER BY s.calls DESC, s.query",
    )
    .fetch_all(&mut *admin)
    .await
    .context("read pg_stat_statements")?;
    drop(callers);
    bench.remove(&config).await;
    let schema = match &config {
        StorageConfig::Postgres(postgres) => format!("\"{}\".", postgres.schema),
        _ => String::new(),
    };
    let mut statements = Vec::with_capacity(rows.len());
    let mut total = 0.0;
    for row in rows {
        let calls: i64 = row.try_get(0).context("calls")?;
        let query: String = row.try_get(1).context("query")?;
        let per_lifecycle = calls as f64 / lifecycles as f64;
        total += per_lifecycle;
        statements.push(StatementCount {
            per_lifecycle,
            statement: shorten(&query.replace(&schema, "")),
        });
    }
    Ok(SideCounts {
        per_lifecycle: total,
        statements,
    })
}

/// One caller: a store handle or a raw connection of its own.
enum Caller {
    Store(Store),
    Raw(Arc<dyn RawEngine>),
}

/// Every caller runs its share of `waves` at once.
async fn run(callers: &[Caller], waves: &[Wave]) -> BenchResult<()> {
    let per = waves.len() / callers.len();
    let mut tasks = Vec::with_capacity(callers.len());
    for (n, caller) in callers.iter().enumerate() {
        let mine: Vec<Wave> = waves[n * per..(n + 1) * per].to_vec();
        let caller = match caller {
            Caller::Store(store) => Caller::Store(store.clone()),
            Caller::Raw(raw) => Caller::Raw(raw.clone()),
        };
        tasks.push(tokio::spawn(async move {
            for wave in &mine {
                match &caller {
                    Caller::Store(store) => drop(store_lifecycle(store, wave).await?),
                    Caller::Raw(raw) => drop(raw_lifecycle(raw.as_ref(), wave).await?),
                }
            }
            Ok::<_, crate::error::Failure>(())
        }));
    }
    for task in tasks {
        task.await.context("caller task")??;
    }
    if waves.len() % callers.len() != 0 {
        return fail("the waves do not divide among the callers");
    }
    Ok(())
}

/// The first words of `query`, on one line.
fn shorten(query: &str) -> String {
    let line: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 72 {
        let cut: String = line.chars().take(69).collect();
        format!("{cut}...")
    } else {
        line
    }
}
