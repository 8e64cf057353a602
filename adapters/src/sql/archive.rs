//! Export and import (C17) for the SQL backends: [`Archive`] for
//! [`SqlStore`].
//!
//! **Export reads one snapshot.** Every query runs in one read-only
//! transaction ([`ArchiveDialect::begin_snapshot`]): on PostgreSQL
//! `REPEATABLE READ READ ONLY`, whose snapshot is taken at the first query
//! and kept to the end; on SQLite a deferred transaction, which in WAL mode
//! reads the database as it was at its first read while other processes go
//! on writing (they append to the WAL; the reader keeps its end mark).
//! Rows are streamed from the engine one by one (sqlx's row stream), so an
//! export holds one row at a time, whatever the registry's size. Text keys
//! are ordered byte by byte (PostgreSQL `COLLATE "C"`; SQLite's default
//! `BINARY`), so both backends list records in the same order. The last
//! position given comes from the engine's own counter (SQLite's
//! `sqlite_sequence`; on PostgreSQL, whose positions are transaction ids,
//! the largest position or the one an import recorded), read after the
//! records: it is at least every position the snapshot holds.
//!
//! **Import is one write transaction.** It takes the tables' locks
//! ([`ArchiveDialect::import_lock`]: on PostgreSQL `EXCLUSIVE` locks, so
//! no other session writes until it commits; SQLite's `BEGIN IMMEDIATE`
//! already excludes other writers), checks inside it that the store holds
//! nothing, then inserts the records in multi-row `INSERT`s of up to
//! [`BATCH_ROWS`] rows as they are read, with their versions, event
//! counters and explicit positions, and at the end sets the engine's
//! position counter to the file's last position (SQLite
//! `sqlite_sequence`; PostgreSQL records it, see `postgres/dialect.rs`), so every
//! later event comes after it. A bad line, or any failure, rolls it all back. The indexes are the
//! engine's own, so they are exactly those of the store's own writes.

use std::collections::VecDeque;

use async_trait::async_trait;
use lf_handoff_application::archive::{
    not_empty, Archive, ArchiveItem, ArchiveRecord, ArchiveSink, ArchiveSource, ArchiveSummary,
};
use lf_handoff_application::ports::Versioned;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::interactive_handoff::{Answer, InteractiveHandoffStatus};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use lf_handoff_domain::timestamp::to_unix_micros;

use crate::sql::columns::{column_list, HandoffRow, COLUMN_COUNT};
use crate::sql::driver::Param;
use crate::sql::events::EventRow;
use crate::sql::row::to_json;
use crate::sql::statements::EVENT_ROW;
use crate::sql::{failed, to_version, versioned_handoff, Dialect, SqlStore};

/// The most rows one `INSERT` of an import carries. A handoff row binds
/// [`COLUMN_COUNT`] values, so a batch stays well inside SQLite's 32,766
/// and PostgreSQL's 65,535 parameters.
pub(crate) const BATCH_ROWS: usize = 256;

/// What export and import need of a SQL backend: each backend's
/// [`Dialect::ARCHIVE`] (in `sqlite/dialect.rs` and `postgres/dialect.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArchiveDialect {
    /// Opens the export's read-only transaction, which sees one snapshot.
    pub begin_snapshot: &'static str,
    /// Appended to a text column in `ORDER BY` so it orders byte by byte.
    pub text_order: &'static str,
    /// A query of one row whose column `n` is the last position given (0
    /// when none was).
    pub last_position: &'static str,
    /// Statements that make `$1` the last position given, run after the
    /// events are inserted.
    pub set_last_position: &'static [&'static str],
    /// Statements an import runs first in its transaction, so no other
    /// session writes until it ends.
    pub import_lock: &'static [&'static str],
}

/// What the rows of a snapshot query are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `key`, `version` and `record` (a parent or a task PR).
    Record,
    /// The handoff columns.
    Handoff,
    /// The columns of [`EVENT_ROW`].
    Event,
    /// One BIGINT column `n`.
    Int,
}

/// One query of [`Engine::read_snapshot`](crate::sql::Engine::read_snapshot).
#[derive(Debug, Clone)]
pub(crate) struct SnapshotQuery {
    pub sql: String,
    pub shape: Shape,
}

/// One row of a snapshot query, decoded by its [`Shape`].
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // Rows stream one at a time.
pub(crate) enum SnapshotRow {
    Record {
        key: String,
        version: i64,
        record: String,
    },
    Handoff(HandoffRow<'static>),
    Event(EventRow),
    Int(i64),
}

/// An owned bind value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
}

impl Value {
    fn of(param: Param<'_>) -> Self {
        match param {
            Param::Text(text) => Self::Text(text.to_string()),
            Param::OptText(text) => Self::OptText(text.map(str::to_string)),
            Param::Int(n) => Self::Int(n),
            Param::OptInt(n) => Self::OptInt(n),
        }
    }

    fn param(&self) -> Param<'_> {
        match self {
            Self::Text(text) => Param::Text(text),
            Self::OptText(text) => Param::OptText(text.as_deref()),
            Self::Int(n) => Param::Int(*n),
            Self::OptInt(n) => Param::OptInt(*n),
        }
    }
}

/// A statement an import runs, with owned text and values.
#[derive(Debug, Clone)]
pub(crate) struct OwnedStatement {
    pub sql: String,
    pub values: Vec<Value>,
}

impl OwnedStatement {
    /// The values, to bind.
    pub(crate) fn params(&self) -> Vec<Param<'_>> {
        self.values.iter().map(Value::param).collect()
    }
}

/// Whether the store holds anything: `n` is 1 when it does.
const PROBE: &str = "SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM parents) \
     OR EXISTS (SELECT 1 FROM task_prs) OR EXISTS (SELECT 1 FROM handoffs) \
     OR EXISTS (SELECT 1 FROM handoff_events) THEN 1 ELSE 0 END AS BIGINT) AS n";

/// The snapshot queries of an export, in file order; the last gives the
/// last position.
fn export_queries(dialect: ArchiveDialect) -> Vec<SnapshotQuery> {
    let order = dialect.text_order;
    let query = |sql: String, shape| SnapshotQuery { sql, shape };
    vec![
        query(
            format!("SELECT id AS key, version, record FROM parents ORDER BY id{order}"),
            Shape::Record,
        ),
        query(
            format!(
                "SELECT id AS key, CAST(1 AS BIGINT) AS version, record FROM task_prs \
                 ORDER BY id{order}"
            ),
            Shape::Record,
        ),
        query(
            format!(
                "SELECT {} FROM handoffs ORDER BY created_at, id{order}",
                column_list()
            ),
            Shape::Handoff,
        ),
        query(
            format!("SELECT {EVENT_ROW} FROM handoff_events ORDER BY position"),
            Shape::Event,
        ),
        query(dialect.last_position.to_string(), Shape::Int),
    ]
}

/// The record a row of export query `index` holds, or the last position.
#[allow(clippy::large_enum_variant)] // Rows stream one at a time.
enum Exported {
    Record(ArchiveRecord),
    LastPosition(u64),
}

fn exported(index: usize, row: SnapshotRow) -> StoreResult<Exported> {
    let unreadable = |what: &str, key: &str, detail: String| {
        StoreError::damaged(format!(
            "stored {what} {key} is unreadable ({detail}); the store may be damaged"
        ))
    };
    Ok(match (index, row) {
        (
            0,
            SnapshotRow::Record {
                key,
                version,
                record,
            },
        ) => {
            let parent: Parent = serde_json::from_str(&record)
                .map_err(|e| unreadable("parent", &key, e.to_string()))?;
            if parent.reference().id_str() != key {
                return Err(unreadable(
                    "parent",
                    &key,
                    format!("it holds {}", parent.reference()),
                ));
            }
            Exported::Record(ArchiveRecord::Parent(Versioned {
                value: parent,
                version: to_version(version)?,
            }))
        }
        (1, SnapshotRow::Record { key, record, .. }) => {
            let pr: TaskPr = serde_json::from_str(&record)
                .map_err(|e| unreadable("task PR", &key, e.to_string()))?;
            if pr.id.as_str() != key {
                return Err(unreadable("task PR", &key, format!("it holds {}", pr.id)));
            }
            Exported::Record(ArchiveRecord::TaskPr(pr))
        }
        (2, SnapshotRow::Handoff(row)) => {
            let events = u64::try_from(row.events).map_err(|_| {
                StoreError::damaged(format!(
                    "stored handoff {} counts {} events; the store may be damaged",
                    row.id, row.events
                ))
            })?;
            Exported::Record(ArchiveRecord::Handoff {
                handoff: versioned_handoff(row)?,
                events,
            })
        }
        (3, SnapshotRow::Event(row)) => Exported::Record(ArchiveRecord::Event(row.into_domain()?)),
        (4, SnapshotRow::Int(n)) => Exported::LastPosition(u64::try_from(n).map_err(|_| {
            StoreError::damaged(format!(
                "the store's last event position is {n}; the store may be damaged"
            ))
        })?),
        (index, row) => {
            return Err(StoreError::unavailable(
                UnavailableKind::Other,
                format!("export query {index} returned an unexpected row: {row:?}"),
            ))
        }
    })
}

#[async_trait]
impl<D: Dialect> Archive for SqlStore<D> {
    async fn export(&self, sink: &mut dyn ArchiveSink) -> StoreResult<ArchiveSummary> {
        let queries = export_queries(D::ARCHIVE);
        let mut last_position = None;
        self.engine
            .read_snapshot(&queries, &mut |index, row| match exported(index, row)? {
                Exported::Record(record) => sink.record(&record),
                Exported::LastPosition(n) => {
                    last_position = Some(n);
                    Ok(())
                }
            })
            .await
            .map_err(failed)?;
        let last_position = last_position.ok_or_else(|| {
            StoreError::unavailable(
                UnavailableKind::Other,
                "the store did not say its last event position",
            )
        })?;
        sink.end(last_position)
    }

    async fn import(&self, source: &mut dyn ArchiveSource) -> StoreResult<ArchiveSummary> {
        let mut batches = Batches::new(source, D::ARCHIVE);
        let imported = self
            .engine
            .import(PROBE, &mut || batches.next_statement())
            .await
            .map_err(failed)?;
        if !imported {
            return Err(not_empty(&self.engine.dialect.store_name()));
        }
        batches.summary.ok_or_else(|| {
            StoreError::unavailable(
                UnavailableKind::Other,
                "the import committed before the end of its file",
            )
        })
    }
}

/// Turns an import's records into multi-row `INSERT`s, reading the
/// source only as the transaction asks for the next statement.
struct Batches<'s> {
    source: &'s mut dyn ArchiveSource,
    dialect: ArchiveDialect,
    /// An item read but not yet in a statement: the first of the next one.
    pending: Option<ArchiveItem>,
    /// Statements to give before reading on (the end's).
    queued: VecDeque<OwnedStatement>,
    /// The end line's summary, once read.
    summary: Option<ArchiveSummary>,
}

/// The table a record goes into, and how many values a row has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Parents,
    TaskPrs,
    Handoffs,
    Events,
}

impl Table {
    fn of(record: &ArchiveRecord) -> Self {
        match record {
            ArchiveRecord::Parent(_) => Self::Parents,
            ArchiveRecord::TaskPr(_) => Self::TaskPrs,
            ArchiveRecord::Handoff { .. } => Self::Handoffs,
            ArchiveRecord::Event(_) => Self::Events,
        }
    }

    /// The `INSERT ... VALUES` before the rows, and the values per row.
    fn insert(self) -> (String, usize) {
        match self {
            Self::Parents => (
                "INSERT INTO parents (id, kind, wave_id, version, record) VALUES ".into(),
                5,
            ),
            Self::TaskPrs => (
                "INSERT INTO task_prs (id, task_session_id, record) VALUES ".into(),
                3,
            ),
            Self::Handoffs => (
                format!("INSERT INTO handoffs ({}) VALUES ", column_list()),
                COLUMN_COUNT,
            ),
            Self::Events => (
                format!("INSERT INTO handoff_events ({EVENT_ROW}) VALUES "),
                EVENT_ROW.split(',').count(),
            ),
        }
    }
}

impl<'s> Batches<'s> {
    fn new(source: &'s mut dyn ArchiveSource, dialect: ArchiveDialect) -> Self {
        Self {
            source,
            dialect,
            pending: None,
            queued: VecDeque::new(),
            summary: None,
        }
    }

    fn next_item(&mut self) -> StoreResult<ArchiveItem> {
        match self.pending.take() {
            Some(item) => Ok(item),
            None => self.source.next_item(),
        }
    }

    /// The next statement: up to [`BATCH_ROWS`] records of one table, or
    /// the end's; `None` once the end's were given.
    fn next_statement(&mut self) -> StoreResult<Option<OwnedStatement>> {
        if let Some(statement) = self.queued.pop_front() {
            return Ok(Some(statement));
        }
        if self.summary.is_some() {
            return Ok(None);
        }
        let first = match self.next_item()? {
            ArchiveItem::Record(record) => record,
            ArchiveItem::End(summary) => return self.end(summary),
        };
        let table = Table::of(&first);
        let (mut sql, width) = table.insert();
        let mut values = Vec::with_capacity(width * BATCH_ROWS);
        row_values(&first, &mut values)?;
        let mut rows = 1;
        while rows < BATCH_ROWS {
            match self.next_item()? {
                ArchiveItem::Record(record) if Table::of(&record) == table => {
                    row_values(&record, &mut values)?;
                    rows += 1;
                }
                other => {
                    self.pending = Some(other);
                    break;
                }
            }
        }
        for row in 0..rows {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for column in 0..width {
                if column > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("${}", row * width + column + 1));
            }
            sql.push(')');
        }
        Ok(Some(OwnedStatement { sql, values }))
    }

    /// The statements that set the last position given, once the end
    /// line is read.
    fn end(&mut self, summary: ArchiveSummary) -> StoreResult<Option<OwnedStatement>> {
        let last = stored(summary.last_position, "the last position")?;
        self.queued = self
            .dialect
            .set_last_position
            .iter()
            .map(|sql| OwnedStatement {
                sql: (*sql).to_string(),
                values: vec![Value::Int(last)],
            })
            .collect();
        self.summary = Some(summary);
        Ok(self.queued.pop_front())
    }
}

/// `n` as BIGINT (the checks of the file keep every number in range).
fn stored(n: u64, what: &str) -> StoreResult<i64> {
    i64::try_from(n).map_err(|_| StoreError::InvalidInput(format!("{what} {n} is out of range")))
}

/// Appends the values of `record`'s row, in its table's column order.
fn row_values(record: &ArchiveRecord, values: &mut Vec<Value>) -> StoreResult<()> {
    match record {
        ArchiveRecord::Parent(parent) => {
            let reference = parent.value.reference();
            values.extend([
                Value::Text(reference.id_str().to_string()),
                Value::Text(reference.kind().to_string()),
                Value::Text(parent.value.wave_id().as_str().to_string()),
                Value::Int(stored(parent.version, "a version")?),
                Value::Text(to_json(&parent.value)?),
            ]);
        }
        ArchiveRecord::TaskPr(pr) => values.extend([
            Value::Text(pr.id.as_str().to_string()),
            Value::Text(pr.task_session_id.as_str().to_string()),
            Value::Text(to_json(pr)?),
        ]),
        ArchiveRecord::Handoff { handoff, events } => {
            let mut row =
                HandoffRow::from_domain(&handoff.value, stored(handoff.version, "a version")?)?;
            row.events = stored(*events, "an event count")?;
            values.extend(row.values().into_iter().map(Value::of));
        }
        ArchiveRecord::Event(event) => values.extend([
            Value::Int(stored(event.position, "a position")?),
            Value::Text(event.handoff_id.as_str().to_string()),
            Value::Int(stored(event.seq, "a seq")?),
            Value::Int(to_unix_micros(event.at)),
            Value::Text(event.kind.as_str().to_string()),
            Value::OptText(
                event
                    .status_before
                    .map(InteractiveHandoffStatus::as_str)
                    .map(str::to_string),
            ),
            Value::Text(event.status_after.as_str().to_string()),
            Value::Text(event.actor.as_str().to_string()),
            Value::OptText(event.detail.clone()),
            Value::OptText(event.answer.as_ref().map(Answer::to_json)),
        ]),
    }
    Ok(())
}
