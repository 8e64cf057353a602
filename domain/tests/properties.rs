//! Property tests: any random sequence of operations on a small registry
//! only ever yields records that pass `validate()`, keeps at most one active
//! handoff per parent, and never moves a terminal handoff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use lf_handoff_domain::interactive_handoff::{
    attach, check_one_active_per_parent, claim_wake, decide_open, expire_if_due, extend, finish,
    HandoffChange, InteractiveHandoff, InteractiveHandoffId, InteractiveHandoffOutcome,
    OpenDecision, Transition,
};
use lf_handoff_domain::parent::Parent;
use proptest::prelude::*;
use support::*;

#[derive(Debug, Clone)]
enum Op {
    Open {
        parent: usize,
        generation_delta: i8,
        blank_reason: bool,
    },
    Attach {
        pick: usize,
    },
    Finish {
        pick: usize,
        outcome: u8,
        text: u8,
    },
    Claim {
        pick: usize,
        generation: u32,
    },
    NewBody {
        parent: usize,
    },
    /// Moves a deadline to `by` seconds from now (may be in the past).
    Extend {
        pick: usize,
        by: i64,
    },
    Expire {
        pick: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, -1i8..=1, any::<bool>()).prop_map(
            |(parent, generation_delta, blank_reason)| Op::Open {
                parent,
                generation_delta,
                blank_reason
            }
        ),
        any::<usize>().prop_map(|pick| Op::Attach { pick }),
        (any::<usize>(), 0..3u8, 0..3u8).prop_map(|(pick, outcome, text)| Op::Finish {
            pick,
            outcome,
            text
        }),
        (any::<usize>(), 0..8u32).prop_map(|(pick, generation)| Op::Claim { pick, generation }),
        (0..3usize).prop_map(|parent| Op::NewBody { parent }),
        (any::<usize>(), -20i64..60).prop_map(|(pick, by)| Op::Extend { pick, by }),
        any::<usize>().prop_map(|pick| Op::Expire { pick }),
    ]
}

fn outcome(kind: u8, text: u8) -> InteractiveHandoffOutcome {
    let text = ["", "done", "other"][usize::from(text % 3)].to_string();
    match kind % 3 {
        0 => InteractiveHandoffOutcome::Completed { summary: text },
        1 => InteractiveHandoffOutcome::HandedBack { summary: text },
        _ => InteractiveHandoffOutcome::Failed { reason: text },
    }
}

/// Keeps what a store would: the records, and the terminal snapshot of each
/// finished handoff to check it never moves.
struct Registry {
    parents: Vec<Parent>,
    handoffs: BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    next_id: u128,
}

impl Registry {
    fn pick(&self, pick: usize) -> Option<InteractiveHandoff> {
        if self.handoffs.is_empty() {
            return None;
        }
        self.handoffs
            .values()
            .nth(pick % self.handoffs.len())
            .cloned()
    }

    /// Stores a changed record; every change names its history event.
    fn store(&mut self, transition: Transition) {
        if let Transition::Changed(handoff) = transition {
            let before = self.handoffs.get(&handoff.id);
            assert!(
                HandoffChange::between(before, &handoff).is_ok(),
                "a change without an event: {before:?} -> {handoff:?}"
            );
            self.handoffs.insert(handoff.id.clone(), handoff);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_operations_keep_every_invariant(
        ops in proptest::collection::vec((op(), -30i64..120), 1..60)
    ) {
        let project = project(project_id(1), &wave_id(1));
        let mut registry = Registry {
            parents: vec![wave_parent(), Parent::Project(project), task_parent()],
            handoffs: BTreeMap::new(),
            next_id: 1,
        };
        let mut clock = 0i64;
        for (op, step) in ops {
            clock += step; // may step backwards
            let now = at(clock);
            let before = registry.handoffs.clone();
            match op {
                Op::Open { parent, generation_delta, blank_reason } => {
                    let parent = registry.parents[parent].clone();
                    let mut request = OpenRequest::on(&parent).build();
                    // One below (stale), equal, or one above (not recorded).
                    request.body_generation =
                        request.body_generation.saturating_add_signed(i32::from(generation_delta));
                    if blank_reason {
                        request.reason = " ".into();
                    }
                    let active = registry
                        .handoffs
                        .values()
                        .find(|h| h.parent == parent.reference() && h.is_active())
                        .cloned();
                    let id = handoff_id(registry.next_id);
                    registry.next_id += 1;
                    match decide_open(&request, &parent, active.as_ref(), id, now) {
                        Ok(OpenDecision::Create(handoff)) => {
                            prop_assert!(active.is_none());
                            registry.handoffs.insert(handoff.id.clone(), handoff);
                        }
                        Ok(OpenDecision::Replay(handoff)) => {
                            prop_assert_eq!(Some(handoff), active);
                        }
                        Err(_) => {}
                    }
                }
                Op::Attach { pick } => {
                    if let Some(h) = registry.pick(pick) {
                        if let Ok(t) = attach(&h, now) {
                            registry.store(t);
                        }
                    }
                }
                Op::Finish { pick, outcome: kind, text } => {
                    if let Some(h) = registry.pick(pick) {
                        if let Ok(t) = finish(&h, &outcome(kind, text), None, now) {
                            registry.store(t);
                        }
                    }
                }
                Op::Claim { pick, generation } => {
                    if let Some(h) = registry.pick(pick) {
                        if let Ok(claim) = claim_wake(&h, generation, now) {
                            registry.store(claim.transition);
                        }
                    }
                }
                Op::Extend { pick, by } => {
                    if let Some(h) = registry.pick(pick) {
                        if let Ok(t) = extend(&h, now + time::Duration::seconds(by), now) {
                            registry.store(t);
                        }
                    }
                }
                Op::Expire { pick } => {
                    if let Some(h) = registry.pick(pick) {
                        let due = h.is_due(now);
                        let t = expire_if_due(&h, now);
                        prop_assert_eq!(due, t.is_changed());
                        registry.store(t);
                    }
                }
                Op::NewBody { parent } => {
                    let current = registry.parents[parent].latest_process().map_or(0, |p| p.generation);
                    let session = registry.parents[parent].provider_session_id().map(str::to_string);
                    if let Ok(next) = registry.parents[parent].record_body(body(current + 1, session.as_deref()), now) {
                        registry.parents[parent] = next;
                    }
                }
            }
            for handoff in registry.handoffs.values() {
                prop_assert!(handoff.validate().is_ok(), "{:?}", handoff.validate());
            }
            prop_assert!(check_one_active_per_parent(registry.handoffs.values()).is_ok());
            for (id, old) in &before {
                let new = &registry.handoffs[id];
                if old.status.is_terminal() {
                    prop_assert_eq!(old.status, new.status);
                    prop_assert_eq!(&old.outcome, &new.outcome);
                    prop_assert_eq!(old.terminal_at, new.terminal_at);
                    prop_assert_eq!(old.created_at, new.created_at);
                    prop_assert_eq!(old.attached_at, new.attached_at);
                }
                if old.wake_claimed_by_generation.is_some() {
                    prop_assert_eq!(old, new);
                }
                // Immutable fields never change.
                prop_assert_eq!(&old.parent, &new.parent);
                prop_assert_eq!(&old.attach_argv, &new.attach_argv);
                prop_assert_eq!(&old.environment, &new.environment);
                prop_assert_eq!(old.body_generation, new.body_generation);
            }
        }
    }

    #[test]
    fn replayed_transitions_are_unchanged(pick in 0..3u8, generation in 5..9u32, step in 0i64..100) {
        let done = finish(&waiting(), &outcome(pick, 1), None, at(1)).unwrap().into_handoff();
        prop_assert_eq!(finish(&done, &outcome(pick, 1), None, at(step)).unwrap(), Transition::Unchanged(done.clone()));
        let claimed = claim_wake(&done, generation, at(2)).unwrap().transition.into_handoff();
        let again = claim_wake(&claimed, generation, at(step)).unwrap();
        prop_assert!(again.claimed);
        prop_assert_eq!(again.transition, Transition::Unchanged(claimed));
    }
}
