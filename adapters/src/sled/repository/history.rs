//! The history (C15) in a transaction: appending a change's event at the
//! store's next position and the handoff's next seq, and removing a
//! handoff's events (a prune); and reading a handoff's history.

use std::fmt::Display;

use ::sled::transaction::ConflictableTransactionError;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, HandoffChange, HandoffEvent};

use crate::sled::error::{abort, failed, Abort};
use crate::sled::handle::Shared;
use crate::sled::trees::{TxResult, TxTrees};
use crate::sled::{keys, record};

/// Whether an event starts a handoff's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Append {
    /// The `opened` event of a new handoff: seq 1, or the store is damaged.
    First,
    /// A later change: the handoff's next seq (1 for a handoff stored by a
    /// release without history that changes for the first time since).
    Next,
}

/// Appends `change` of handoff `id` by `actor` at the store's next
/// position and the handoff's next seq, both read and raised in this
/// transaction: sled runs transactions one at a time, so positions follow
/// commit order, and a counter that only grows never gives a position or
/// seq twice.
pub(super) fn append(
    tx: &TxTrees<'_>,
    id: &InteractiveHandoffId,
    change: &HandoffChange,
    actor: &Actor,
    append: Append,
) -> TxResult {
    let position = next(tx, keys::POSITION, &"the history's last position")?;
    let seq_key = keys::seq_counter(id);
    let seq = next(tx, &seq_key, &format_args!("the last seq of handoff {id}"))?;
    let damaged = |detail: String| {
        abort(Abort::Failed(StoreError::damaged(format!(
            "refusing to append to the history of handoff {id}: {detail}; the store may be \
             damaged"
        ))))
    };
    if append == Append::First && seq != 1 {
        return damaged(format!(
            "it is new, yet its counter says it has {} events",
            seq - 1
        ));
    }
    let event_key = keys::event(position);
    if tx.events.get(event_key)?.is_some() {
        return damaged(format!(
            "position {position} is taken, yet the counter says it is the next one"
        ));
    }
    let history_key = keys::history(id, seq);
    if tx.history.get(&history_key)?.is_some() {
        return damaged(format!(
            "event {seq} is stored, yet the counter says it is the next one"
        ));
    }
    let event = change
        .clone()
        .into_event(id.clone(), seq, position, actor.clone());
    let bytes = record::encode_event(&event).map_err(failed)?;
    tx.events.insert(&event_key[..], bytes)?;
    tx.history.insert(history_key, &event_key[..])?;
    tx.counters.insert(keys::POSITION, &event_key[..])?;
    tx.counters.insert(seq_key, &seq.to_be_bytes()[..])?;
    Ok(())
}

/// Removes every event of handoff `id`, their `handoff_history` entries
/// and its seq counter (a prune, C17), and returns how many events it
/// removed. Seqs run 1, 2, ... up to the counter without a gap; a gap is
/// damage and aborts.
pub(super) fn remove_all(
    tx: &TxTrees<'_>,
    id: &InteractiveHandoffId,
) -> Result<u64, ConflictableTransactionError<Abort>> {
    let seq_key = keys::seq_counter(id);
    let what = format_args!("the last seq of handoff {id}");
    let last = match tx.counters.get(&seq_key)? {
        Some(bytes) => record::counter(&what, &bytes).map_err(failed)?,
        None => 0,
    };
    let mut removed = 0;
    // Bounded by the entries there are, not by the counter alone.
    for seq in 1..=last {
        let history_key = keys::history(id, seq);
        let Some(position) = tx.history.remove(history_key)? else {
            return abort(Abort::Failed(StoreError::damaged(format!(
                "the history of handoff {id} has no event {seq} where its counter says {last}; \
                 the store may be damaged and nothing was pruned"
            ))));
        };
        let position = record::counter(
            &format_args!("position of event {seq} of handoff {id}"),
            &position,
        )
        .map_err(failed)?;
        if tx.events.remove(&keys::event(position)[..])?.is_some() {
            removed += 1;
        }
    }
    tx.counters.remove(seq_key)?;
    Ok(removed)
}

/// One more than the counter at `key` (absent: 0).
fn next(
    tx: &TxTrees<'_>,
    key: &[u8],
    what: &dyn Display,
) -> Result<u64, ConflictableTransactionError<Abort>> {
    let last = match tx.counters.get(key)? {
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

/// The events of handoff `id`, in seq order, checked against their keys:
/// seqs 1, 2, 3, ... with no gap, at increasing positions.
///
/// No snapshot is needed: an event is committed in the same transaction as
/// its `handoff_history` entry, and sled's reads see a transaction whole or
/// not at all, so every entry read names an event that is stored; one
/// appended during the scan is read or not, after all those before it. A
/// handoff pruned during the scan has no history (the events go with
/// their entries, and the record with them).
pub(super) fn read_history(
    shared: &Shared,
    id: &InteractiveHandoffId,
) -> StoreResult<Vec<HandoffEvent>> {
    let prefix = keys::history_prefix(id);
    let mut events: Vec<HandoffEvent> = Vec::new();
    for entry in shared.trees.history.scan_prefix(&prefix) {
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
        let expected_seq = events.last().map_or(1, |last| last.seq.saturating_add(1));
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
            .trees
            .events
            .get(keys::event(position))
            .map_err(|e| shared.engine(e))?;
        let Some(bytes) = found else {
            // A prune removes the events with their entries in one
            // transaction: an entry gone too means the handoff was pruned
            // while its history was read.
            if !shared
                .trees
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
    }
    Ok(events)
}
