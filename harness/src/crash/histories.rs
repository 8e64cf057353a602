//! Reading and checking histories after a trial and at the end of a run
//! (C15).

use std::collections::{BTreeMap, BTreeSet};

use lf_handoff_adapters::Store;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoff};

use super::ledger::{HistorySeen, Ledger};
use super::CrashFigures;
use crate::check::{
    acked_change_has_event, history_matches_record, history_well_formed, AckedChange,
    HistoryFindings,
};
use crate::crash_child::parse_child_actor;

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
