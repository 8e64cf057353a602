//! [`HandoffRepository`] on sled: one multi-tree transaction per write,
//! index trees for every list and for the deadlines (C14), the
//! `handoff_steps` key that allows one handoff per parent and step (C12),
//! and the history (C15): every write that changes a handoff appends its
//! event in the same transaction.

use std::collections::HashSet;
use std::fmt::Display;

use ::sled::transaction::{ConflictableTransactionError, Transactional as _, TransactionalTree};
use ::sled::{IVec, Tree};
use async_trait::async_trait;
use lf_handoff_application::ports::{
    recorded_change, Decided, Decision, HandoffRepository, InsertOutcome, SwapOutcome,
    TransitionOutcome, Versioned,
};
use lf_handoff_application::{ListQuery, StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffChange, HandoffEvent, InteractiveHandoff, InteractiveHandoffParent, StepKey,
    Transition,
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
            let handoffs = match (&query.parent, query.active_only) {
                (Some(parent), true) => active_of(shared, parent)?
                    .map(|active| active.value)
                    .into_iter()
                    .collect(),
                (Some(parent), false) => {
                    let prefix = keys::by_parent_prefix(parent);
                    let keys = shared.by_parent.scan_prefix(&prefix);
                    let handoffs = read_indexed(shared, &shared.by_parent, keys, prefix.len())?;
                    if let Some(stray) = handoffs.iter().find(|h| h.parent != *parent) {
                        return Err(StoreError::damaged(format!(
                            "index {} lists handoff {} under {parent}, but it belongs to {}; \
                             the store may be damaged",
                            String::from_utf8_lossy(keys::BY_PARENT),
                            stray.id,
                            stray.parent
                        )));
                    }
                    handoffs
                }
                (None, true) => {
                    let mut handoffs =
                        read_indexed(shared, &shared.active, shared.active.iter(), 0)?;
                    // A handoff finished between the index read and the
                    // record read is no longer active.
                    handoffs.retain(InteractiveHandoff::is_active);
                    handoffs
                }
                (None, false) => {
                    read_indexed(shared, &shared.by_created, shared.by_created.iter(), 0)?
                }
            };
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
            let trees = (
                &shared.parents,
                &shared.steps,
                &shared.handoffs,
                &shared.by_created,
                &shared.by_parent,
                &shared.active,
                &shared.slots,
                &shared.due,
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
                let bytes = shared
                    .handoffs
                    .get(keys::handoff(&id))
                    .map_err(|e| shared.engine(e))?
                    .ok_or_else(|| missing(keys::DUE, &id))?;
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
}

/// The events of handoff `id`, in seq order, checked against their keys:
/// seqs 1, 2, 3, ... with no gap, at increasing positions.
///
/// No snapshot is needed: an event is committed in the same transaction as
/// its `handoff_history` entry, and sled's reads see a transaction whole or
/// not at all, so every entry read names an event that is stored; one
/// appended during the scan is read or not, after all those before it.
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
        let bytes = shared
            .events
            .get(keys::event(position))
            .map_err(|e| shared.engine(e))?
            .ok_or_else(|| {
                damaged(format!(
                    "event {seq} names position {position}, where no event is stored"
                ))
            })?;
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
        &shared.events,
        &shared.history,
        &shared.counters,
    );
    let outcome = shared.commit(
        &trees,
        |(handoffs, by_created, by_parent, active, slots, due, events, history, counters)| {
            // The bytes decided on, or another write won: versions only
            // grow, so equal bytes are the same record at the same version.
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
                };
                old_index.remove(&indexes, id_key)?;
                new_index.add(&indexes, id_key)?;
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
}

/// The index entries a handoff has: always `by_created` and `by_parent`;
/// `active` and the parent's slot while it is not terminal; its
/// `handoffs_due` entry while it is not terminal and has a deadline; its
/// `handoff_steps` entry when it has a step (written by the insert alone,
/// since a handoff's step never changes).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct IndexKeys {
    /// The key in `handoffs_by_created`, and in `handoffs_active` while
    /// the handoff is active.
    pub created: Vec<u8>,
    /// The key in `handoffs_by_parent`.
    pub by_parent: Vec<u8>,
    /// The parent's slot key, when the handoff is active.
    pub slot: Option<Vec<u8>>,
    /// The deadline key, when the handoff is active and has a deadline.
    pub due: Option<Vec<u8>>,
    /// The parent and step key, when the handoff has a step.
    pub step: Option<Vec<u8>>,
}

type TxResult = Result<(), ConflictableTransactionError<Abort>>;

impl IndexKeys {
    pub(super) fn of(handoff: &InteractiveHandoff) -> Self {
        Self {
            created: keys::created(handoff.created_at, &handoff.id),
            by_parent: keys::by_parent(&handoff.parent, handoff.created_at, &handoff.id),
            slot: handoff.is_active().then(|| keys::parent(&handoff.parent)),
            due: handoff
                .expires_at
                .filter(|_| handoff.is_active())
                .map(|deadline| keys::due(deadline, &handoff.id)),
            step: handoff
                .step
                .as_ref()
                .map(|step| keys::step(&handoff.parent, step)),
        }
    }

    /// Writes the entries, taking the parent's slot; a slot held by another
    /// handoff would break invariant I6 and aborts.
    fn add(&self, trees: &Indexes<'_>, id_key: &[u8]) -> TxResult {
        trees.by_created.insert(self.created.as_slice(), &[][..])?;
        trees.by_parent.insert(self.by_parent.as_slice(), &[][..])?;
        if let Some(slot) = &self.slot {
            if let Some(holder) = trees.slots.get(slot)? {
                if holder != id_key {
                    return abort(Abort::Failed(StoreError::damaged(format!(
                        "refusing a second active handoff for {}: {} holds its slot (I6)",
                        String::from_utf8_lossy(slot),
                        String::from_utf8_lossy(&holder)
                    ))));
                }
            }
            trees.active.insert(self.created.as_slice(), &[][..])?;
            trees.slots.insert(slot.as_slice(), id_key)?;
        }
        if let Some(due) = &self.due {
            trees.due.insert(due.as_slice(), &[][..])?;
        }
        Ok(())
    }

    /// Removes the entries, freeing the parent's slot if this handoff holds it.
    fn remove(&self, trees: &Indexes<'_>, id_key: &[u8]) -> TxResult {
        trees.by_created.remove(self.created.as_slice())?;
        trees.by_parent.remove(self.by_parent.as_slice())?;
        if let Some(slot) = &self.slot {
            trees.active.remove(self.created.as_slice())?;
            if trees
                .slots
                .get(slot)?
                .is_some_and(|holder| holder == id_key)
            {
                trees.slots.remove(slot.as_slice())?;
            }
        }
        if let Some(due) = &self.due {
            trees.due.remove(due.as_slice())?;
        }
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
/// the same transaction as the record and never changes or goes, so a
/// record read after its entry exists; it may be newer than the entry,
/// which is what a caller wants.
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
    let bytes = shared
        .handoffs
        .get(&holder)
        .map_err(|e| shared.engine(e))?
        .ok_or_else(|| missing(keys::STEPS, &id))?;
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

/// Reads the records an index names, in index order.
fn read_indexed(
    shared: &Shared,
    index: &Tree,
    entries: ::sled::Iter,
    skip: usize,
) -> StoreResult<Vec<InteractiveHandoff>> {
    let name = index.name();
    let mut handoffs = Vec::new();
    for entry in entries {
        let (key, _) = entry.map_err(|e| shared.engine(e))?;
        let id = keys::id_in_index(&name, &key, skip)?;
        let bytes = shared
            .handoffs
            .get(keys::handoff(&id))
            .map_err(|e| shared.engine(e))?
            .ok_or_else(|| missing(&name, &id))?;
        handoffs.push(record::handoff(&id, &bytes)?.value);
    }
    Ok(handoffs)
}

fn missing(index: &[u8], id: &InteractiveHandoffId) -> StoreError {
    StoreError::damaged(format!(
        "index {} names handoff {id}, which is not stored; the store may be damaged",
        String::from_utf8_lossy(index)
    ))
}
