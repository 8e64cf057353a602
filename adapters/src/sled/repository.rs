//! [`HandoffRepository`] on sled: one multi-tree transaction per write,
//! index trees for every list and for the deadlines (C14), the
//! `handoff_steps` key that allows one handoff per parent and step (C12),
//! and the history (C15): every write that changes a handoff appends its
//! event in the same transaction.

use std::collections::HashSet;
use std::fmt::Display;
use std::ops::Bound;

use ::sled::transaction::{ConflictableTransactionError, Transactional as _, TransactionalTree};
use ::sled::{IVec, Tree};
use async_trait::async_trait;
use lf_handoff_application::ports::{
    recorded_change, Decided, Decision, HandoffRepository, InsertOutcome, PruneCount, SwapOutcome,
    TransitionOutcome, Versioned,
};
use lf_handoff_application::{ListQuery, StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
    InteractiveHandoffStatus, StepKey, Transition,
};
use time::OffsetDateTime;

use super::error::{abort, failed, settle, Abort};
use super::handle::Shared;
use super::{keys, record, SledStore};

#[async_trait]
impl HandoffRepository for SledStore {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        let id = id.clone();
        self.run(move |shared| {
            shared.get(&shared.handoffs, &keys::handoff(&id), |bytes| {
                record::handoff(&id, &bytes)
            })
        })
        .await
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        let query = query.clone();
        self.run(move |shared| {
            let handoffs = list(shared, &query)?;
            shared.settle_reads()?;
            Ok(handoffs)
        })
        .await
    }

    async fn insert(
        &self,
        handoff: &InteractiveHandoff,
        parent_version: u64,
        actor: &Actor,
    ) -> StoreResult<InsertOutcome> {
        let stored = record::encode(1, handoff)?;
        let change = recorded_change(None, handoff)?;
        let handoff = handoff.clone();
        let actor = actor.clone();
        self.run(move |shared| {
            let id_key = keys::handoff(&handoff.id);
            let parent_key = keys::parent(&handoff.parent);
            let index = IndexKeys::of(&handoff);
            // Fourteen trees, the most a sled transaction takes as a tuple.
            let trees = (
                &shared.parents,
                &shared.steps,
                &shared.handoffs,
                &shared.by_created,
                &shared.by_parent,
                &shared.active,
                &shared.slots,
                &shared.due,
                &shared.by_status,
                &shared.by_home,
                &shared.prunable,
                &shared.events,
                &shared.history,
                &shared.counters,
            );
            let outcome = shared.commit(
                &trees,
                |(
                    parents,
                    steps,
                    handoffs,
                    by_created,
                    by_parent,
                    active,
                    slots,
                    due,
                    by_status,
                    by_home,
                    prunable,
                    events,
                    history,
                    counters,
                )| {
                    let indexes = Indexes {
                        by_created,
                        by_parent,
                        active,
                        slots,
                        due,
                        by_status,
                        by_home,
                        prunable,
                    };
                    let log = Log {
                        events,
                        history,
                        counters,
                    };
                    let Some(parent) = parents.get(&parent_key)? else {
                        return abort(Abort::ParentChanged);
                    };
                    let version = record::version(&handoff.parent, &parent).map_err(failed)?;
                    if version != parent_version {
                        return abort(Abort::ParentChanged);
                    }
                    // The step first: a racer that took the step took the
                    // slot too, and the step is what the caller must see.
                    if let Some(step_key) = &index.step {
                        if steps.get(step_key)?.is_some() {
                            return abort(Abort::StepTaken);
                        }
                    }
                    if handoff.is_active() && slots.get(&parent_key)?.is_some() {
                        return abort(Abort::ParentBusy);
                    }
                    if handoffs.get(&id_key)?.is_some() {
                        return abort(Abort::Failed(StoreError::unavailable(
                            UnavailableKind::Other,
                            format!(
                                "handoff id {} is already stored; refusing to overwrite it",
                                handoff.id
                            ),
                        )));
                    }
                    handoffs.insert(id_key.as_slice(), stored.as_slice())?;
                    index.add(&indexes, &id_key)?;
                    if let Some(step_key) = &index.step {
                        steps.insert(step_key.as_slice(), id_key.as_slice())?;
                    }
                    log.append(&handoff.id, &change, &actor, Append::First)?;
                    Ok(())
                },
            )?;
            match outcome {
                Ok(()) => Ok(InsertOutcome::Inserted),
                Err(Abort::ParentBusy) => Ok(InsertOutcome::ParentBusy),
                Err(Abort::StepTaken) => Ok(InsertOutcome::StepTaken),
                Err(_) => Ok(InsertOutcome::ParentChanged),
            }
        })
        .await
    }

    async fn transition(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
        actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>> {
        let id = id.clone();
        let actor = actor.clone();
        // Load, decision and write in one call: one hop to the blocking
        // pool instead of two, and one read of the record.
        self.run(move |shared| {
            let id_key = keys::handoff(&id);
            // The stored bytes are kept for the write's comparison.
            let loaded = shared.get(&shared.handoffs, &id_key, |bytes| {
                Ok((record::handoff(&id, &bytes)?, bytes))
            })?;
            let Some((current, bytes)) = loaded else {
                return Ok(None);
            };
            let Decided { transition, answer } = decide(&current.value)?;
            let next = match transition {
                Transition::Unchanged(handoff) => {
                    return Ok(Some(TransitionOutcome::Applied {
                        handoff: Box::new(handoff),
                        answer,
                    }))
                }
                Transition::Changed(next) => next,
            };
            Ok(Some(
                match swap(shared, &id_key, &bytes, &current, &next, &actor)? {
                    SwapOutcome::Swapped => TransitionOutcome::Applied {
                        handoff: Box::new(next),
                        answer,
                    },
                    SwapOutcome::Lost => TransitionOutcome::Lost,
                },
            ))
        })
        .await
    }

    async fn due(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>> {
        self.run(move |shared| {
            let mut due = Vec::new();
            let mut named = HashSet::new();
            if limit == 0 {
                return Ok(due);
            }
            // Earliest deadline first, up to `now` and no further.
            for entry in shared.due.range(..=keys::due_until(now)) {
                let (key, _) = entry.map_err(|e| shared.engine(e))?;
                let id = keys::id_in_index(keys::DUE, &key, 0)?;
                let Some(bytes) = named_record(shared, &shared.due, &key, &id)? else {
                    // Finished, claimed and pruned since its entry was read.
                    continue;
                };
                // One finished or extended since its entry was read is not
                // due any more; one whose deadline moved during the walk may
                // be met at its old and its new entry, and is named once.
                if record::handoff(&id, &bytes)?.value.is_due(now) && named.insert(id.clone()) {
                    due.push(id);
                    if due.len() >= limit {
                        break;
                    }
                }
            }
            shared.settle_reads()?;
            Ok(due)
        })
        .await
    }

    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        let id = id.clone();
        self.run(move |shared| {
            let events = read_history(shared, &id)?;
            shared.settle_reads()?;
            Ok(events)
        })
        .await
    }

    async fn count_prunable(&self, finished_before: OffsetDateTime) -> StoreResult<PruneCount> {
        self.run(move |shared| {
            let mut count = PruneCount::default();
            for entry in shared.prunable.range(..keys::before(finished_before)) {
                let (key, _) = entry.map_err(|e| shared.engine(e))?;
                let id = keys::id_in_index(keys::PRUNABLE, &key, 0)?;
                if named_record(shared, &shared.prunable, &key, &id)?.is_none() {
                    continue;
                }
                let events = match shared
                    .counters
                    .get(keys::seq_counter(&id))
                    .map_err(|e| shared.engine(e))?
                {
                    Some(bytes) => {
                        record::counter(&format_args!("the last seq of handoff {id}"), &bytes)?
                    }
                    None => 0,
                };
                count += PruneCount {
                    handoffs: 1,
                    events,
                };
            }
            shared.settle_reads()?;
            Ok(count)
        })
        .await
    }

    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount> {
        self.run(move |shared| prune_batch(shared, finished_before, limit))
            .await
    }
}

/// [`HandoffRepository::list`]: walks the index that serves `query` (see
/// the module doc of `sled`), from just after `query.after`, and reads the
/// record each entry names, keeping those that pass every filter, up to
/// `query.limit`.
fn list(shared: &Shared, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
    let wanted = query.wanted_statuses();
    if query.limit == Some(0) || wanted.as_ref().is_some_and(Vec::is_empty) {
        return Ok(Vec::new());
    }
    // Where the page starts: just after `after`'s place in list order.
    let start = match &query.after {
        None => None,
        Some(after) => {
            let found = shared
                .handoffs
                .get(keys::handoff(after))
                .map_err(|e| shared.engine(e))?;
            let Some(bytes) = found else {
                return Ok(Vec::new());
            };
            let after = record::handoff(after, &bytes)?.value;
            Some(keys::created(after.created_at, &after.id))
        }
    };
    let only_active = wanted
        .as_ref()
        .is_some_and(|wanted| wanted.iter().all(|status| !status.is_terminal()));
    let (tree, prefixes) = match (&query.parent, &wanted) {
        (Some(parent), _) if only_active => {
            // The parent's active slot: at most one handoff.
            let active = active_of(shared, parent)?.map(|active| active.value);
            return Ok(active
                .filter(|handoff| {
                    query.matches(handoff)
                        && start.as_ref().is_none_or(|start| {
                            keys::created(handoff.created_at, &handoff.id) > *start
                        })
                })
                .into_iter()
                .collect());
        }
        (Some(parent), _) => (&shared.by_parent, vec![keys::by_parent_prefix(parent)]),
        (None, Some(wanted)) if wanted.len() == 2 && only_active => (&shared.active, vec![vec![]]),
        (None, Some(wanted)) => (
            &shared.by_status,
            wanted
                .iter()
                .map(|status| keys::by_status_prefix(*status))
                .collect(),
        ),
        (None, None) => match &query.home {
            Some(home) => (&shared.by_home, vec![keys::by_home_prefix(home)]),
            None => (&shared.by_created, vec![vec![]]),
        },
    };
    let end = query.created_before.map(keys::before);
    let mut walks: Vec<Walk> = prefixes
        .into_iter()
        .map(|prefix| Walk::new(tree, prefix, start.as_deref(), end.as_ref()))
        .collect();
    let name = tree.name();
    let limit = query.limit.unwrap_or(usize::MAX);
    let mut handoffs: Vec<InteractiveHandoff> = Vec::new();
    // Each walk is in list order; the next entry is the least of their
    // heads (several walks: one per status, merged).
    let mut heads = walks
        .iter_mut()
        .map(|walk| walk.next(shared))
        .collect::<StoreResult<Vec<_>>>()?;
    while handoffs.len() < limit {
        let next = heads
            .iter()
            .enumerate()
            .filter_map(|(at, head)| head.as_ref().map(|key| (at, &key[walks[at].skip..])))
            .min_by(|a, b| a.1.cmp(b.1))
            .map(|(at, _)| at);
        let Some(at) = next else {
            break;
        };
        let (Some(key), Some(walk)) = (heads[at].take(), walks.get_mut(at)) else {
            break;
        };
        heads[at] = walk.next(shared)?;
        let id = keys::id_in_index(&name, &key, walk.skip)?;
        // A handoff met again in another status's walk (it changed status
        // while the list read) is listed once.
        if handoffs.last().is_some_and(|last| last.id == id) {
            continue;
        }
        let Some(bytes) = named_record(shared, tree, &key, &id)? else {
            continue;
        };
        let handoff = record::handoff(&id, &bytes)?.value;
        // A parent and a home never change: a record the index files
        // elsewhere is damage. A status or the activity may have changed
        // since the entry was read: such a record is skipped.
        let stray = match (&query.parent, &query.home) {
            (Some(parent), _) if handoff.parent != *parent => Some(parent.to_string()),
            (None, Some(home)) if wanted.is_none() && handoff.home != *home => {
                Some(home.to_string())
            }
            _ => None,
        };
        if let Some(filed_under) = stray {
            return Err(StoreError::damaged(format!(
                "index {} lists handoff {id} under {filed_under}, but it belongs to {} at {}; \
                 the store may be damaged",
                String::from_utf8_lossy(&name),
                handoff.parent,
                handoff.home
            )));
        }
        if query.matches(&handoff) {
            handoffs.push(handoff);
        }
    }
    Ok(handoffs)
}

/// One index walk of a list: the entries under `prefix`, after `start` and
/// before `end` (the parts of a key after its prefix), in key order.
struct Walk {
    entries: ::sled::Iter,
    /// The prefix's length: where an entry's `created_at ++ id` begins.
    skip: usize,
}

impl Walk {
    fn new(tree: &Tree, prefix: Vec<u8>, start: Option<&[u8]>, end: Option<&[u8; 8]>) -> Self {
        let under = |suffix: &[u8]| [prefix.as_slice(), suffix].concat();
        let lower = match start {
            Some(start) => Bound::Excluded(under(start)),
            None => Bound::Included(prefix.clone()),
        };
        let upper = match end {
            Some(end) => Bound::Excluded(under(end)),
            None => prefix_end(&prefix),
        };
        Self {
            entries: tree.range::<Vec<u8>, _>((lower, upper)),
            skip: prefix.len(),
        }
    }

    /// The next entry's key.
    fn next(&mut self, shared: &Shared) -> StoreResult<Option<IVec>> {
        self.entries
            .next()
            .transpose()
            .map(|entry| entry.map(|(key, _)| key))
            .map_err(|e| shared.engine(e))
    }
}

/// The first key after every key that starts with `prefix` (none for the
/// empty prefix).
fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Bound::Excluded(end);
        }
    }
    Bound::Unbounded
}

/// The record the index entry `key` of `index` names (handoff `id`), or
/// `None` when the handoff was removed (pruned) since the entry was read:
/// the entry is gone too, since a prune removes both in one transaction.
/// An entry that is still there without its record is damage.
pub(super) fn named_record(
    shared: &Shared,
    index: &Tree,
    key: &[u8],
    id: &InteractiveHandoffId,
) -> StoreResult<Option<IVec>> {
    let found = shared
        .handoffs
        .get(keys::handoff(id))
        .map_err(|e| shared.engine(e))?;
    if found.is_some() || !index.contains_key(key).map_err(|e| shared.engine(e))? {
        return Ok(found);
    }
    Err(missing(&index.name(), id))
}

/// One prune batch (C17): the first `limit` entries of `handoffs_prunable`
/// before `finished_before`, each removed in one transaction with every
/// index entry, its step, its events, their history entries and its seq
/// counter, if its record is still there.
fn prune_batch(
    shared: &Shared,
    finished_before: OffsetDateTime,
    limit: usize,
) -> StoreResult<PruneCount> {
    let mut chosen = Vec::new();
    for entry in shared
        .prunable
        .range(..keys::before(finished_before))
        .take(limit)
    {
        let (key, _) = entry.map_err(|e| shared.engine(e))?;
        chosen.push(keys::id_in_index(keys::PRUNABLE, &key, 0)?);
    }
    if chosen.is_empty() {
        return Ok(PruneCount::default());
    }
    let trees = (
        &shared.handoffs,
        &shared.by_created,
        &shared.by_parent,
        &shared.active,
        &shared.slots,
        &shared.due,
        &shared.by_status,
        &shared.by_home,
        &shared.prunable,
        &shared.steps,
        &shared.events,
        &shared.history,
        &shared.counters,
    );
    let outcome = shared.commit(
        &trees,
        |(
            handoffs,
            by_created,
            by_parent,
            active,
            slots,
            due,
            by_status,
            by_home,
            prunable,
            steps,
            events,
            history,
            counters,
        )| {
            let indexes = Indexes {
                by_created,
                by_parent,
                active,
                slots,
                due,
                by_status,
                by_home,
                prunable,
            };
            let log = Log {
                events,
                history,
                counters,
            };
            let mut count = PruneCount::default();
            for id in &chosen {
                let id_key = keys::handoff(id);
                // Pruned by another handle since the entry was read.
                let Some(bytes) = handoffs.get(&id_key)? else {
                    continue;
                };
                let handoff = record::handoff(id, &bytes).map_err(failed)?.value;
                let finished = handoff.status.is_terminal()
                    && handoff.wake_claimed_at.is_some()
                    && handoff.terminal_at.is_some_and(|at| at < finished_before);
                if !finished {
                    return abort(Abort::Failed(StoreError::damaged(format!(
                        "index {} names handoff {id} as finished before {finished_before} \
                         with its wake claimed, but it is {}; the store may be damaged and \
                         nothing was pruned",
                        String::from_utf8_lossy(keys::PRUNABLE),
                        handoff.status
                    ))));
                }
                let index = IndexKeys::of(&handoff);
                index.remove(&indexes, &id_key)?;
                // And any status entry left behind by a build that did not
                // keep `handoffs_by_status` (see the upgrade notes of
                // `sled`): a list would take it for damage once the record
                // is gone.
                for status in InteractiveHandoffStatus::ALL {
                    by_status.remove(keys::by_status(status, handoff.created_at, id))?;
                }
                // The step is forgotten with its handoff: it may be opened
                // again (C12 holds until the prune).
                if let Some(step_key) = &index.step {
                    if steps.get(step_key)?.is_some_and(|holder| holder == id_key) {
                        steps.remove(step_key.as_slice())?;
                    }
                }
                count += PruneCount {
                    handoffs: 1,
                    events: log.remove_all(id)?,
                };
                handoffs.remove(id_key)?;
            }
            Ok(count)
        },
    )?;
    outcome.map_err(|abort| match abort {
        Abort::Failed(error) => error,
        other => StoreError::unavailable(
            UnavailableKind::Other,
            format!("a prune batch stopped unexpectedly ({other:?}); nothing was pruned"),
        ),
    })
}

/// Fills the index trees a store of an older format lacks (by status, by
/// home, prunable) from its records, from scratch, and makes them durable:
/// the step of an upgrade before the marker names the new format. Until
/// then no build writes these trees, so clearing them first makes a
/// repeated fill (after a crash during one) exact. A record that cannot be
/// read gets no entries: it is refused, as before, whenever it is read.
pub(super) fn fill_list_indexes(shared: &Shared) -> StoreResult<()> {
    /// Entries written per batch of each tree.
    const PER_BATCH: usize = 10_000;
    let engine = |e| shared.engine(e);
    for tree in [&shared.by_status, &shared.by_home, &shared.prunable] {
        tree.clear().map_err(engine)?;
    }
    let mut batches: [::sled::Batch; 3] = Default::default();
    let mut pending = 0;
    let flush = |batches: &mut [::sled::Batch; 3]| -> StoreResult<()> {
        let [status, home, prunable] = std::mem::take(batches);
        shared.by_status.apply_batch(status).map_err(engine)?;
        shared.by_home.apply_batch(home).map_err(engine)?;
        shared.prunable.apply_batch(prunable).map_err(engine)
    };
    for entry in shared.handoffs.iter() {
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
    flush(&mut batches)?;
    shared.make_durable()
}

/// The events of handoff `id`, in seq order, checked against their keys:
/// seqs 1, 2, 3, ... with no gap, at increasing positions.
///
/// No snapshot is needed: an event is committed in the same transaction as
/// its `handoff_history` entry, and sled's reads see a transaction whole or
/// not at all, so every entry read names an event that is stored; one
/// appended during the scan is read or not, after all those before it. A
/// handoff pruned during the scan has no history (the events go with
/// their entries, and the record with them).
fn read_history(shared: &Shared, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
    let prefix = keys::history_prefix(id);
    let mut events: Vec<HandoffEvent> = Vec::new();
    let mut expected_seq = 1u64;
    for entry in shared.history.scan_prefix(&prefix) {
        let (key, value) = entry.map_err(|e| shared.engine(e))?;
        let seq = keys::seq_in_history(&prefix, &key)?;
        let position = record::counter(
            &format_args!("position of event {seq} of handoff {id}"),
            &value,
        )?;
        let damaged = |detail: String| {
            StoreError::damaged(format!(
                "the history of handoff {id} is damaged: {detail}; the store may be damaged \
                 and was left unchanged"
            ))
        };
        if seq != expected_seq {
            return Err(damaged(format!(
                "it holds event {seq} where event {expected_seq} belongs"
            )));
        }
        if let Some(previous) = events.last() {
            if position <= previous.position {
                return Err(damaged(format!(
                    "event {seq} is at position {position}, not after event {} at {}",
                    previous.seq, previous.position
                )));
            }
        }
        let found = shared
            .events
            .get(keys::event(position))
            .map_err(|e| shared.engine(e))?;
        let Some(bytes) = found else {
            // A prune removes the events with their entries in one
            // transaction: an entry gone too means the handoff was pruned
            // while its history was read.
            if !shared
                .history
                .contains_key(&key)
                .map_err(|e| shared.engine(e))?
            {
                return Ok(Vec::new());
            }
            return Err(damaged(format!(
                "event {seq} names position {position}, where no event is stored"
            )));
        };
        let event = record::event(position, &bytes)?;
        if event.handoff_id != *id || event.seq != seq {
            return Err(damaged(format!(
                "position {position} holds event {} of handoff {}, not event {seq}",
                event.seq, event.handoff_id
            )));
        }
        events.push(event);
        expected_seq = seq.saturating_add(1);
    }
    Ok(events)
}

/// Replaces `current` (whose stored bytes are `current_bytes`) with
/// `handoff` and appends the change's event by `actor`, in one
/// transaction, if and only if the record is still the one read; and makes
/// it durable.
///
/// Every change is a multi-tree transaction, even one that moves no index
/// entry (attach, claim): the event and the history's counters change with
/// the record, which a compare-and-swap of the record alone cannot do.
fn swap(
    shared: &Shared,
    id_key: &[u8],
    current_bytes: &IVec,
    current: &Versioned<InteractiveHandoff>,
    handoff: &InteractiveHandoff,
    actor: &Actor,
) -> StoreResult<SwapOutcome> {
    let expected = current.version;
    let next = record::next_version(&format_args!("handoff {}", handoff.id), expected)?;
    let stored = record::encode(next, handoff)?;
    // Nothing is written when the history cannot say what the change was.
    let change = recorded_change(Some(&current.value), handoff)?;
    let old_index = IndexKeys::of(&current.value);
    let new_index = IndexKeys::of(handoff);
    // The step entry is written once, by the insert, and never moves.
    if new_index.step != old_index.step {
        return Err(StoreError::unavailable(
            UnavailableKind::Other,
            format!(
                "refusing to change the step of handoff {}: a handoff keeps its step for ever",
                handoff.id
            ),
        ));
    }
    let trees = (
        &shared.handoffs,
        &shared.by_created,
        &shared.by_parent,
        &shared.active,
        &shared.slots,
        &shared.due,
        &shared.by_status,
        &shared.by_home,
        &shared.prunable,
        &shared.events,
        &shared.history,
        &shared.counters,
    );
    let outcome = shared.commit(
        &trees,
        |(
            handoffs,
            by_created,
            by_parent,
            active,
            slots,
            due,
            by_status,
            by_home,
            prunable,
            events,
            history,
            counters,
        )| {
            // The bytes decided on, or another write won (or pruned it):
            // versions only grow, so equal bytes are the same record at the
            // same version.
            if handoffs.get(id_key)?.as_ref() != Some(current_bytes) {
                return abort(Abort::Lost);
            }
            if old_index != new_index {
                let indexes = Indexes {
                    by_created,
                    by_parent,
                    active,
                    slots,
                    due,
                    by_status,
                    by_home,
                    prunable,
                };
                old_index.replace(&new_index, &indexes, id_key)?;
            }
            handoffs.insert(id_key, stored.as_slice())?;
            let log = Log {
                events,
                history,
                counters,
            };
            log.append(&handoff.id, &change, actor, Append::Next)?;
            Ok(())
        },
    )?;
    match outcome {
        Ok(()) => Ok(SwapOutcome::Swapped),
        Err(_) => Ok(SwapOutcome::Lost),
    }
}

/// Whether an event starts a handoff's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Append {
    /// The `opened` event of a new handoff: seq 1, or the store is damaged.
    First,
    /// A later change: the handoff's next seq (1 for a handoff stored by a
    /// release without history that changes for the first time since).
    Next,
}

/// The history trees, as one transaction sees them.
struct Log<'t> {
    events: &'t TransactionalTree,
    history: &'t TransactionalTree,
    counters: &'t TransactionalTree,
}

impl Log<'_> {
    /// Appends `change` of handoff `id` by `actor` at the store's next
    /// position and the handoff's next seq, both read and raised in this
    /// transaction: sled runs transactions one at a time, so positions
    /// follow commit order, and a counter that only grows never gives a
    /// position or seq twice.
    fn append(
        &self,
        id: &InteractiveHandoffId,
        change: &HandoffChange,
        actor: &Actor,
        append: Append,
    ) -> TxResult {
        let position = self.next(keys::POSITION, &"the history's last position")?;
        let seq_key = keys::seq_counter(id);
        let seq = self.next(&seq_key, &format_args!("the last seq of handoff {id}"))?;
        let damaged = |detail: String| {
            abort(Abort::Failed(StoreError::damaged(format!(
                "refusing to append to the history of handoff {id}: {detail}; the store may \
                 be damaged"
            ))))
        };
        if append == Append::First && seq != 1 {
            return damaged(format!(
                "it is new, yet its counter says it has {} events",
                seq - 1
            ));
        }
        let event_key = keys::event(position);
        if self.events.get(event_key)?.is_some() {
            return damaged(format!(
                "position {position} is taken, yet the counter says it is the next one"
            ));
        }
        let history_key = keys::history(id, seq);
        if self.history.get(&history_key)?.is_some() {
            return damaged(format!(
                "event {seq} is stored, yet the counter says it is the next one"
            ));
        }
        let event = change
            .clone()
            .into_event(id.clone(), seq, position, actor.clone());
        let bytes = record::encode_event(&event).map_err(failed)?;
        self.events.insert(&event_key[..], bytes)?;
        self.history.insert(history_key, &event_key[..])?;
        self.counters.insert(keys::POSITION, &event_key[..])?;
        self.counters.insert(seq_key, &seq.to_be_bytes()[..])?;
        Ok(())
    }

    /// Removes every event of handoff `id`, their `handoff_history`
    /// entries and its seq counter (a prune, C17), and returns how many
    /// events it removed. Seqs run 1, 2, ... up to the counter without a
    /// gap; a gap is damage and aborts.
    fn remove_all(
        &self,
        id: &InteractiveHandoffId,
    ) -> Result<u64, ConflictableTransactionError<Abort>> {
        let seq_key = keys::seq_counter(id);
        let what = format_args!("the last seq of handoff {id}");
        let last = match self.counters.get(&seq_key)? {
            Some(bytes) => record::counter(&what, &bytes).map_err(failed)?,
            None => 0,
        };
        let mut removed = 0;
        // Bounded by the entries there are, not by the counter alone.
        for seq in 1..=last {
            let history_key = keys::history(id, seq);
            let Some(position) = self.history.remove(history_key)? else {
                return abort(Abort::Failed(StoreError::damaged(format!(
                    "the history of handoff {id} has no event {seq} where its counter says \
                     {last}; the store may be damaged and nothing was pruned"
                ))));
            };
            let position = record::counter(
                &format_args!("position of event {seq} of handoff {id}"),
                &position,
            )
            .map_err(failed)?;
            if self.events.remove(&keys::event(position)[..])?.is_some() {
                removed += 1;
            }
        }
        self.counters.remove(seq_key)?;
        Ok(removed)
    }

    /// One more than the counter at `key` (absent: 0).
    fn next(
        &self,
        key: &[u8],
        what: &dyn Display,
    ) -> Result<u64, ConflictableTransactionError<Abort>> {
        let last = match self.counters.get(key)? {
            Some(bytes) => record::counter(what, &bytes).map_err(failed)?,
            None => 0,
        };
        last.checked_add(1).ok_or_else(|| {
            failed(StoreError::unavailable(
                UnavailableKind::Other,
                format!("{what} is the largest there can be"),
            ))
        })
    }
}

/// The index trees, as one transaction sees them.
struct Indexes<'t> {
    by_created: &'t TransactionalTree,
    by_parent: &'t TransactionalTree,
    active: &'t TransactionalTree,
    slots: &'t TransactionalTree,
    due: &'t TransactionalTree,
    by_status: &'t TransactionalTree,
    by_home: &'t TransactionalTree,
    prunable: &'t TransactionalTree,
}

/// The index entries a handoff has: always `by_created`, `by_parent`,
/// `by_status` (under its status) and `by_home`; `active` and the
/// parent's slot while it is not terminal; its `handoffs_due` entry while
/// it is not terminal and has a deadline; its `handoffs_prunable` entry
/// once its wake is claimed; its `handoff_steps` entry when it has a step
/// (written by the insert alone, since a handoff's step never changes, and
/// removed by a prune).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct IndexKeys {
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

type TxResult = Result<(), ConflictableTransactionError<Abort>>;

impl IndexKeys {
    pub(super) fn of(handoff: &InteractiveHandoff) -> Self {
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

    /// Writes the entries, taking the parent's slot; a slot held by another
    /// handoff would break invariant I6 and aborts.
    fn add(&self, trees: &Indexes<'_>, id_key: &[u8]) -> TxResult {
        for entry in self.entries() {
            trees.add(entry, id_key)?;
        }
        Ok(())
    }

    /// Removes the entries, freeing the parent's slot if this handoff holds it.
    fn remove(&self, trees: &Indexes<'_>, id_key: &[u8]) -> TxResult {
        for entry in self.entries() {
            trees.remove(entry, id_key)?;
        }
        Ok(())
    }

    /// Moves the entries to `next`'s, writing only those that differ (an
    /// attach moves one, a claim adds one).
    fn replace(&self, next: &Self, trees: &Indexes<'_>, id_key: &[u8]) -> TxResult {
        let (old, new) = (self.entries(), next.entries());
        for entry in old.iter().filter(|entry| !new.contains(entry)) {
            trees.remove(*entry, id_key)?;
        }
        for entry in new.iter().filter(|entry| !old.contains(entry)) {
            trees.add(*entry, id_key)?;
        }
        Ok(())
    }
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

impl Indexes<'_> {
    fn tree(&self, which: IndexTree) -> &TransactionalTree {
        match which {
            IndexTree::Created => self.by_created,
            IndexTree::Parent => self.by_parent,
            IndexTree::Status => self.by_status,
            IndexTree::Home => self.by_home,
            IndexTree::Active => self.active,
            IndexTree::Slot => self.slots,
            IndexTree::Due => self.due,
            IndexTree::Prunable => self.prunable,
        }
    }

    /// Writes one entry: an empty value, or for the parent's slot the
    /// handoff's id, if no other handoff holds it (I6).
    fn add(&self, (which, key): (IndexTree, &[u8]), id_key: &[u8]) -> TxResult {
        if which != IndexTree::Slot {
            self.tree(which).insert(key, &[][..])?;
            return Ok(());
        }
        if let Some(holder) = self.slots.get(key)? {
            if holder != id_key {
                return abort(Abort::Failed(StoreError::damaged(format!(
                    "refusing a second active handoff for {}: {} holds its slot (I6)",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(&holder)
                ))));
            }
        }
        self.slots.insert(key, id_key)?;
        Ok(())
    }

    /// Removes one entry; the parent's slot only if this handoff holds it.
    fn remove(&self, (which, key): (IndexTree, &[u8]), id_key: &[u8]) -> TxResult {
        if which == IndexTree::Slot && self.slots.get(key)?.is_none_or(|holder| holder != id_key) {
            return Ok(());
        }
        self.tree(which).remove(key)?;
        Ok(())
    }
}

/// The parent's active handoff, read through its slot: an empty slot is
/// one read; a taken one is read with its record in one transaction, so
/// the slot and the record agree.
pub(super) fn active_of(
    shared: &Shared,
    parent: &InteractiveHandoffParent,
) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
    let slot_key = keys::parent(parent);
    // An empty slot is one atomic read and needs nothing more; a taken one
    // is read again with its record in one transaction, so they agree.
    if !shared
        .slots
        .contains_key(&slot_key)
        .map_err(|e| shared.engine(e))?
    {
        return Ok(None);
    }
    let result = (&shared.slots, &shared.handoffs).transaction(|(slots, handoffs)| {
        let Some(holder) = slots.get(&slot_key)? else {
            return Ok(None);
        };
        let id = keys::id_in_slot(parent, &holder).map_err(failed)?;
        let Some(bytes) = handoffs.get(&holder)? else {
            return abort(Abort::Failed(missing(keys::ACTIVE_SLOTS, &id)));
        };
        let active = record::handoff(&id, &bytes).map_err(failed)?;
        if active.value.parent != *parent || !active.value.is_active() {
            return abort(Abort::Failed(StoreError::damaged(format!(
                "the active slot of {parent} names handoff {id}, which is {} and belongs to \
                 {}; the store may be damaged",
                active.value.status, active.value.parent
            ))));
        }
        Ok(Some(active))
    });
    match settle(&shared.dir, result)? {
        Ok(active) => Ok(active),
        Err(other) => Err(StoreError::unavailable(
            UnavailableKind::Other,
            format!("reading the active slot of {parent} stopped unexpectedly ({other:?})"),
        )),
    }
}

/// The parent's handoff for `step`, whatever its status, read through its
/// `handoff_steps` entry.
///
/// Two plain reads agree without a transaction: the entry is written in
/// the same transaction as the record and never changes, and goes only with
/// the record (a prune), so a record read after its entry exists unless
/// the entry went too; it may be newer than the entry, which is what a
/// caller wants.
pub(super) fn at_step_of(
    shared: &Shared,
    parent: &InteractiveHandoffParent,
    step: &StepKey,
) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
    let entry = shared
        .steps
        .get(keys::step(parent, step))
        .map_err(|e| shared.engine(e))?;
    let Some(holder) = entry else {
        return Ok(None);
    };
    let id = keys::id_in_step(parent, step, &holder)?;
    let step_key = keys::step(parent, step);
    let Some(bytes) = named_record(shared, &shared.steps, &step_key, &id)? else {
        // Pruned with its entry since the entry was read: the step is free.
        return Ok(None);
    };
    let found = record::handoff(&id, &bytes)?;
    if found.value.parent != *parent || found.value.step.as_ref() != Some(step) {
        return Err(StoreError::damaged(format!(
            "index {} names handoff {id} for step {:?} of {parent}, but it belongs to {} \
             at {}; the store may be damaged",
            String::from_utf8_lossy(keys::STEPS),
            step.as_str(),
            found.value.parent,
            found.value.step.as_ref().map_or_else(
                || "no step".to_string(),
                |step| format!("step {:?}", step.as_str())
            )
        )));
    }
    Ok(Some(found))
}

fn missing(index: &[u8], id: &InteractiveHandoffId) -> StoreError {
    StoreError::damaged(format!(
        "index {} names handoff {id}, which is not stored; the store may be damaged",
        String::from_utf8_lossy(index)
    ))
}
