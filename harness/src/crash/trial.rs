//! Checking one trial: the child's acknowledgements against the reopened
//! store, the writes in flight at the kill, the crash story, the
//! invariants, and (through `histories`) the histories; and after the
//! last trial, the final sweep of every record.

use lf_handoff_adapters::ListQuery;
use std::collections::{BTreeMap, BTreeSet};

use lf_handoff_adapters::{open_store, Store};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    check_one_active_per_parent, InteractiveHandoff, InteractiveHandoffParent,
    InteractiveHandoffStatus,
};
use lf_handoff_domain::parent::Parent;

use super::child::{parse_event, Event};
use super::histories::{check_histories, Reading};
use super::ledger::{Ledger, StepOpened, Story, Wake};
use super::{CrashFigures, CrashOptions, SAMPLED_HISTORIES};
use crate::check::{
    handoff_same_or_later, parent_same_or_later, progress, AckedChange, HistoryFindings,
};
use crate::crash_child::{child_actor, parse_reference};
use crate::rng::Rng;
use crate::target::StoreTarget;

/// Which trial is checked, how the run was set up, and the random source
/// that picks the histories sampled.
pub(super) struct Checking<'a> {
    pub(super) trial: u64,
    pub(super) options: &'a CrashOptions,
    pub(super) sampling: &'a mut Rng,
}

/// Checks the store after one kill against what the child acknowledged and
/// what earlier trials observed.
pub(super) async fn check_trial(
    store: &Store,
    lines: &[String],
    checking: Checking<'_>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let Checking {
        trial,
        options,
        sampling,
    } = checking;
    let stored: BTreeMap<InteractiveHandoffId, InteractiveHandoff> =
        match store.list_interactive_handoffs(ListQuery::default()).await {
            Ok(all) => {
                check_invariants(&all, figures);
                all.into_iter().map(|h| (h.id.clone(), h)).collect()
            }
            Err(e) => {
                figures.violate(format!("listing every handoff failed: {e}"));
                return;
            }
        };

    // The handoffs this trial created or changed: their histories are read.
    let mut to_read: BTreeSet<InteractiveHandoffId> = stored
        .iter()
        .filter(|(id, now)| ledger.handoffs.get(*id) != Some(*now))
        .map(|(id, _)| id.clone())
        .collect();

    check_earlier_records(&stored, ledger, figures);
    let (open_lanes, acked) = check_acks(store, lines, trial, &stored, ledger, figures).await;

    // Transitions in flight at the kill: whole or not at all.
    for (kind, key) in open_lanes.values() {
        figures.in_flight += 1;
        match in_flight_applied(store, kind, key, &stored, ledger).await {
            Ok(true) => figures.in_flight_applied += 1,
            Ok(false) => {}
            Err(message) => figures.violate(message),
        }
    }

    // One handoff per step; no wake went back to an older generation.
    check_story(&stored, &mut ledger.story, figures);

    // Every change has its event, and no event is without its change.
    for record in stored.values() {
        ledger.saw(record);
    }
    to_read.extend(
        acked
            .iter()
            .map(|change| change.id.clone())
            .filter(|id| stored.contains_key(id)),
    );
    let others: Vec<&InteractiveHandoffId> =
        stored.keys().filter(|id| !to_read.contains(*id)).collect();
    if !others.is_empty() {
        for _ in 0..SAMPLED_HISTORIES.min(others.len()) {
            to_read.insert(others[sampling.index(others.len())].clone());
        }
    }
    let reading = Reading {
        trial,
        lanes: options.child_lanes(),
        doctor: options.fake_history,
    };
    check_histories(store, &to_read, &stored, &acked, &reading, ledger, figures).await;
    keep_what_is_stored(stored, ledger, figures);
}

/// Earlier trials' records: still there, never behind.
fn check_earlier_records(
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &Ledger,
    figures: &mut CrashFigures,
) {
    for (id, known) in &ledger.handoffs {
        match stored.get(id) {
            None => figures.lose(format!(
                "handoff {id}, held after an earlier trial, is gone"
            )),
            Some(now) => {
                if let Err(message) = handoff_same_or_later(known, now) {
                    figures.lose(format!("after a later crash: {message}"));
                }
            }
        }
    }
}

/// Checks every acknowledgement the child printed and follows the story's
/// steps; returns the writes each lane had begun and not acknowledged
/// (by lane: kind and key), and the changes acknowledged.
async fn check_acks(
    store: &Store,
    lines: &[String],
    trial: u64,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) -> (BTreeMap<usize, (String, String)>, Vec<AckedChange>) {
    let mut open_lanes: BTreeMap<usize, (String, String)> = BTreeMap::new();
    let mut acked: Vec<AckedChange> = Vec::new();
    for line in lines {
        let event = match parse_event(line) {
            Ok(event) => event,
            Err(message) => {
                figures.fail(message);
                continue;
            }
        };
        match event {
            Event::Ready => {}
            Event::Error(message) => figures.fail(format!("the child reported: {message}")),
            Event::Begin { lane, kind, key } => {
                open_lanes.insert(lane, (kind, key));
            }
            Event::Ack {
                lane,
                kind,
                key,
                json,
            } => {
                open_lanes.remove(&lane);
                let ack = Ack {
                    kind: &kind,
                    key: &key,
                    json: &json,
                    actor: child_actor(trial, lane),
                };
                check_ack(store, &ack, stored, ledger, figures, &mut acked).await;
            }
            Event::Moved { parent, step } => {
                match ledger
                    .story
                    .parents
                    .iter_mut()
                    .find(|(reference, _, _)| *reference == parent)
                {
                    Some((_, _, at)) => *at = (*at).max(step),
                    None => figures.fail(format!("the child moved {parent}, not a story parent")),
                }
            }
        }
    }
    (open_lanes, acked)
}

/// Nothing appears that nobody wrote; from now on the stored state is
/// what must survive.
fn keep_what_is_stored(
    stored: BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    for (id, handoff) in &stored {
        if !ledger.handoffs.contains_key(id) {
            figures.violate(format!(
                "handoff {id} on {} is stored but no acknowledged or in-flight open made it",
                handoff.parent
            ));
        }
    }
    for (id, handoff) in stored {
        ledger.handoffs.insert(id, handoff);
    }
}

/// The story's checks on what is stored: every handoff stored with a step
/// counts for that step, and no stored holder is older than a generation
/// told it holds the wake.
pub(super) fn check_story(
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    story: &mut Story,
    figures: &mut CrashFigures,
) {
    for handoff in stored.values() {
        if let Some(step) = &handoff.step {
            story.saw_at_step(&handoff.parent, step, &handoff.id, figures);
        }
    }
    story.check_holders(|id| stored.get(id), figures);
}

/// Checks a story acknowledgement (`step-open` or `wake`) beyond what
/// every handoff acknowledgement is checked for, and returns its record
/// and whether the acknowledged answer says the record changed (a handoff
/// created, a wake held by the claiming generation).
fn check_story_ack(
    kind: &str,
    json: &str,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) -> Result<(InteractiveHandoff, bool), String> {
    if kind == "step-open" {
        let opened: StepOpened = serde_json::from_str(json)
            .map_err(|e| format!("unreadable {kind} acknowledgement: {e}"))?;
        let handoff = opened.handoff;
        if handoff.step.as_ref() != Some(&opened.step) {
            figures.violate(format!(
                "an open of {} at step {} returned handoff {} of step {:?}",
                handoff.parent, opened.step, handoff.id, handoff.step
            ));
        }
        if opened.created {
            figures.steps_opened += 1;
        } else {
            figures.steps_rerun += 1;
            figures.steps_rerun_finished += u64::from(handoff.status.is_terminal());
        }
        ledger
            .story
            .saw_at_step(&handoff.parent, &opened.step, &handoff.id, figures);
        return Ok((handoff, opened.created));
    }
    let wake: Wake = serde_json::from_str(json)
        .map_err(|e| format!("unreadable {kind} acknowledgement: {e}"))?;
    let handoff = wake.handoff;
    let (generation, id) = (wake.generation, &handoff.id);
    let holder = handoff.wake_claimed_by_generation;
    if wake.claimed {
        if holder != Some(generation) {
            figures.violate(format!(
                "generation {generation} was told it holds the wake of {id}, whose record \
                 names {holder:?}"
            ));
        }
        let before = ledger
            .handoffs
            .get(id)
            .and_then(|known| known.wake_claimed_by_generation);
        if before.is_some_and(|old| old < generation) {
            figures.wakes_taken_over += 1;
        }
        ledger.story.told_holder(id, generation, figures);
    } else if holder.is_some_and(|holder| holder > generation) {
        figures.old_claims_refused += 1;
    }
    if !wake.claimed && ledger.story.generation(&handoff.parent) == Some(generation) {
        figures.violate(format!(
            "generation {generation}, the current body of {}, was refused the wake of {id} \
             (holder {holder:?})",
            handoff.parent
        ));
    }
    let held = wake.claimed && holder == Some(generation);
    Ok((handoff, held))
}

/// One acknowledgement: its kind, key and JSON, and the actor of the lane
/// that printed it.
struct Ack<'a> {
    kind: &'a str,
    key: &'a str,
    json: &'a str,
    actor: String,
}

async fn check_ack(
    store: &Store,
    ack: &Ack<'_>,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
    acked: &mut Vec<AckedChange>,
) {
    let (kind, json) = (ack.kind, ack.json);
    match kind {
        "wave" | "parent" | "body" => check_parent_ack(store, kind, json, ledger, figures).await,
        "expire" => {
            // The handoffs one write expired: a sweep, or an attach or
            // finish refused because the deadline had passed.
            let expired: Vec<InteractiveHandoff> = match serde_json::from_str(json) {
                Ok(expired) => expired,
                Err(e) => return figures.fail(format!("unreadable {kind} acknowledgement: {e}")),
            };
            for handoff in expired {
                *figures.acknowledged.entry(kind.to_string()).or_default() += 1;
                if handoff.status != InteractiveHandoffStatus::Expired {
                    figures.violate(format!(
                        "handoff {} was acknowledged as expired but is {}",
                        handoff.id, handoff.status
                    ));
                }
                // A sweep reports only what it expired itself; a refused
                // write may find the handoff expired by another sweeper.
                let actor = (ack.key == "due").then(|| ack.actor.clone());
                acked.extend(AckedChange::of(kind, &handoff, actor));
                check_handoff_ack(kind, handoff, stored, ledger, figures);
            }
        }
        "open" | "attach" | "finish" | "claim" | "extend" | "step-open" | "wake" => {
            *figures.acknowledged.entry(kind.to_string()).or_default() += 1;
            let parsed = if matches!(kind, "step-open" | "wake") {
                check_story_ack(kind, json, ledger, figures)
            } else {
                serde_json::from_str(json)
                    .map(|handoff| (handoff, true))
                    .map_err(|e| format!("unreadable {kind} acknowledgement: {e}"))
            };
            let (acknowledged, changed) = match parsed {
                Ok(parsed) => parsed,
                Err(message) => return figures.fail(message),
            };
            if changed {
                // A story claim may have been the holder's retry, so only a
                // claim made in this trial must name this lane (checked with
                // every new event).
                let actor = (kind != "wake").then(|| ack.actor.clone());
                acked.extend(AckedChange::of(kind, &acknowledged, actor));
            }
            if kind == "claim" {
                // A lifecycle lane acknowledges only a claim it won.
                if let Some(generation) = acknowledged.wake_claimed_by_generation {
                    ledger
                        .story
                        .told_holder(&acknowledged.id, generation, figures);
                }
            }
            check_handoff_ack(kind, acknowledged, stored, ledger, figures);
        }
        other => figures.fail(format!("the child acknowledged an unknown kind {other:?}")),
    }
}

/// Checks an acknowledged parent (a wave, a project or task session, a
/// recorded body) against the stored one.
async fn check_parent_ack(
    store: &Store,
    kind: &str,
    json: &str,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    *figures.acknowledged.entry(kind.to_string()).or_default() += 1;
    let acknowledged: Parent = match serde_json::from_str(json) {
        Ok(parent) => parent,
        Err(e) => return figures.fail(format!("unreadable {kind} acknowledgement: {e}")),
    };
    let reference = acknowledged.reference();
    match store.get_parent(&reference).await {
        Ok(Some(now)) => {
            if let Err(message) = parent_same_or_later(&acknowledged, &now) {
                figures.lose(format!("acknowledged {kind}: {message}"));
            }
        }
        Ok(None) => figures.lose(format!("acknowledged {kind} {reference} is missing")),
        Err(e) => figures.violate(format!("reading parent {reference}: {e}")),
    }
    ledger.parents.insert(reference, acknowledged);
}

/// Checks an acknowledged handoff record against the stored one and keeps
/// the furthest of the two known.
fn check_handoff_ack(
    kind: &str,
    acknowledged: InteractiveHandoff,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let id = acknowledged.id.clone();
    ledger.saw(&acknowledged);
    match stored.get(&id) {
        Some(now) => {
            if let Err(message) = handoff_same_or_later(&acknowledged, now) {
                figures.lose(format!("acknowledged {kind}: {message}"));
            }
        }
        None => figures.lose(format!(
            "acknowledged {kind} of handoff {id}: it is missing"
        )),
    }
    let further = ledger
        .handoffs
        .get(&id)
        .is_some_and(|known| progress(known) > progress(&acknowledged));
    if !further {
        ledger.handoffs.insert(id, acknowledged);
    }
}

/// Whether a transition in flight at the kill is visible after the restart.
async fn in_flight_applied(
    store: &Store,
    kind: &str,
    key: &str,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
) -> Result<bool, String> {
    match kind {
        "wave" | "parent" | "body" => {
            let reference = parse_reference(key)?;
            let now = store
                .get_parent(&reference)
                .await
                .map_err(|e| format!("reading parent {reference}: {e}"))?;
            let Some(now) = now else {
                return Ok(false);
            };
            let applied = match ledger.parents.get(&reference) {
                None => true,
                Some(known) => now.body_generation() > known.body_generation(),
            };
            ledger.parents.insert(reference, now);
            Ok(applied)
        }
        "open" | "step-open" => {
            let reference = parse_reference(key)?;
            let mut applied = false;
            for (id, handoff) in stored {
                if handoff.parent == reference && !ledger.handoffs.contains_key(id) {
                    ledger.handoffs.insert(id.clone(), handoff.clone());
                    applied = true;
                }
            }
            Ok(applied)
        }
        "expire" if key == "due" => Ok(stored.iter().any(|(id, now)| {
            now.status == InteractiveHandoffStatus::Expired
                && ledger
                    .handoffs
                    .get(id)
                    .is_some_and(|known| known.status != InteractiveHandoffStatus::Expired)
        })),
        "attach" | "finish" | "claim" | "wake" | "extend" | "expire" => {
            let id = InteractiveHandoffId::parse(key).map_err(|e| e.to_string())?;
            let (Some(known), Some(now)) = (ledger.handoffs.get(&id), stored.get(&id)) else {
                return Err(format!(
                    "{kind} of {id} was in flight but the handoff is unknown"
                ));
            };
            Ok(progress(now) > progress(known)
                || (kind == "extend" && now.expires_at != known.expires_at))
        }
        other => Err(format!("the child began an unknown kind {other:?}")),
    }
}

pub(super) fn check_invariants(all: &[InteractiveHandoff], figures: &mut CrashFigures) {
    for handoff in all {
        if let Err(violation) = handoff.validate() {
            figures.violate(violation.to_string());
        }
    }
    if let Err(violation) = check_one_active_per_parent(all) {
        figures.violate(violation.to_string());
    }
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
