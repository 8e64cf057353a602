//! The index entries a handoff has ([`IndexKeys`]), how a transaction
//! writes, removes and moves them, and the fill of the trees an upgrade
//! adds.

use std::path::Path;

use lf_handoff_application::{StoreError, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoff;

use super::error::{abort, Abort};
use super::keys;
use super::record;
use super::trees::{Trees, TxResult, TxTrees};

/// The index entries a handoff has: always `by_created`, `by_parent`,
/// `by_status` (under its status) and `by_home`; `active` and the
/// parent's slot while it is not terminal; its `handoffs_due` entry while
/// it is not terminal and has a deadline; its `handoffs_prunable` entry
/// once its wake is claimed; its `handoff_steps` entry when it has a step
/// (written by the insert alone, since a handoff's step never changes, and
/// removed by a prune).
#[derive(Debug, PartialEq, Eq)]
pub(in crate::sled) struct IndexKeys {
    /// The key in `handoffs_by_created`, and in `handoffs_active` while
    /// the handoff is active.
    pub created: Vec<u8>,
    /// The key in `handoffs_by_parent`.
    pub by_parent: Vec<u8>,
    /// The key in `handoffs_by_status`.
    pub status: Vec<u8>,
    /// The key in `handoffs_by_home`.
    pub home: Vec<u8>,
    /// The parent's slot key, when the handoff is active.
    pub slot: Option<Vec<u8>>,
    /// The deadline key, when the handoff is active and has a deadline.
    pub due: Option<Vec<u8>>,
    /// The finish key, when the handoff's wake is claimed.
    pub prunable: Option<Vec<u8>>,
    /// The parent and step key, when the handoff has a step.
    pub step: Option<Vec<u8>>,
}

/// The index trees of [`IndexKeys`] (the step's aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IndexTree {
    Created,
    Parent,
    Status,
    Home,
    Active,
    Slot,
    Due,
    Prunable,
}

impl IndexKeys {
    pub(in crate::sled) fn of(handoff: &InteractiveHandoff) -> Self {
        Self {
            created: keys::created(handoff.created_at, &handoff.id),
            by_parent: keys::by_parent(&handoff.parent, handoff.created_at, &handoff.id),
            status: keys::by_status(handoff.status, handoff.created_at, &handoff.id),
            home: keys::by_home(&handoff.home, handoff.created_at, &handoff.id),
            slot: handoff.is_active().then(|| keys::parent(&handoff.parent)),
            due: handoff
                .expires_at
                .filter(|_| handoff.is_active())
                .map(|deadline| keys::due(deadline, &handoff.id)),
            prunable: handoff
                .terminal_at
                .filter(|_| handoff.wake_claimed_at.is_some())
                .map(|finished| keys::prunable(finished, &handoff.id)),
            step: handoff
                .step
                .as_ref()
                .map(|step| keys::step(&handoff.parent, step)),
        }
    }

    /// Every entry but the step's, with the tree it is in.
    fn entries(&self) -> Vec<(IndexTree, &[u8])> {
        let mut entries = vec![
            (IndexTree::Created, self.created.as_slice()),
            (IndexTree::Parent, self.by_parent.as_slice()),
            (IndexTree::Status, self.status.as_slice()),
            (IndexTree::Home, self.home.as_slice()),
        ];
        if let Some(slot) = &self.slot {
            entries.push((IndexTree::Active, self.created.as_slice()));
            entries.push((IndexTree::Slot, slot.as_slice()));
        }
        if let Some(due) = &self.due {
            entries.push((IndexTree::Due, due.as_slice()));
        }
        if let Some(prunable) = &self.prunable {
            entries.push((IndexTree::Prunable, prunable.as_slice()));
        }
        entries
    }

    /// Each entry but the step's, with its tree among `trees` and the value
    /// it holds: the handoff's key `id_key` in the parent's slot, nothing
    /// elsewhere.
    pub(in crate::sled) fn entries_in<'t, T>(
        &'t self,
        trees: &'t Trees<T>,
        id_key: &'t [u8],
    ) -> impl Iterator<Item = (&'t T, &'t [u8], &'t [u8])> {
        self.entries().into_iter().map(move |(which, key)| {
            let value = if which == IndexTree::Slot {
                id_key
            } else {
                &[]
            };
            (which.of(trees), key, value)
        })
    }

    /// Writes the entries, taking the parent's slot; a slot held by another
    /// handoff would break invariant I6 and aborts.
    pub(super) fn add(&self, tx: &TxTrees<'_>, id_key: &[u8]) -> TxResult {
        for entry in self.entries() {
            add(tx, entry, id_key)?;
        }
        Ok(())
    }

    /// Removes the entries, freeing the parent's slot if this handoff holds it.
    pub(super) fn remove(&self, tx: &TxTrees<'_>, id_key: &[u8]) -> TxResult {
        for entry in self.entries() {
            remove(tx, entry, id_key)?;
        }
        Ok(())
    }

    /// Moves the entries to `next`'s, writing only those that differ (an
    /// attach moves one, a claim adds one).
    pub(super) fn replace(&self, next: &Self, tx: &TxTrees<'_>, id_key: &[u8]) -> TxResult {
        let (old, new) = (self.entries(), next.entries());
        for entry in old.iter().filter(|entry| !new.contains(entry)) {
            remove(tx, *entry, id_key)?;
        }
        for entry in new.iter().filter(|entry| !old.contains(entry)) {
            add(tx, *entry, id_key)?;
        }
        Ok(())
    }
}

impl IndexTree {
    /// The tree among `trees`.
    fn of<T>(self, trees: &Trees<T>) -> &T {
        match self {
            Self::Created => &trees.by_created,
            Self::Parent => &trees.by_parent,
            Self::Status => &trees.by_status,
            Self::Home => &trees.by_home,
            Self::Active => &trees.active,
            Self::Slot => &trees.slots,
            Self::Due => &trees.due,
            Self::Prunable => &trees.prunable,
        }
    }
}

/// Writes one entry: an empty value, or for the parent's slot the
/// handoff's id, if no other handoff holds it (I6).
fn add(tx: &TxTrees<'_>, (which, key): (IndexTree, &[u8]), id_key: &[u8]) -> TxResult {
    if which != IndexTree::Slot {
        which.of(tx).insert(key, &[][..])?;
        return Ok(());
    }
    if let Some(holder) = tx.slots.get(key)? {
        if holder != id_key {
            return abort(Abort::Failed(StoreError::damaged(format!(
                "refusing a second active handoff for {}: {} holds its slot (I6)",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&holder)
            ))));
        }
    }
    tx.slots.insert(key, id_key)?;
    Ok(())
}

/// Removes one entry; the parent's slot only if this handoff holds it.
fn remove(tx: &TxTrees<'_>, (which, key): (IndexTree, &[u8]), id_key: &[u8]) -> TxResult {
    if which == IndexTree::Slot && tx.slots.get(key)?.is_none_or(|holder| holder != id_key) {
        return Ok(());
    }
    which.of(tx).remove(key)?;
    Ok(())
}

/// Fills the index trees a store of an older format lacks (by status, by
/// home, prunable) from its records, from scratch (the caller then makes
/// them durable): the step of an upgrade before the marker names the new
/// format. Until
/// then no build writes these trees, so clearing them first makes a
/// repeated fill (after a crash during one) exact. A record that cannot be
/// read gets no entries: it is refused, as before, whenever it is read.
pub(super) fn fill_list_indexes(trees: &Trees, dir: &Path) -> StoreResult<()> {
    /// Entries written per batch of each tree.
    const PER_BATCH: usize = 10_000;
    let engine = |e| super::error::engine(dir, e);
    for tree in [&trees.by_status, &trees.by_home, &trees.prunable] {
        tree.clear().map_err(engine)?;
    }
    let mut batches: [::sled::Batch; 3] = Default::default();
    let mut pending = 0;
    let flush = |batches: &mut [::sled::Batch; 3]| -> StoreResult<()> {
        let [status, home, prunable] = std::mem::take(batches);
        trees.by_status.apply_batch(status).map_err(engine)?;
        trees.by_home.apply_batch(home).map_err(engine)?;
        trees.prunable.apply_batch(prunable).map_err(engine)
    };
    for entry in trees.handoffs.iter() {
        let (key, bytes) = entry.map_err(engine)?;
        let Some(id) = std::str::from_utf8(&key)
            .ok()
            .and_then(|id| InteractiveHandoffId::parse(id).ok())
        else {
            continue;
        };
        let Ok(found) = record::handoff(&id, &bytes) else {
            continue;
        };
        let index = IndexKeys::of(&found.value);
        batches[0].insert(index.status, &[][..]);
        batches[1].insert(index.home, &[][..]);
        if let Some(prunable) = index.prunable {
            batches[2].insert(prunable, &[][..]);
        }
        pending += 1;
        if pending == PER_BATCH {
            flush(&mut batches)?;
            pending = 0;
        }
    }
    flush(&mut batches)
}
