//! Unit tests of the `Store` service against mockall mocks of every port.
//! No storage engine is involved: these pin down the load / decide / swap
//! loop itself. Each test says what the ports answer through [`Mocks`] (in
//! the order the service must ask), runs one call and checks its result. A
//! mocked `transition` plays the adapter's part: it runs the decision the
//! service passes on a fixture record and reports what an adapter would
//! (see [`decided_on`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenInteractiveHandoff, OpenOptions, StepKey, Transition,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use lf_handoff_domain::ConflictKind;
use mockall::predicate::eq;
use mockall::Sequence;
use time::macros::datetime;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::archive::tests::Memory;
use crate::ports::{
    Decided, Decision, InsertOutcome, ListQuery, MockClock, MockHandoffRepository, MockIdSource,
    MockParentRegistry, ParentInsert, ParentWithActive, PruneCount, SwapOutcome, TransitionOutcome,
    Versioned,
};
use crate::testing::{body, wave_request, DEFAULT_CWD, T0};
use crate::watch::MockEventLog;
use crate::{
    Archive, PruneOptions, Store, StoreError, StorePorts, StoreResult, UnavailableKind,
    MAX_RACE_ATTEMPTS,
};

fn wave() -> Wave {
    Wave::new(
        WaveId::from_uuid(Uuid::from_u128(1)),
        "product".into(),
        DEFAULT_CWD.into(),
    )
}

/// The wave with body `generation` recorded.
fn wave_at(generation: u32) -> Wave {
    wave().with_latest_process(body(generation, None))
}

fn handoff_id() -> InteractiveHandoffId {
    InteractiveHandoffId::from_uuid(Uuid::from_u128(2))
}

fn request() -> OpenInteractiveHandoff {
    wave_request(&wave(), Path::new(DEFAULT_CWD))
}

fn waiting() -> InteractiveHandoff {
    lf_handoff_domain::interactive_handoff::open(&request(), wave().id().clone(), handoff_id(), T0)
        .unwrap()
}

fn finished(outcome: &InteractiveHandoffOutcome) -> InteractiveHandoff {
    lf_handoff_domain::interactive_handoff::finish(&waiting(), outcome, None, T0)
        .unwrap()
        .into_handoff()
}

/// The finished handoff with its wake claimed by `generation`.
fn claimed_by(generation: u32) -> InteractiveHandoff {
    lf_handoff_domain::interactive_handoff::claim_wake(&finished(&completed()), generation, T0)
        .unwrap()
        .transition
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

fn unreachable() -> StoreError {
    StoreError::unavailable(UnavailableKind::Unreachable, "server gone")
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

/// The mocks of one test. A port with no expectation panics when called;
/// the helpers add one expected call each, in the order the service must
/// make them; a test with another need sets an expectation on a field.
/// [`store`](Self::store) builds the `Store` on them.
pub(crate) struct Mocks {
    pub(crate) handoffs: MockHandoffRepository,
    pub(crate) parents: MockParentRegistry,
    pub(crate) clock: MockClock,
    pub(crate) archive: Arc<dyn Archive>,
    seq: Sequence,
}

impl Mocks {
    /// Mocks with a clock at [`T0`].
    fn new() -> Self {
        Self::at(T0)
    }

    /// Mocks with a clock at `now`.
    fn at(now: OffsetDateTime) -> Self {
        let mut mocks = Self::untouched();
        mocks.clock.expect_now().return_const(now);
        mocks
    }

    /// Mocks that no call may reach, the clock's included.
    pub(crate) fn untouched() -> Self {
        Self {
            handoffs: MockHandoffRepository::new(),
            parents: MockParentRegistry::new(),
            clock: MockClock::new(),
            archive: Arc::new(Memory::default()),
            seq: Sequence::new(),
        }
    }

    /// Next, a `transition` of the handoff that runs the service's decision
    /// on `stored`, checks it is the `expect`ed kind and stores it.
    fn decides_on(&mut self, stored: InteractiveHandoff, expect: Expect) -> &mut Self {
        self.transition_then(stored, expect, |outcome| outcome)
    }

    /// Next, a `transition` that runs the decision on `stored` as
    /// [`decides_on`](Self::decides_on) does, then reports `then(outcome)`
    /// instead (a lost swap, a lost reply).
    fn transition_then(
        &mut self,
        stored: InteractiveHandoff,
        expect: Expect,
        then: impl Fn(StoreResult<Option<TransitionOutcome>>) -> StoreResult<Option<TransitionOutcome>>
            + Send
            + 'static,
    ) -> &mut Self {
        self.handoffs
            .expect_transition()
            .withf(|id, _, _| *id == handoff_id())
            .times(1)
            .in_sequence(&mut self.seq)
            .returning(move |_, decide, _| then(decided_on(&stored, &decide, expect)));
        self
    }

    /// Next, `open`'s read of the parent: the wave at `version` with
    /// `active`.
    fn reads_wave(
        &mut self,
        wave: Wave,
        version: u64,
        active: Option<InteractiveHandoff>,
    ) -> &mut Self {
        self.parents
            .expect_load_parent_with_active()
            .times(1)
            .in_sequence(&mut self.seq)
            .returning(move |_, _| wave_snapshot(wave.clone(), version, active.clone()));
        self
    }

    /// Next, a read of the parent alone: the wave at `version`.
    fn loads_wave(&mut self, wave: Wave, version: u64) -> &mut Self {
        self.parents
            .expect_load_parent()
            .times(1)
            .in_sequence(&mut self.seq)
            .returning(move |_| {
                Ok(Some(Versioned {
                    value: Parent::Wave(wave.clone()),
                    version,
                }))
            });
        self
    }

    /// Next, an `insert` of a handoff that answers `outcome`.
    fn inserts(&mut self, outcome: InsertOutcome) -> &mut Self {
        self.handoffs
            .expect_insert()
            .times(1)
            .in_sequence(&mut self.seq)
            .returning(move |_, _, _| Ok(outcome));
        self
    }

    /// The store on these mocks, with the ids of [`handoff_id`].
    pub(crate) fn store(self) -> Store {
        let mut ids = MockIdSource::new();
        ids.expect_new_handoff_id().returning(handoff_id);
        Store::new(StorePorts {
            backend: "mock",
            handoffs: Arc::new(self.handoffs),
            parents: Arc::new(self.parents),
            events: Arc::new(MockEventLog::new()),
            archive: self.archive,
            deliveries: Arc::new(crate::delivery::MockDeliveries::new()),
            revocations: Arc::new(crate::revocation::MockRevocations::new()),
            clock: Arc::new(self.clock),
            ids: Arc::new(ids),
        })
    }
}

#[tokio::test]
async fn a_lost_finish_race_is_retried_and_resolved_as_a_replay() {
    let mut mocks = Mocks::new();
    // The domain would write, but another writer wins the swap.
    mocks.transition_then(waiting(), Expect::Write, |decided| {
        decided.map(|_| Some(TransitionOutcome::Lost))
    });
    // The winner finished with the same outcome: the retry is a replay and
    // must not write again.
    mocks.decides_on(finished(&completed()), Expect::Replay);
    let result = mocks
        .store()
        .finish_interactive_handoff(&handoff_id(), &completed(), None)
        .await
        .unwrap();
    assert_eq!(result, finished(&completed()));
}

#[tokio::test]
async fn a_lost_finish_race_against_another_outcome_is_a_conflict() {
    let mut mocks = Mocks::new();
    mocks
        .transition_then(waiting(), Expect::Write, |decided| {
            decided.map(|_| Some(TransitionOutcome::Lost))
        })
        .decides_on(finished(&failed()), Expect::Replay);
    let err = mocks
        .store()
        .finish_interactive_handoff(&handoff_id(), &completed(), None)
        .await
        .unwrap_err();
    assert!(
        err.conflict_kind() == Some(ConflictKind::OtherOutcome),
        "{err}"
    );
}

#[tokio::test]
async fn a_lost_open_race_replays_the_winners_handoff() {
    let mut winner = waiting();
    winner.id = InteractiveHandoffId::from_uuid(Uuid::from_u128(99));
    let mut mocks = Mocks::new();
    mocks
        .reads_wave(wave(), 1, None)
        .inserts(InsertOutcome::ParentBusy)
        .reads_wave(wave(), 1, Some(winner.clone()));
    let (handoff, created) = mocks
        .store()
        .open_interactive_handoff(request())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(handoff, winner);
}

#[tokio::test]
async fn a_lost_step_race_returns_the_winners_handoff_for_the_step() {
    let step = StepKey::parse("oauth-login@turn-17").unwrap();
    // The winner already finished: the step's handoff is returned as it is.
    let mut winner = finished(&completed());
    winner.id = InteractiveHandoffId::from_uuid(Uuid::from_u128(99));
    winner.step = Some(step.clone());
    let mut mocks = Mocks::new();
    let asked = step.clone();
    mocks
        .parents
        .expect_load_parent_with_active()
        .withf(move |_, step| *step == Some(&asked))
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _| wave_snapshot(wave(), 1, None));
    let stored_step = step.clone();
    mocks
        .handoffs
        .expect_insert()
        .withf(move |handoff, _, _| handoff.step.as_ref() == Some(&stored_step))
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _, _| Ok(InsertOutcome::StepTaken));
    let found = winner.clone();
    mocks
        .parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(move |_, _| {
            let mut snapshot = wave_snapshot(wave(), 1, None)?;
            if let Some(snapshot) = snapshot.as_mut() {
                snapshot.at_step = Some(Versioned {
                    value: found.clone(),
                    version: 2,
                });
            }
            Ok(snapshot)
        });
    let (handoff, created) = mocks
        .store()
        .open_interactive_handoff(request().with_options(OpenOptions::at_step(step)))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(handoff, winner);
}

#[tokio::test]
async fn open_inserts_against_the_loaded_parent_version() {
    let mut mocks = Mocks::new();
    mocks.reads_wave(wave(), 7, None);
    mocks
        .handoffs
        .expect_insert()
        .withf(|handoff, version, _| {
            *version == 7 && handoff.status == InteractiveHandoffStatus::Waiting
        })
        .times(1)
        .returning(|_, _, _| Ok(InsertOutcome::Inserted));
    let (handoff, created) = mocks
        .store()
        .open_interactive_handoff(request())
        .await
        .unwrap();
    assert!(created);
    assert_eq!(handoff.id, handoff_id());
}

#[tokio::test]
async fn a_parent_that_changed_under_open_is_revalidated() {
    // The first insert finds the parent moved (a new body was recorded); the
    // reload shows generation 2, so the generation-1 request is now stale.
    let mut mocks = Mocks::new();
    mocks
        .reads_wave(wave(), 1, None)
        .inserts(InsertOutcome::ParentChanged)
        .reads_wave(wave_at(2), 2, None);
    let err = mocks
        .store()
        .open_interactive_handoff(request())
        .await
        .unwrap_err();
    assert!(
        err.conflict_kind() == Some(ConflictKind::StaleGeneration),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_requests_are_refused_before_any_read() {
    let store = Mocks::untouched().store();
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
        .finish_interactive_handoff(&handoff_id(), &blank, None)
        .await
        .unwrap_err()
        .is_invalid_input());
}

#[tokio::test]
async fn a_repository_failure_surfaces_as_unavailable() {
    let mut mocks = Mocks::new();
    mocks.handoffs.expect_transition().returning(|_, _, _| {
        Err(StoreError::unavailable(
            UnavailableKind::DiskFull,
            "disk on fire",
        ))
    });
    let err = mocks
        .store()
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Unavailable { kind: UnavailableKind::DiskFull, message, .. } if message == "disk on fire"),
        "{err}"
    );

    let mut mocks = Mocks::untouched();
    mocks
        .parents
        .expect_load_parent_with_active()
        .returning(|_, _| Err(unreachable()));
    // Without a retry window an unreachable server fails the call at once.
    let store = mocks.store().with_retry_window(Duration::ZERO);
    assert!(store
        .open_interactive_handoff(request())
        .await
        .unwrap_err()
        .is_unavailable());
}

#[tokio::test]
async fn an_unreachable_server_is_retried_within_the_window_then_named() {
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_transition()
        .returning(|_, _, _| Err(unreachable()));
    let store = mocks.store().with_retry_window(Duration::from_millis(100));
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
        let mut mocks = Mocks::new();
        mocks
            .handoffs
            .expect_transition()
            .times(1)
            .returning(move |_, _, _| Err(StoreError::unavailable(kind, "no")));
        let err = mocks
            .store()
            .attach_interactive_handoff(&handoff_id())
            .await
            .unwrap_err();
        assert_eq!(err.unavailable_kind(), Some(kind));
    }
}

#[tokio::test]
async fn a_finish_whose_reply_was_lost_is_retried_and_replays_its_own_result() {
    let mut mocks = Mocks::new();
    // The first attempt commits, then the connection dies before the reply.
    mocks.transition_then(waiting(), Expect::Write, |decided| {
        decided.and(Err(unreachable()))
    });
    // The retry finds the finish stored: a replay, nothing written.
    mocks.decides_on(finished(&completed()), Expect::Replay);
    let result = mocks
        .store()
        .finish_interactive_handoff(&handoff_id(), &completed(), None)
        .await
        .unwrap();
    assert_eq!(result, finished(&completed()));
}

#[tokio::test]
async fn an_open_whose_insert_reply_was_lost_returns_its_handoff_as_created() {
    let stored = Arc::new(Mutex::new(None));
    let mut mocks = Mocks::new();
    mocks.reads_wave(wave(), 1, None);
    // The insert commits, then the connection dies before the reply.
    let inserted = stored.clone();
    mocks
        .handoffs
        .expect_insert()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(move |handoff, _, _| {
            *inserted.lock().unwrap() = Some(handoff.clone());
            Err(unreachable())
        });
    // Not the same insert again: the next round reads the stored handoff.
    let found = stored.clone();
    mocks
        .parents
        .expect_load_parent_with_active()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(move |_, _| wave_snapshot(wave(), 1, found.lock().unwrap().clone()));
    let (handoff, created) = mocks
        .store()
        .open_interactive_handoff(request())
        .await
        .unwrap();
    assert!(
        created,
        "the handoff this call stored is reported as created"
    );
    assert_eq!(Some(handoff), stored.lock().unwrap().clone());
}

#[tokio::test]
async fn a_parent_insert_whose_reply_was_lost_is_created_on_the_retry() {
    let mut mocks = Mocks::new();
    mocks
        .parents
        .expect_insert_parent()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _| Err(unreachable()));
    mocks
        .parents
        .expect_insert_parent()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _| Ok(ParentInsert::AlreadyExists));
    mocks.loads_wave(wave(), 1);
    mocks.store().create_wave(&wave()).await.unwrap();
}

#[tokio::test]
async fn the_clocks_value_is_what_gets_stored() {
    let now = datetime!(2026-12-02 12:34:56.789_123_456 UTC);
    let stored_at = datetime!(2026-12-02 12:34:56.789_123 UTC);
    let mut mocks = Mocks::at(now);
    mocks.transition_then(waiting(), Expect::Write, move |decided| {
        let Ok(Some(TransitionOutcome::Applied {
            handoff: attached, ..
        })) = &decided
        else {
            unreachable!("decided_on reports an applied transition")
        };
        assert_eq!(
            (attached.attached_at, attached.updated_at),
            (Some(stored_at), stored_at)
        );
        decided
    });
    let attached = mocks
        .store()
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap();
    assert_eq!(attached.attached_at, Some(stored_at));

    let mut mocks = Mocks::at(now);
    mocks.reads_wave(wave(), 1, None);
    mocks
        .handoffs
        .expect_insert()
        .withf(move |handoff, _, _| handoff.created_at == stored_at)
        .times(1)
        .returning(|_, _, _| Ok(InsertOutcome::Inserted));
    let (opened, _) = mocks
        .store()
        .open_interactive_handoff(request())
        .await
        .unwrap();
    assert_eq!(opened.created_at, stored_at);
}

#[tokio::test]
async fn replayed_transitions_write_nothing() {
    // The mocked adapter panics on a decision to write.
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_transition()
        .returning(|_, decide, _| decided_on(&finished(&completed()), &decide, Expect::Replay));
    mocks
        .store()
        .finish_interactive_handoff(&handoff_id(), &completed(), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn claims_return_whether_this_generation_holds_the_wake() {
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_transition()
        .returning(move |_, decide, _| decided_on(&claimed_by(5), &decide, Expect::Replay));
    // Generation 6 is newer than the holder but not the parent's current
    // body (5), so it reads the parent once and does not take over.
    mocks.parents.expect_load_parent().times(1).returning(|_| {
        Ok(Some(Versioned {
            value: Parent::Wave(wave_at(5)),
            version: 2,
        }))
    });
    let store = mocks.store();
    assert!(
        store
            .claim_interactive_handoff_wake(&handoff_id(), 5)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        !store
            .claim_interactive_handoff_wake(&handoff_id(), 6)
            .await
            .unwrap()
            .claimed
    );
}

#[tokio::test]
async fn the_parents_current_generation_takes_an_older_holders_wake_over() {
    // The holder of the record the take-over wrote.
    let written = Arc::new(Mutex::new(None));
    let stored = written.clone();
    let mut mocks = Mocks::new();
    mocks
        .decides_on(claimed_by(5), Expect::Replay)
        .loads_wave(wave_at(6), 3)
        .transition_then(claimed_by(5), Expect::Write, move |decided| {
            if let Ok(Some(TransitionOutcome::Applied { handoff, .. })) = &decided {
                *stored.lock().unwrap() = Some(handoff.wake_claimed_by_generation);
            }
            decided
        });
    assert!(
        mocks
            .store()
            .claim_interactive_handoff_wake(&handoff_id(), 6)
            .await
            .unwrap()
            .claimed
    );
    assert_eq!(*written.lock().unwrap(), Some(Some(6)));
}

#[tokio::test]
async fn endless_lost_races_give_up_as_unavailable() {
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_transition()
        .times(MAX_RACE_ATTEMPTS)
        .returning(|_, _, _| Ok(Some(TransitionOutcome::Lost)));
    let err = mocks
        .store()
        .attach_interactive_handoff(&handoff_id())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err}");
}

#[tokio::test]
async fn unknown_ids_and_parents_are_not_found() {
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_transition()
        .returning(|_, _, _| Ok(None));
    mocks.handoffs.expect_load().returning(|_| Ok(None));
    mocks
        .parents
        .expect_load_parent_with_active()
        .returning(|_, _| Ok(None));
    let store = mocks.store();
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
    let mut mocks = Mocks::new();
    mocks
        .parents
        .expect_insert_parent()
        .returning(|_, _| Ok(ParentInsert::AlreadyExists));
    mocks.parents.expect_load_parent().returning(|_| {
        Ok(Some(Versioned {
            value: Parent::Wave(wave()),
            version: 1,
        }))
    });
    let store = mocks.store();
    store.create_wave(&wave()).await.unwrap();
    let other = Wave::new(wave().id().clone(), "other".into(), "/src/other".into());
    assert!(store.create_wave(&other).await.unwrap_err().is_conflict());
}

#[tokio::test]
async fn a_lost_body_race_is_retried() {
    let mut mocks = Mocks::new();
    mocks.loads_wave(wave(), 1);
    mocks
        .parents
        .expect_swap_parent()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _| Ok(SwapOutcome::Lost));
    // The winner recorded generation 2 already: recording it again is a replay.
    mocks.loads_wave(wave_at(2), 2);
    let parent = mocks
        .store()
        .record_body(
            &InteractiveHandoffParent::Wave(wave().id().clone()),
            body(2, None),
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
    // The store on a repository whose page is `page` and whose `load` of
    // the handoff paged after is expected `loads` times, answering
    // `found`.
    let listing =
        |page: Vec<InteractiveHandoff>, loads: usize, found: Option<InteractiveHandoff>| {
            let mut mocks = Mocks::new();
            let paged_after = after.clone();
            mocks
                .handoffs
                .expect_list()
                .times(1)
                .returning(move |_| Ok(page.clone()));
            mocks
                .handoffs
                .expect_load()
                .withf(move |id| *id == paged_after)
                .times(loads)
                .returning(move |_| Ok(found.clone().map(|value| Versioned { value, version: 1 })));
            mocks.store()
        };

    // A full page: the repository's answer as it is, and no other read.
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_list()
        .with(eq(query.clone()))
        .times(1)
        .returning(|_| Ok(vec![waiting()]));
    mocks.handoffs.expect_load().never();
    assert_eq!(
        mocks
            .store()
            .list_interactive_handoffs(query.clone())
            .await
            .unwrap(),
        vec![waiting()]
    );

    // An empty page after a handoff that exists: the end of the list.
    assert!(listing(vec![], 1, Some(waiting()))
        .list_interactive_handoffs(query.clone())
        .await
        .unwrap()
        .is_empty());

    // An empty page after a handoff that does not exist.
    let err = listing(vec![], 1, None)
        .list_interactive_handoffs(query.clone())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains(after.as_str()), "{err}");

    // Without `after`, an empty page is just empty.
    assert!(listing(vec![], 0, None)
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
    let mut mocks = Mocks::new();
    for (removed, events) in [(256, 1_024), (10, 31), (0, 0)] {
        mocks
            .handoffs
            .expect_prune_batch()
            .with(eq(cutoff), eq(crate::PRUNE_BATCH))
            .times(1)
            .in_sequence(&mut mocks.seq)
            .returning(move |_, _| {
                Ok(PruneCount {
                    handoffs: removed,
                    events,
                })
            });
    }
    mocks.handoffs.expect_count_prunable().never();
    assert_eq!(
        mocks
            .store()
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
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_count_prunable()
        .with(eq(cutoff))
        .times(1)
        .returning(move |_| Ok(counted));
    mocks.handoffs.expect_prune_batch().never();
    let store = mocks.store();
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
    let mut mocks = Mocks::new();
    mocks
        .handoffs
        .expect_prune_batch()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _| {
            Ok(PruneCount {
                handoffs: 2,
                events: 6,
            })
        });
    mocks
        .handoffs
        .expect_prune_batch()
        .times(1)
        .in_sequence(&mut mocks.seq)
        .returning(|_, _| Err(StoreError::damaged("the disk said no")));
    assert!(mocks
        .store()
        .prune(PruneOptions {
            batch: 2,
            ..PruneOptions::finished_before(cutoff)
        })
        .await
        .unwrap_err()
        .is_unavailable());
}
