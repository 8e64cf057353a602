//! What PostgreSQL does differently from SQLite: [`Dialect`] for
//! [`Server`], and the SQL only PostgreSQL runs.
//!
//! A data-modifying CTE feeds a write's `RETURNING` row to its event's
//! `INSERT`, so a handoff and its event are one statement and one round
//! trip; a prune batch is one statement too. Concurrent writers commit
//! out of order, so a watcher reads only the events below the oldest
//! writer still running ([`EVENT_HORIZON`]). The planner chooses indexes
//! by its statistics, so no statement names one.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_application::ports::PruneCount;
use sqlx::postgres::PgConnectOptions;

use super::text::inline;
use super::watch::{Notifications, Rechecks, REGISTER, UNREGISTER};
use super::{Pooler, Server, RECHECK_EVERY, REWRITTEN_CAPACITY};
use crate::changes::{ChangeSource, RECHECK};
use crate::sql::archive::ArchiveDialect;
use crate::sql::columns::{COLUMN_COUNT, EVENTS_COLUMN, ID_COLUMN, SWAP_PARAMS, VERSION_COLUMN};
use crate::sql::driver::Param;
use crate::sql::statements::{insert_event_from, INSERT_HANDOFF, PRUNABLE, SWAP_HANDOFF};
use crate::sql::{Dialect, Engine, EngineError, HandoffWrite, WriteKind};

/// `statement` (an INSERT or UPDATE of one handoff whose own parameters
/// are `$1 ... $own`) with its event, in one statement: a data-modifying
/// CTE whose row feeds the event's INSERT, so the event costs no round
/// trip and no transaction of its own. It affects one row if and only if
/// `statement` did.
pub fn with_event(statement: &str, own: usize) -> String {
    format!(
        "WITH h AS ({statement} RETURNING {ID_COLUMN}, {EVENTS_COLUMN}) {}",
        insert_event_from("h", own + 1)
    )
}

/// `INSERT_HANDOFF` and its `opened` event in one statement.
static INSERT_HANDOFF_WITH_EVENT: LazyLock<String> =
    LazyLock::new(|| with_event(&INSERT_HANDOFF, COLUMN_COUNT + 2));

/// `SWAP_HANDOFF` and its event in one statement.
pub static SWAP_HANDOFF_WITH_EVENT: LazyLock<String> =
    LazyLock::new(|| with_event(&SWAP_HANDOFF, SWAP_PARAMS));

/// A prune batch, in one statement: at most `$2` handoffs
/// prunable at `$1` (`seen`, the statement's snapshot), locked in the
/// order of their finish (so racing prunes never deadlock) if and only if
/// no write changed them since that snapshot (the lock re-checks the
/// version on the newest row, so a handoff whose wake another generation
/// took over meanwhile is left for the next batch: its newest event is not
/// in the snapshot); removed, their condition checked again; then exactly
/// their events. The foreign key from the events is checked at the end of
/// the statement, when both are gone. Returns the counts as
/// `COUNT_PRUNABLE` does.
pub(crate) static PRUNE_BATCH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH seen AS (SELECT {ID_COLUMN}, {VERSION_COLUMN} FROM handoffs WHERE {PRUNABLE} \
         ORDER BY terminal_at, id LIMIT $2), \
         locked AS MATERIALIZED (SELECT h.{ID_COLUMN} FROM handoffs h JOIN seen s \
         ON h.{ID_COLUMN} = s.{ID_COLUMN} AND h.{VERSION_COLUMN} = s.{VERSION_COLUMN} \
         ORDER BY h.terminal_at, h.{ID_COLUMN} FOR UPDATE OF h), \
         gone AS (DELETE FROM handoffs WHERE {ID_COLUMN} IN (SELECT {ID_COLUMN} FROM locked) \
         AND {PRUNABLE} RETURNING {ID_COLUMN}), \
         events AS (DELETE FROM handoff_events WHERE handoff_id IN \
         (SELECT {ID_COLUMN} FROM gone) RETURNING 1) \
         SELECT (SELECT COUNT(*) FROM gone) AS handoffs, (SELECT COUNT(*) FROM events) AS events"
    )
});

/// The first event position that may not be final (C16): the oldest
/// transaction still running that holds a lock on `handoff_events` (every
/// writer of an event locks the table before it is given its transaction
/// id, and an import locks it first of all), or, when none does, the next
/// transaction id, times 2^20. An event's
/// position is its writer's transaction id times that, plus its number in
/// the transaction ([`POSITION`](super::POSITION)), so every event below
/// the horizon was written by a transaction that has ended: a later
/// statement sees all of them that committed, and no other can come. The
/// lock table names a transaction by its 32-bit id; it is matched to the
/// 64-bit one of the snapshot's running transactions (the statement's
/// snapshot, taken before the lock table is read; the lock table is read
/// once). A transaction that takes its id before it touches
/// `handoff_events` (none of lf-handoff's writes does; a person's `BEGIN`
/// in psql might) is not seen as a writer until it does.
const EVENT_HORIZON: &str = "WITH locks AS MATERIALIZED (\
      SELECT locktype, database, relation, transactionid, mode, granted, pid FROM pg_locks), \
    snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s) \
    SELECT COALESCE(\
      (SELECT MIN(x::text::bigint) FROM snap, pg_snapshot_xip(snap.s) AS x \
       WHERE x::text::bigint % 4294967296 IN (\
         SELECT t.transactionid::text::bigint FROM locks r JOIN locks t ON t.pid = r.pid \
         WHERE r.locktype = 'relation' AND r.relation = to_regclass('handoff_events') \
           AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted)), \
      (SELECT pg_snapshot_xmax(s)::text::bigint FROM snap)) * 1048576 AS n";

/// The store's mark for the change signal's safety check (C16): the last
/// final event's position, in one statement. Every change commits an
/// event (C15), and the events that become final are all above those
/// final before, so the mark moves whenever a change becomes readable
/// (prune, which only removes events, may move it too).
static LAST_FINAL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT COALESCE(MAX(position), 0) AS n FROM handoff_events \
         WHERE position < ({EVENT_HORIZON})"
    )
});

/// 1 when an event is held at or above position `$1`, else 0 (C16).
const EVENTS_FROM: &str =
    "SELECT COUNT(*) AS n FROM (SELECT 1 FROM handoff_events WHERE position >= $1 LIMIT 1) AS held";

/// A `REPEATABLE READ` snapshot. Positions come from transaction ids
/// (C16, [`POSITION`](super::POSITION)), so there is no counter to set:
/// the last position given is the largest event position or the one an
/// import recorded (`handoff_position_floor`), whichever is larger. An
/// import keeps the file's positions when they are all below its own
/// transaction's (as they are when the file comes from SQLite, sled, or
/// this server), so every later event comes after them; when they are not
/// (a file from a busier server) it numbers the events 1, 2, 3, ... in
/// their order instead, and records that count.
const ARCHIVE: ArchiveDialect = ArchiveDialect {
    begin_snapshot: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    text_order: " COLLATE \"C\"",
    last_position: "SELECT GREATEST(\
                    COALESCE((SELECT MAX(position) FROM handoff_events), 0), \
                    COALESCE((SELECT MAX(floor) FROM handoff_position_floor), 0)) AS n",
    set_last_position: &[
        "UPDATE handoff_events SET position = -position \
         WHERE CAST($1 AS BIGINT) >= pg_current_xact_id()::text::bigint * 1048576",
        "UPDATE handoff_events e SET position = r.n \
         FROM (SELECT position AS p, row_number() OVER (ORDER BY position DESC) AS n \
               FROM handoff_events WHERE position < 0) r \
         WHERE e.position = r.p AND CAST($1 AS BIGINT) IS NOT NULL",
        "INSERT INTO handoff_position_floor (floor) \
         SELECT CASE WHEN CAST($1 AS BIGINT) < pg_current_xact_id()::text::bigint * 1048576 \
                THEN CAST($1 AS BIGINT) ELSE (SELECT COUNT(*) FROM handoff_events) END",
    ],
    import_lock: &["LOCK TABLE parents, task_prs, handoffs, handoff_events IN EXCLUSIVE MODE"],
};

/// PostgreSQL's dialect: the server, which every message names.
#[async_trait]
impl Dialect for Server {
    type Db = sqlx::Postgres;

    /// READ COMMITTED: a writer that finds a row another transaction
    /// changed waits for it, then re-checks its condition on the new row.
    const BEGIN_WRITE: &'static str = "BEGIN";
    const ARCHIVE: ArchiveDialect = ARCHIVE;

    fn store_name(&self) -> String {
        self.to_string()
    }

    fn map_error(&self, error: sqlx::Error) -> EngineError {
        self.engine_error(error)
    }

    /// `reply_timeout` of the store URL: a server on the network may go
    /// silent without closing anything.
    fn reply_timeout(&self) -> Option<Duration> {
        Some(self.reply_timeout)
    }

    /// Listens on the server the hosts choose (not on `_options`, the
    /// URL's first host's): those of `listen_url` when the URL gives one,
    /// else the store's own, unless they are behind a pooler in
    /// transaction mode, which cannot hold a `LISTEN`: then the store's
    /// mark is read every [`RECHECK_EVERY`](super::RECHECK_EVERY) instead.
    fn change_source(&self, _options: &PgConnectOptions) -> Arc<dyn ChangeSource> {
        let mark = self.qualified(&LAST_FINAL);
        let hosts = match (&self.listen, self.pooler) {
            (Some(listen), _) => listen.clone(),
            (None, Pooler::Transaction) => {
                return Arc::new(Rechecks {
                    hosts: self.hosts.clone(),
                    server: self.to_string(),
                    mark,
                    every: RECHECK_EVERY,
                })
            }
            (None, _) => self.hosts.clone(),
        };
        Arc::new(Notifications {
            hosts,
            server: self.to_string(),
            register: REGISTER.iter().map(|sql| self.qualified(sql)).collect(),
            unregister: self.qualified(UNREGISTER),
            mark,
            recheck: RECHECK,
        })
    }

    /// `sql` with the store's schema named in every table, rewritten once
    /// per text.
    fn statement<'s>(&self, sql: &'s str) -> Cow<'s, str> {
        let mut rewritten = self
            .rewritten
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(text) = rewritten.get(sql) {
            return Cow::Owned(text.clone());
        }
        let text = self.qualified(sql);
        if rewritten.len() >= REWRITTEN_CAPACITY {
            rewritten.clear();
        }
        rewritten.insert(sql.to_string(), text.clone());
        Cow::Owned(text)
    }

    /// Behind a pooler in transaction mode, every statement with its
    /// values written in as literals ([`inline`]); else prepared.
    fn unprepared(&self, sql: &str, params: &[Param<'_>]) -> Option<Result<String, sqlx::Error>> {
        (self.pooler == Pooler::Transaction)
            .then(|| inline(sql, params).map_err(|e| sqlx::Error::Encode(Box::new(e))))
    }

    /// Nothing: the planner chooses by its statistics.
    fn index_hint(_index: &str) -> String {
        String::new()
    }

    /// One statement: the row's write with its event (a data-modifying
    /// CTE).
    async fn write_with_event(
        engine: &Engine<Self>,
        write: HandoffWrite<'_>,
    ) -> Result<bool, EngineError> {
        let sql: &'static str = match write.kind {
            WriteKind::Insert => &INSERT_HANDOFF_WITH_EVENT,
            WriteKind::Swap => &SWAP_HANDOFF_WITH_EVENT,
        };
        let params: Vec<Param<'_>> = write.params.iter().copied().chain(write.event).collect();
        Ok(engine.execute(sql, &params).await? == 1)
    }

    /// One statement ([`PRUNE_BATCH`]).
    async fn prune_batch(
        engine: &Engine<Self>,
        finished_before: i64,
        limit: i64,
    ) -> Result<PruneCount, EngineError> {
        let params = [Param::Int(finished_before), Param::Int(limit)];
        let counts = engine.fetch_counts(&PRUNE_BATCH, &params).await?;
        Ok(counts.prune_count()?)
    }

    /// [`EVENT_HORIZON`].
    async fn final_below(engine: &Engine<Self>) -> Result<i64, EngineError> {
        engine.fetch_int(EVENT_HORIZON, &[]).await
    }

    /// Events committed above the horizon wait for a writer still running.
    async fn pending_from(engine: &Engine<Self>, from: i64) -> Result<bool, EngineError> {
        Ok(engine.fetch_int(EVENTS_FROM, &[Param::Int(from)]).await? > 0)
    }
}
