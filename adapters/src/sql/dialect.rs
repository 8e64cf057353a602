//! [`Dialect`]: what differs between the SQL backends, asked by the shared
//! repository and implemented in each backend's folder
//! (`sqlite/dialect.rs`, `postgres/dialect.rs`).
//!
//! Each method gives the SQL that differs or does the part of a write or
//! read that differs; the shared code never asks which backend it runs
//! on. A write of a handoff with its history event is one statement on
//! PostgreSQL (a data-modifying CTE) and a two-statement transaction on
//! SQLite; a prune batch one statement or two; the events a watcher may
//! read are every committed one on SQLite, whose writers take turns, and
//! those below the oldest running writer on PostgreSQL.

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_application::ports::PruneCount;
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;
use sqlx::Database;

use crate::changes::ChangeSource;
use crate::sql::archive::ArchiveDialect;
use crate::sql::columns::HandoffRow;
use crate::sql::engine::{Driver, Engine, EngineError, Param};
use crate::sql::statements::{EVENT_PARAMS, INSERT_HANDOFF, SWAP_HANDOFF};

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

/// Which row a [`HandoffWrite`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// A new handoff ([`INSERT_HANDOFF`]: every column, then the parent's
    /// id and version).
    Insert,
    /// A compare-and-swap of a stored one ([`SWAP_HANDOFF`]).
    Swap,
}

impl WriteKind {
    /// The statement that writes the row alone.
    pub(crate) fn statement(self) -> &'static str {
        match self {
            Self::Insert => &INSERT_HANDOFF,
            Self::Swap => &SWAP_HANDOFF,
        }
    }
}

/// A write of one handoff's row with its history event (C15).
#[derive(Debug)]
pub(crate) struct HandoffWrite<'a> {
    /// Which row the write is.
    pub kind: WriteKind,
    /// The handoff as written.
    pub handoff: &'a InteractiveHandoff,
    /// The parameters of [`WriteKind::statement`].
    pub params: &'a [Param<'a>],
    /// The event's own values, after the row's
    /// ([`event_values`](crate::sql::events::event_values)).
    pub event: [Param<'a>; EVENT_PARAMS],
}
