//! [`HandoffRepository`] on sled: one multi-tree transaction per write,
//! index trees for every list, and the `handoff_steps` key that allows one
//! handoff per parent and step (C12).

use ::sled::transaction::{Transactional as _, TransactionalTree};
use ::sled::{IVec, Tree};
use async_trait::async_trait;
use lf_handoff_application::ports::{
    Decided, Decision, HandoffRepository, InsertOutcome, SwapOutcome, TransitionOutcome, Versioned,
};
use lf_handoff_application::{ListQuery, StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, InteractiveHandoff, InteractiveHandoffParent, StepKey, Transition,
};

use super::error::{abort, failed, settle, Abort};
use super::handle::Shared;
use super::{keys, record, SledStore};

#[async_trait]
impl HandoffRepository for SledStore {
    async fn due(
        &self,
        _now: time::OffsetDateTime,
        _limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>> {
        Err(lf_handoff_application::StoreError::unavailable(
            lf_handoff_application::UnavailableKind::Other,
            "WIP: deadlines are not stored yet",
        ))
    }

    async fn history(
        &self,
        _id: &InteractiveHandoffId,
    ) -> StoreResult<Vec<lf_handoff_domain::interactive_handoff::HandoffEvent>> {
        Ok(Vec::new())
    }

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
        _actor: &Actor,
    ) -> StoreResult<InsertOutcome> {
        let stored = record::encode(1, handoff)?;
        let handoff = handoff.clone();
        self.run(move |shared| {
            let id_key = keys::handoff(&handoff.id);
            let parent_key = keys::parent(&handoff.parent);
            let index = IndexKeys::of(&handoff);
            let trees = (
                &shared.parents,
                &shared.slots,
                &shared.steps,
                &shared.handoffs,
                &shared.by_created,
                &shared.by_parent,
                &shared.active,
            );
            let outcome = shared.commit(
                &trees,
                |(parents, slots, steps, handoffs, by_created, by_parent, active)| {
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
                    index.add(by_created, by_parent, active, slots, &id_key)?;
                    if let Some(step_key) = &index.step {
                        steps.insert(step_key.as_slice(), id_key.as_slice())?;
                    }
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
        _actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>> {
        let id = id.clone();
        // Load, decision and compare-and-swap in one call: one hop to the
        // blocking pool instead of two, and one read of the record.
        self.run(move |shared| {
            let id_key = keys::handoff(&id);
            // The stored bytes are kept for the compare-and-swap.
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
            Ok(Some(match swap(shared, &id_key, bytes, &current, &next)? {
                SwapOutcome::Swapped => TransitionOutcome::Applied {
                    handoff: Box::new(next),
                    answer,
                },
                SwapOutcome::Lost => TransitionOutcome::Lost,
            }))
        })
        .await
    }
}

/// Replaces `current` (whose stored bytes are `current_bytes`) with
/// `handoff`, if and only if the record is still at `current`'s version,
/// and makes it durable.
fn swap(
    shared: &Shared,
    id_key: &[u8],
    current_bytes: IVec,
    current: &Versioned<InteractiveHandoff>,
    handoff: &InteractiveHandoff,
) -> StoreResult<SwapOutcome> {
    let expected = current.version;
    let next = record::next_version(&format_args!("handoff {}", handoff.id), expected)?;
    let stored = record::encode(next, handoff)?;
    let new_index = IndexKeys::of(handoff);
    // The step entry is written once, by the insert, and never moves.
    if new_index.step != IndexKeys::of(&current.value).step {
        return Err(StoreError::unavailable(
            UnavailableKind::Other,
            format!(
                "refusing to change the step of handoff {}: a handoff keeps its step for ever",
                handoff.id
            ),
        ));
    }
    // A transition that leaves every index entry where it is (attach,
    // claim) changes the record alone: sled's compare-and-swap of the
    // record's bytes just read settles the race as a transaction would (a
    // concurrent transaction cannot interleave with it), at a fraction of a
    // multi-tree transaction's cost.
    if IndexKeys::of(&current.value) == new_index {
        return shared.write(|| {
            let swapped = shared
                .handoffs
                .compare_and_swap(id_key, Some(current_bytes), Some(stored))
                .map_err(|e| shared.engine(e))?;
            match swapped {
                Ok(()) => {
                    shared.make_durable()?;
                    Ok(SwapOutcome::Swapped)
                }
                // The bytes changed since the read: another swap won.
                Err(_) => Ok(SwapOutcome::Lost),
            }
        });
    }
    let trees = (
        &shared.handoffs,
        &shared.by_created,
        &shared.by_parent,
        &shared.active,
        &shared.slots,
    );
    let outcome = shared.commit(
        &trees,
        |(handoffs, by_created, by_parent, active, slots)| {
            let Some(current) = handoffs.get(id_key)? else {
                return abort(Abort::Lost);
            };
            let current = record::handoff(&handoff.id, &current).map_err(failed)?;
            if current.version != expected {
                return abort(Abort::Lost);
            }
            let old_index = IndexKeys::of(&current.value);
            if old_index != new_index {
                old_index.remove(by_created, by_parent, active, slots, id_key)?;
                new_index.add(by_created, by_parent, active, slots, id_key)?;
            }
            handoffs.insert(id_key, stored.as_slice())?;
            Ok(())
        },
    )?;
    match outcome {
        Ok(()) => Ok(SwapOutcome::Swapped),
        Err(_) => Ok(SwapOutcome::Lost),
    }
}

/// The index entries a handoff has: always `by_created` and `by_parent`;
/// `active` and the parent's slot while it is not terminal; its
/// `handoff_steps` entry when it has a step (written by the insert alone,
/// since a handoff's step never changes).
#[derive(Debug, PartialEq, Eq)]
struct IndexKeys {
    created: Vec<u8>,
    by_parent: Vec<u8>,
    /// The parent's slot key, when the handoff is active.
    slot: Option<Vec<u8>>,
    /// The parent and step key, when the handoff has a step.
    step: Option<Vec<u8>>,
}

type TxResult = Result<(), ::sled::transaction::ConflictableTransactionError<Abort>>;

impl IndexKeys {
    fn of(handoff: &InteractiveHandoff) -> Self {
        Self {
            created: keys::created(handoff.created_at, &handoff.id),
            by_parent: keys::by_parent(&handoff.parent, handoff.created_at, &handoff.id),
            slot: handoff.is_active().then(|| keys::parent(&handoff.parent)),
            step: handoff
                .step
                .as_ref()
                .map(|step| keys::step(&handoff.parent, step)),
        }
    }

    /// Writes the entries, taking the parent's slot; a slot held by another
    /// handoff would break invariant I6 and aborts.
    fn add(
        &self,
        by_created: &TransactionalTree,
        by_parent: &TransactionalTree,
        active: &TransactionalTree,
        slots: &TransactionalTree,
        id_key: &[u8],
    ) -> TxResult {
        by_created.insert(self.created.as_slice(), &[][..])?;
        by_parent.insert(self.by_parent.as_slice(), &[][..])?;
        if let Some(slot) = &self.slot {
            if let Some(holder) = slots.get(slot)? {
                if holder != id_key {
                    return abort(Abort::Failed(StoreError::damaged(format!(
                        "refusing a second active handoff for {}: {} holds its slot (I6)",
                        String::from_utf8_lossy(slot),
                        String::from_utf8_lossy(&holder)
                    ))));
                }
            }
            active.insert(self.created.as_slice(), &[][..])?;
            slots.insert(slot.as_slice(), id_key)?;
        }
        Ok(())
    }

    /// Removes the entries, freeing the parent's slot if this handoff holds it.
    fn remove(
        &self,
        by_created: &TransactionalTree,
        by_parent: &TransactionalTree,
        active: &TransactionalTree,
        slots: &TransactionalTree,
        id_key: &[u8],
    ) -> TxResult {
        by_created.remove(self.created.as_slice())?;
        by_parent.remove(self.by_parent.as_slice())?;
        if let Some(slot) = &self.slot {
            active.remove(self.created.as_slice())?;
            if slots.get(slot)?.is_some_and(|holder| holder == id_key) {
                slots.remove(slot.as_slice())?;
            }
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
