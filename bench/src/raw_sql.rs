//! The raw-engine side for the SQL backends: the lifecycle as plain
//! statements, and the bulk loader for the big stores.
//!
//! Everything here goes straight to one sqlx connection on the store's own
//! file or database, with the same schema (the store created it) and the
//! same durability settings as the adapter: no pool, no checks, nothing
//! but the statements, which makes it the hardest baseline. Statements are
//! written once, in the `$n` placeholder form both SQLite and PostgreSQL
//! accept; `on_conn!` runs the same code on whichever connection the
//! backend has.

use std::ops::Range;
use std::sync::LazyLock;

use async_trait::async_trait;
use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::InteractiveHandoff;
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::timestamp::to_unix_micros;
use sqlx::Connection as _;
use time::OffsetDateTime;
use tokio::sync::Mutex;

use crate::backends::RawEngine;
use crate::error::{fail, BenchResult, Context};
use crate::population::{version_of, Population};

/// One connection to one of the SQL engines.
#[derive(Debug)]
pub enum RawSql {
    /// SQLite (WAL, `synchronous` as the adapter sets it).
    Sqlite(Mutex<sqlx::SqliteConnection>),
    /// PostgreSQL (the server's settings, the store's schema).
    Postgres(Mutex<sqlx::PgConnection>),
}

/// Runs `$body` with `$conn` bound to the engine's typed connection
/// (`&mut`), held for the whole body.
macro_rules! on_conn {
    ($raw:expr, |$conn:ident| $body:expr) => {
        match $raw {
            RawSql::Sqlite(conn) => {
                let mut guard = conn.lock().await;
                let $conn = &mut *guard;
                $body
            }
            RawSql::Postgres(conn) => {
                let mut guard = conn.lock().await;
                let $conn = &mut *guard;
                $body
            }
        }
    };
}

pub const COLUMNS: &str = "id, version, parent_kind, parent_id, wave_id, home, cwd, provider, \
     provider_session_id, body_generation, reason, environment, attach_argv, status, \
     outcome_text, created_at, updated_at, attached_at, terminal_at, wake_claimed_at, \
     wake_claimed_by_generation";
const COLUMN_COUNT: usize = 21;

static SELECT_ONE: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {COLUMNS} FROM handoffs WHERE id = $1"));
static INSERT_ONE: LazyLock<String> =
    LazyLock::new(|| multi_insert("handoffs", COLUMNS, COLUMN_COUNT, 1, true));

const ATTACH: &str = "UPDATE handoffs SET version = version + 1, status = 'attached', \
     attached_at = $2, updated_at = $2 WHERE id = $1 AND status = 'waiting'";
const FINISH: &str = "UPDATE handoffs SET version = version + 1, status = $2, \
     outcome_text = $3, terminal_at = $4, updated_at = $4 \
     WHERE id = $1 AND status IN ('waiting', 'attached')";
const CLAIM: &str = "UPDATE handoffs SET version = version + 1, wake_claimed_at = $2, \
     wake_claimed_by_generation = $3, updated_at = $2 \
     WHERE id = $1 AND terminal_at IS NOT NULL AND wake_claimed_by_generation IS NULL";

/// Handoff rows per multi-row INSERT of the bulk loader (21 parameters each).
const HANDOFFS_PER_STATEMENT: usize = 100;
/// Parent rows per multi-row INSERT of the bulk loader (4 parameters each).
const PARENTS_PER_STATEMENT: usize = 400;
/// Handoffs per bulk-load transaction (one commit, so one sync, each).
pub const HANDOFFS_PER_TRANSACTION: u64 = 100_000;

/// A handoff in column form (the adapter's encoding).
#[derive(Debug)]
struct Row {
    id: String,
    version: i64,
    parent_kind: &'static str,
    parent_id: String,
    wave_id: String,
    home: String,
    cwd: String,
    provider: String,
    provider_session_id: Option<String>,
    body_generation: i64,
    reason: String,
    environment: String,
    attach_argv: String,
    status: &'static str,
    outcome_text: Option<String>,
    created_at: i64,
    updated_at: i64,
    attached_at: Option<i64>,
    terminal_at: Option<i64>,
    wake_claimed_at: Option<i64>,
    wake_claimed_by_generation: Option<i64>,
}

impl Row {
    fn of(handoff: &InteractiveHandoff) -> BenchResult<Self> {
        Ok(Self {
            id: handoff.id.to_string(),
            version: version_of(handoff),
            parent_kind: handoff.parent.kind(),
            parent_id: handoff.parent.id_str().to_string(),
            wave_id: handoff.wave_id.to_string(),
            home: handoff.home.to_string(),
            cwd: handoff
                .cwd
                .to_str()
                .ok_or_else(|| crate::error::Failure("cwd is not UTF-8".into()))?
                .to_string(),
            provider: handoff.provider.clone(),
            provider_session_id: handoff.provider_session_id.clone(),
            body_generation: i64::from(handoff.body_generation),
            reason: handoff.reason.clone(),
            environment: serde_json::to_string(&handoff.environment).context("environment")?,
            attach_argv: serde_json::to_string(&handoff.attach_argv).context("argv")?,
            status: handoff.status.as_str(),
            outcome_text: handoff.outcome.as_ref().map(|o| o.text().to_string()),
            created_at: to_unix_micros(handoff.created_at),
            updated_at: to_unix_micros(handoff.updated_at),
            attached_at: handoff.attached_at.map(to_unix_micros),
            terminal_at: handoff.terminal_at.map(to_unix_micros),
            wake_claimed_at: handoff.wake_claimed_at.map(to_unix_micros),
            wake_claimed_by_generation: handoff.wake_claimed_by_generation.map(i64::from),
        })
    }
}

/// Binds a [`Row`]'s columns in `COLUMNS` order.
macro_rules! bind_row {
    ($query:expr, $row:expr) => {{
        let row = $row;
        $query
            .bind(row.id.as_str())
            .bind(row.version)
            .bind(row.parent_kind)
            .bind(row.parent_id.as_str())
            .bind(row.wave_id.as_str())
            .bind(row.home.as_str())
            .bind(row.cwd.as_str())
            .bind(row.provider.as_str())
            .bind(row.provider_session_id.as_deref())
            .bind(row.body_generation)
            .bind(row.reason.as_str())
            .bind(row.environment.as_str())
            .bind(row.attach_argv.as_str())
            .bind(row.status)
            .bind(row.outcome_text.as_deref())
            .bind(row.created_at)
            .bind(row.updated_at)
            .bind(row.attached_at)
            .bind(row.terminal_at)
            .bind(row.wake_claimed_at)
            .bind(row.wake_claimed_by_generation)
    }};
}

/// `INSERT INTO table (columns) VALUES ($1, ...), ...` for `rows` rows;
/// with `numbered` false, the placeholders are plain `?`.
///
/// SQLite resolves a numbered parameter's name by a linear scan, and sqlx
/// asks for every parameter's name, so binding N numbered parameters costs
/// O(N²): for the loader's 2,100-parameter statements, plain `?` is what
/// makes SQLite bulk loading fast.
fn multi_insert(table: &str, columns: &str, width: usize, rows: usize, numbered: bool) -> String {
    let mut sql = format!("INSERT INTO {table} ({columns}) VALUES ");
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..width {
            if column > 0 {
                sql.push_str(", ");
            }
            if numbered {
                sql.push_str(&format!("${}", row * width + column + 1));
            } else {
                sql.push('?');
            }
        }
        sql.push(')');
    }
    sql
}

fn micros(instant: Option<OffsetDateTime>) -> BenchResult<i64> {
    match instant {
        Some(instant) => Ok(to_unix_micros(instant)),
        None => fail("raw transition without its timestamp"),
    }
}

fn expect_one(affected: u64, what: &str, id: &str) -> BenchResult<()> {
    if affected == 1 {
        Ok(())
    } else {
        fail(format!("raw {what} of {id} changed {affected} rows, not 1"))
    }
}

#[async_trait]
impl RawEngine for RawSql {
    async fn insert(&self, handoff: &InteractiveHandoff) -> BenchResult<()> {
        let row = Row::of(handoff)?;
        let affected = on_conn!(self, |conn| bind_row!(
            sqlx::query(INSERT_ONE.as_str()),
            &row
        )
        .execute(&mut *conn)
        .await
        .context("raw insert")?
        .rows_affected());
        expect_one(affected, "insert", &row.id)
    }

    async fn get(&self, id: &InteractiveHandoffId) -> BenchResult<bool> {
        let found = on_conn!(self, |conn| sqlx::query(SELECT_ONE.as_str())
            .bind(id.as_str())
            .fetch_optional(&mut *conn)
            .await
            .context("raw get")?
            .is_some());
        Ok(found)
    }

    async fn attach(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        let id = current.id.as_str();
        let at = micros(next.attached_at)?;
        let affected = on_conn!(self, |conn| sqlx::query(ATTACH)
            .bind(id)
            .bind(at)
            .execute(&mut *conn)
            .await
            .context("raw attach")?
            .rows_affected());
        expect_one(affected, "attach", id)
    }

    async fn finish(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        let id = current.id.as_str();
        let at = micros(next.terminal_at)?;
        let affected = on_conn!(self, |conn| sqlx::query(FINISH)
            .bind(id)
            .bind(next.status.as_str())
            .bind(next.outcome.as_ref().map(|o| o.text()))
            .bind(at)
            .execute(&mut *conn)
            .await
            .context("raw finish")?
            .rows_affected());
        expect_one(affected, "finish", id)
    }

    async fn claim(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        let id = current.id.as_str();
        let at = micros(next.wake_claimed_at)?;
        let generation = next.wake_claimed_by_generation.map(i64::from);
        let affected = on_conn!(self, |conn| sqlx::query(CLAIM)
            .bind(id)
            .bind(at)
            .bind(generation)
            .execute(&mut *conn)
            .await
            .context("raw claim")?
            .rows_affected());
        expect_one(affected, "claim", id)
    }

    /// Multi-row INSERTs, [`HANDOFFS_PER_TRANSACTION`] handoffs per
    /// transaction; on SQLite, a checkpoint at the end.
    async fn bulk_load(
        &self,
        population: &Population,
        parents: Range<u64>,
        handoffs: Range<u64>,
    ) -> BenchResult<()> {
        let parent_rows: Vec<u64> = parents.collect();
        for chunk in parent_rows.chunks(PARENTS_PER_STATEMENT * 10) {
            self.insert_parents(population, chunk).await?;
        }
        let mut start = handoffs.start;
        while start < handoffs.end {
            let end = (start + HANDOFFS_PER_TRANSACTION).min(handoffs.end);
            self.insert_handoffs(population, start..end).await?;
            start = end;
        }
        match self {
            // Copy the WAL back into the file, as SQLite's automatic
            // checkpoint would have done along the way.
            RawSql::Sqlite(conn) => sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&mut *conn.lock().await)
                .await
                .map(drop)
                .context("checkpoint after bulk load")?,
            // Gather the planner statistics autovacuum would gather after
            // so many inserts.
            RawSql::Postgres(conn) => sqlx::query("ANALYZE handoffs, parents")
                .execute(&mut *conn.lock().await)
                .await
                .map(drop)
                .context("analyze after bulk load")?,
        }
        Ok(())
    }

    async fn close(self: Box<Self>) {
        match *self {
            RawSql::Sqlite(conn) => {
                let _ = conn.into_inner().close().await;
            }
            RawSql::Postgres(conn) => {
                let _ = conn.into_inner().close().await;
            }
        }
    }
}

impl RawSql {
    /// Whether bulk statements use `$n` placeholders (PostgreSQL needs
    /// them) or plain `?` (SQLite binds those in linear time).
    fn numbered(&self) -> bool {
        match self {
            RawSql::Sqlite(_) => false,
            RawSql::Postgres(_) => true,
        }
    }

    async fn insert_parents(&self, population: &Population, parents: &[u64]) -> BenchResult<()> {
        let mut encoded = Vec::with_capacity(parents.len());
        for &p in parents {
            let parent: Parent = population.wave(p);
            let reference = parent.reference();
            encoded.push((
                reference.id_str().to_string(),
                parent.wave_id().to_string(),
                serde_json::to_string(&parent).context("parent record")?,
            ));
        }
        on_conn!(self, |conn| {
            let mut tx = conn.begin().await.context("bulk load: begin")?;
            for chunk in encoded.chunks(PARENTS_PER_STATEMENT) {
                let sql = multi_insert(
                    "parents",
                    "id, kind, wave_id, version, record",
                    5,
                    chunk.len(),
                    self.numbered(),
                );
                let mut query = sqlx::query(&sql);
                for (id, wave_id, record) in chunk {
                    query = query
                        .bind(id.as_str())
                        .bind("wave")
                        .bind(wave_id.as_str())
                        .bind(1_i64)
                        .bind(record.as_str());
                }
                query
                    .execute(&mut *tx)
                    .await
                    .context("bulk load: parents")?;
            }
            tx.commit().await.context("bulk load: commit")?;
        });
        Ok(())
    }

    async fn insert_handoffs(&self, population: &Population, range: Range<u64>) -> BenchResult<()> {
        let full = multi_insert(
            "handoffs",
            COLUMNS,
            COLUMN_COUNT,
            HANDOFFS_PER_STATEMENT,
            self.numbered(),
        );
        on_conn!(self, |conn| {
            let mut tx = conn.begin().await.context("bulk load: begin")?;
            let mut start = range.start;
            while start < range.end {
                let end = (start + HANDOFFS_PER_STATEMENT as u64).min(range.end);
                let rows = (start..end)
                    .map(|i| Row::of(&population.handoff(i)?))
                    .collect::<BenchResult<Vec<Row>>>()?;
                let partial;
                let sql = if rows.len() == HANDOFFS_PER_STATEMENT {
                    &full
                } else {
                    partial = multi_insert(
                        "handoffs",
                        COLUMNS,
                        COLUMN_COUNT,
                        rows.len(),
                        self.numbered(),
                    );
                    &partial
                };
                let mut query = sqlx::query(sql);
                for row in &rows {
                    query = bind_row!(query, row);
                }
                query
                    .execute(&mut *tx)
                    .await
                    .context("bulk load: handoffs")?;
                start = end;
            }
            tx.commit().await.context("bulk load: commit")?;
        });
        Ok(())
    }
}
