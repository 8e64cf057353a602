//! Unit tests of the `Store` service against mockall mocks of every port.
//! No storage engine is involved: these pin down the load / decide / swap
//! loop itself. A mocked `transition` plays the adapter's part: it runs the
//! decision the service passes on a fixture record and reports what an
//! adapter would (see [`decided_on`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenInteractiveHandoff, OpenOptions, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use mockall::predicate::eq;
use time::macros::datetime;
use time::OffsetDateTime;
use uuid::Uuid;

use lf_handoff_domain::interactive_handoff::Transition;

use crate::archive::tests::Memory;
use crate::ports::{
    Decided, Decision, InsertOutcome, ListQuery, MockClock, MockHandoffRepository, MockIdSource,
    MockParentRegistry, ParentInsert, ParentWithActive, PruneCount, SwapOutcome, TransitionOutcome,
    Versioned,
};
use crate::watch::MockEventLog;
use crate::{
    PruneOptions, Store, StoreError, StorePorts, StoreResult, UnavailableKind, MAX_RACE_ATTEMPTS,
};
use lf_handoff_domain::ConflictKind;

const T0: OffsetDateTime = datetime!(2026-12-02 12:00:00 UTC);

fn wave() -> Wave {
    Wave::new(
        WaveId::from_uuid(Uuid::from_u128(1)),
        "product".into(),
        "/src/product".into(),
    )
}

fn handoff_id() -> InteractiveHandoffId {
    InteractiveHandoffId::from_uuid(Uuid::from_u128(2))
}

fn request() -> OpenInteractiveHandoff {
    OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Wave(wave().id().clone()),
        home: WaveHome::parse("jack@local").unwrap(),
        cwd: PathBuf::from("/src/product"),
        provider: "codex".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: "OAuth login requires a human".into(),
        environment: BTreeMap::new(),
        attach_argv: vec!["tmux".into(), "attach".into()],
    }
}

fn waiting() -> InteractiveHandoff {
    lf_handoff_domain::interactive_handoff::open(&request(), wave().id().clone(), handoff_id(), T0)
        .unwrap()
}

fn finished(outcome: &InteractiveHandoffOutcome) -> InteractiveHandoff {
    lf_handoff_domain::interactive_handoff::finish(&waiting(), outcome, T0)
        .unwrap()
        .into_handoff()
}

fn completed() -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Completed {
        summary: "done".into(),
    }
}

fn failed() -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Failed {
        reason: "gone".into(),
    }
}

fn clock_at(now: OffsetDateTime) -> MockClock {
    let mut clock = MockClock::new();
    clock.expect_now().return_const(now);
    clock
}

fn ids() -> MockIdSource {
    let mut ids = MockIdSource::new();
    ids.expect_new_handoff_id().returning(handoff_id);
    ids
}

fn build(handoffs: MockHandoffRepository, parents: MockParentRegistry, clock: MockClock) -> Store {
    Store::new(StorePorts {
        backend: "mock",
        handoffs: Arc::new(handoffs),
        parents: Arc::new(parents),
        events: Arc::new(MockEventLog::new()),
        archive: Arc::new(Memory::default()),
        clock: Arc::new(clock),
        ids: Arc::new(ids()),
    })
}

/// The snapshot `open` reads: the wave at `version` with `active`.
fn wave_snapshot(
    parent: Wave,
    version: u64,
    active: Option<InteractiveHandoff>,
) -> StoreResult<Option<ParentWithActive>> {
    Ok(Some(ParentWithActive {
        parent: Versioned {
            value: Parent::Wave(parent),
            version,
        },
        active: active.map(|value| Versioned { value, version: 1 }),
        at_step: None,
    }))
}

/// What an adapter's `transition` reports after running `decide` on
/// `stored` and winning its compare-and-swap: the record as it then is, or
/// the domain's refusal. `expect` says which kind of decision the test
/// expects (`Changed` is a write, `Unchanged` a replay that writes nothing).
fn decided_on(
    stored: &InteractiveHandoff,
    decide: &Decision,
    expect: Expect,
) -> StoreResult<Option<TransitionOutcome>> {
    let Decided { transition, answer } = decide(stored)?;
    match (&transition, expect) {
        (Transition::Changed(_), Expect::Write) | (Transition::Unchanged(_), Expect::Replay) => {}
        (other, _) => panic!("expected a {expect:?}, the domain decided {other:?}"),
    }
    Ok(Some(TransitionOutcome::Applied {
        handoff: Box::new(transition.into_handoff()),
        answer,
    }))
}

#[derive(Debug, Clone, Copy)]
enum Expect {
    Write,
    Replay,
}

/// A registry whose wave is at `version` with no active handoff.
fn parents_with_wave(version: u64) -> MockParentRegistry {
    let mut parents = MockParentRegistry::new();
    parents
        .expect_load_parent_with_active()
        .returning(move |_, _| wave_snapshot(wave(), version, None));
    parents
}

#[tokio::test]
async fn a_lost_finish_race_is_retried_and_resolved_as_a_replay() {
    let mut handoffs = MockHandoffRepository::new();
    let mut seq = mockall::Sequence::new();
    handoffs
        .expect_transition()
        .with(
            eq(handoff_id()),
            mockall::predicate::always(),
            mockall::predicate::always(),
        )
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, decide, _| {
            // The domain would write, but another writer wins the swap.
            decided_on(&waiting(), &decide, Expect::Write)?;
            Ok(Some(TransitionOutcome::Lost))
        });
    // The winner finished with the same outcome: the retry is a replay and
    // must not write again.
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, decide, _| decided_on(&finished(&completed()), &decide, Expect::Replay));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    let result = store
        .finish_interactive_handoff(&handoff_id(), &completed())
        .await
        .unwrap();
    assert_eq!(result, finished(&completed()));
}

#[tokio::test]
async fn a_lost_finish_race_against_another_outcome_is_a_conflict() {
    let mut handoffs = MockHandoffRepository::new();
    let mut seq = mockall::Sequence::new();
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, decide, _| {
            decided_on(&waiting(), &decide, Expect::Write)?;
            Ok(Some(TransitionOutcome::Lost))
        });
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, decide, _| decided_on(&finished(&failed()), &decide, Expect::Replay));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    let err = store
        .finish_interactive_handoff(&handoff_id(), &completed())
        .await
        .unwrap_err();
    assert!(
        err.conflict_kind() == Some(ConflictKind::OtherOutcome),
        "{err}"
    );
}

#[tokio::test]
async fn a_lost_open_race_replays_the_winners_handoff() {
    let mut handoffs = MockHandoffRepository::new();
    let mut parents = MockParentRegistry::new();
    let mut seq = mockall::Sequence::new();
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| wave_snapshot(wave(), 1, None));
    handoffs
        .expect_insert()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _| Ok(InsertOutcome::ParentBusy));
    let mut winner = waiting();
    winner.id = InteractiveHandoffId::from_uuid(Uuid::from_u128(99));
    let expected = winner.clone();
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_, _| wave_snapshot(wave(), 1, Some(winner.clone())));
    let store = build(handoffs, parents, clock_at(T0));
    let (handoff, created) = store.open_interactive_handoff(request()).await.unwrap();
    assert!(!created);
    assert_eq!(handoff, expected);
}

#[tokio::test]
async fn a_lost_step_race_returns_the_winners_handoff_for_the_step() {
    let step = StepKey::parse("oauth-login@turn-17").unwrap();
    let mut handoffs = MockHandoffRepository::new();
    let mut parents = MockParentRegistry::new();
    let mut seq = mockall::Sequence::new();
    let asked = step.clone();
    parents
        .expect_load_parent_with_active()
        .withf(move |_, step| *step == Some(&asked))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| wave_snapshot(wave(), 1, None));
    let stored_step = step.clone();
    handoffs
        .expect_insert()
        .withf(move |handoff, _, _| handoff.step.as_ref() == Some(&stored_step))
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _, _| Ok(InsertOutcome::StepTaken));
    // The winner already finished: the step's handoff is returned as it is.
    let mut winner = finished(&completed());
    winner.id = InteractiveHandoffId::from_uuid(Uuid::from_u128(99));
    winner.step = Some(step.clone());
    let expected = winner.clone();
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_, _| {
            let mut snapshot = wave_snapshot(wave(), 1, None)?;
            if let Some(snapshot) = snapshot.as_mut() {
                snapshot.at_step = Some(Versioned {
                    value: winner.clone(),
                    version: 2,
                });
            }
            Ok(snapshot)
        });
    let store = build(handoffs, parents, clock_at(T0));
    let (handoff, created) = store
        .open_interactive_handoff(request().with_options(OpenOptions::at_step(step.clone())))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(handoff, expected);
}

#[tokio::test]
async fn open_inserts_against_the_loaded_parent_version() {
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_insert()
        .withf(|handoff, version, _| {
            *version == 7 && handoff.status == InteractiveHandoffStatus::Waiting
        })
        .times(1)
        .returning(|_, _, _| Ok(InsertOutcome::Inserted));
    let store = build(handoffs, parents_with_wave(7), clock_at(T0));
    let (handoff, created) = store.open_interactive_handoff(request()).await.unwrap();
    assert!(created);
    assert_eq!(handoff.id, handoff_id());
}

#[tokio::test]
async fn a_parent_that_changed_under_open_is_revalidated() {
    // The first insert finds the parent moved (a new body was recorded); the
    // reload shows generation 2, so the generation-1 request is now stale.
    let mut parents = MockParentRegistry::new();
    let mut seq = mockall::Sequence::new();
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| wave_snapshot(wave(), 1, None));
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| wave_snapshot(wave().with_latest_process(test_process(2)), 2, None));
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_insert()
        .times(1)
        .returning(|_, _, _| Ok(InsertOutcome::ParentChanged));
    let store = build(handoffs, parents, clock_at(T0));
    let err = store.open_interactive_handoff(request()).await.unwrap_err();
    assert!(
        err.conflict_kind() == Some(ConflictKind::StaleGeneration),
        "{err}"
    );
}

fn test_process(generation: u32) -> lf_handoff_domain::child_session::ChildProcessGeneration {
    lf_handoff_domain::child_session::ChildProcessGeneration {
        generation,
        pid: None,
        process_group_id: None,
        tmux_name: "body".into(),
        agent: "codex".into(),
        provider: "codex".into(),
        provider_session_id: None,
        started_at: T0,
        state: lf_handoff_domain::child_session::ChildLeaseState::Active,
        outcome: None,
    }
}

#[tokio::test]
async fn malformed_requests_are_refused_before_any_read() {
    // Mocks without expectations panic if called.
    let store = build(
        MockHandoffRepository::new(),
        MockParentRegistry::new(),
        MockClock::new(),
    );
    let mut bad = request();
    bad.reason = " ".into();
    assert!(store
        .open_interactive_handoff(bad)
        .await
        .unwrap_err()
        .is_invalid_input());
    assert!(store
        .claim_interactive_handoff_wake(&handoff_id(), 0)
        .await
        .unwrap_err()
        .is_invalid_input());
    let blank = InteractiveHandoffOutcome::HandedBack {
        summary: String::new(),
    };
    assert!(store
        .finish_interactive_handoff(&handoff_id(), &blank)
        .await
        .unwrap_err()
        .is_invalid_input());
}

#[tokio::test]
async fn a_repository_failure_surfaces_as_unavailable() {
    let mut handoffs = MockHandoffRepository::new();
    handoffs.expect_transition().returning(|_, _, _| {
        Err(StoreError::unavailable(
            UnavailableKind::DiskFull,
            "disk on fire",
        ))
    });
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    let err = store
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Unavailable { kind: UnavailableKind::DiskFull, message, .. } if message == "disk on fire"),
        "{err}"
    );

    let mut parents = MockParentRegistry::new();
    parents.expect_load_parent_with_active().returning(|_, _| {
        Err(StoreError::unavailable(
            UnavailableKind::Unreachable,
            "server gone",
        ))
    });
    // Without a retry window an unreachable server fails the call at once.
    let store = build(MockHandoffRepository::new(), parents, MockClock::new())
        .with_retry_window(Duration::ZERO);
    assert!(store
        .open_interactive_handoff(request())
        .await
        .unwrap_err()
        .is_unavailable());
}

fn unreachable() -> StoreError {
    StoreError::unavailable(UnavailableKind::Unreachable, "server gone")
}

#[tokio::test]
async fn an_unreachable_server_is_retried_within_the_window_then_named() {
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_transition()
        .returning(|_, _, _| Err(unreachable()));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0))
        .with_retry_window(Duration::from_millis(100));
    assert_eq!(store.retry_window(), Duration::from_millis(100));
    let started = std::time::Instant::now();
    let err = store
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(60));
    assert_eq!(err.unavailable_kind(), Some(UnavailableKind::Unreachable));
    assert!(
        err.message()
            .contains("gave up on changing the handoff after"),
        "{err}"
    );
    assert!(UnavailableKind::Unreachable.is_transient());
}

#[tokio::test]
async fn other_unavailable_kinds_are_not_retried() {
    for kind in [
        UnavailableKind::Locked,
        UnavailableKind::Contended,
        UnavailableKind::Damaged,
        UnavailableKind::Io,
        UnavailableKind::Refused,
        UnavailableKind::Other,
    ] {
        let mut handoffs = MockHandoffRepository::new();
        handoffs
            .expect_transition()
            .times(1)
            .returning(move |_, _, _| Err(StoreError::unavailable(kind, "no")));
        let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
        let err = store
            .attach_interactive_handoff(&handoff_id())
            .await
            .unwrap_err();
        assert_eq!(err.unavailable_kind(), Some(kind));
    }
}

#[tokio::test]
async fn a_finish_whose_reply_was_lost_is_retried_and_replays_its_own_result() {
    let mut handoffs = MockHandoffRepository::new();
    let mut seq = mockall::Sequence::new();
    // The first attempt commits, then the connection dies before the reply.
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, decide, _| {
            decided_on(&waiting(), &decide, Expect::Write)?;
            Err(unreachable())
        });
    // The retry finds the finish stored: a replay, nothing written.
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, decide, _| decided_on(&finished(&completed()), &decide, Expect::Replay));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    let result = store
        .finish_interactive_handoff(&handoff_id(), &completed())
        .await
        .unwrap();
    assert_eq!(result, finished(&completed()));
}

#[tokio::test]
async fn an_open_whose_insert_reply_was_lost_returns_its_handoff_as_created() {
    let mut handoffs = MockHandoffRepository::new();
    let mut parents = MockParentRegistry::new();
    let mut seq = mockall::Sequence::new();
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| wave_snapshot(wave(), 1, None));
    let stored = Arc::new(std::sync::Mutex::new(None));
    let inserted = stored.clone();
    // The insert commits, then the connection dies before the reply.
    handoffs
        .expect_insert()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |handoff, _, _| {
            *inserted.lock().unwrap() = Some(handoff.clone());
            Err(unreachable())
        });
    // Not the same insert again: the next round reads the stored handoff.
    let found = stored.clone();
    parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_, _| wave_snapshot(wave(), 1, found.lock().unwrap().clone()));
    let store = build(handoffs, parents, clock_at(T0));
    let (handoff, created) = store.open_interactive_handoff(request()).await.unwrap();
    assert!(
        created,
        "the handoff this call stored is reported as created"
    );
    assert_eq!(Some(handoff), stored.lock().unwrap().clone());
}

#[tokio::test]
async fn a_parent_insert_whose_reply_was_lost_is_created_on_the_retry() {
    let mut parents = MockParentRegistry::new();
    let mut seq = mockall::Sequence::new();
    parents
        .expect_insert_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Err(unreachable()));
    parents
        .expect_insert_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(ParentInsert::AlreadyExists));
    parents
        .expect_load_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Ok(Some(Versioned {
                value: Parent::Wave(wave()),
                version: 1,
            }))
        });
    let store = build(MockHandoffRepository::new(), parents, clock_at(T0));
    store.create_wave(&wave()).await.unwrap();
}

#[tokio::test]
async fn the_clocks_value_is_what_gets_stored() {
    let now = datetime!(2026-12-02 12:34:56.789_123_456 UTC);
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_transition()
        .times(1)
        .returning(|_, decide, _| {
            let stored = decided_on(&waiting(), &decide, Expect::Write)?;
            let Some(TransitionOutcome::Applied {
                handoff: attached, ..
            }) = &stored
            else {
                unreachable!("decided_on reports an applied transition")
            };
            assert_eq!(
                (attached.attached_at, attached.updated_at),
                (
                    Some(datetime!(2026-12-02 12:34:56.789_123 UTC)),
                    datetime!(2026-12-02 12:34:56.789_123 UTC)
                )
            );
            Ok(stored)
        });
    let store = build(handoffs, MockParentRegistry::new(), clock_at(now));
    let attached = store
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap();
    assert_eq!(
        attached.attached_at,
        Some(datetime!(2026-12-02 12:34:56.789_123 UTC))
    );

    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_insert()
        .withf(|handoff, _, _| handoff.created_at == datetime!(2026-12-02 12:34:56.789_123 UTC))
        .times(1)
        .returning(|_, _, _| Ok(InsertOutcome::Inserted));
    let store = build(handoffs, parents_with_wave(1), clock_at(now));
    let (opened, _) = store.open_interactive_handoff(request()).await.unwrap();
    assert_eq!(
        opened.created_at,
        datetime!(2026-12-02 12:34:56.789_123 UTC)
    );
}

#[tokio::test]
async fn replayed_transitions_write_nothing() {
    // The mocked adapter panics on a decision to write.
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_transition()
        .returning(|_, decide, _| decided_on(&finished(&completed()), &decide, Expect::Replay));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    store
        .finish_interactive_handoff(&handoff_id(), &completed())
        .await
        .unwrap();
}

#[tokio::test]
async fn claims_return_whether_this_generation_holds_the_wake() {
    let mut handoffs = MockHandoffRepository::new();
    let claimed =
        lf_handoff_domain::interactive_handoff::claim_wake(&finished(&completed()), 5, T0)
            .unwrap()
            .transition
            .into_handoff();
    handoffs
        .expect_transition()
        .returning(move |_, decide, _| decided_on(&claimed, &decide, Expect::Replay));
    // Generation 6 is newer than the holder but not the parent's current
    // body (5), so it reads the parent once and does not take over.
    let mut parents = MockParentRegistry::new();
    parents.expect_load_parent().times(1).returning(|_| {
        Ok(Some(Versioned {
            value: Parent::Wave(wave().with_latest_process(test_process(5))),
            version: 2,
        }))
    });
    let store = build(handoffs, parents, clock_at(T0));
    assert!(store
        .claim_interactive_handoff_wake(&handoff_id(), 5)
        .await
        .unwrap());
    assert!(!store
        .claim_interactive_handoff_wake(&handoff_id(), 6)
        .await
        .unwrap());
}

#[tokio::test]
async fn the_parents_current_generation_takes_an_older_holders_wake_over() {
    let held = lf_handoff_domain::interactive_handoff::claim_wake(&finished(&completed()), 5, T0)
        .unwrap()
        .transition
        .into_handoff();
    // The holder of the record the take-over wrote.
    let written = Arc::new(std::sync::Mutex::new(None));
    let stored = written.clone();
    let mut seq = mockall::Sequence::new();
    let mut handoffs = MockHandoffRepository::new();
    let first = held.clone();
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_, decide, _| decided_on(&first, &decide, Expect::Replay));
    let mut parents = MockParentRegistry::new();
    parents
        .expect_load_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Ok(Some(Versioned {
                value: Parent::Wave(wave().with_latest_process(test_process(6))),
                version: 3,
            }))
        });
    handoffs
        .expect_transition()
        .times(1)
        .in_sequence(&mut seq)
        .returning(move |_, decide, _| {
            let outcome = decided_on(&held, &decide, Expect::Write);
            if let Ok(Some(TransitionOutcome::Applied { handoff, .. })) = &outcome {
                *stored.lock().unwrap() = Some(handoff.wake_claimed_by_generation);
            }
            outcome
        });
    let store = build(handoffs, parents, clock_at(T0));
    assert!(store
        .claim_interactive_handoff_wake(&handoff_id(), 6)
        .await
        .unwrap());
    assert_eq!(*written.lock().unwrap(), Some(Some(6)));
}

#[tokio::test]
async fn endless_lost_races_give_up_as_unavailable() {
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_transition()
        .times(MAX_RACE_ATTEMPTS)
        .returning(|_, _, _| Ok(Some(TransitionOutcome::Lost)));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    let err = store
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
}

#[tokio::test]
async fn unknown_ids_and_parents_are_not_found() {
    let mut handoffs = MockHandoffRepository::new();
    handoffs.expect_transition().returning(|_, _, _| Ok(None));
    handoffs.expect_load().returning(|_| Ok(None));
    let mut parents = MockParentRegistry::new();
    parents
        .expect_load_parent_with_active()
        .returning(|_, _| Ok(None));
    let store = build(handoffs, parents, clock_at(T0));
    assert!(store
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap_err()
        .is_not_found());
    assert!(store
        .open_interactive_handoff(request())
        .await
        .unwrap_err()
        .is_not_found());
    assert!(store
        .get_interactive_handoff(&handoff_id())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn creating_an_existing_parent_is_idempotent_only_when_equal() {
    let mut parents = MockParentRegistry::new();
    parents
        .expect_insert_parent()
        .returning(|_, _| Ok(ParentInsert::AlreadyExists));
    parents.expect_load_parent().returning(|_| {
        Ok(Some(Versioned {
            value: Parent::Wave(wave()),
            version: 1,
        }))
    });
    let store = build(MockHandoffRepository::new(), parents, clock_at(T0));
    store.create_wave(&wave()).await.unwrap();
    let other = Wave::new(wave().id().clone(), "other".into(), "/src/other".into());
    assert!(store.create_wave(&other).await.unwrap_err().is_conflict());
}

#[tokio::test]
async fn a_lost_body_race_is_retried() {
    let mut parents = MockParentRegistry::new();
    let mut seq = mockall::Sequence::new();
    parents
        .expect_load_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Ok(Some(Versioned {
                value: Parent::Wave(wave()),
                version: 1,
            }))
        });
    parents
        .expect_swap_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Ok(SwapOutcome::Lost));
    // The winner recorded generation 2 already: recording it again is a replay.
    parents
        .expect_load_parent()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| {
            Ok(Some(Versioned {
                value: Parent::Wave(wave().with_latest_process(test_process(2))),
                version: 2,
            }))
        });
    let store = build(MockHandoffRepository::new(), parents, clock_at(T0));
    let parent = store
        .record_body(
            &InteractiveHandoffParent::Wave(wave().id().clone()),
            test_process(2),
        )
        .await
        .unwrap();
    assert_eq!(parent.body_generation(), 2);
}

// ----- list pages and prune (C17) -----

#[tokio::test]
async fn a_page_after_an_unknown_handoff_is_not_found_and_a_full_one_reads_nothing_more() {
    let after = InteractiveHandoffId::from_uuid(Uuid::from_u128(7));
    let query = ListQuery {
        after: Some(after.clone()),
        limit: Some(10),
        ..ListQuery::default()
    };

    // A full page: the repository's answer as it is, and no other read.
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_list()
        .with(eq(query.clone()))
        .times(1)
        .returning(|_| Ok(vec![waiting()]));
    handoffs.expect_load().never();
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    assert_eq!(
        store
            .list_interactive_handoffs(query.clone())
            .await
            .unwrap(),
        vec![waiting()]
    );

    // An empty page after a handoff that exists: the end of the list.
    let mut handoffs = MockHandoffRepository::new();
    handoffs.expect_list().times(1).returning(|_| Ok(vec![]));
    handoffs
        .expect_load()
        .with(eq(after.clone()))
        .times(1)
        .returning(|_| {
            Ok(Some(Versioned {
                value: waiting(),
                version: 1,
            }))
        });
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    assert!(store
        .list_interactive_handoffs(query.clone())
        .await
        .unwrap()
        .is_empty());

    // An empty page after a handoff that does not exist.
    let mut handoffs = MockHandoffRepository::new();
    handoffs.expect_list().times(1).returning(|_| Ok(vec![]));
    handoffs.expect_load().times(1).returning(|_| Ok(None));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    let err = store
        .list_interactive_handoffs(query.clone())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains(after.as_str()), "{err}");

    // Without `after`, an empty page is just empty.
    let mut handoffs = MockHandoffRepository::new();
    handoffs.expect_list().times(1).returning(|_| Ok(vec![]));
    handoffs.expect_load().never();
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    assert!(store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .is_empty());
}

#[test]
fn list_filters_are_anded_and_the_active_filter_narrows_the_statuses() {
    use InteractiveHandoffStatus::{Attached, Completed, Expired, Failed, HandedBack, Waiting};
    let handoff = waiting();
    let any = ListQuery::default();
    assert_eq!(any.wanted_statuses(), None);
    assert!(any.matches(&handoff));

    let active = ListQuery {
        active_only: true,
        ..ListQuery::default()
    };
    assert_eq!(active.wanted_statuses(), Some(vec![Waiting, Attached]));
    let finished_ones = ListQuery {
        statuses: vec![Failed, Completed, Failed],
        ..ListQuery::default()
    };
    assert_eq!(
        finished_ones.wanted_statuses(),
        Some(vec![Completed, Failed])
    );
    assert!(!finished_ones.matches(&handoff));
    assert!(finished_ones.matches(&finished(&completed())));
    let nothing = ListQuery {
        active_only: true,
        statuses: vec![HandedBack, Expired],
        ..ListQuery::default()
    };
    assert_eq!(nothing.wanted_statuses(), Some(vec![]));
    let waiting_and_active = ListQuery {
        active_only: true,
        statuses: vec![Waiting, Completed],
        ..ListQuery::default()
    };
    assert_eq!(waiting_and_active.wanted_statuses(), Some(vec![Waiting]));
    assert!(waiting_and_active.matches(&handoff));

    let elsewhere = WaveHome::parse("ssh://jack@build.example").unwrap();
    for (query, passes) in [
        (
            ListQuery {
                home: Some(handoff.home.clone()),
                ..ListQuery::default()
            },
            true,
        ),
        (
            ListQuery {
                home: Some(elsewhere),
                ..ListQuery::default()
            },
            false,
        ),
        (
            ListQuery {
                created_before: Some(T0),
                ..ListQuery::default()
            },
            false,
        ),
        (
            ListQuery {
                created_before: Some(T0 + time::Duration::microseconds(1)),
                ..ListQuery::default()
            },
            true,
        ),
        (
            ListQuery {
                parent: Some(handoff.parent.clone()),
                statuses: vec![Waiting],
                // Neither is a filter: a page may start anywhere.
                after: Some(handoff.id.clone()),
                limit: Some(0),
                ..ListQuery::default()
            },
            true,
        ),
        (
            ListQuery {
                parent: Some(InteractiveHandoffParent::Wave(WaveId::from_uuid(
                    Uuid::from_u128(5),
                ))),
                ..ListQuery::default()
            },
            false,
        ),
    ] {
        assert_eq!(query.matches(&handoff), passes, "{query:?}");
    }
}

#[tokio::test]
async fn prune_removes_batches_until_one_removes_nothing() {
    let cutoff = T0 - time::Duration::days(30);
    let mut handoffs = MockHandoffRepository::new();
    let mut seq = mockall::Sequence::new();
    for (removed, events) in [(256, 1_024), (10, 31), (0, 0)] {
        handoffs
            .expect_prune_batch()
            .with(eq(cutoff), eq(crate::PRUNE_BATCH))
            .times(1)
            .in_sequence(&mut seq)
            .returning(move |_, _| {
                Ok(PruneCount {
                    handoffs: removed,
                    events,
                })
            });
    }
    handoffs.expect_count_prunable().never();
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff))
            .await
            .unwrap(),
        PruneCount {
            handoffs: 266,
            events: 1_055
        }
    );
}

#[tokio::test]
async fn a_dry_run_only_counts_and_a_batch_of_zero_is_refused_before_any_read() {
    let cutoff = T0 - time::Duration::days(30);
    let counted = PruneCount {
        handoffs: 3,
        events: 12,
    };
    let mut handoffs = MockHandoffRepository::new();
    handoffs
        .expect_count_prunable()
        .with(eq(cutoff))
        .times(1)
        .returning(move |_| Ok(counted));
    handoffs.expect_prune_batch().never();
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(cutoff).dry_run())
            .await
            .unwrap(),
        counted
    );
    let err = store
        .prune(PruneOptions {
            batch: 0,
            ..PruneOptions::finished_before(cutoff)
        })
        .await
        .unwrap_err();
    assert!(err.is_invalid_input(), "{err}");

    // A failing batch stops the prune with its error.
    let mut handoffs = MockHandoffRepository::new();
    let mut seq = mockall::Sequence::new();
    handoffs
        .expect_prune_batch()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| {
            Ok(PruneCount {
                handoffs: 2,
                events: 6,
            })
        });
    handoffs
        .expect_prune_batch()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| Err(StoreError::damaged("the disk said no")));
    let store = build(handoffs, MockParentRegistry::new(), clock_at(T0));
    assert!(store
        .prune(PruneOptions {
            batch: 2,
            ..PruneOptions::finished_before(cutoff)
        })
        .await
        .unwrap_err()
        .is_unavailable());
}
