//! The SQL engine: the one generic runner of the shared repository's
//! statements, over sqlx, and its [`Dialect`].
//!
//! [`Engine`] runs a query and decodes its rows, executes a statement, a
//! batch in one transaction, an export's snapshot or an import, each with
//! errors already mapped ([`EngineError`]); nothing about sqlx crosses its
//! methods. What differs between SQLite and PostgreSQL is its
//! [`Dialect`], asked by the shared repository and implemented in each
//! backend's folder (`sqlite/dialect.rs`, `postgres/dialect.rs`); the
//! engine and the dialect name each other (a dialect's write runs on its
//! engine), so they live in one module. Each dialect method gives the SQL
//! that differs or does the part of a write or read that differs; the
//! shared code never asks which backend it runs on. A write of a handoff
//! with its history event is one statement on PostgreSQL (a
//! data-modifying CTE) and a two-statement transaction on SQLite; a prune
//! batch one statement or two; the events a watcher may read are every
//! committed one on SQLite, whose writers take turns, and those below the
//! oldest running writer on PostgreSQL.
//!
//! What sqlx offers alike for both databases (binding a [`Param`],
//! decoding a column) is [`Driver`] (`driver.rs`), implemented for every
//! sqlx database that can.

use std::borrow::Cow;
use std::fmt::{self, Debug};
use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_application::ports::PruneCount;
use lf_handoff_application::{Changes, StoreError, StoreResult, UnavailableKind};
use sqlx::Database;

use crate::changes::{ChangeFeed, ChangeSource};
use crate::sql::archive::{ArchiveDialect, OwnedStatement, Shape, SnapshotQuery, SnapshotRow};
use crate::sql::columns::{HandoffRow, Positions};
use crate::sql::connections::{Connections, Lease};
use crate::sql::driver::Param;
pub use crate::sql::driver::{Driver, RowsAffected};
use crate::sql::events::EventRow;
use crate::sql::schema::UniqueIndex;
use crate::sql::statements::{
    HandoffWrite, AT_STEP, PARENT_RECORD, PARENT_VERSION, RECORD, VERSION,
};

/// What differs between the SQL backends.
#[async_trait]
pub(crate) trait Dialect: Debug + Send + Sync + Sized + 'static {
    /// The sqlx database.
    type Db: Driver;

    /// The statement that opens a write transaction.
    const BEGIN_WRITE: &'static str;

    /// What export and import (C17) need of this backend's SQL.
    const ARCHIVE: ArchiveDialect;

    /// The store, as messages name it (a file; a server and schema).
    fn store_name(&self) -> String;

    /// Maps every sqlx error of this backend, in one place: a unique
    /// violation (naming which of the schema's unique indexes refused the
    /// row, where the engine says so), or an actionable `Unavailable`
    /// naming the store.
    fn map_error(&self, error: sqlx::Error) -> EngineError;

    /// This backend's way of noticing changes, on connections of its own
    /// made with `options` (C16).
    fn change_source(
        &self,
        options: &<<Self::Db as Database>::Connection as sqlx::Connection>::Options,
    ) -> Arc<dyn ChangeSource>;

    /// What goes between `FROM handoffs` and the rest of a statement that
    /// `index` must serve: a hint naming the index where the planner needs
    /// one, else nothing. Ends with a space when not empty.
    fn index_hint(index: &str) -> String;

    /// Writes `write`'s row and appends its event, in one atomic write:
    /// `Ok(true)` if and only if the row was written (with its event);
    /// `Ok(false)` when the statement's condition held no row (nothing
    /// written). A unique index that refused the row is
    /// [`EngineError::Unique`].
    async fn write_with_event(
        engine: &Engine<Self>,
        write: HandoffWrite<'_>,
    ) -> Result<bool, EngineError>;

    /// Removes at most `limit` handoffs finished with their wake claimed
    /// before `finished_before` (microseconds), with their events, in one
    /// atomic write, and counts what it removed (C17).
    async fn prune_batch(
        engine: &Engine<Self>,
        finished_before: i64,
        limit: i64,
    ) -> Result<PruneCount, EngineError>;

    /// The first event position that may not be final yet: every event
    /// below it has committed or never will (C16).
    async fn final_below(engine: &Engine<Self>) -> Result<i64, EngineError>;

    /// The text to run for the statement `sql`: as written, or rewritten
    /// (PostgreSQL names the store's schema in every table, so that no
    /// statement depends on a session's `search_path`, which a pooler may
    /// drop or share).
    fn statement<'s>(&self, sql: &'s str) -> Cow<'s, str> {
        Cow::Borrowed(sql)
    }

    /// The statement `sql` with `params` written into its text, to be
    /// sent as a simple query that prepares nothing on the server; `None`
    /// (the default) to prepare it and bind `params`. PostgreSQL does so
    /// behind a pooler in transaction mode, where the next statement may
    /// run in another server session.
    fn unprepared(&self, sql: &str, params: &[Param<'_>]) -> Option<Result<String, sqlx::Error>> {
        let _ = (sql, params);
        None
    }

    /// How long a statement, or a write's transaction, waits for the
    /// engine's answer before its connection is taken for dead (closed,
    /// with every idle one) and the call fails as `unreachable`; `None`
    /// (the default) to wait as long as it takes, for an engine that
    /// cannot go silent (a file).
    fn reply_timeout(&self) -> Option<Duration> {
        None
    }

    /// The row of the handoff `id` (`Some(None)`: no such handoff), read
    /// at once on the caller's thread where the engine can do that without
    /// waiting for anything (SQLite: `sqlite/inline.rs`); `None` (the
    /// default, and whenever that read cannot answer at once) to read it
    /// through the connections, which report any error.
    fn handoff_at_once(&self, id: &str) -> Option<Option<HandoffRow<'static>>> {
        let _ = id;
        None
    }

    /// Whether events at or above position `from` are stored that may
    /// become final soon without a change signal (their writer is still
    /// running), so a watcher reads again shortly rather than sleeping.
    async fn pending_from(engine: &Engine<Self>, from: i64) -> Result<bool, EngineError>;
}

/// A `(version, record)` pair read from `parents` or `task_prs`.
#[derive(Debug, Clone)]
pub(crate) struct RecordRow {
    pub version: i64,
    pub record: String,
}

/// A parent's `(version, record)` with its active handoff and its handoff
/// for a step, as [`PARENT_WITH_ACTIVE`](crate::sql::statements::PARENT_WITH_ACTIVE)
/// returns them.
#[derive(Debug, Clone)]
pub(crate) struct ParentSnapshot {
    pub parent: RecordRow,
    pub active: Option<HandoffRow<'static>>,
    pub at_step: Option<HandoffRow<'static>>,
}

/// What an engine reports besides success.
#[derive(Debug)]
pub(crate) enum EngineError {
    /// A unique constraint refused the write.
    Unique {
        /// The schema's unique index that refused it, as the dialect
        /// recognised it; `None` for another (a primary key).
        index: Option<UniqueIndex>,
        /// The engine's message.
        detail: String,
    },
    /// Anything else, already mapped to an actionable `StoreError`.
    Failed(StoreError),
}

/// One row of a backend's table of engine errors (`sqlite/error.rs`,
/// `postgres/error.rs`): the codes it covers, the kind a program branches
/// on, and the message it gives, from the backend and the engine's own
/// message.
pub(crate) struct ErrorRow<Codes: 'static, Backend> {
    /// The engine's codes this row covers.
    pub codes: Codes,
    /// What a program branches on.
    pub kind: UnavailableKind,
    /// The message a person reads.
    pub says: fn(&Backend, &str) -> String,
}

impl From<StoreError> for EngineError {
    fn from(error: StoreError) -> Self {
        Self::Failed(error)
    }
}

/// One statement of a batch, with its parameters.
pub(crate) struct Statement<'a> {
    pub sql: &'static str,
    pub params: Vec<Param<'a>>,
}

/// Two counts a prune reads or reports (C17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    /// The `handoffs` column.
    pub handoffs: i64,
    /// The `events` column.
    pub events: i64,
}

impl Counts {
    /// The counts as a prune reports them.
    ///
    /// # Errors
    /// `Unavailable` (damaged) for a negative count.
    pub(crate) fn prune_count(self) -> StoreResult<PruneCount> {
        let count = |n: i64| {
            u64::try_from(n).map_err(|_| StoreError::damaged(format!("a prune counted {n} rows")))
        };
        Ok(PruneCount {
            handoffs: count(self.handoffs)?,
            events: count(self.events)?,
        })
    }
}

/// Why a transaction of [`Engine::read_snapshot`] or
/// [`Engine::import`] stopped: the engine, or the caller's own error.
enum Stop {
    Sql(sqlx::Error),
    Caller(StoreError),
}

impl From<sqlx::Error> for Stop {
    fn from(error: sqlx::Error) -> Self {
        Self::Sql(error)
    }
}

/// A connection of dialect `D`'s database.
type Conn<D> = <<D as Dialect>::Db as Database>::Connection;
/// A result row of dialect `D`'s database.
type Row<D> = <<D as Dialect>::Db as Database>::Row;

/// What the shared repository runs its statements on, for every SQL
/// backend: statements on a few pooled connections ([`Connections`]),
/// errors mapped by the [`Dialect`]. Its methods take [`Param`]s and
/// return decoded rows, each error already mapped ([`EngineError`]):
/// nothing about sqlx crosses them.
pub(crate) struct Engine<D: Dialect> {
    /// The connections every statement runs on.
    pub pool: Connections<Conn<D>>,
    /// What this backend's errors say, and how it opens a transaction.
    pub dialect: D,
    /// The change signal of watchers and waiters (C16).
    feed: ChangeFeed,
}

impl<D: Dialect> Debug for Engine<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("pool", &self.pool)
            .field("dialect", &self.dialect)
            .finish()
    }
}

impl<D: Dialect> Engine<D> {
    /// Statements on `pool`, errors mapped by `dialect`.
    pub(crate) fn new(pool: Connections<Conn<D>>, dialect: D) -> Self {
        let feed = ChangeFeed::new(dialect.change_source(pool.options()));
        Self {
            pool,
            dialect,
            feed,
        }
    }

    /// Lends a connection from the pool.
    pub(crate) async fn lend(&self) -> Result<Lease<'_, Conn<D>>, EngineError> {
        self.pool
            .acquire()
            .await
            .map_err(|e| self.dialect.map_error(e))
    }

    /// `work` (a statement or a transaction on a lent connection), given
    /// up when the engine has not answered within the dialect's
    /// [`reply_timeout`](Dialect::reply_timeout): the idle connections are
    /// then closed too (most likely to the same silent server), and the
    /// error is an I/O error of kind `TimedOut`, which marks the lent
    /// connection broken ([`Lease::failed`]) and is `unreachable` to the
    /// caller, so the store's retries go on with new connections.
    async fn in_time<T>(
        &self,
        work: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        let Some(limit) = self.dialect.reply_timeout() else {
            return work.await;
        };
        match tokio::time::timeout(limit, work).await {
            Ok(done) => done,
            Err(_) => {
                self.pool.close_idle();
                Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no answer within {limit:?} (the store URL's reply_timeout); the \
                         connection was closed"
                    ),
                )))
            }
        }
    }

    /// Runs a query on a lent connection and returns its rows; the
    /// connection goes back before the rows are decoded.
    async fn fetch_rows(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row<D>>, EngineError> {
        let mut conn = self.lend().await?;
        match self
            .in_time(self.fetch_all_on(&mut conn, sql, params))
            .await
        {
            Ok(rows) => Ok(rows),
            Err(e) => Err(self.statement_failed(&mut conn, e)),
        }
    }

    /// Executes `sql` with `params` on `conn` as the dialect runs
    /// statements ([`Dialect::statement`], [`Dialect::unprepared`]).
    async fn execute_on(
        &self,
        conn: &mut Conn<D>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<<D::Db as Database>::QueryResult, sqlx::Error> {
        let text = self.dialect.statement(sql);
        match self.dialect.unprepared(&text, params) {
            None => D::Db::execute(conn, &text, params).await,
            Some(inlined) => D::Db::execute_text(conn, &inlined?).await,
        }
    }

    /// Runs the query `sql` with `params` on `conn` as the dialect runs
    /// statements, and returns its rows.
    async fn fetch_all_on(
        &self,
        conn: &mut Conn<D>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row<D>>, sqlx::Error> {
        let text = self.dialect.statement(sql);
        match self.dialect.unprepared(&text, params) {
            None => D::Db::fetch_all(conn, &text, params).await,
            Some(inlined) => D::Db::fetch_all_text(conn, &inlined?).await,
        }
    }

    /// Decodes the `(version, record)` pair in the columns `version` and
    /// `record` of `row`.
    fn decode_record(row: &Row<D>, version: &str, record: &str) -> Result<RecordRow, sqlx::Error> {
        Ok(RecordRow {
            version: D::Db::int(row, D::Db::ordinal(row, version)?)?,
            record: D::Db::text(row, D::Db::ordinal(row, record)?)?,
        })
    }

    /// Decodes the columns of [`EVENT_ROW`](crate::sql::statements::EVENT_ROW).
    fn decode_event(row: &Row<D>) -> Result<EventRow, sqlx::Error> {
        let text = |name: &str| D::Db::text(row, D::Db::ordinal(row, name)?);
        let optional_text = |name: &str| D::Db::optional_text(row, D::Db::ordinal(row, name)?);
        let int = |name: &str| D::Db::int(row, D::Db::ordinal(row, name)?);
        Ok(EventRow {
            position: int("position")?,
            handoff_id: text("handoff_id")?,
            seq: int("seq")?,
            at: int("at")?,
            kind: text("kind")?,
            status_before: optional_text("status_before")?,
            status_after: text("status_after")?,
            actor: text("actor")?,
            detail: optional_text("detail")?,
            answer: optional_text("answer")?,
        })
    }

    /// Decodes a row of a snapshot query of `shape`; `positions` are the
    /// handoff columns' places, found on the query's first handoff row.
    fn decode_snapshot(
        row: &Row<D>,
        shape: Shape,
        positions: &mut Option<Positions>,
    ) -> Result<SnapshotRow, sqlx::Error> {
        let int = |name: &str| D::Db::int(row, D::Db::ordinal(row, name)?);
        let text = |name: &str| D::Db::text(row, D::Db::ordinal(row, name)?);
        Ok(match shape {
            Shape::Record => SnapshotRow::Record {
                key: text("key")?,
                version: int(VERSION)?,
                record: text(RECORD)?,
            },
            Shape::Handoff => {
                let found = match positions.take() {
                    Some(found) => found,
                    None => Positions::of::<D::Db>(row, "")?,
                };
                let handoff = HandoffRow::decode::<D::Db>(row, &found)?;
                *positions = Some(found);
                SnapshotRow::Handoff(handoff)
            }
            Shape::Event => SnapshotRow::Event(Self::decode_event(row)?),
            Shape::Int => SnapshotRow::Int(int("n")?),
        })
    }

    /// Maps a statement's error, telling the connection's pool.
    pub(crate) fn statement_failed(
        &self,
        conn: &mut Lease<'_, Conn<D>>,
        error: sqlx::Error,
    ) -> EngineError {
        conn.failed(&error);
        self.dialect.map_error(error)
    }
}

impl<D: Dialect> Engine<D> {
    /// Runs a query returning handoff rows (the columns of
    /// [`HANDOFF_COLUMNS`](crate::sql::columns::HANDOFF_COLUMNS), found by
    /// name).
    pub(crate) async fn fetch_handoffs(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<HandoffRow<'static>>, EngineError> {
        let rows = self.fetch_rows(sql, params).await?;
        let decode = || -> Result<_, sqlx::Error> {
            let Some(first) = rows.first() else {
                return Ok(Vec::new());
            };
            let positions = Positions::of::<D::Db>(first, "")?;
            rows.iter()
                .map(|row| HandoffRow::decode::<D::Db>(row, &positions))
                .collect()
        };
        decode().map_err(|e| self.dialect.map_error(e))
    }

    /// Runs a query returning one row of two BIGINT columns, `handoffs`
    /// and `events`: what a prune counts (C17).
    pub(crate) async fn fetch_counts(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Counts, EngineError> {
        let rows = self.fetch_rows(sql, params).await?;
        let [row] = rows.as_slice() else {
            return Err(EngineError::Failed(StoreError::damaged(format!(
                "a count returned {} rows where it returns one",
                rows.len()
            ))));
        };
        let int = |name: &str| D::Db::int(row, D::Db::ordinal(row, name)?);
        let decode = || -> Result<Counts, sqlx::Error> {
            Ok(Counts {
                handoffs: int("handoffs")?,
                events: int("events")?,
            })
        };
        decode().map_err(|e| self.dialect.map_error(e))
    }

    /// Runs a query returning the columns `parent_version` and
    /// `parent_record`, the handoff columns of a handoff (or as many
    /// NULLs), and those of another handoff (or NULLs) under the names
    /// prefixed with [`AT_STEP`]; `None` for no row. More than one row is
    /// `Unavailable`.
    pub(crate) async fn fetch_parent_snapshot(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Option<ParentSnapshot>, EngineError> {
        let rows = self.fetch_rows(sql, params).await?;
        let row = match rows.as_slice() {
            [] => return Ok(None),
            [row] => row,
            [..] => {
                return Err(EngineError::Failed(StoreError::damaged(format!(
                    "a parent has {} rows of active handoffs or handoffs for one step, where \
                     the store allows one of each; the store may be damaged",
                    rows.len()
                ))))
            }
        };
        let handoff = |prefix: &str| -> Result<_, sqlx::Error> {
            let positions = Positions::of::<D::Db>(row, prefix)?;
            if positions.is_null::<D::Db>(row)? {
                Ok(None)
            } else {
                HandoffRow::decode::<D::Db>(row, &positions).map(Some)
            }
        };
        let decode = || -> Result<_, sqlx::Error> {
            Ok(Some(ParentSnapshot {
                parent: Self::decode_record(row, PARENT_VERSION, PARENT_RECORD)?,
                active: handoff("")?,
                at_step: handoff(AT_STEP)?,
            }))
        };
        decode().map_err(|e| self.dialect.map_error(e))
    }

    /// Runs a query returning the columns of
    /// [`EVENT_ROW`](crate::sql::statements::EVENT_ROW).
    pub(crate) async fn fetch_events(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<Vec<EventRow>, EngineError> {
        let rows = self.fetch_rows(sql, params).await?;
        rows.iter()
            .map(|row| Self::decode_event(row).map_err(|e| self.dialect.map_error(e)))
            .collect()
    }

    /// Runs a query returning one row with one BIGINT column `n`.
    pub(crate) async fn fetch_int(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<i64, EngineError> {
        let rows = self.fetch_rows(sql, params).await?;
        let [row] = rows.as_slice() else {
            return Err(EngineError::Failed(StoreError::damaged(format!(
                "a query of one number returned {} rows",
                rows.len()
            ))));
        };
        D::Db::ordinal(row, "n")
            .and_then(|at| D::Db::int(row, at))
            .map_err(|e| self.dialect.map_error(e))
    }

    /// A subscription to this store's change signal (C16).
    pub(crate) fn subscribe(&self) -> Box<dyn Changes> {
        self.feed.subscribe()
    }

    /// Runs a query returning `version` and `record` columns.
    pub(crate) async fn fetch_records(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<RecordRow>, EngineError> {
        let rows = self.fetch_rows(sql, params).await?;
        rows.iter()
            .map(|row| {
                Self::decode_record(row, VERSION, RECORD).map_err(|e| self.dialect.map_error(e))
            })
            .collect()
    }

    /// Executes one statement, returning the rows it affected.
    pub(crate) async fn execute(
        &self,
        sql: &'static str,
        params: &[Param<'_>],
    ) -> Result<u64, EngineError> {
        let mut conn = self.lend().await?;
        match self.in_time(self.execute_on(&mut conn, sql, params)).await {
            Ok(done) => Ok(done.rows_affected()),
            Err(e) => Err(self.statement_failed(&mut conn, e)),
        }
    }

    /// Executes `statements` in one write transaction. Each must affect
    /// exactly one row; if one does not, the transaction is rolled back and
    /// its index is returned.
    pub(crate) async fn execute_batch(
        &self,
        statements: &[Statement<'_>],
    ) -> Result<Option<usize>, EngineError> {
        let mut conn = self.lend().await?;
        let result = self
            .in_time(async {
                let mut tx = sqlx::Connection::begin_with(&mut *conn, D::BEGIN_WRITE).await?;
                for (index, statement) in statements.iter().enumerate() {
                    let affected = self
                        .execute_on(&mut tx, statement.sql, &statement.params)
                        .await?
                        .rows_affected();
                    if affected != 1 {
                        tx.rollback().await?;
                        return Ok(Some(index));
                    }
                }
                tx.commit().await?;
                Ok(None)
            })
            .await;
        result.map_err(|e| self.statement_failed(&mut conn, e))
    }

    /// Runs `queries` in order in one read-only transaction that sees one
    /// snapshot of the store ([`ArchiveDialect::begin_snapshot`](crate::sql::archive::ArchiveDialect::begin_snapshot)), handing
    /// each row to `each` with the index of its query as it is read: rows
    /// are streamed, never gathered. `each`'s error stops the read and is
    /// returned as `Failed`.
    pub(crate) async fn read_snapshot(
        &self,
        queries: &[SnapshotQuery],
        each: &mut (dyn FnMut(usize, SnapshotRow) -> StoreResult<()> + Send),
    ) -> Result<(), EngineError> {
        let mut conn = self.lend().await?;
        let result = async {
            let mut tx =
                sqlx::Connection::begin_with(&mut *conn, D::ARCHIVE.begin_snapshot).await?;
            for (index, query) in queries.iter().enumerate() {
                let mut positions = None;
                let text = self.dialect.statement(&query.sql);
                let inlined = self.dialect.unprepared(&text, &[]).transpose()?;
                let mut rows = match &inlined {
                    None => D::Db::fetch(&mut tx, &text, &[]),
                    Some(inlined) => D::Db::fetch_text(&mut tx, inlined),
                };
                while let Some(row) = poll_fn(|cx| rows.as_mut().poll_next(cx)).await {
                    let row = Self::decode_snapshot(&row?, query.shape, &mut positions)?;
                    each(index, row).map_err(Stop::Caller)?;
                }
            }
            tx.rollback().await?;
            Ok(())
        }
        .await;
        match result {
            Ok(()) => Ok(()),
            Err(Stop::Caller(error)) => Err(EngineError::Failed(error)),
            Err(Stop::Sql(error)) => Err(self.statement_failed(&mut conn, error)),
        }
    }

    /// In one write transaction: takes [`ArchiveDialect::import_lock`](crate::sql::archive::ArchiveDialect::import_lock),
    /// runs `probe` (a query of one row whose column `n` counts what the
    /// store holds) and, when it is 0, executes every statement `next`
    /// gives until it gives `None`, then commits: `Ok(true)`. `Ok(false)`
    /// when the store is not empty (nothing written). An error of `next` or
    /// of a statement rolls everything back; `next`'s is returned as
    /// `Failed`.
    pub(crate) async fn import(
        &self,
        probe: &str,
        next: &mut (dyn FnMut() -> StoreResult<Option<OwnedStatement>> + Send),
    ) -> Result<bool, EngineError> {
        let mut conn = self.lend().await?;
        let result = async {
            let mut tx = sqlx::Connection::begin_with(&mut *conn, D::BEGIN_WRITE).await?;
            for lock in D::ARCHIVE.import_lock {
                self.execute_on(&mut tx, lock, &[]).await?;
            }
            let held = self.fetch_all_on(&mut tx, probe, &[]).await?;
            let mut none = None;
            let empty = match held.first() {
                Some(row) => matches!(
                    Self::decode_snapshot(row, Shape::Int, &mut none)?,
                    SnapshotRow::Int(0)
                ),
                None => false,
            };
            if !empty {
                tx.rollback().await?;
                return Ok(false);
            }
            loop {
                let statement = match next() {
                    Ok(Some(statement)) => statement,
                    Ok(None) => break,
                    Err(error) => {
                        tx.rollback().await?;
                        return Err(Stop::Caller(error));
                    }
                };
                let params = statement.params();
                self.execute_on(&mut tx, &statement.sql, &params).await?;
            }
            tx.commit().await?;
            Ok(true)
        }
        .await;
        match result {
            Ok(imported) => Ok(imported),
            Err(Stop::Caller(error)) => Err(EngineError::Failed(error)),
            Err(Stop::Sql(error)) => Err(self.statement_failed(&mut conn, error)),
        }
    }

    /// Executes `statements` in one write transaction and returns the rows
    /// each affected, whatever their number.
    // Only SQLite's dialect runs a batch of statements in one transaction.
    #[cfg(feature = "sqlite")]
    pub(crate) async fn execute_all(
        &self,
        statements: &[Statement<'_>],
    ) -> Result<Vec<u64>, EngineError> {
        let mut conn = self.lend().await?;
        let result = self
            .in_time(async {
                let mut tx = sqlx::Connection::begin_with(&mut *conn, D::BEGIN_WRITE).await?;
                let mut affected = Vec::with_capacity(statements.len());
                for statement in statements {
                    affected.push(
                        self.execute_on(&mut tx, statement.sql, &statement.params)
                            .await?
                            .rows_affected(),
                    );
                }
                tx.commit().await?;
                Ok(affected)
            })
            .await;
        result.map_err(|e| self.statement_failed(&mut conn, e))
    }
}
