//! Prune (C17) on sled: the walk of `handoffs_prunable` up to the cutoff,
//! and a batch removed in one transaction over every tree but the
//! parents': each handoff's record, index entries, step, events, history
//! entries and seq counter.

use lf_handoff_application::ports::PruneCount;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus;
use time::OffsetDateTime;

use super::history::remove_all;
use super::reads::named_record;
use crate::sled::error::{abort, failed, Abort};
use crate::sled::handle::Shared;
use crate::sled::indexes::IndexKeys;
use crate::sled::trees::TxTrees;
use crate::sled::{keys, record};

/// How many handoffs a prune at `finished_before` would remove, and how
/// many events they hold.
pub(super) fn count_prunable(
    shared: &Shared,
    finished_before: OffsetDateTime,
) -> StoreResult<PruneCount> {
    let trees = &shared.trees;
    let mut count = PruneCount::default();
    for entry in trees.prunable.range(..keys::before(finished_before)) {
        let (key, _) = entry.map_err(|e| shared.engine(e))?;
        let id = keys::id_in_index(keys::PRUNABLE, &key, 0)?;
        if named_record(shared, &trees.prunable, &key, &id)?.is_none() {
            continue;
        }
        let events = match trees
            .counters
            .get(keys::seq_counter(&id))
            .map_err(|e| shared.engine(e))?
        {
            Some(bytes) => record::counter(&format_args!("the last seq of handoff {id}"), &bytes)?,
            None => 0,
        };
        count += PruneCount {
            handoffs: 1,
            events,
        };
    }
    shared.settle_reads()?;
    Ok(count)
}

/// One prune batch (C17): the first `limit` entries of `handoffs_prunable`
/// before `finished_before`, each removed in one transaction with every
/// index entry, its step, its events, their history entries and its seq
/// counter, if its record is still there.
pub(super) fn prune_batch(
    shared: &Shared,
    finished_before: OffsetDateTime,
    limit: usize,
) -> StoreResult<PruneCount> {
    let mut chosen = Vec::new();
    for entry in shared
        .trees
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
    let outcome = shared.commit(|tx| {
        let mut count = PruneCount::default();
        for id in &chosen {
            count += prune_one(tx, id, finished_before)?;
        }
        Ok(count)
    })?;
    outcome.map_err(|abort| match abort {
        Abort::Failed(error) => error,
        other => StoreError::unavailable(
            UnavailableKind::Other,
            format!("a prune batch stopped unexpectedly ({other:?}); nothing was pruned"),
        ),
    })
}

/// Removes handoff `id` in `tx`, if it is still stored, with everything
/// that is its; refuses (as damage) one that is not finished with its
/// wake claimed before `finished_before`.
fn prune_one(
    tx: &TxTrees<'_>,
    id: &InteractiveHandoffId,
    finished_before: OffsetDateTime,
) -> Result<PruneCount, ::sled::transaction::ConflictableTransactionError<Abort>> {
    let id_key = keys::handoff(id);
    // Pruned by another handle since the entry was read.
    let Some(bytes) = tx.handoffs.get(&id_key)? else {
        return Ok(PruneCount::default());
    };
    let handoff = record::handoff(id, &bytes).map_err(failed)?.value;
    let finished = handoff.status.is_terminal()
        && handoff.wake_claimed_at.is_some()
        && handoff.terminal_at.is_some_and(|at| at < finished_before);
    if !finished {
        return abort(Abort::Failed(StoreError::damaged(format!(
            "index {} names handoff {id} as finished before {finished_before} with its wake \
             claimed, but it is {}; the store may be damaged and nothing was pruned",
            String::from_utf8_lossy(keys::PRUNABLE),
            handoff.status
        ))));
    }
    let index = IndexKeys::of(&handoff);
    index.remove(tx, &id_key)?;
    // And any status entry left behind by a build that did not keep
    // `handoffs_by_status` (see the upgrade notes of `sled`): a list would
    // take it for damage once the record is gone.
    for status in InteractiveHandoffStatus::ALL {
        tx.by_status
            .remove(keys::by_status(status, handoff.created_at, id))?;
    }
    // The step is forgotten with its handoff: it may be opened again (C12
    // holds until the prune).
    if let Some(step_key) = &index.step {
        if tx
            .steps
            .get(step_key)?
            .is_some_and(|holder| holder == id_key)
        {
            tx.steps.remove(step_key.as_slice())?;
        }
    }
    let events = remove_all(tx, id)?;
    tx.handoffs.remove(id_key)?;
    Ok(PruneCount {
        handoffs: 1,
        events,
    })
}
