//! Reading and checking histories after a trial and at the end of a run
//! (C15), and the final sweep of every record.

use lf_handoff_adapters::ListQuery;
use std::collections::{BTreeMap, BTreeSet};

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
};
use lf_handoff_adapters::{open_store, Store};

use super::ledger::{HistorySeen, Ledger};
use super::trial::{check_invariants, check_story};
use super::{CrashFigures, CrashOptions};
use crate::check::{
    acked_change_has_event, handoff_same_or_later, history_matches_record, history_well_formed,
    parent_same_or_later, AckedChange, HistoryFindings,
};
use crate::crash_child::parse_child_actor;
use crate::target::StoreTarget;

/// How histories are read: after which trial, the lanes each child had, and
/// whether to doctor what was read (the self-test).
pub(super) struct Reading {
    pub(super) trial: u64,
    pub(super) lanes: usize,
    pub(super) doctor: bool,
}

/// Reads and checks the history of each of `ids` that is stored (see the
/// module documentation), with the changes `acked` in this trial.
pub(super) async fn check_histories(
    store: &Store,
    ids: &BTreeSet<InteractiveHandoffId>,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    acked: &[AckedChange],
    reading: &Reading,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let mut doctored = 0;
    for id in ids {
        let Some(record) = stored.get(id) else {
            continue;
        };
        let events = match store.history(id).await {
            Ok(events) => events,
            Err(e) => {
                figures.violate(format!("reading the history of {id}: {e}"));
                continue;
            }
        };
        let mut checked = events.clone();
        if reading.doctor {
            doctor(&mut checked, &mut doctored);
        }
        figures.history_reads += 1;
        figures.events_checked += checked.len() as u64;
        let seen = ledger.histories.entry(id.clone()).or_default();
        let mut found = HistoryFindings {
            malformed: history_well_formed(id, &checked),
            ..HistoryFindings::default()
        };
        found.append(history_matches_record(record, &checked, &seen.known));
        for change in acked.iter().filter(|change| &change.id == id) {
            found.append(acked_change_has_event(change, &checked));
        }
        found.append(compare_with_earlier_read(id, seen, &checked, reading));
        seen.events = events;
        seen.read_after = Some(reading.trial);
        figures.history(found);
    }
}

/// The self-test's lies: the first history of two events or more loses
/// its last event, the next one read gains a second `opened`.
fn doctor(checked: &mut Vec<HandoffEvent>, doctored: &mut u32) {
    if *doctored == 0 && checked.len() >= 2 {
        checked.pop();
        *doctored += 1;
    } else if *doctored == 1 {
        if let (Some(first), Some(last)) = (checked.first(), checked.last()) {
            let mut again = first.clone();
            again.seq = last.seq + 1;
            again.position = last.position + 1;
            again.at = last.at;
            checked.push(again);
            *doctored += 1;
        }
    }
}

/// What an earlier read of `id`'s history saw is still there, unchanged,
/// and the events new since then name a lane of a child started since.
fn compare_with_earlier_read(
    id: &InteractiveHandoffId,
    seen: &HistorySeen,
    checked: &[HandoffEvent],
    reading: &Reading,
) -> HistoryFindings {
    let mut found = HistoryFindings::default();
    let kept = seen
        .events
        .iter()
        .zip(checked)
        .take_while(|(before, now)| before == now)
        .count();
    let since = seen
        .read_after
        .map_or_else(String::new, |trial| format!(" after trial {trial}"));
    if kept < seen.events.len() {
        if kept == checked.len() {
            found.missing.push(format!(
                "handoff {id}: {} of the events read{since} are gone",
                seen.events.len() - kept
            ));
        } else {
            found.mismatch(format!(
                "handoff {id}: event {} read{since} has changed",
                kept + 1
            ));
        }
    }
    for event in checked.iter().skip(seen.events.len()) {
        let fits = parse_child_actor(event.actor.as_str()).is_some_and(|(trial, lane)| {
            trial <= reading.trial
                && seen.read_after.is_none_or(|after| trial > after)
                && lane < reading.lanes
        });
        if !fits {
            found.malformed.push(format!(
                "handoff {id}: event {} ({}) names the actor {:?}, not a lane of a child \
                 run{since}",
                event.seq,
                event.kind,
                event.actor.as_str()
            ));
        }
    }
    found
}

/// After the last trial: every handoff and every parent ever acknowledged
/// or observed is read back and checked once more, and so is every
/// handoff's history.
pub(super) async fn final_sweep(
    target: &StoreTarget,
    options: &CrashOptions,
    last_trial: u64,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let store = match open_store(target.config()).await {
        Ok(store) => store,
        Err(e) => return figures.fail(format!("the store does not reopen at the end: {e}")),
    };
    let all = match store.list_interactive_handoffs(ListQuery::default()).await {
        Ok(all) => all,
        Err(e) => return figures.violate(format!("listing every handoff failed: {e}")),
    };
    check_invariants(&all, figures);
    figures.handoffs_at_end = all.len();
    let stored: BTreeMap<_, _> = all.iter().map(|h| (h.id.clone(), h.clone())).collect();
    check_story(&stored, &mut ledger.story, figures);
    for (id, known) in &ledger.handoffs {
        match stored.get(id) {
            None => figures.lose(format!("handoff {id} is gone at the end")),
            Some(now) => {
                if let Err(message) = handoff_same_or_later(known, now) {
                    figures.lose(format!("at the end: {message}"));
                }
            }
        }
    }
    let mut parents: BTreeSet<InteractiveHandoffParent> = ledger.parents.keys().cloned().collect();
    parents.extend(all.iter().map(|h| h.parent.clone()));
    for reference in parents {
        match store.get_parent(&reference).await {
            Ok(Some(now)) => {
                if let Some(known) = ledger.parents.get(&reference) {
                    if let Err(message) = parent_same_or_later(known, &now) {
                        figures.lose(format!("at the end: {message}"));
                    }
                }
                figures.parents_at_end += 1;
            }
            Ok(None) => figures.lose(format!("parent {reference} is gone at the end")),
            Err(e) => figures.violate(format!("reading parent {reference}: {e}")),
        }
    }

    // Every history, once more; every event has a position of its own.
    let reading = Reading {
        trial: last_trial,
        lanes: options.child_lanes(),
        doctor: false,
    };
    let ids: BTreeSet<InteractiveHandoffId> = stored.keys().cloned().collect();
    check_histories(&store, &ids, &stored, &[], &reading, ledger, figures).await;
    let mut positions: BTreeMap<u64, &InteractiveHandoffId> = BTreeMap::new();
    let mut found = HistoryFindings::default();
    for id in &ids {
        let Some(seen) = ledger.histories.get(id) else {
            continue;
        };
        for event in &seen.events {
            *figures
                .events_at_end
                .entry(event.kind.to_string())
                .or_default() += 1;
            if let Some(other) = positions.insert(event.position, id) {
                found.malformed.push(format!(
                    "events of handoffs {other} and {id} share the position {}",
                    event.position
                ));
            }
        }
    }
    figures.history(found);
}
