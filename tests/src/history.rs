//! Scenarios for the history (contract C15): every change appends one
//! event in the same atomic write, numbered per handoff without gaps and
//! store-wide in order, naming its actor; replays append nothing.

use std::collections::BTreeSet;

use lf_handoff_adapters::{GenerateId, Store, StoreError};
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffEvent, HandoffEventKind, InteractiveHandoffParent, InteractiveHandoffStatus,
};

use crate::contract::{fresh, handles};
use crate::fixtures::{body, new_wave, outcome, wave_request};
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! history_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [history];
            AnyBackend: [
                c15_positions_are_store_wide_and_increasing,
                c15_history_refuses_unknown_handoffs_and_bad_actors,
            ],
            OwnStorage: [
                c15_every_change_appends_one_event_with_its_actor,
                c15_racing_writers_append_one_event_per_change,
            ],
        );
    };
}

fn actor(name: &str) -> Actor {
    Actor::parse(name).unwrap()
}

fn kinds(events: &[HandoffEvent]) -> Vec<HandoffEventKind> {
    events.iter().map(|event| event.kind).collect()
}

/// Checks what holds for every history: one handoff, seq 1, 2, 3, ...,
/// positions increasing, each status after the next one's before.
#[track_caller]
fn assert_well_formed(events: &[HandoffEvent]) {
    for (n, event) in events.iter().enumerate() {
        assert_eq!(event.seq, n as u64 + 1, "{events:#?}");
        assert_eq!(event.handoff_id, events[0].handoff_id);
    }
    for pair in events.windows(2) {
        assert!(pair[0].position < pair[1].position, "{events:#?}");
        assert!(pair[0].at <= pair[1].at, "{events:#?}");
        assert_eq!(
            Some(pair[0].status_after),
            pair[1].status_before,
            "{events:#?}"
        );
    }
}

/// C15: a whole life, each step by another actor: opened, attached,
/// finished, wake claimed, wake taken over; replays append nothing.
pub async fn c15_every_change_appends_one_event_with_its_actor(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let body_process = store.clone().with_actor(actor("codex body 1"));
    let person = store.clone().with_actor(actor("jack@laptop (pid 77)"));
    let replacement = store.clone().with_actor(actor("codex body 2"));
    assert_eq!(person.actor().as_str(), "jack@laptop (pid 77)");
    assert!(
        store
            .actor()
            .as_str()
            .ends_with(&format!("(pid {})", std::process::id())),
        "the default actor names this process: {}",
        store.actor()
    );

    let wave = new_wave(&store, dir.path()).await;
    let (opened, _) = body_process
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let (replayed, created) = body_process
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert!(!created);
    let attached = person.attach_interactive_handoff(&opened.id).await.unwrap();
    person.attach_interactive_handoff(&opened.id).await.unwrap();
    let finished = person
        .finish_interactive_handoff(&opened.id, &outcome(0), None)
        .await
        .unwrap();
    person
        .finish_interactive_handoff(&opened.id, &outcome(0), None)
        .await
        .unwrap();
    assert!(
        body_process
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        body_process
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await
            .unwrap()
            .claimed
    );
    store
        .record_body(
            &InteractiveHandoffParent::Wave(wave.id().clone()),
            body(2, None),
        )
        .await
        .unwrap();
    let took_over = replacement
        .claim_interactive_handoff_wake(&opened.id, 2)
        .await
        .unwrap()
        .claimed;
    assert!(took_over);
    assert!(
        !body_process
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let last = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();

    let events = store.history(&opened.id).await.unwrap();
    assert_well_formed(&events);
    assert_eq!(
        kinds(&events),
        [
            HandoffEventKind::Opened,
            HandoffEventKind::Attached,
            HandoffEventKind::Finished,
            HandoffEventKind::WakeClaimed,
            HandoffEventKind::WakeTakenOver,
        ]
    );
    let actors: Vec<&str> = events.iter().map(|e| e.actor.as_str()).collect();
    assert_eq!(
        actors,
        [
            "codex body 1",
            "jack@laptop (pid 77)",
            "jack@laptop (pid 77)",
            "codex body 1",
            "codex body 2"
        ]
    );
    use InteractiveHandoffStatus::{Attached, Completed, Waiting};
    let transitions: Vec<_> = events
        .iter()
        .map(|e| (e.status_before, e.status_after))
        .collect();
    assert_eq!(
        transitions,
        [
            (None, Waiting),
            (Some(Waiting), Attached),
            (Some(Attached), Completed),
            (Some(Completed), Completed),
            (Some(Completed), Completed),
        ]
    );
    assert_eq!(events[0].at, opened.created_at);
    assert_eq!(replayed, opened);
    assert_eq!(Some(events[1].at), attached.attached_at);
    assert_eq!(Some(events[2].at), finished.terminal_at);
    assert_eq!(events[4].at, last.updated_at);
    assert!(events.iter().all(|e| e.handoff_id == opened.id));
    assert_eq!(events[3].detail.as_deref(), Some("generation 1"));
    assert_eq!(events[4].detail.as_deref(), Some("generation 2 from 1"));
}

/// C15: positions are store-wide: every event has its own, and an event
/// committed later has a larger one, across handoffs and handles.
pub async fn c15_positions_are_store_wide_and_increasing(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let other = handles(backend, &dir, 1).await.remove(0);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let wave = new_wave(&store, dir.path()).await;
        let (opened, _) = store
            .open_interactive_handoff(wave_request(&wave, dir.path()))
            .await
            .unwrap();
        ids.push(opened.id);
    }
    // Interleaved writes from two handles, one at a time.
    let mut order = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let handle = if n % 2 == 0 { &store } else { &other };
        handle.attach_interactive_handoff(id).await.unwrap();
        order.push((id.clone(), 2));
    }
    for (n, id) in ids.iter().enumerate().rev() {
        let handle = if n % 2 == 0 { &other } else { &store };
        handle
            .finish_interactive_handoff(id, &outcome(n), None)
            .await
            .unwrap();
        order.push((id.clone(), 3));
    }
    let mut all = Vec::new();
    for id in &ids {
        let events = store.history(id).await.unwrap();
        assert_well_formed(&events);
        assert_eq!(events.len(), 3);
        all.extend(events);
    }
    let positions: BTreeSet<u64> = all.iter().map(|e| e.position).collect();
    assert_eq!(
        positions.len(),
        all.len(),
        "each event has its own position"
    );
    // The later writes (attaches, then finishes in reverse) have increasing
    // positions in the order they were made.
    let position_of = |id: &lf_handoff_domain::id::InteractiveHandoffId, seq: u64| {
        all.iter()
            .find(|e| &e.handoff_id == id && e.seq == seq)
            .unwrap()
            .position
    };
    let in_order: Vec<u64> = order
        .iter()
        .map(|(id, seq)| position_of(id, *seq))
        .collect();
    let mut sorted = in_order.clone();
    sorted.sort_unstable();
    assert_eq!(in_order, sorted);
    let opens: Vec<u64> = ids.iter().map(|id| position_of(id, 1)).collect();
    assert!(opens.iter().all(|p| *p < in_order[0]));
}

/// C15: racing writers on separate handles append exactly one event per
/// change that happened: one `finished` of many finishers, one
/// `wake_claimed` of many claimers.
pub async fn c15_racing_writers_append_one_event_per_change(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let racers = handles(backend, &dir, 8).await;
    let mut tasks = Vec::new();
    for (n, racer) in racers.iter().cloned().enumerate() {
        let id = opened.id.clone();
        let racer = racer.with_actor(actor(&format!("racer {n}")));
        tasks.push(tokio::spawn(async move {
            let _ = racer.attach_interactive_handoff(&id).await;
            let finished = racer
                .finish_interactive_handoff(&id, &outcome(n), None)
                .await;
            let claimed = racer.claim_interactive_handoff_wake(&id, 1).await;
            (finished.is_ok(), claimed.unwrap().claimed)
        }));
    }
    let mut finished = 0;
    for task in tasks {
        let (ok, claimed) = task.await.unwrap();
        finished += usize::from(ok);
        assert!(claimed, "generation 1 holds the wake whoever claimed it");
    }
    assert_eq!(finished, 1);
    let events = store.history(&opened.id).await.unwrap();
    assert_well_formed(&events);
    assert_eq!(
        kinds(&events),
        [
            HandoffEventKind::Opened,
            HandoffEventKind::Attached,
            HandoffEventKind::Finished,
            HandoffEventKind::WakeClaimed
        ]
    );
    let stored = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    let winner = stored.outcome.unwrap();
    let finisher = events[2].actor.as_str();
    let n: usize = finisher.trim_start_matches("racer ").parse().unwrap();
    assert_eq!(outcome(n), winner, "the finished event names the winner");
}

/// C15: the history of an unknown handoff is `NotFound`; an actor is
/// checked like every input.
pub async fn c15_history_refuses_unknown_handoffs_and_bad_actors(backend: &dyn Backend) {
    let (_dir, store) = fresh(backend).await;
    let unknown = lf_handoff_domain::id::InteractiveHandoffId::new();
    match store.history(&unknown).await {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("history of an unknown handoff: {other:?}"),
    }
    for bad in ["", "  ", "tab\there", &"x".repeat(201)] {
        assert!(Actor::parse(bad).is_err(), "{bad:?}");
    }
    let _: Store = store.with_actor(actor(&"é".repeat(100)));
}
