//! Reads through an index entry: a parent's active handoff (its slot) and
//! its handoff for a step, and the record any entry names.

use ::sled::{IVec, Tree};
use lf_handoff_application::ports::Versioned;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffParent, StepKey,
};

use crate::sled::error::{abort, failed, settle, Abort};
use crate::sled::handle::Shared;
use crate::sled::{keys, record};

/// The parent's active handoff, read through its slot: an empty slot is
/// one read; a taken one is read with its record in one transaction, so
/// the slot and the record agree.
pub(in crate::sled) fn active_of(
    shared: &Shared,
    parent: &InteractiveHandoffParent,
) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
    let slot_key = keys::parent(parent);
    // An empty slot is one atomic read and needs nothing more; a taken one
    // is read again with its record in one transaction, so they agree.
    if !shared
        .trees
        .slots
        .contains_key(&slot_key)
        .map_err(|e| shared.engine(e))?
    {
        return Ok(None);
    }
    let result = shared.trees.transaction(|tx| {
        let Some(holder) = tx.slots.get(&slot_key)? else {
            return Ok(None);
        };
        let id = keys::id_in_slot(parent, &holder).map_err(failed)?;
        let Some(bytes) = tx.handoffs.get(&holder)? else {
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
pub(in crate::sled) fn at_step_of(
    shared: &Shared,
    parent: &InteractiveHandoffParent,
    step: &StepKey,
) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
    let entry = shared
        .trees
        .steps
        .get(keys::step(parent, step))
        .map_err(|e| shared.engine(e))?;
    let Some(holder) = entry else {
        return Ok(None);
    };
    let id = keys::id_in_step(parent, step, &holder)?;
    let step_key = keys::step(parent, step);
    let Some(bytes) = named_record(shared, &shared.trees.steps, &step_key, &id)? else {
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

/// The record the index entry `key` of `index` names (handoff `id`), or
/// `None` when the handoff was removed (pruned) since the entry was read:
/// the entry is gone too, since a prune removes both in one transaction.
/// An entry that is still there without its record is damage.
pub(in crate::sled) fn named_record(
    shared: &Shared,
    index: &Tree,
    key: &[u8],
    id: &InteractiveHandoffId,
) -> StoreResult<Option<IVec>> {
    let found = shared
        .trees
        .handoffs
        .get(keys::handoff(id))
        .map_err(|e| shared.engine(e))?;
    if found.is_some() || !index.contains_key(key).map_err(|e| shared.engine(e))? {
        return Ok(found);
    }
    Err(missing(&index.name(), id))
}
