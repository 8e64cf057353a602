//! What the crash harness knows the store must hold, and the crash story's
//! bookkeeping.

use std::collections::{BTreeMap, BTreeSet};

use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoff, InteractiveHandoffParent, StepKey,
};
use lf_handoff_domain::parent::Parent;
use serde::Deserialize;

use super::CrashFigures;
use crate::check::KnownChanges;

/// What the harness knows the store must hold.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Every handoff acknowledged or observed, at the furthest state seen.
    pub(super) handoffs: BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    /// Every parent acknowledged or observed, at the newest state seen.
    pub(super) parents: BTreeMap<InteractiveHandoffParent, Parent>,
    /// The crash story.
    pub(super) story: Story,
    /// What was seen of each handoff's changes and history.
    pub(super) histories: BTreeMap<InteractiveHandoffId, HistorySeen>,
}

/// What the harness saw of one handoff's history.
#[derive(Debug, Default)]
pub(super) struct HistorySeen {
    /// The changes its records showed.
    pub(super) known: KnownChanges,
    /// Its history when it was last read.
    pub(super) events: Vec<HandoffEvent>,
    /// The trial after which it was last read.
    pub(super) read_after: Option<u64>,
}

impl Ledger {
    /// Notes what `record`, acknowledged or stored, shows of its changes.
    pub(super) fn saw(&mut self, record: &InteractiveHandoff) {
        self.histories
            .entry(record.id.clone())
            .or_default()
            .known
            .saw(record);
    }
}

/// The crash story's state: its parents, what was seen of their steps, and
/// who was told it holds each wake (for every handoff).
#[derive(Debug, Default)]
pub(super) struct Story {
    /// Each story parent, the generation last recorded for it, and the step
    /// its body is at (the last one it recorded moving to).
    pub(super) parents: Vec<(InteractiveHandoffParent, u32, u64)>,
    /// The handoffs seen for each (parent, step): acknowledged by an open
    /// at the step, or stored with that step.
    pub(super) at_step:
        BTreeMap<(InteractiveHandoffParent, StepKey), BTreeSet<InteractiveHandoffId>>,
    /// The (parent, step) pairs found with more than one handoff.
    pub(super) duplicates: BTreeSet<(InteractiveHandoffParent, StepKey)>,
    /// For each handoff, the newest generation told `claimed = true`.
    pub(super) newest_holder: BTreeMap<InteractiveHandoffId, u32>,
    /// The handoffs whose wake two generations held.
    pub(super) double_held: BTreeSet<InteractiveHandoffId>,
}

impl Story {
    /// The generation the harness recorded for a story parent, if it is one.
    pub(super) fn generation(&self, parent: &InteractiveHandoffParent) -> Option<u32> {
        self.parents
            .iter()
            .find(|(reference, _, _)| reference == parent)
            .map(|(_, generation, _)| *generation)
    }

    /// Notes handoff `id` for `step` of `parent`; counts a second one.
    pub(super) fn saw_at_step(
        &mut self,
        parent: &InteractiveHandoffParent,
        step: &StepKey,
        id: &InteractiveHandoffId,
        figures: &mut CrashFigures,
    ) {
        let key = (parent.clone(), step.clone());
        let ids = self.at_step.entry(key.clone()).or_default();
        ids.insert(id.clone());
        if ids.len() > 1 && self.duplicates.insert(key) {
            let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
            figures.duplicate_steps += 1;
            figures.problems.describe(format!(
                "duplicate: {parent} has {} handoffs for step {step}: {}",
                ids.len(),
                ids.join(", ")
            ));
        }
    }

    /// Notes that `generation` was told `claimed = true` for `id`; counts
    /// a newer generation told so before it.
    pub(super) fn told_holder(
        &mut self,
        id: &InteractiveHandoffId,
        generation: u32,
        figures: &mut CrashFigures,
    ) {
        let newest = self.newest_holder.entry(id.clone()).or_insert(generation);
        if *newest > generation {
            let newer = *newest;
            self.held_twice(
                id,
                format!("generation {generation} was told it holds the wake after generation {newer} was"),
                figures,
            );
        } else {
            *newest = generation;
        }
    }

    /// Checks that each stored holder is no older than the newest
    /// generation told `claimed = true`.
    pub(super) fn check_holders<'a>(
        &mut self,
        stored: impl Fn(&InteractiveHandoffId) -> Option<&'a InteractiveHandoff>,
        figures: &mut CrashFigures,
    ) {
        let behind: Vec<(InteractiveHandoffId, u32, Option<u32>)> = self
            .newest_holder
            .iter()
            .filter_map(|(id, newest)| {
                let holder = stored(id)?.wake_claimed_by_generation;
                (holder < Some(*newest)).then(|| (id.clone(), *newest, holder))
            })
            .collect();
        for (id, newest, holder) in behind {
            self.held_twice(
                &id,
                format!("generation {newest} was told it holds the wake, but {holder:?} is stored"),
                figures,
            );
        }
    }

    fn held_twice(
        &mut self,
        id: &InteractiveHandoffId,
        message: String,
        figures: &mut CrashFigures,
    ) {
        if self.double_held.insert(id.clone()) {
            figures.double_held_wakes += 1;
            figures.problems.describe(format!(
                "wake held by two generations: handoff {id}: {message}"
            ));
        }
    }
}

/// The JSON of a `step-open` acknowledgement.
#[derive(Debug, Deserialize)]
pub(super) struct StepOpened {
    pub(super) created: bool,
    pub(super) step: StepKey,
    pub(super) handoff: InteractiveHandoff,
}

/// The JSON of a `wake` acknowledgement.
#[derive(Debug, Deserialize)]
pub(super) struct Wake {
    pub(super) generation: u32,
    pub(super) claimed: bool,
    pub(super) handoff: InteractiveHandoff,
}
