//! [`HandoffRepository`] on sled: one transaction over the store's trees
//! per write ([`Shared::commit`]), index trees for every list and for the
//! deadlines (C14), the `handoff_steps` key that allows one handoff per
//! parent and step (C12), and the history (C15): every write that changes
//! a handoff appends its event in the same transaction.
//!
//! - `indexes.rs`: the index entries a handoff has, how a write moves
//!   them, and the upgrade's fill of the trees older formats lack.
//! - `history.rs`: appending and removing events; reading a history.
//! - `list.rs`: lists, one index walk each.
//! - `prune.rs`: prune batches and their count.
//! - `reads.rs`: reads through an index entry (a parent's active handoff,
//!   its handoff for a step, the record any entry names).

mod history;
mod list;
mod prune;
mod reads;

use std::collections::HashSet;

use ::sled::IVec;
use async_trait::async_trait;
use lf_handoff_application::ports::{
    recorded_change, Decided, Decision, HandoffRepository, InsertOutcome, PruneCount, SwapOutcome,
    TransitionOutcome, Versioned,
};
use lf_handoff_application::{ListQuery, StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, HandoffEvent, InteractiveHandoff, Transition};
use time::OffsetDateTime;

use super::error::{abort, failed, Abort};
use super::handle::Shared;
use super::indexes::IndexKeys;
use super::trees::{TxResult, TxTrees};
use super::{keys, record, SledStore};
use history::{read_history, Append};
pub(super) use reads::{active_of, at_step_of, named_record};

#[async_trait]
impl HandoffRepository for SledStore {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        let id = id.clone();
        self.hold
            .get(
                |trees| &trees.handoffs,
                keys::handoff(&id),
                move |bytes| record::handoff(&id, &bytes),
            )
            .await
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        let query = query.clone();
        self.run(move |shared| {
            let handoffs = list::list(shared, &query)?;
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
            let new = NewHandoff {
                id_key: keys::handoff(&handoff.id),
                parent_key: keys::parent(&handoff.parent),
                index: IndexKeys::of(&handoff),
                handoff: &handoff,
                stored: &stored,
            };
            let outcome = shared.commit(|tx| {
                new.check(tx, parent_version)?;
                new.write(tx)?;
                history::append(tx, &handoff.id, &change, &actor, Append::First)
            })?;
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
            let loaded = shared.get(&shared.trees.handoffs, &id_key, |bytes| {
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
            for entry in shared.trees.due.range(..=keys::due_until(now)) {
                let (key, _) = entry.map_err(|e| shared.engine(e))?;
                let id = keys::id_in_index(keys::DUE, &key, 0)?;
                let Some(bytes) = named_record(shared, &shared.trees.due, &key, &id)? else {
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
        self.run(move |shared| prune::count_prunable(shared, finished_before))
            .await
    }

    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount> {
        self.run(move |shared| prune::prune_batch(shared, finished_before, limit))
            .await
    }
}

/// A handoff an insert stores, with its keys, computed once before the
/// transaction (which sled may run more than once).
struct NewHandoff<'a> {
    handoff: &'a InteractiveHandoff,
    /// Its record, encoded.
    stored: &'a [u8],
    id_key: Vec<u8>,
    parent_key: Vec<u8>,
    index: IndexKeys,
}

impl NewHandoff<'_> {
    /// Aborts unless the parent is still at `parent_version`, the step is
    /// free (checked first: a racer that took the step took the slot too,
    /// and the step is what the caller must see), the parent's slot is
    /// free for an active handoff, and the id is not stored.
    fn check(&self, tx: &TxTrees<'_>, parent_version: u64) -> TxResult {
        let Some(parent) = tx.parents.get(&self.parent_key)? else {
            return abort(Abort::ParentChanged);
        };
        let version = record::version(&self.handoff.parent, &parent).map_err(failed)?;
        if version != parent_version {
            return abort(Abort::ParentChanged);
        }
        if let Some(step_key) = &self.index.step {
            if tx.steps.get(step_key)?.is_some() {
                return abort(Abort::StepTaken);
            }
        }
        if self.handoff.is_active() && tx.slots.get(&self.parent_key)?.is_some() {
            return abort(Abort::ParentBusy);
        }
        if tx.handoffs.get(&self.id_key)?.is_some() {
            return abort(Abort::Failed(StoreError::unavailable(
                UnavailableKind::Other,
                format!(
                    "handoff id {} is already stored; refusing to overwrite it",
                    self.handoff.id
                ),
            )));
        }
        Ok(())
    }

    /// Writes the record, its index entries and its step's entry.
    fn write(&self, tx: &TxTrees<'_>) -> TxResult {
        tx.handoffs.insert(self.id_key.as_slice(), self.stored)?;
        self.index.add(tx, &self.id_key)?;
        if let Some(step_key) = &self.index.step {
            tx.steps
                .insert(step_key.as_slice(), self.id_key.as_slice())?;
        }
        Ok(())
    }
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
    let outcome = shared.commit(|tx| {
        // The bytes decided on, or another write won (or pruned it):
        // versions only grow, so equal bytes are the same record at the
        // same version.
        if tx.handoffs.get(id_key)?.as_ref() != Some(current_bytes) {
            return abort(Abort::Lost);
        }
        if old_index != new_index {
            old_index.replace(&new_index, tx, id_key)?;
        }
        tx.handoffs.insert(id_key, stored.as_slice())?;
        history::append(tx, &handoff.id, &change, actor, Append::Next)
    })?;
    match outcome {
        Ok(()) => Ok(SwapOutcome::Swapped),
        Err(_) => Ok(SwapOutcome::Lost),
    }
}
