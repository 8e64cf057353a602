//! Export and import (C17) on sled: [`Archive`] for [`SledStore`].
//!
//! **Export reads while no write runs.** sled has no snapshot across
//! trees, and every writer of a store is in this process (sled serves
//! one). Every write holds the store's gate shared while it runs
//! (`Shared::write`, through which every transaction commits); an export
//! holds it exclusively for its whole read (`Shared::quiet`), so it waits
//! for the writes in flight to end, and writes that start meanwhile wait
//! for it. What it reads is one state of the store. Reads are not held up;
//! writes of this process are, for as long as the export takes (its
//! records are passed to the caller through a small bounded channel, so a
//! slow output slows the export and holds the writers longer).
//!
//! **Import loads in steps under a marker.** One sled transaction cannot
//! hold a large registry, so an import holds the gate exclusively, checks
//! that every tree is empty, writes the counter `import` (and syncs it),
//! then writes the records, their index entries and counters as they come,
//! exactly as the store's own writes leave them (each handoff's
//! `handoffs_by_created`, `handoffs_by_parent`, and while active
//! `handoffs_active` and its parent's slot, `handoffs_due` while active
//! with a deadline, `handoff_steps` with a step; each event and its
//! `handoff_history` entry; the seq counter of each handoff with events
//! and the position counter), then removes the marker and syncs. If
//! anything fails before that, including a bad line in the file, it
//! empties every tree again (the store was empty), marker last. A store
//! that still holds the marker, because the process died during an import
//! or the clean-up failed, is refused when opened (`Unavailable`,
//! damaged) with a message saying to delete it and import again. Other
//! handles of this process that were open before the import see its
//! records appear as they are loaded.

use async_trait::async_trait;
use lf_handoff_application::archive::{
    not_empty, Archive, ArchiveItem, ArchiveRecord, ArchiveSink, ArchiveSource, ArchiveSummary,
};
use lf_handoff_application::ports::Versioned;
use lf_handoff_application::{ConflictKind, StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use tokio::sync::mpsc;

use super::handle::Shared;
use super::indexes::IndexKeys;
use super::{keys, record, SledStore};

/// How many records wait between the sled thread and the caller.
const CHANNEL: usize = 256;

/// What the export's sled thread hands the caller.
#[allow(clippy::large_enum_variant)] // Rows stream one at a time.
enum Exported {
    Record(ArchiveRecord),
    End(u64),
}

#[async_trait]
impl Archive for SledStore {
    async fn export(&self, sink: &mut dyn ArchiveSink) -> StoreResult<ArchiveSummary> {
        let (sender, mut receiver) = mpsc::channel(CHANNEL);
        let lease = self.hold.lease().await?;
        let reader = tokio::task::spawn_blocking(move || read_all(&lease.shared, &sender));
        let mut outcome = Ok(None);
        while let Some(item) = receiver.recv().await {
            match item {
                Exported::Record(record) => {
                    if let Err(error) = sink.record(&record) {
                        outcome = Err(error);
                        break;
                    }
                }
                Exported::End(last_position) => outcome = Ok(Some(last_position)),
            }
        }
        // A reader still sending stops at its next record.
        drop(receiver);
        let read = joined(reader.await);
        match (outcome?, read) {
            (Some(last_position), Ok(())) => sink.end(last_position),
            (_, Err(error)) => Err(error),
            (None, Ok(())) => Err(StoreError::unavailable(
                UnavailableKind::Other,
                "the export's read ended without its end",
            )),
        }
    }

    async fn import(&self, source: &mut dyn ArchiveSource) -> StoreResult<ArchiveSummary> {
        let (sender, receiver) = mpsc::channel(CHANNEL);
        let lease = self.hold.lease().await?;
        let writer = tokio::task::spawn_blocking(move || load_all(&lease.shared, receiver));
        loop {
            let item = match source.next_item() {
                Ok(item) => item,
                Err(error) => {
                    // The writer sees the channel close before the end and
                    // empties the store again. A store that was not empty
                    // is the first refusal, as on the other backends, which
                    // look before they read the input.
                    drop(sender);
                    return match joined(writer.await) {
                        Err(refused) if refused.conflict_kind() == Some(ConflictKind::NotEmpty) => {
                            Err(refused)
                        }
                        _ => Err(error),
                    };
                }
            };
            let end = matches!(item, ArchiveItem::End(_));
            // A writer that stopped (a store that is not empty, a failure)
            // says why below.
            if sender.send(item).await.is_err() || end {
                break;
            }
        }
        drop(sender);
        joined(writer.await)
    }
}

/// The result of a sled thread, or why it did not finish.
fn joined<T>(result: Result<StoreResult<T>, tokio::task::JoinError>) -> StoreResult<T> {
    result.map_err(|e| {
        StoreError::unavailable_because(
            UnavailableKind::Other,
            format!("a sled call failed: {e}"),
            e,
        )
    })?
}

/// The error of a thread whose caller stopped listening.
fn stopped() -> StoreError {
    StoreError::unavailable(UnavailableKind::Other, "the export was stopped")
}

/// Reads every record in file order, with no write running, and sends
/// each one, then the last position given.
fn read_all(shared: &Shared, out: &mpsc::Sender<Exported>) -> StoreResult<()> {
    let _quiet = shared.quiet();
    let send = |item| out.blocking_send(item).map_err(|_| stopped());
    let engine = |e| shared.engine(e);
    // Parent keys are references (`project:ps_...`, `task:ts_...`,
    // `wave:wv_...`): the kinds sort as their id prefixes do, so this is
    // the order by id.
    for entry in shared.trees.parents.iter() {
        let (key, bytes) = entry.map_err(engine)?;
        let reference = std::str::from_utf8(&key)
            .ok()
            .and_then(|text| InteractiveHandoffParent::parse(text).ok())
            .ok_or_else(|| malformed(keys::PARENTS, &key))?;
        send(Exported::Record(ArchiveRecord::Parent(record::parent(
            &reference, &bytes,
        )?)))?;
    }
    for entry in shared.trees.task_prs.iter() {
        let (key, bytes) = entry.map_err(engine)?;
        let id = std::str::from_utf8(&key).map_err(|_| malformed(keys::TASK_PRS, &key))?;
        send(Exported::Record(ArchiveRecord::TaskPr(record::task_pr(
            id, &bytes,
        )?)))?;
    }
    let mut handoffs = 0usize;
    for entry in shared.trees.by_created.iter() {
        let (key, _) = entry.map_err(engine)?;
        let id = keys::id_in_index(keys::BY_CREATED, &key, 0)?;
        let bytes = shared
            .trees
            .handoffs
            .get(keys::handoff(&id))
            .map_err(engine)?
            .ok_or_else(|| {
                StoreError::damaged(format!(
                    "index {} names handoff {id}, which is not stored; the store may be damaged",
                    String::from_utf8_lossy(keys::BY_CREATED)
                ))
            })?;
        let handoff = record::handoff(&id, &bytes)?;
        let events = counter(shared, &keys::seq_counter(&id), &format!("the seq of {id}"))?;
        send(Exported::Record(ArchiveRecord::Handoff { handoff, events }))?;
        handoffs += 1;
    }
    // Nothing left out: every stored handoff was listed.
    let stored = shared.trees.handoffs.len();
    if stored != handoffs {
        return Err(StoreError::damaged(format!(
            "{} stores {stored} handoffs, but its index {} lists {handoffs}; the store may be \
             damaged",
            shared.dir.display(),
            String::from_utf8_lossy(keys::BY_CREATED)
        )));
    }
    for entry in shared.trees.events.iter() {
        let (key, bytes) = entry.map_err(engine)?;
        let position = <[u8; 8]>::try_from(key.as_ref())
            .map(u64::from_be_bytes)
            .map_err(|_| malformed(keys::EVENTS, &key))?;
        send(Exported::Record(ArchiveRecord::Event(record::event(
            position, &bytes,
        )?)))?;
    }
    let last_position = counter(shared, keys::POSITION, &"the last position")?;
    send(Exported::End(last_position))
}

/// The counter at `key` of `handoff_counters`; 0 when absent.
fn counter(shared: &Shared, key: &[u8], what: &dyn std::fmt::Display) -> StoreResult<u64> {
    match shared
        .trees
        .counters
        .get(key)
        .map_err(|e| shared.engine(e))?
    {
        Some(bytes) => record::counter(what, &bytes),
        None => Ok(0),
    }
}

fn malformed(tree: &[u8], key: &[u8]) -> StoreError {
    StoreError::damaged(format!(
        "tree {} holds a malformed key {}; the store may be damaged",
        String::from_utf8_lossy(tree),
        String::from_utf8_lossy(key)
    ))
}

/// Loads the records `items` brings into the empty store, with no other
/// write running; see the module doc.
fn load_all(
    shared: &Shared,
    mut items: mpsc::Receiver<ArchiveItem>,
) -> StoreResult<ArchiveSummary> {
    shared.exclusive(|| {
        if !shared.trees.all().iter().all(|tree| tree.is_empty()) {
            return Ok(Err(not_empty(&shared.dir.display())));
        }
        let engine = |e| shared.engine(e);
        shared
            .trees
            .counters
            .insert(keys::IMPORTING, &b"in progress"[..])
            .map_err(engine)?;
        shared.make_durable()?;
        let loaded = load(shared, &mut items).and_then(|summary| {
            shared
                .trees
                .counters
                .remove(keys::IMPORTING)
                .map_err(engine)?;
            shared.make_durable()?;
            Ok(summary)
        });
        match loaded {
            Ok(summary) => Ok(Ok(summary)),
            // Emptied again, durably: the store is as it was.
            Err(error) => match empty_again(shared) {
                Ok(()) => Ok(Err(error)),
                Err(cleanup) => Err(StoreError::unavailable(
                    cleanup.unavailable_kind().unwrap_or(UnavailableKind::Other),
                    format!(
                        "{}; emptying the store again failed too ({}), so {} holds part of \
                         an import and refuses to open: delete it and import again",
                        error.message(),
                        cleanup.message(),
                        shared.dir.display()
                    ),
                )),
            },
        }
    })
}

/// Empties every tree, the marker last, and syncs.
fn empty_again(shared: &Shared) -> StoreResult<()> {
    // The counters last: they hold the import's marker.
    for tree in shared.trees.all() {
        tree.clear().map_err(|e| shared.engine(e))?;
    }
    shared.make_durable()
}

/// Writes each record `items` brings; at the end, the position counter.
fn load(shared: &Shared, items: &mut mpsc::Receiver<ArchiveItem>) -> StoreResult<ArchiveSummary> {
    loop {
        match items.blocking_recv() {
            Some(ArchiveItem::Record(record)) => load_record(shared, record)?,
            Some(ArchiveItem::End(summary)) => {
                if summary.last_position > 0 {
                    shared
                        .trees
                        .counters
                        .insert(keys::POSITION, &keys::event(summary.last_position)[..])
                        .map_err(|e| shared.engine(e))?;
                }
                return Ok(summary);
            }
            None => {
                return Err(StoreError::unavailable(
                    UnavailableKind::Other,
                    "the import stopped before the end of its file; the store was emptied again",
                ))
            }
        }
    }
}

/// Writes one record, with what the store's own writes keep beside it: a
/// handoff's index entries, step and seq counter; an event's history
/// entry.
fn load_record(shared: &Shared, record: ArchiveRecord) -> StoreResult<()> {
    let trees = &shared.trees;
    let engine = |e| shared.engine(e);
    match record {
        ArchiveRecord::Parent(Versioned { value, version }) => {
            let key = keys::parent(&value.reference());
            let stored = record::encode(version, &value)?;
            trees.parents.insert(key, stored).map_err(engine)?;
        }
        ArchiveRecord::TaskPr(pr) => {
            // A PR never changes: it stays at version 1.
            let key = keys::task_pr(pr.id.as_str());
            let stored = record::encode(1, &pr)?;
            trees.task_prs.insert(key, stored).map_err(engine)?;
        }
        ArchiveRecord::Handoff { handoff, events } => {
            let Versioned { value, version } = handoff;
            let id_key = keys::handoff(&value.id);
            let stored = record::encode(version, &value)?;
            trees
                .handoffs
                .insert(id_key.as_slice(), stored)
                .map_err(engine)?;
            let index = IndexKeys::of(&value);
            for (tree, key, entry) in index.entries_in(trees, &id_key) {
                tree.insert(key, entry).map_err(engine)?;
            }
            if let Some(step) = &index.step {
                let holder = id_key.as_slice();
                trees
                    .steps
                    .insert(step.as_slice(), holder)
                    .map_err(engine)?;
            }
            if events > 0 {
                let counter = &events.to_be_bytes()[..];
                let key = keys::seq_counter(&value.id);
                trees.counters.insert(key, counter).map_err(engine)?;
            }
        }
        ArchiveRecord::Event(event) => {
            let position = keys::event(event.position);
            let key = keys::history(&event.handoff_id, event.seq);
            trees.history.insert(key, &position[..]).map_err(engine)?;
            let stored = record::encode_event(&event)?;
            trees.events.insert(&position[..], stored).map_err(engine)?;
        }
    }
    Ok(())
}
