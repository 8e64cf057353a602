//! What SQLite does differently from PostgreSQL: [`Dialect`] for
//! [`SqliteFile`], and the SQL only SQLite runs.
//!
//! SQLite has no data-modifying CTE, so a handoff's row and its event are
//! two statements of one `BEGIN IMMEDIATE` transaction, and a prune batch
//! two `DELETE`s of one. Writers take turns on the file's write lock, so
//! positions commit in order and every committed event is final. Its
//! planner has no statistics: the statements that must use one index name
//! it (`INDEXED BY`).
//!
//! SQLite reports a refused row by the result code
//! `SQLITE_CONSTRAINT_UNIQUE` alone: its only other word on which index
//! refused it is an English message. So a write that a unique index
//! refuses asks the table, in the same transaction (which holds the write
//! lock, so nothing changed since), which of the schema's indexes holds a
//! row that conflicts: the step's first, as SQLite checks it first.

use std::sync::Arc;

use async_trait::async_trait;
use lf_handoff_application::ports::PruneCount;
use lf_handoff_application::StoreError;
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, StepKey};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::Connection as _;
use std::sync::LazyLock;

use super::error::is_unique_index_violation;
use super::watch::DataVersion;
use super::SqliteFile;
use crate::changes::{ChangeSource, RECHECK};
use crate::file_events::FILE_CHECK;
use crate::sql::archive::ArchiveDialect;
use crate::sql::columns::{HandoffRow, ID_COLUMN};
use crate::sql::driver::{Driver as _, Param};
use crate::sql::engine::Statement;
use crate::sql::schema::{UniqueIndex, ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP};
use crate::sql::statements::{insert_event_from, ACTIVE, PRUNABLE};
use crate::sql::{Dialect, Engine, EngineError, HandoffWrite, WriteKind};

/// The event row of handoff `$1` as it now stands, with the event's own
/// values from `$2` on: the second statement of a write, in the same
/// transaction as the handoff's row.
pub static INSERT_EVENT: LazyLock<String> =
    LazyLock::new(|| insert_event_from(&format!("handoffs WHERE {ID_COLUMN} = $1"), 2));

/// The ids of at most `$2` handoffs a prune at `$1` may remove, earliest
/// finish first: a range of `handoffs_prunable`.
static PRUNABLE_IDS: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {ID_COLUMN} FROM handoffs WHERE {PRUNABLE} ORDER BY terminal_at, id LIMIT $2")
});

/// The first statement of a prune batch: the events of the handoffs
/// [`PRUNE_HANDOFFS`] removes next in the same transaction (the events
/// first: they refer to their handoff). Writers take turns, so both
/// statements see the same handoffs.
pub(crate) static PRUNE_EVENTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "DELETE FROM handoff_events WHERE handoff_id IN ({})",
        *PRUNABLE_IDS
    )
});

/// The second statement of a prune batch: at most `$2` handoffs prunable
/// at `$1`.
pub(crate) static PRUNE_HANDOFFS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "DELETE FROM handoffs WHERE {ID_COLUMN} IN ({})",
        *PRUNABLE_IDS
    )
});

/// Which rows of parent `$1` a new handoff at step `$2` (or none) would
/// conflict with: one at that step (`step`), an active one (`active`).
static CONFLICTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT EXISTS (SELECT 1 FROM handoffs WHERE parent_id = $1 AND step = $2) AS step, \
         EXISTS (SELECT 1 FROM handoffs WHERE parent_id = $1 AND {ACTIVE}) AS active"
    )
});

/// `BEGIN` defers the snapshot to the first read, which WAL mode keeps for
/// the transaction; `AUTOINCREMENT` keeps its counter in `sqlite_sequence`
/// (the row exists once an event was inserted, with the largest position;
/// a file whose newest events were removed sets it higher).
const ARCHIVE: ArchiveDialect = ArchiveDialect {
    begin_snapshot: "BEGIN",
    text_order: "",
    last_position: "SELECT COALESCE((SELECT seq FROM sqlite_sequence \
                    WHERE name = 'handoff_events'), 0) AS n",
    set_last_position: &[
        "UPDATE sqlite_sequence SET seq = $1 WHERE name = 'handoff_events'",
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'handoff_events', $1 \
         WHERE $1 > 0 AND NOT EXISTS \
         (SELECT 1 FROM sqlite_sequence WHERE name = 'handoff_events')",
    ],
    import_lock: &[],
};

#[async_trait]
impl Dialect for SqliteFile {
    type Db = sqlx::Sqlite;

    /// Takes the write lock before the first read, so a writer never
    /// deadlocks into `SQLITE_BUSY`.
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const ARCHIVE: ArchiveDialect = ARCHIVE;

    fn store_name(&self) -> String {
        self.path.display().to_string()
    }

    fn map_error(&self, error: sqlx::Error) -> EngineError {
        self.engine_error(error)
    }

    fn change_source(&self, options: &SqliteConnectOptions) -> Arc<dyn ChangeSource> {
        Arc::new(DataVersion {
            path: self.path.clone(),
            options: options.clone(),
            look_every: FILE_CHECK,
            recheck: RECHECK,
        })
    }

    /// On the caller's thread, when that answers at once (`inline.rs`).
    fn handoff_at_once(&self, id: &str) -> Option<Option<HandoffRow<'static>>> {
        self.inline.handoff(id)
    }

    /// `INDEXED BY`: without statistics the planner may take another index
    /// and sort.
    fn index_hint(index: &str) -> String {
        format!("INDEXED BY {index} ")
    }

    async fn write_with_event(
        engine: &Engine<Self>,
        write: HandoffWrite<'_>,
    ) -> Result<bool, EngineError> {
        let mut conn = engine.lend().await?;
        match write_in_transaction(&mut conn, &write).await {
            Ok(Written::Row) => Ok(true),
            Ok(Written::Nothing) => Ok(false),
            Ok(Written::Refused { index, detail }) => Err(EngineError::Unique { index, detail }),
            Ok(Written::EventRefused) => Err(EngineError::Failed(StoreError::damaged(format!(
                "the event of handoff {} could not be appended beside its change; nothing was \
                 written",
                write.handoff.id
            )))),
            Err(error) => Err(engine.statement_failed(&mut conn, error)),
        }
    }

    /// The events, then their handoffs, in one write transaction.
    async fn prune_batch(
        engine: &Engine<Self>,
        finished_before: i64,
        limit: i64,
    ) -> Result<PruneCount, EngineError> {
        let params = vec![Param::Int(finished_before), Param::Int(limit)];
        let batch = [
            Statement {
                sql: &PRUNE_EVENTS,
                params: params.clone(),
            },
            Statement {
                sql: &PRUNE_HANDOFFS,
                params,
            },
        ];
        match engine.execute_all(&batch).await?[..] {
            [events, handoffs] => Ok(PruneCount { handoffs, events }),
            ref other => Err(EngineError::Failed(StoreError::damaged(format!(
                "a prune batch of two statements reported {} counts",
                other.len()
            )))),
        }
    }

    /// Past every position: writers take turns, so every committed event
    /// is final.
    async fn final_below(_engine: &Engine<Self>) -> Result<i64, EngineError> {
        Ok(i64::MAX)
    }

    /// Never: every committed event is final.
    async fn pending_from(_engine: &Engine<Self>, _from: i64) -> Result<bool, EngineError> {
        Ok(false)
    }
}

/// How a write's transaction ended, short of an engine failure.
enum Written {
    /// The row and its event were written.
    Row,
    /// The statement's condition held no row: nothing was written.
    Nothing,
    /// A unique index refused the row: the schema's `index`, as the table
    /// showed it, or `None` for another.
    Refused {
        index: Option<UniqueIndex>,
        detail: String,
    },
    /// The row was written but its event was not: rolled back.
    EventRefused,
}

/// `write`'s row, then its event, in one `BEGIN IMMEDIATE` transaction.
async fn write_in_transaction(
    conn: &mut SqliteConnection,
    write: &HandoffWrite<'_>,
) -> Result<Written, sqlx::Error> {
    let mut tx = conn.begin_with(SqliteFile::BEGIN_WRITE).await?;
    let written = match sqlx::Sqlite::execute(&mut tx, write.kind.statement(), write.params).await {
        Ok(done) => done.rows_affected(),
        Err(error) if is_unique_index_violation(&error) => {
            // Only an insert can meet a row of another handoff.
            let index = match write.kind {
                WriteKind::Insert => conflicting_index(&mut tx, write.handoff).await?,
                WriteKind::Swap => None,
            };
            tx.rollback().await?;
            let detail = match &error {
                sqlx::Error::Database(db) => db.message().to_string(),
                other => other.to_string(),
            };
            return Ok(Written::Refused { index, detail });
        }
        Err(error) => return Err(error),
    };
    if written != 1 {
        tx.rollback().await?;
        return Ok(Written::Nothing);
    }
    let mut event = vec![Param::Text(write.handoff.id.as_str())];
    event.extend(write.event);
    if sqlx::Sqlite::execute(&mut tx, &INSERT_EVENT, &event)
        .await?
        .rows_affected()
        != 1
    {
        tx.rollback().await?;
        return Ok(Written::EventRefused);
    }
    tx.commit().await?;
    Ok(Written::Row)
}

/// Which of the schema's unique indexes holds a row `handoff` conflicts
/// with, read inside the transaction whose write it refused: the step's
/// first (SQLite checks the index created last first), then the active
/// slot's; `None` when neither does.
async fn conflicting_index(
    conn: &mut SqliteConnection,
    handoff: &InteractiveHandoff,
) -> Result<Option<UniqueIndex>, sqlx::Error> {
    let (step, active): (bool, bool) = sqlx::query_as(&CONFLICTS)
        .bind(handoff.parent.id_str())
        .bind(handoff.step.as_ref().map(StepKey::as_str))
        .fetch_one(&mut *conn)
        .await?;
    Ok(if step {
        Some(ONE_PER_PARENT_STEP)
    } else if active && handoff.is_active() {
        Some(ONE_ACTIVE_PER_PARENT)
    } else {
        None
    })
}
