//! Scenarios for step keys (contract C12) and the wake hand-over (C13):
//! a body that crashed after claiming its wake is replaced, re-runs its
//! step, finds the finished handoff instead of asking a person again, and
//! takes the wake over from the body it replaced.

use lf_handoff_adapters::ListQuery;
use std::collections::BTreeSet;

use lf_handoff_adapters::{ConflictKind, GenerateId, Store, StoreError};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{HandoffEventKind, InteractiveHandoffParent, StepKey};
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, OpenOptions};
use lf_handoff_domain::wave::Wave;
use tempfile::TempDir;

use crate::contract::{fresh, handles};
use crate::fixtures::{body, location, new_wave, outcome, wave_request};
use crate::worker::race;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! steps_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [steps];
            AnyBackend: [
                c12_a_step_is_opened_once_for_ever,
                c12_another_step_waits_for_the_active_handoff,
                c12_racing_opens_of_one_step_create_one,
                c13_a_replaced_body_resumes_from_the_finished_step,
                c13_only_the_current_generation_takes_the_wake_over,
                c13_a_claim_answers_with_the_record_it_left,
                c13_racing_take_overs_have_one_winner,
            ],
            SeveralProcesses: [
                c12_racing_opens_of_one_step_from_separate_processes_create_one,
            ],
        );
    };
}

fn step(text: &str) -> StepKey {
    StepKey::parse(text).unwrap()
}

fn parent_of(wave: &Wave) -> InteractiveHandoffParent {
    InteractiveHandoffParent::Wave(wave.id().clone())
}

async fn count(store: &Store, wave: &Wave) -> usize {
    store
        .list_interactive_handoffs(ListQuery::from(&parent_of(wave)))
        .await
        .unwrap()
        .len()
}

/// A wave whose recorded body is `generation`.
async fn wave_at(store: &Store, dir: &TempDir, generation: u32) -> Wave {
    let wave = new_wave(store, dir.path()).await;
    store
        .record_body(&parent_of(&wave), body(generation, None))
        .await
        .unwrap();
    wave
}

/// A finished handoff of a wave at generation 5 whose wake generation 5
/// holds, with the wave then moved to `next`.
async fn held_by_5(store: &Store, dir: &TempDir, next: u32) -> InteractiveHandoff {
    let wave = wave_at(store, dir, 5).await;
    let mut request = wave_request(&wave, dir.path());
    request.body_generation = 5;
    let (opened, _) = store.open_interactive_handoff(request).await.unwrap();
    store
        .finish_interactive_handoff(&opened.id, &outcome(1), None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 5)
            .await
            .unwrap()
            .claimed
    );
    store
        .record_body(&parent_of(&wave), body(next, None))
        .await
        .unwrap();
    opened
}

/// C12: a step the parent has is answered with its handoff, whatever its
/// status, for ever; nothing is written.
pub async fn c12_a_step_is_opened_once_for_ever(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let key = step("oauth-login@turn-17");
    let (first, created) = store
        .open_interactive_handoff(
            wave_request(&wave, dir.path()).with_options(OpenOptions::at_step(key.clone())),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(first.step, Some(key.clone()));
    let (again, created) = store
        .open_interactive_handoff(
            wave_request(&wave, dir.path()).with_options(OpenOptions::at_step(key.clone())),
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again, first, "a replay writes nothing");

    let done = store
        .finish_interactive_handoff(&first.id, &outcome(1), None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&first.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let claimed = store
        .get_interactive_handoff(&first.id)
        .await
        .unwrap()
        .unwrap();
    let (found, created) = store
        .open_interactive_handoff(
            wave_request(&wave, dir.path()).with_options(OpenOptions::at_step(key.clone())),
        )
        .await
        .unwrap();
    assert!(!created, "a finished step is never opened again");
    assert_eq!(found, claimed, "nothing was written");
    assert!(done.terminal_at.is_some());
    assert_eq!(count(&store, &wave).await, 1);
    assert_eq!(
        store.get_interactive_handoff(&first.id).await.unwrap(),
        Some(claimed)
    );
}

/// C12: another step while the parent's active handoff is for a step (or
/// none) is a `ParentBusy` conflict; without a step, open replays the
/// active handoff (C3); once it is finished, the other step opens.
pub async fn c12_another_step_waits_for_the_active_handoff(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let (a, _) = store
        .open_interactive_handoff(
            wave_request(&wave, dir.path()).with_options(OpenOptions::at_step(step("a"))),
        )
        .await
        .unwrap();
    match store
        .open_interactive_handoff(
            wave_request(&wave, dir.path()).with_options(OpenOptions::at_step(step("b"))),
        )
        .await
    {
        Err(StoreError::Conflict {
            kind: ConflictKind::ParentBusy,
            message,
        }) => assert!(message.contains(a.id.as_str()), "{message}"),
        other => panic!("expected ParentBusy, got {other:?}"),
    }
    let (replayed, created) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(replayed, a);

    store
        .finish_interactive_handoff(&a.id, &outcome(1), None)
        .await
        .unwrap();
    let (b, created) = store
        .open_interactive_handoff(
            wave_request(&wave, dir.path()).with_options(OpenOptions::at_step(step("b"))),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(b.step, Some(step("b")));
    // A handoff without a step, opened while nothing is active, has none.
    store
        .finish_interactive_handoff(&b.id, &outcome(1), None)
        .await
        .unwrap();
    let (plain, created) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(plain.step, None);
    assert_eq!(count(&store, &wave).await, 3);
}

/// C12: 8 handles racing to open one step create exactly one handoff, and
/// after it finished, 8 more racers all get that finished handoff.
pub async fn c12_racing_opens_of_one_step_create_one(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let stores = handles(backend, &dir, 8).await;
    for round in 0..3 {
        let wave = new_wave(&store, dir.path()).await;
        let key = step(&format!("login@{round}"));
        let race_once = || {
            let tasks: Vec<_> = stores
                .iter()
                .map(|handle| {
                    let (handle, key) = (handle.clone(), key.clone());
                    let request = wave_request(&wave, dir.path());
                    tokio::spawn(async move {
                        handle
                            .open_interactive_handoff(
                                request.with_options(OpenOptions::at_step(key.clone())),
                            )
                            .await
                    })
                })
                .collect();
            async move {
                let mut created = 0;
                let mut ids = BTreeSet::new();
                for task in tasks {
                    let (handoff, was_created) = task.await.unwrap().unwrap();
                    created += usize::from(was_created);
                    ids.insert(handoff.id);
                }
                (created, ids)
            }
        };
        let (created, ids) = race_once().await;
        assert_eq!(created, 1, "exactly one open creates");
        assert_eq!(ids.len(), 1, "every racer gets the same handoff");
        let id = ids.into_iter().next().unwrap();
        store
            .finish_interactive_handoff(&id, &outcome(1), None)
            .await
            .unwrap();
        let (created, ids) = race_once().await;
        assert_eq!(created, 0, "a finished step is never opened again");
        assert_eq!(ids, BTreeSet::from([id]));
        assert_eq!(count(&store, &wave).await, 1);
    }
}

/// C12: 8 OS processes racing to open one step create exactly one handoff,
/// also after the first one finished.
pub async fn c12_racing_opens_of_one_step_from_separate_processes_create_one(
    backend: &dyn Backend,
) {
    let (dir, store) = fresh(backend).await;
    let url = backend.config(location(dir.path())).url();
    let wave = new_wave(&store, dir.path()).await;
    let runs: Vec<Vec<String>> = (0..8)
        .map(|_| {
            vec![
                "open-step".into(),
                wave.id().to_string(),
                dir.path().display().to_string(),
                "deploy-key@turn-3".into(),
            ]
        })
        .collect();
    let results = race(&url, &runs).await;
    let created: Vec<&String> = results
        .iter()
        .filter(|line| line.starts_with("created "))
        .collect();
    assert_eq!(created.len(), 1, "{results:?}");
    let ids: BTreeSet<&str> = results
        .iter()
        .filter_map(|line| line.split(' ').nth(1))
        .collect();
    assert_eq!(ids.len(), 1, "{results:?}");
    let id =
        lf_handoff_domain::id::InteractiveHandoffId::parse(ids.iter().next().unwrap()).unwrap();
    store
        .finish_interactive_handoff(&id, &outcome(1), None)
        .await
        .unwrap();
    let results = race(&url, &runs).await;
    assert!(
        results.iter().all(|line| line == &format!("replayed {id}")),
        "{results:?}"
    );
    assert_eq!(count(&store, &wave).await, 1);
}

/// C12 and C13, the whole crash story: generation 5 claims the wake and
/// crashes before it records that it moved on; the orchestrator records
/// generation 6; generation 6 re-runs the step and gets the finished
/// handoff (nothing written), claims the wake and holds it; generation 5's
/// retry gets `false`; there is still one handoff.
pub async fn c13_a_replaced_body_resumes_from_the_finished_step(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = wave_at(&store, &dir, 5).await;
    let key = step("oauth-login@turn-17");
    let mut request = wave_request(&wave, dir.path());
    request.body_generation = 5;
    let (opened, created) = store
        .open_interactive_handoff(
            request
                .clone()
                .with_options(OpenOptions::at_step(key.clone())),
        )
        .await
        .unwrap();
    assert!(created);
    store.attach_interactive_handoff(&opened.id).await.unwrap();
    store
        .finish_interactive_handoff(&opened.id, &outcome(1), None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 5)
            .await
            .unwrap()
            .claimed
    );
    // Generation 5 "crashes" here. The orchestrator records generation 6.
    store
        .record_body(&parent_of(&wave), body(6, None))
        .await
        .unwrap();
    let before = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    request.body_generation = 6;
    let (found, created) = store
        .open_interactive_handoff(
            request
                .clone()
                .with_options(OpenOptions::at_step(key.clone())),
        )
        .await
        .unwrap();
    assert!(!created, "generation 6 must not ask a person again");
    assert_eq!(found, before, "re-running the step writes nothing");

    let claimed = store
        .claim_interactive_handoff_wake(&opened.id, 6)
        .await
        .unwrap()
        .claimed;
    assert!(claimed, "the replacement takes the wake over");
    let held = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held.wake_claimed_by_generation, Some(6));
    assert!(
        !store
            .claim_interactive_handoff_wake(&opened.id, 5)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 6)
            .await
            .unwrap()
            .claimed
    );
    assert_eq!(count(&store, &wave).await, 1);
    // A stale body still cannot reach the step.
    request.body_generation = 5;
    match store
        .open_interactive_handoff(request.with_options(OpenOptions::at_step(key.clone())))
        .await
    {
        Err(StoreError::Conflict {
            kind: ConflictKind::StaleGeneration,
            ..
        }) => {}
        other => panic!("expected StaleGeneration, got {other:?}"),
    }
}

/// C13: only the parent's current generation takes the wake over, and only
/// from an older holder; otherwise C7 holds unchanged.
pub async fn c13_only_the_current_generation_takes_the_wake_over(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = held_by_5(&store, &dir, 7).await;
    // 6 is newer than the holder but not the parent's current generation.
    assert!(
        !store
            .claim_interactive_handoff_wake(&opened.id, 6)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 7)
            .await
            .unwrap()
            .claimed
    );
    // Once 7 holds it, neither an older holder nor a newer stranger takes it.
    for generation in [5, 6, 8] {
        assert!(
            !store
                .claim_interactive_handoff_wake(&opened.id, generation)
                .await
                .unwrap()
                .claimed,
            "generation {generation}"
        );
    }
    let stored = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.wake_claimed_by_generation, Some(7));
}

/// C7/C13: a claim answering with the record gives the same verdicts as
/// the `bool` claim, and the handoff as that claim left it: its holder is
/// the generation that holds the wake, and it is what a read returns next.
pub async fn c13_a_claim_answers_with_the_record_it_left(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = held_by_5(&store, &dir, 7).await;
    let expect = [
        (6, false, 5),
        (7, true, 7),
        (7, true, 7),
        (5, false, 7),
        (8, false, 7),
    ];
    for (generation, claimed, holder) in expect {
        let answer = store
            .claim_interactive_handoff_wake(&opened.id, generation)
            .await
            .unwrap();
        assert_eq!(answer.claimed, claimed, "generation {generation}");
        assert_eq!(answer.handoff.id, opened.id);
        assert_eq!(
            answer.handoff.wake_claimed_by_generation,
            Some(holder),
            "generation {generation}"
        );
        let read = store.get_interactive_handoff(&opened.id).await.unwrap();
        assert_eq!(
            read.as_ref(),
            Some(&answer.handoff),
            "generation {generation}"
        );
    }
    match store.claim_interactive_handoff_wake(&opened.id, 0).await {
        Err(StoreError::InvalidInput(_)) => {}
        other => panic!("expected InvalidInput for generation 0, got {other:?}"),
    }
    let unknown = InteractiveHandoffId::new();
    match store.claim_interactive_handoff_wake(&unknown, 7).await {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("expected NotFound, got {other:?}"),
    }
}

/// C13: 8 handles race on a wake that generation 5 holds while the parent
/// is at 6: four claim as 6 (the take-over), two retry as 5 (the old
/// holder) and two claim as 7 (not recorded). Every claim by 6 wins, 7
/// never does, the wake was taken over exactly once, 6 holds it at the
/// end, and 5 is told it holds it no more.
pub async fn c13_racing_take_overs_have_one_winner(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let stores = handles(backend, &dir, 8).await;
    for _ in 0..5 {
        let opened = held_by_5(&store, &dir, 6).await;
        let tasks: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(n, handle)| {
                let (handle, id) = (handle.clone(), opened.id.clone());
                let generation = [6, 5, 6, 7, 6, 5, 6, 7][n];
                tokio::spawn(async move {
                    let claimed = handle
                        .claim_interactive_handoff_wake(&id, generation)
                        .await
                        .unwrap()
                        .claimed;
                    (generation, claimed)
                })
            })
            .collect();
        for task in tasks {
            let (generation, claimed) = task.await.unwrap();
            match generation {
                6 => assert!(claimed, "6 takes the wake over"),
                // Before the take-over commits, 5 still holds the wake.
                5 => {}
                _ => assert!(!claimed, "7 is not the parent's body"),
            }
        }
        let take_overs: Vec<_> = store
            .history(&opened.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|event| event.kind == HandoffEventKind::WakeTakenOver)
            .collect();
        assert_eq!(take_overs.len(), 1, "one take-over: {take_overs:?}");
        let stored = store
            .get_interactive_handoff(&opened.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.wake_claimed_by_generation, Some(6));
        assert!(
            !store
                .claim_interactive_handoff_wake(&opened.id, 5)
                .await
                .unwrap()
                .claimed
        );
    }
}
