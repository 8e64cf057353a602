//! The raw-engine side for the SQL backends: the lifecycle as plain
//! statements, and the bulk loader for the big stores.
//!
//! Everything here goes straight to one sqlx connection on the store's own
//! file or database, with the same schema (the store created it) and the
//! same durability settings as the adapter: no pool, no checks, nothing
//! but the statements, which makes it the hardest baseline. The columns,
//! their encoding and the get and transition statements are the adapter's
//! own (`lf_handoff_adapters::raw_sql`): a transition is the store's
//! compare-and-swap of the whole row. Every write also appends its history
//! event, as the store does (C15): on PostgreSQL in the same statement (a
//! data-modifying CTE), on SQLite as a second statement of the write's
//! transaction. Statements use the `$n` placeholder form both SQLite and
//! PostgreSQL accept; `on_conn!` runs the same code on whichever connection
//! the backend has.

use std::ops::Range;
use std::sync::LazyLock;

use async_trait::async_trait;
use lf_handoff_adapters::ports::recorded_change;
use lf_handoff_adapters::raw_sql::{
    bind, column_list, event_values, with_event, HandoffRow, Param, COLUMN_COUNT, HANDOFF_BY_ID,
    INSERT_EVENT, SWAP_HANDOFF, SWAP_HANDOFF_WITH_EVENT,
};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;
use lf_handoff_domain::parent::Parent;
use sqlx::Connection as _;
use tokio::sync::Mutex;

use crate::backends::{raw_actor, RawEngine};
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

/// One handoff row, every column bound.
static INSERT_ONE: LazyLock<String> =
    LazyLock::new(|| multi_insert("handoffs", &column_list(), COLUMN_COUNT, 1, true));

/// [`INSERT_ONE`] and its `opened` event in one statement (PostgreSQL).
static INSERT_ONE_WITH_EVENT: LazyLock<String> =
    LazyLock::new(|| with_event(&INSERT_ONE, COLUMN_COUNT));

/// Handoff rows per multi-row INSERT of the bulk loader (one parameter per
/// column each).
const HANDOFFS_PER_STATEMENT: usize = 100;
/// Parent rows per multi-row INSERT of the bulk loader (4 parameters each).
const PARENTS_PER_STATEMENT: usize = 400;
/// Handoffs per bulk-load transaction (one commit, so one sync, each).
pub const HANDOFFS_PER_TRANSACTION: u64 = 100_000;

/// `handoff` in the adapter's column form, at the version its writes gave it.
fn row_of(handoff: &InteractiveHandoff) -> BenchResult<HandoffRow<'_>> {
    HandoffRow::from_domain(handoff, version_of(handoff)).context("encode handoff")
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
        let row = row_of(handoff)?;
        self.write_with_event(
            None,
            handoff,
            &row.values(),
            (&INSERT_ONE, &INSERT_ONE_WITH_EVENT),
            "insert",
        )
        .await
    }

    async fn get(&self, id: &InteractiveHandoffId) -> BenchResult<bool> {
        let found = on_conn!(self, |conn| sqlx::query(HANDOFF_BY_ID.as_str())
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
        self.swap(current, next, "attach").await
    }

    async fn finish(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        self.swap(current, next, "finish").await
    }

    async fn claim(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()> {
        self.swap(current, next, "claim").await
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
    /// Writes `next` over `current` (`what`): the store's compare-and-swap
    /// of the whole row, guarded by `current`'s version.
    async fn swap(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
        what: &str,
    ) -> BenchResult<()> {
        let row = row_of(next)?;
        let params = row.swap_values(version_of(current));
        self.write_with_event(
            Some(current),
            next,
            &params,
            (&SWAP_HANDOFF, &SWAP_HANDOFF_WITH_EVENT),
            what,
        )
        .await
    }

    /// Runs `statements.0` (a write of `next`'s row with `params`) with the
    /// event of the change from `before`, as the store does: one statement
    /// (`statements.1`) on PostgreSQL, a transaction of two on SQLite.
    async fn write_with_event(
        &self,
        before: Option<&InteractiveHandoff>,
        next: &InteractiveHandoff,
        params: &[Param<'_>],
        statements: (&str, &str),
        what: &str,
    ) -> BenchResult<()> {
        let change = recorded_change(before, next).context("name the event")?;
        let actor = raw_actor()?;
        let event = event_values(&change, actor, None);
        let id = next.id.as_str();
        let affected = match self {
            RawSql::Postgres(conn) => {
                let all: Vec<Param<'_>> = params.iter().copied().chain(event).collect();
                bind(sqlx::query(statements.1), &all)
                    .execute(&mut *conn.lock().await)
                    .await
                    .context(format!("raw {what}"))?
                    .rows_affected()
            }
            RawSql::Sqlite(conn) => {
                let mut conn = conn.lock().await;
                let mut tx = conn.begin().await.context("raw begin")?;
                let affected = bind(sqlx::query(statements.0), params)
                    .execute(&mut *tx)
                    .await
                    .context(format!("raw {what}"))?
                    .rows_affected();
                let mut event_params = vec![Param::Text(id)];
                event_params.extend(event);
                bind(sqlx::query(INSERT_EVENT.as_str()), &event_params)
                    .execute(&mut *tx)
                    .await
                    .context(format!("raw {what} event"))?;
                tx.commit().await.context("raw commit")?;
                affected
            }
        };
        expect_one(affected, what, id)
    }

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
        let columns = column_list();
        let full = multi_insert(
            "handoffs",
            &columns,
            COLUMN_COUNT,
            HANDOFFS_PER_STATEMENT,
            self.numbered(),
        );
        on_conn!(self, |conn| {
            let mut tx = conn.begin().await.context("bulk load: begin")?;
            let mut start = range.start;
            while start < range.end {
                let end = (start + HANDOFFS_PER_STATEMENT as u64).min(range.end);
                let handoffs = (start..end)
                    .map(|i| population.handoff(i))
                    .collect::<BenchResult<Vec<InteractiveHandoff>>>()?;
                let rows = handoffs
                    .iter()
                    .map(row_of)
                    .collect::<BenchResult<Vec<HandoffRow>>>()?;
                let values: Vec<Param> = rows.iter().flat_map(HandoffRow::values).collect();
                let partial;
                let sql = if rows.len() == HANDOFFS_PER_STATEMENT {
                    &full
                } else {
                    partial = multi_insert(
                        "handoffs",
                        &columns,
                        COLUMN_COUNT,
                        rows.len(),
                        self.numbered(),
                    );
                    &partial
                };
                bind(sqlx::query(sql), &values)
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
