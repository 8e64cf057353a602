//! Export and import of a whole registry (contract C17): the record type,
//! the file format, its checks, and the port a backend implements.
//!
//! # The file
//!
//! An export is UTF-8 JSON, one value per line (JSON lines), `\n` after
//! every line:
//!
//! ```text
//! {"format":"lf-handoff-export","version":2}
//! {"parent":{"version":1,"record":{"kind":"wave","value":{...}}}}
//! {"task_pr":{"id":"pr_...",...}}
//! {"handoff":{"version":3,"events":3,"record":{"id":"ih_...",...}}}
//! {"event":{"position":1,"handoff_id":"ih_...","seq":1,...}}
//! {"end":{"parents":3,"task_prs":1,"handoffs":1,"events":3,"last_position":3}}
//! ```
//!
//! - **The header** names the format and its version, and nothing else: no
//!   backend, host or time, so two stores holding equal registries export
//!   byte-identical files, whatever their backends.
//! - **The records**, in one order that depends only on the registry:
//!   parents by id, task PRs by id, handoffs by `created_at` then id, events
//!   by position (ids compared as bytes). Every field is kept, with what a
//!   round trip needs to be exact: the compare-and-swap `version` of each
//!   parent and handoff, each handoff's event counter (`events`, the `seq`
//!   of its last event), and each event's `position` and `seq`. A record is
//!   the domain's own JSON form (`Parent`, `TaskPr`, `InteractiveHandoff`,
//!   `HandoffEvent`).
//! - **The end line** counts each kind of record and carries the store's
//!   last event position given (`last_position`, at least the largest
//!   position in the file, larger when the newest events were removed), so
//!   an imported store never gives a position twice. A file without it was
//!   cut short and is refused.
//!
//! # Checks
//!
//! [`ArchiveReader`] refuses, as `InvalidInput` naming the line number: a
//! line that is not JSON or not a record, a record out of order or
//! duplicated, a handoff that fails `validate()` or breaks I6 or C12 within
//! the file, a handoff whose parent or a PR whose task is not in the file
//! before it, an event whose handoff does not precede it or whose `seq` is
//! not the next one, counts that disagree with the end line, anything
//! after the end line, and a file without one. A header of a newer format
//! version is refused with a message that says to upgrade. [`ArchiveWriter`]
//! runs the same checks on what a store exports, so an export that would
//! not import fails instead of being written.
//!
//! # The port
//!
//! A backend implements [`Archive`]: `export` streams its registry to an
//! [`ArchiveSink`] from one consistent snapshot, `import` loads an
//! [`ArchiveSource`] into an empty store, atomically. `Store::export`
//! and `Store::import` join the two.

use std::fmt::{self, Debug};

use async_trait::async_trait;
use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoff};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult};
use crate::ports::Versioned;

mod checks;
mod file;

pub use file::{ArchiveReader, ArchiveWriter};

/// The header's `format`: what makes a file an lf-handoff export.
pub const ARCHIVE_FORMAT: &str = "lf-handoff-export";

/// The format version this build writes, and the newest it reads.
///
/// Version 2 adds the fields of C26: a handoff's `choices`, `form`,
/// `on_expiry` and `answer`, an event's `answer`. A version-1 file (the
/// builds before answers) reads with none of them. The version was raised
/// because a build before answers ignores fields it does not know: it
/// would import a file with answers and lose them, where it refuses a
/// version-2 file as newer.
pub const ARCHIVE_VERSION: u32 = 2;

/// One record of an export, in file order: the parents, the task PRs, the
/// handoffs, then the events.
// Records stream one at a time, so a `Box` would cost an allocation per
// record and save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveRecord {
    /// A wave, project session or task session, with its version.
    Parent(Versioned<Parent>),
    /// A task PR (PRs never change, so they have no version).
    TaskPr(TaskPr),
    /// A handoff with its version and its event counter: the `seq` of its
    /// last event (0 for a handoff stored by a release without history
    /// that has not changed since).
    Handoff {
        /// The handoff and its version.
        handoff: Versioned<InteractiveHandoff>,
        /// Its event counter.
        events: u64,
    },
    /// One history event, with its position and seq.
    Event(HandoffEvent),
}

/// What an export holds: the count of each kind of record, and the store's
/// last event position given (0 when it never gave one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSummary {
    /// Waves, project sessions and task sessions.
    pub parents: u64,
    /// Task PRs.
    pub task_prs: u64,
    /// Handoffs.
    pub handoffs: u64,
    /// History events.
    pub events: u64,
    /// The last event position the store gave: an imported store gives the
    /// next one after it.
    pub last_position: u64,
}

impl ArchiveSummary {
    /// How many records: parents, PRs, handoffs and events.
    pub fn records(&self) -> u64 {
        self.parents
            .saturating_add(self.task_prs)
            .saturating_add(self.handoffs)
            .saturating_add(self.events)
    }
}

impl fmt::Display for ArchiveSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |n: u64, one: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {one}s")
            }
        };
        write!(
            f,
            "{}, {}, {}, {}",
            count(self.parents, "parent"),
            count(self.task_prs, "task PR"),
            count(self.handoffs, "handoff"),
            count(self.events, "event")
        )
    }
}

/// What [`ArchiveSource::next_item`] gives: a record, or the end of the
/// file with what it holds (after which there is nothing more).
#[allow(clippy::large_enum_variant)] // As ArchiveRecord: one at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveItem {
    /// The next record, checked.
    Record(ArchiveRecord),
    /// The end line, checked against every record before it.
    End(ArchiveSummary),
}

/// Where [`Archive::export`] writes: records in file order, then the end.
pub trait ArchiveSink: Send {
    /// The next record, in file order.
    ///
    /// # Errors
    /// `InvalidInput` when the record breaks the file's rules (out of
    /// order, an invalid handoff, ...); `Unavailable` when it cannot be
    /// written. The export stops at the first error.
    fn record(&mut self, record: &ArchiveRecord) -> StoreResult<()>;

    /// The end of the export: `last_position` is the last event position
    /// the store gave.
    ///
    /// # Errors
    /// As [`record`](Self::record).
    fn end(&mut self, last_position: u64) -> StoreResult<ArchiveSummary>;
}

/// Where [`Archive::import`] reads from.
pub trait ArchiveSource: Send {
    /// The next record or the end, already checked.
    ///
    /// # Errors
    /// `InvalidInput` for a damaged line, naming its number, and for a file
    /// of a newer format; `Unavailable` when the input cannot be read.
    fn next_item(&mut self) -> StoreResult<ArchiveItem>;
}

/// Export and import of a whole registry (contract C17), implemented by
/// each backend beside its two storage ports.
#[async_trait]
pub trait Archive: Debug + Send + Sync + 'static {
    /// Writes every record of the store to `sink`, in file order (parents
    /// by id, task PRs by id, handoffs by `created_at` then id, events by
    /// position; ids compared as bytes), then calls [`ArchiveSink::end`]
    /// with the last event position given, and returns what it returned.
    ///
    /// The records MUST come from one consistent snapshot even while other
    /// handles or processes write: every event's handoff and every
    /// handoff's parent is in it, and each handoff's events are all those
    /// its counter says. Records are streamed, not gathered in memory.
    ///
    /// # Errors
    /// The sink's error as it is; `Unavailable` on engine failure or a
    /// record that is unreadable.
    async fn export(&self, sink: &mut dyn ArchiveSink) -> StoreResult<ArchiveSummary>;

    /// Loads every record of `source` into this store, which MUST be
    /// empty, atomically: afterwards the store holds exactly the records of
    /// the source, with their versions, event counters, positions and
    /// seqs, every index as the store's own writes would have made it, and
    /// gives the position after the source's `last_position` next; or, on
    /// any error, it is as it was. Returns the source's summary.
    ///
    /// # Errors
    /// MUST return `Conflict` of kind [`NotEmpty`](crate::ConflictKind::NotEmpty)
    /// when the store holds any record, writing nothing; the source's error
    /// as it is; `Unavailable` on engine failure.
    async fn import(&self, source: &mut dyn ArchiveSource) -> StoreResult<ArchiveSummary>;
}

/// The error [`Archive::import`] returns for a store that is not empty.
pub fn not_empty(store: &dyn fmt::Display) -> StoreError {
    StoreError::conflict(
        crate::ConflictKind::NotEmpty,
        format!(
            "{store} is not empty: an import loads a whole registry and goes only into an \
             empty store. Nothing was imported; import into a new store"
        ),
    )
}

/// A progress report: called with the counts so far after each record.
pub type Progress<'a> = Box<dyn FnMut(&ArchiveSummary) + Send + 'a>;

#[cfg(test)]
pub(crate) mod tests;
