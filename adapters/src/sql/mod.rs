//! The repository shared by the SQL backends (SQLite and PostgreSQL): what
//! both run alike. What differs is each backend's [`Dialect`], in its own
//! folder; the code here asks it and never asks which backend it is.
//!
//! [`SqlStore`] implements the storage ports once, over the [`Engine`] of
//! a dialect: run a query and decode rows, execute a statement or a batch
//! in one transaction, each error already mapped; nothing about sqlx leaks
//! past it.
//!
//! - `engine.rs`: the generic [`Engine`], its errors, and the [`Dialect`]
//!   trait (the two name each other); `driver.rs`: a statement's
//!   parameters and what the engine needs of a sqlx database.
//! - `columns.rs`: the table of the handoff's columns, from which every
//!   column list, bind list and row decoding derive.
//! - `row.rs`: a handoff's conversion to and from its column form;
//!   `events.rs`: a history event's.
//! - `statements.rs`: the SQL text both backends run; `list.rs`: the
//!   statements of a list and of the due handoffs, which the dialect
//!   shapes.
//! - `handoffs.rs`, `parents.rs`: the two ports; `archive.rs`: export and
//!   import (C17), the third; `watch.rs`: the event log (C16);
//!   `deliveries.rs`: the notifiers' delivery cursors (C23).
//!   `revocations.rs`: the service's revoked sign-ins (C29).
//! - `connections.rs`: the engines' connections; `schema.rs`: the
//!   migrations.
//!
//! **Races are settled by the engine.** A transition is one `UPDATE ...
//! WHERE id = $1 AND version = $2` that writes the whole record the domain
//! returned; opening is one `INSERT ... SELECT ... WHERE EXISTS (parent at
//! version)`, and the partial unique index `handoffs_one_active_per_parent`
//! refuses a second active handoff for a parent even from another process,
//! as `handoffs_one_per_parent_step` refuses a second handoff for one
//! parent and step (C12), ever. Each is a single atomic statement, so there
//! is no read-then-write gap to lose.
//!
//! **History rides with the change (C15).** Every write that changes a
//! handoff also appends its event in the same atomic write
//! ([`Dialect::write_with_event`]). The event's `seq` is the handoff's
//! `events` counter, which the same write increments, so a handoff's
//! events are numbered 1, 2, 3, ... without gaps.
//!
//! **Lists and prunes read what they return (C17).** A list is one
//! statement built from its filters (`list::list_statement`), served
//! by one index (named where the dialect's planner needs it); a prune
//! batch removes at most N handoffs finished before the cutoff with their
//! wake claimed, found through the partial index `handoffs_prunable`, with
//! their events in the same atomic write ([`Dialect::prune_batch`]).

pub(crate) mod archive;
pub(crate) mod columns;
pub(crate) mod connections;
mod deliveries;
pub(crate) mod driver;
pub(crate) mod engine;
pub(crate) mod events;
mod handoffs;
mod list;
mod parents;
mod revocations;
mod row;
pub(crate) mod schema;
pub(crate) mod statements;
// The shared code's tests run each scenario on both SQL engines.
#[cfg(test)]
#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod tests;
mod watch;

use lf_handoff_application::ports::Versioned;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;

pub(crate) use engine::{Dialect, Engine, EngineError, RowsAffected};
pub(crate) use statements::{HandoffWrite, WriteKind};

use columns::HandoffRow;

/// The storage ports over the [`Engine`] of any [`Dialect`].
#[derive(Debug)]
pub(crate) struct SqlStore<D: Dialect> {
    engine: Engine<D>,
    /// The handoffs this handle wrote last, with the versions it wrote.
    written: Written,
}

impl<D: Dialect> SqlStore<D> {
    pub(crate) fn new(engine: Engine<D>) -> Self {
        Self {
            engine,
            written: Written::default(),
        }
    }
}

/// The records a store handle wrote last, by id, with the version each
/// write gave them: a transition of one of them decides on it and writes
/// with that version, so a record nobody else changed since costs its
/// compare-and-swap alone, without the read before it (one round trip to
/// a server instead of two). A record changed by anyone else fails the
/// compare-and-swap and is read as usual; nothing stale is ever stored or
/// returned. At most [`WRITTEN_CAPACITY`] records are kept; the map is
/// emptied when full.
#[derive(Debug, Default)]
pub(crate) struct Written {
    records: std::sync::Mutex<
        std::collections::HashMap<
            lf_handoff_domain::id::InteractiveHandoffId,
            Versioned<InteractiveHandoff>,
        >,
    >,
}

/// How many records [`Written`] keeps at most.
const WRITTEN_CAPACITY: usize = 1024;

impl Written {
    fn records(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<
            lf_handoff_domain::id::InteractiveHandoffId,
            Versioned<InteractiveHandoff>,
        >,
    > {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn get(
        &self,
        id: &lf_handoff_domain::id::InteractiveHandoffId,
    ) -> Option<Versioned<InteractiveHandoff>> {
        self.records().get(id).cloned()
    }

    pub(crate) fn remember(&self, handoff: &InteractiveHandoff, version: u64) {
        let mut records = self.records();
        if records.len() >= WRITTEN_CAPACITY && !records.contains_key(&handoff.id) {
            records.clear();
        }
        records.insert(
            handoff.id.clone(),
            Versioned {
                value: handoff.clone(),
                version,
            },
        );
    }

    pub(crate) fn forget(&self, id: &lf_handoff_domain::id::InteractiveHandoffId) {
        self.records().remove(id);
    }
}

/// The `StoreError` of an engine error where no unique violation is
/// expected.
fn failed(error: EngineError) -> StoreError {
    match error {
        EngineError::Failed(error) => error,
        EngineError::Unique { detail, .. } => {
            StoreError::damaged(format!("unexpected unique constraint violation: {detail}"))
        }
    }
}

/// The handoff a row holds, with its version, checked as `into_domain` does.
fn versioned_handoff(row: HandoffRow<'_>) -> StoreResult<Versioned<InteractiveHandoff>> {
    let version = to_version(row.version)?;
    Ok(Versioned {
        value: row.into_domain()?,
        version,
    })
}

fn to_version(version: i64) -> StoreResult<u64> {
    u64::try_from(version)
        .map_err(|_| StoreError::damaged(format!("stored version {version} is negative")))
}

fn to_stored_version(version: u64) -> StoreResult<i64> {
    i64::try_from(version).map_err(|_| {
        StoreError::unavailable(
            UnavailableKind::Other,
            format!("version {version} does not fit storage"),
        )
    })
}
