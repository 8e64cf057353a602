//! The sled backend: an embedded key-value store for one process on one
//! machine (`sled:///abs/path/dir`).
//!
//! # Process model
//!
//! sled allows **one process** per store directory: it holds an exclusive
//! lock on its log while open. Inside that process, every `open_store` on
//! the same directory shares one `sled::Db` (a process-wide registry keyed
//! by the canonical path, holding weak references), so several store
//! handles race safely. A second process gets `Unavailable`: "... is locked
//! by another process: sled allows only one process ...", which suggests
//! SQLite or PostgreSQL to share a store between processes. An open waits
//! up to one second for the lock first, so reopening right after the last
//! handle dropped works.
//!
//! A handle holds the store while it is open ([`SledHold::WhileOpen`]), or
//! only while its calls run and [`SLED_LINGER`] after
//! ([`SledHold::DuringCalls`], `hold=calls`, what the command line uses:
//! see `hold`), so that processes can take turns. Every durable write
//! touches the store's signal file, which wakes the watchers and waiters
//! of processes that hold the store during calls (see `watch`).
//!
//! # Files
//!
//! ```text
//! dir/                 mode 0700 when lf-handoff creates it
//!   lf-handoff-store   marker: "lf-handoff sled store\nformat 4\n"
//!   lf-handoff-signal  one byte, written after every durable write (no data)
//!   conf, db, snap.*   sled's settings, log and snapshots
//!   blobs/             sled's large values (unused: records are small)
//! ```
//!
//! The marker makes a directory an lf-handoff store and names its store
//! format, the newest record format it may hold. It is written before sled
//! creates anything; a build refuses a marker newer than its own format
//! before sled opens the directory.
//!
//! # Upgrading a store of an older format
//!
//! Release 0.1.0 wrote store format 1: marker `format 1`, records of format
//! 1 (handoffs without a `step`). Builds with steps (C12) wrote format 2
//! (handoffs without a deadline, and no history). Release 0.3.0 and the
//! builds after it wrote format 3 (handoffs and events without answers).
//! This build writes format 4 (C26: a handoff's `choices`, `form`,
//! `on_expiry` and `answer`, an event's `answer`) and opens a store of
//! format 1, 2 or 3 by upgrading it in place, the same way for each
//! (format 4 adds no tree; the index trees are filled again as below):
//!
//! - Once sled's lock is held and before the marker changes, the index
//!   trees of C17's lists and prune (`handoffs_by_status`,
//!   `handoffs_by_home`, `handoffs_prunable`) are filled from every record
//!   (`repository::fill_list_indexes`) and made durable. No build of an
//!   older format writes them, so they are cleared first: a fill that a
//!   crash cut short (the marker still old) is redone from scratch by the
//!   next open, exact even if an older build changed records in between.
//!   A record that cannot be read gets no entries; it is refused when read,
//!   as before. The fill reads every record once, so it takes time in
//!   proportion to the store (the other steps of the upgrade do not).
//!   A format-3 store written by a development build from before these
//!   trees (never released) is not refilled: it lists nothing by status or
//!   home and prunes nothing until its records are written again.
//!
//! - The marker is read again and rewritten to `format 4` (temporary
//!   file, `fsync`, rename, `fsync` of the directory) right after sled has
//!   opened the store, so sled's lock is held and the marker of a store
//!   another process holds is never touched; deciding again under the lock
//!   also refuses a store that another build made newer while this one
//!   waited for the lock. Until the marker says 4 no format-4 record (and,
//!   from a format 1 or 2 store, no event) is written. An older binary that read the old marker just
//!   before and waits for the lock (it waits up to a second) may still
//!   open the upgraded store: it then reports format-3 records as damaged
//!   and writes only records it understands, losing nothing (though its
//!   changes append no event and its new handoffs have no `opened` one,
//!   and it keeps none of the list and prune trees in step: a handoff it
//!   changes may be missing from a status list, and one whose wake it
//!   claims is not pruned, until this build writes it again; a status
//!   entry it leaves behind is skipped when read and removed by a prune);
//!   any later open by it refuses the store as newer (C11).
//! - Records are upgraded lazily, not at open: every record of format 1 to
//!   4 is read (a format-1 handoff has no step, a format-1 or format-2
//!   one no deadline, one of format 1 to 3 no answer), and a record moves
//!   to format 4 when it is next
//!   written, keeping its version. So the upgrade is the fill and one
//!   rename, and a `kill -9` at any point leaves the old marker
//!   (the next open fills the trees and upgrades) or the new one (it finds
//!   the store upgraded). An old handoff needs no `handoff_steps` or `handoffs_due`
//!   entry (it has no step and no deadline), and has no history: its first
//!   change after the upgrade is its event 1. The cost is that later builds
//!   must keep reading formats 1 and 2, or rewrite such records when they
//!   upgrade.
//!
//! # Key layout
//!
//! One sled `Db` per store directory, with these trees (keys are bytes,
//! compared lexicographically; numbers are big-endian, so byte order is
//! sort order):
//!
//! | tree | key | value |
//! | --- | --- | --- |
//! | `handoffs` | handoff id (`ih_<uuid>`) | handoff record |
//! | `handoffs_by_created` | `created_at` ++ id | empty |
//! | `handoffs_by_parent` | parent reference ++ `0x00` ++ `created_at` ++ id | empty |
//! | `handoffs_active` | `created_at` ++ id, only while non-terminal | empty |
//! | `active_slots` | parent reference (`task:ts_<uuid>`) | id of its non-terminal handoff |
//! | `handoff_steps` | parent reference ++ `0x00` ++ step | id of the parent's handoff for that step |
//! | `handoffs_due` | `expires_at` ++ id, only while non-terminal with a deadline | empty |
//! | `handoffs_by_status` | status name ++ `0x00` ++ `created_at` ++ id | empty |
//! | `handoffs_by_home` | home (canonical text) ++ `0x00` ++ `created_at` ++ id | empty |
//! | `handoffs_prunable` | `terminal_at` ++ id, only once the wake is claimed | empty |
//! | `handoff_events` | position (8 bytes) | history event (C15) |
//! | `handoff_history` | id ++ `0x00` ++ seq (8 bytes) | position (8 bytes) of that event |
//! | `handoff_counters` | `position` | the last position given (8 bytes) |
//! | `handoff_counters` | `seq` ++ `0x00` ++ id | the handoff's last seq (8 bytes) |
//! | `handoff_counters` | `import`, only while an import loads the store | `in progress` |
//! | `parents` | parent reference | parent record |
//! | `task_prs` | task PR id (`pr_<uuid>`) | task PR record |
//!
//! `created_at` and `expires_at` are 8 bytes: microseconds since the Unix
//! epoch with the sign bit flipped, big-endian, so keys sort by time, then
//! by id (ids are fixed length lowercase text); positions and seqs are
//! plain big-endian `u64`s. A step (C12) holds no control character, so
//! never `0x00`, and a `handoff_steps` key names exactly one parent and
//! step. A record is a format byte, an 8-byte big-endian compare-and-swap
//! version and the record's JSON; an event is a format byte and its JSON
//! (see `record.rs`).
//!
//! - `list` reads only what it returns: all handoffs walk
//!   `handoffs_by_created`; one parent's walk its prefix of
//!   `handoffs_by_parent`; the active filter walks `handoffs_active`; one
//!   parent's active handoff is its `active_slots` entry; a status filter
//!   walks that status's prefix of `handoffs_by_status` (several statuses:
//!   one walk each, merged in key order), a home filter its prefix of
//!   `handoffs_by_home` (C17); a deadline bound walks `handoffs_due` up to
//!   it and sorts what passes into list order, keeping at most twice the
//!   limit. One tree serves a list (parent, then deadline, then active,
//!   then statuses, then home, then creation); the other filters are
//!   checked on the records it names. `created_before` and a page's start
//!   (`after`, whose record is read for its `created_at`) bound the walk;
//!   `limit` ends it. Newest first, the same walks run backwards (merged
//!   greatest key first), from the lower of the page's start and
//!   `created_before`. `count_prunable` and a prune batch walk
//!   `handoffs_prunable` up to the cutoff. `due(now)` walks
//!   `handoffs_due` up to `now`, earliest deadline first, and reads each
//!   record it names, skipping one finished or extended meanwhile;
//!   `history(id)` walks the handoff's prefix of `handoff_history` and
//!   reads each event it names.
//! - **Invariant I6 is a key, and so is C12.** Opening writes the record,
//!   its index entries, the parent's `active_slots` entry and, for a
//!   handoff with a step, its `handoff_steps` entry in one multi-tree
//!   transaction that first checks the parent's record is still at the
//!   expected version, the step's key is absent (else `StepTaken`) and the
//!   slot is free. The `handoff_steps` entry is never moved, and removed only
//!   with its handoff by a prune (C17), so a step is opened once until
//!   then; `open` finds the step's handoff, in any status, by reading that
//!   key. A transition is one transaction that
//!   checks the record's bytes are still those it read and decided on
//!   (versions only grow, so equal bytes are the same version), writes the
//!   new record, moves the index entries that change (finishing frees the
//!   slot and drops the `handoffs_due` entry; extending moves it) and
//!   appends the event. sled runs transactions one at a time (a
//!   process-wide lock held exclusively for the microseconds the
//!   transaction body runs; the sync comes after it is released), so a
//!   lost race is seen by the engine, never through a read-then-write gap.
//!   Every change is a transaction, even one whose index entries stay
//!   (attach, claim): a compare-and-swap of the record alone could not
//!   append its event.
//! - **History is written with its change (C15).** The insert appends the
//!   `opened` event and every stored transition the event
//!   `recorded_change` names, by the caller's actor, in the same
//!   transaction; a replay writes nothing and so appends nothing. The
//!   transaction reads the `position` counter and the handoff's seq counter,
//!   raises both by one and writes the event under the new position, its
//!   `handoff_history` entry and the counters. Transactions run one at a
//!   time, so positions follow commit order; counters only grow and an
//!   aborted transaction writes nothing, so a position or seq is never
//!   given twice and a handoff's seqs have no gap. A counter behind a stored
//!   event is refused as damage, never overwritten.
//! - A list walks its index, then reads each record it names: a handoff that
//!   changes in between is returned as it is now, and the active and status
//!   filters drop one that left them meanwhile. A handoff pruned in between
//!   is skipped: its record and its entries go in one transaction, so a
//!   missing record whose entry is gone too was pruned, while an entry left
//!   without its record is damage.
//! - **A prune batch is one transaction (C17)** over every tree but
//!   `parents` and `task_prs`: for each handoff the walk of
//!   `handoffs_prunable` chose, it reads the record again, refuses (as
//!   damage) one that is not finished with its wake claimed, and removes
//!   the record, every index entry, its `handoff_steps` entry, its events
//!   and their `handoff_history` entries (seq 1 up to its counter, without
//!   a gap) and its seq counter. The position counter stays, so a position
//!   is never given twice. A concurrent write of that handoff (a take-over)
//!   commits before or after the whole batch, never in between.
//!
//! # Durability (C8) and what it costs
//!
//! Every write returns only after sled has written its log (`Db::flush`) and
//! the log file has been `fdatasync`ed: sled's own flush on Linux ends with
//! `sync_file_range`, which does not flush the drive's write cache, so the
//! explicit `fdatasync` is what makes an acknowledged write survive power
//! loss as well as `kill -9`. The cost is one log write and one
//! `fdatasync` per acknowledged write (SQLite's `synchronous=FULL` pays the
//! same per commit), and racing writers are not batched into one sync. On
//! the development VM, 200 lifecycles of five writes each (create a wave,
//! open, attach, finish, claim) took 2-3 ms per lifecycle with syncing
//! against about 1 ms with none (SQLite: about 9 ms); on a disk that honours
//! cache flushes, expect every write to wait for one device flush
//! (typically 0.1-10 ms). While a write of this process is between its
//! first change and its sync, reads first write out sled's log buffer (no
//! sync), so they never report a write that exists only in memory; with no
//! write in flight they leave the buffer alone (it can then hold only
//! sled's own node reorganisation, see `Shared::settle_reads`). Opening
//! syncs the log only for a new store; opening an existing one syncs just
//! the directory, since what sled writes then is its own reorganisation,
//! which the next write syncs with it (see `handle::SyncAtOpen`).
//!
//! sled is synchronous: every call that writes, walks an index or may
//! open the store runs on tokio's blocking pool (`spawn_blocking`), never
//! on the async executor's threads. A hop there and back costs tens of
//! microseconds on an idle machine, so each port call is one hop: a
//! transition's load, decision and write run in one. A handoff's load on a
//! store kept open (what `get` reads) while no write is in flight is a
//! lookup in sled's cache and runs on the caller's thread, with no hop
//! (`hold::Hold::get`).
//!
//! # Refusing what is not ours (C11), and recovering from kills
//!
//! sled repairs what it opens (it rewrites a missing settings file and
//! truncates a log it cannot read as if a crash had torn it), so the
//! directory is checked with plain reads before sled sees it, and a refused
//! store is left byte for byte unchanged: a path that is not a directory; a
//! non-empty directory without the `lf-handoff-store` marker; a marker
//! naming a newer store format; a log with no valid segment (garbage); a
//! damaged sled settings file; a sled snapshot whose checksum fails; a log
//! with damage inside what sled reads when it opens (a message whose
//! checksum fails, garbage followed by more messages; see `log_audit`). A
//! record whose format byte is unknown or
//! newer, or that fails `validate()`, and an index entry whose record is
//! missing or belongs elsewhere, are refused with `Unavailable` when read. A
//! missing directory is created with mode 0700 (an existing one keeps its
//! mode), and the files sled creates inside it are protected by it.
//!
//! What a killed writer leaves opens, with every acknowledged write: a log
//! whose tail a kill tore (sled recovers it), the unfinished
//! `snap.<lsn>.generating` of a killed open (removed, under the store's
//! lock, before sled reads it) and the settings file of a killed creation
//! (completed). `recovery` lists what sled writes on open and why that is
//! all a kill can break.
//!
//! What cannot be told from a crash: a log cut short, or damaged so that it
//! seems to end early (garbage over its last messages), is what a torn
//! write looks like, and sled truncates it on open like any crash
//! recovery; data older than the newest snapshot is checked only when it is
//! read. Keep backups of a sled store you care about, or use SQLite.

mod archive;
mod config;
mod deliveries;
mod error;
mod files;
mod handle;
mod hold;
mod indexes;
mod keys;
mod log_audit;
mod record;
mod recovery;
mod registry;
mod repository;
mod revocations;
mod trees;

use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};

pub use config::{SledConfig, SledHold, DEFAULT_SLED_CACHE, SLED_LINGER};
use handle::Shared;

/// Both storage ports on one sled `Db`, shared with this process's other
/// handles on the store and held as [`SledHold`] says.
#[derive(Debug)]
pub(crate) struct SledStore {
    hold: hold::Hold,
    /// The change signal of watchers and waiters in this process (C16).
    feed: crate::changes::ChangeFeed,
}

impl SledStore {
    /// Opens (creating when missing) the store in `config.path`, sharing
    /// the `Db` of any handle this process already has on it.
    ///
    /// # Errors
    /// `Unavailable` when the directory is refused, locked by another
    /// process, or sled fails; nothing was changed.
    pub(crate) async fn open(config: &SledConfig) -> StoreResult<Self> {
        let hold = hold::Hold::open(config).await?;
        let source = match &hold {
            hold::Hold::Kept(shared) => {
                watch::Subscription::source(shared.trees.events.clone(), shared.dir.clone())
            }
            hold::Hold::Lent(_) => watch::SignalFile::source(hold.dir().to_owned()),
        };
        let feed = crate::changes::ChangeFeed::new(source);
        Ok(Self { hold, feed })
    }

    /// Runs `operation` on tokio's blocking pool: sled calls and syncs block.
    async fn run<T, F>(&self, operation: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Shared) -> StoreResult<T> + Send + 'static,
    {
        self.hold.run(operation).await
    }

    /// The open store of a handle that keeps it open, for tests.
    #[cfg(test)]
    fn shared(&self) -> std::sync::Arc<Shared> {
        match &self.hold {
            hold::Hold::Kept(shared) => shared.clone(),
            hold::Hold::Lent(_) => panic!("a store held during calls has no open store to show"),
        }
    }
}

impl Shared {
    /// Maps a sled error of this store.
    fn engine(&self, error: ::sled::Error) -> StoreError {
        error::engine(&self.dir, error)
    }
}

async fn blocking<T, F>(operation: F) -> StoreResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> StoreResult<T> + Send + 'static,
{
    tokio::task::spawn_blocking(operation).await.map_err(|e| {
        StoreError::unavailable_because(
            UnavailableKind::Other,
            format!("a sled call failed: {e}"),
            e,
        )
    })?
}

#[cfg(test)]
mod hold_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod tests;
mod watch;
