//! Unit tests for every handoff transition and the parent rules (C1-C3,
//! C5-C7, C9, C10), with no IO.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_domain::interactive_handoff::{
    attach, claim_wake, claim_wake_for_parent, decide_open, decide_open_with, finish, open, replay,
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffStatus, OpenDecision,
    OpenOptions, StepKey, Transition,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSessionStatus;
use lf_handoff_domain::task::TaskSessionStatus;
use lf_handoff_domain::wave::WaveStatus;
use lf_handoff_domain::{ConflictKind, DomainError};
use std::path::PathBuf;
use support::*;
use time::macros::datetime;

fn handed_back() -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::HandedBack {
        summary: "Finish the review fixes headlessly".into(),
    }
}

/// The result is a conflict of `kind` whose message names `needle`.
fn is_conflict<T: std::fmt::Debug>(
    result: Result<T, DomainError>,
    kind: ConflictKind,
    needle: &str,
) {
    match result {
        Err(DomainError::Conflict {
            kind: actual,
            message,
        }) => {
            assert_eq!(actual, kind, "{message}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}")
        }
        other => panic!("expected a {kind} conflict, got {other:?}"),
    }
}

fn is_invalid<T: std::fmt::Debug>(result: Result<T, DomainError>, needle: &str) {
    match result {
        Err(DomainError::InvalidInput(message)) => {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}")
        }
        other => panic!("expected invalid input mentioning {needle:?}, got {other:?}"),
    }
}

#[test]
fn open_creates_a_waiting_handoff_stamped_now() {
    let handoff = waiting();
    assert_eq!(handoff.status, InteractiveHandoffStatus::Waiting);
    assert_eq!(handoff.created_at, T0);
    assert_eq!(handoff.updated_at, T0);
    assert_eq!(handoff.body_generation, 4);
    assert_eq!(handoff.wave_id, wave_id(1));
    assert!(handoff.attached_at.is_none() && handoff.outcome.is_none());
    handoff.validate().unwrap();
}

#[test]
fn open_truncates_now_to_utc_microseconds() {
    let parent = wave_parent();
    let now = datetime!(2026-12-02 14:00:00.123_456_789 +02:00);
    let handoff = open(
        &OpenRequest::on(&parent).build(),
        wave_id(1),
        handoff_id(2),
        now,
    )
    .unwrap();
    assert_eq!(
        handoff.created_at,
        datetime!(2026-12-02 12:00:00.123_456 UTC)
    );
    handoff.validate().unwrap();
}

#[test]
fn open_refuses_a_wave_parent_owned_by_another_wave() {
    let parent = wave_parent();
    is_invalid(
        open(
            &OpenRequest::on(&parent).build(),
            wave_id(9),
            handoff_id(2),
            T0,
        ),
        "must own the handoff",
    );
}

#[test]
fn c1_malformed_requests_are_invalid_input() {
    let parent = task_parent();
    type Mutation =
        Box<dyn Fn(&mut lf_handoff_domain::interactive_handoff::OpenInteractiveHandoff)>;
    let cases: Vec<(&str, Mutation)> = vec![
        ("provider", Box::new(|r| r.provider = " ".into())),
        (
            "provider session id",
            Box::new(|r| r.provider_session_id = Some("".into())),
        ),
        ("generation", Box::new(|r| r.body_generation = 0)),
        ("reason", Box::new(|r| r.reason = "\n".into())),
        (
            "absolute",
            Box::new(|r| r.cwd = PathBuf::from("relative/dir")),
        ),
        ("command", Box::new(|r| r.attach_argv.clear())),
        ("empty", Box::new(|r| r.attach_argv.push(String::new()))),
        (
            "environment key",
            Box::new(|r| {
                r.environment.insert(" ".into(), "x".into());
            }),
        ),
        (
            "`=`",
            Box::new(|r| {
                r.environment.insert("A=B".into(), "x".into());
            }),
        ),
        ("NUL", Box::new(|r| r.reason = "a\0b".into())),
        ("NUL", Box::new(|r| r.attach_argv.push("a\0".into()))),
    ];
    for (needle, mutate) in cases {
        let mut request = OpenRequest::on(&parent).build();
        mutate(&mut request);
        is_invalid(
            decide_open(&request, &parent, None, handoff_id(1), T0),
            needle,
        );
    }
}

#[test]
fn c1_request_validation_comes_before_parent_checks() {
    // A request that is both malformed and stale is reported as malformed.
    let parent = task_parent();
    let mut request = OpenRequest::on(&parent).build();
    request.reason = String::new();
    request.body_generation = 3;
    is_invalid(
        decide_open(&request, &parent, None, handoff_id(1), T0),
        "reason",
    );
}

#[test]
fn c2_parent_rules_are_conflicts_naming_the_rule() {
    let parent = task_parent();
    let mut stale = OpenRequest::on(&parent).build();
    stale.body_generation = 3;
    is_conflict(
        decide_open(&stale, &parent, None, handoff_id(1), T0),
        ConflictKind::StaleGeneration,
        "stale",
    );

    let mut future = OpenRequest::on(&parent).build();
    future.body_generation = 5;
    is_conflict(
        decide_open(&future, &parent, None, handoff_id(1), T0),
        ConflictKind::GenerationNotRecorded,
        "not recorded",
    );

    let mut provider = OpenRequest::on(&parent).build();
    provider.provider = "claude".into();
    is_conflict(
        decide_open(&provider, &parent, None, handoff_id(1), T0),
        ConflictKind::ProviderMismatch,
        "provider",
    );

    let mut history = OpenRequest::on(&parent).build();
    history.provider_session_id = Some("other-thread".into());
    is_conflict(
        decide_open(&history, &parent, None, handoff_id(1), T0),
        ConflictKind::HistoryMismatch,
        "history",
    );
    history.provider_session_id = None;
    is_conflict(
        decide_open(&history, &parent, None, handoff_id(1), T0),
        ConflictKind::HistoryMismatch,
        "history",
    );

    let mut worktree = OpenRequest::on(&parent).build();
    worktree.cwd = PathBuf::from("/src/some-other-task");
    is_conflict(
        decide_open(&worktree, &parent, None, handoff_id(1), T0),
        ConflictKind::WorktreeMismatch,
        "worktree",
    );
}

#[test]
fn c2_worktree_comparison_is_lexical() {
    let parent = task_parent();
    for cwd in [
        "/src/worktrees/task-1/",
        "/src/worktrees/task-1/.",
        "/src/worktrees/./task-1",
    ] {
        let mut request = OpenRequest::on(&parent).build();
        request.cwd = PathBuf::from(cwd);
        assert!(
            decide_open(&request, &parent, None, handoff_id(1), T0).is_ok(),
            "{cwd} refused"
        );
    }
}

#[test]
fn c2_terminal_parents_refuse_handoffs() {
    let Parent::Task(mut task) = task_parent() else {
        unreachable!()
    };
    task.status = TaskSessionStatus::Abandoned;
    let parent = Parent::Task(task);
    is_conflict(
        decide_open(
            &OpenRequest::on(&parent).build(),
            &parent,
            None,
            handoff_id(1),
            T0,
        ),
        ConflictKind::ParentFinished,
        "terminal",
    );

    let mut project = project(project_id(1), &wave_id(1));
    project.status = ProjectSessionStatus::Completed;
    let parent = Parent::Project(project);
    is_conflict(
        decide_open(
            &OpenRequest::on(&parent).build(),
            &parent,
            None,
            handoff_id(1),
            T0,
        ),
        ConflictKind::ParentFinished,
        "terminal",
    );

    let parent = Parent::Wave(wave(1).with_status(WaveStatus::Closed));
    is_conflict(
        decide_open(
            &OpenRequest::on(&parent).build(),
            &parent,
            None,
            handoff_id(1),
            T0,
        ),
        ConflictKind::ParentFinished,
        "terminal",
    );
}

#[test]
fn c2_a_request_for_another_parent_is_invalid() {
    let parent = task_parent();
    let other = wave_parent();
    is_invalid(
        decide_open(
            &OpenRequest::on(&other).build(),
            &parent,
            None,
            handoff_id(1),
            T0,
        ),
        "request is for",
    );
}

#[test]
fn c2_a_wave_without_a_recorded_body_is_at_generation_one_and_any_provider() {
    let parent = wave_parent();
    let mut request = OpenRequest::on(&parent).build();
    request.provider = "claude".into();
    request.provider_session_id = None;
    assert_eq!(request.body_generation, 1);
    assert!(decide_open(&request, &parent, None, handoff_id(1), T0).is_ok());
    request.body_generation = 2;
    is_conflict(
        decide_open(&request, &parent, None, handoff_id(1), T0),
        ConflictKind::GenerationNotRecorded,
        "not recorded",
    );
}

#[test]
fn c2_a_stale_body_cannot_obtain_an_existing_handoff() {
    let existing = waiting();
    let parent = task_parent();
    let mut stale = OpenRequest::on(&parent).build();
    stale.body_generation = 3;
    is_conflict(
        decide_open(&stale, &parent, Some(&existing), handoff_id(2), T0),
        ConflictKind::StaleGeneration,
        "stale",
    );
}

#[test]
fn c3_open_replays_the_active_handoff() {
    let existing = waiting();
    let parent = task_parent();
    let decision = decide_open(
        &OpenRequest::on(&parent).build(),
        &parent,
        Some(&existing),
        handoff_id(2),
        at(9),
    )
    .unwrap();
    assert_eq!(decision, OpenDecision::Replay(existing.clone()));
    assert_eq!(
        replay(&existing, &OpenRequest::on(&parent).build()).unwrap(),
        existing
    );
}

#[test]
fn replay_refuses_a_terminal_or_foreign_handoff() {
    let parent = task_parent();
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    is_conflict(
        replay(&done, &OpenRequest::on(&parent).build()),
        ConflictKind::AlreadyFinished,
        "only an active",
    );
    is_invalid(
        replay(&waiting(), &OpenRequest::on(&wave_parent()).build()),
        "belongs to",
    );
}

#[test]
fn c5_attach_moves_waiting_to_attached_once() {
    let handoff = waiting();
    let Transition::Changed(attached) = attach(&handoff, at(5)).unwrap() else {
        panic!("first attach changed nothing")
    };
    assert_eq!(attached.status, InteractiveHandoffStatus::Attached);
    assert_eq!(attached.attached_at, Some(at(5)));
    assert_eq!(attached.updated_at, at(5));
    attached.validate().unwrap();

    let again = attach(&attached, at(50)).unwrap();
    assert_eq!(again, Transition::Unchanged(attached.clone()));
    assert_eq!(
        again.handoff().attach_descriptor(),
        attached.attach_descriptor()
    );
}

#[test]
fn c5_attaching_a_terminal_handoff_is_a_conflict() {
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    is_conflict(
        attach(&done, at(2)),
        ConflictKind::AlreadyFinished,
        "already handed back",
    );
}

#[test]
fn c6_finish_records_outcome_status_and_terminal_at() {
    for outcome in [
        InteractiveHandoffOutcome::Completed {
            summary: "done".into(),
        },
        handed_back(),
        InteractiveHandoffOutcome::Failed {
            reason: "tmux exited".into(),
        },
    ] {
        for start in [waiting(), attach(&waiting(), at(1)).unwrap().into_handoff()] {
            let finished = finish(&start, &outcome, None, at(2)).unwrap();
            assert!(finished.is_changed());
            let finished = finished.into_handoff();
            assert_eq!(finished.status, outcome.status());
            assert_eq!(finished.outcome.as_ref(), Some(&outcome));
            assert_eq!(finished.terminal_at, Some(at(2)));
            assert!(!finished.is_active());
            finished.validate().unwrap();
        }
    }
}

#[test]
fn c6_finishing_again_with_an_equal_outcome_changes_nothing() {
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    assert_eq!(
        finish(&done, &handed_back(), None, at(9)).unwrap(),
        Transition::Unchanged(done.clone())
    );
}

#[test]
fn c6_a_different_outcome_is_a_conflict_and_the_first_stays() {
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    let other = InteractiveHandoffOutcome::HandedBack {
        summary: "something else".into(),
    };
    is_conflict(
        finish(&done, &other, None, at(2)),
        ConflictKind::OtherOutcome,
        "first outcome stays",
    );
    let failed = InteractiveHandoffOutcome::Failed {
        reason: "gone".into(),
    };
    is_conflict(
        finish(&done, &failed, None, at(2)),
        ConflictKind::OtherOutcome,
        "already handed back",
    );
}

#[test]
fn c6_blank_outcome_text_is_invalid() {
    is_invalid(
        finish(
            &waiting(),
            &InteractiveHandoffOutcome::Completed {
                summary: " ".into(),
            },
            None,
            at(1),
        ),
        "summary",
    );
    is_invalid(
        finish(
            &waiting(),
            &InteractiveHandoffOutcome::Failed {
                reason: String::new(),
            },
            None,
            at(1),
        ),
        "reason",
    );
}

#[test]
fn c7_claim_wake_rules() {
    let handoff = waiting();
    is_invalid(claim_wake(&handoff, 0, at(1)), "at least 1");
    is_conflict(
        claim_wake(&handoff, 5, at(1)),
        ConflictKind::NotFinished,
        "still waiting",
    );
    let done = finish(&handoff, &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    is_conflict(
        claim_wake(&done, 3, at(2)),
        ConflictKind::StaleGeneration,
        "stale",
    );

    let first = claim_wake(&done, 5, at(2)).unwrap();
    assert!(first.claimed);
    let Transition::Changed(claimed) = first.transition else {
        panic!("claim wrote nothing")
    };
    assert_eq!(claimed.wake_claimed_by_generation, Some(5));
    assert_eq!(claimed.wake_claimed_at, Some(at(2)));
    assert_eq!(claimed.updated_at, at(2));
    claimed.validate().unwrap();

    let retry = claim_wake(&claimed, 5, at(3)).unwrap();
    assert!(retry.claimed);
    assert_eq!(retry.transition, Transition::Unchanged(claimed.clone()));

    let other = claim_wake(&claimed, 6, at(3)).unwrap();
    assert!(!other.claimed);
    assert_eq!(other.transition, Transition::Unchanged(claimed.clone()));
}

#[test]
fn c7_the_opening_generation_may_claim() {
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    assert!(
        claim_wake(&done, done.body_generation, at(2))
            .unwrap()
            .claimed
    );
}

#[test]
fn i7_a_clock_stepping_backwards_never_reorders_timestamps() {
    let handoff = waiting();
    let attached = attach(&handoff, at(-100)).unwrap().into_handoff();
    assert_eq!(attached.attached_at, Some(T0));
    let done = finish(&attached, &handed_back(), None, at(-200))
        .unwrap()
        .into_handoff();
    assert_eq!(done.terminal_at, Some(T0));
    let claim = claim_wake(&done, 5, at(-300))
        .unwrap()
        .transition
        .into_handoff();
    assert_eq!(claim.wake_claimed_at, Some(T0));
    claim.validate().unwrap();
}

#[test]
fn c10_record_body_only_increases_generations() {
    let parent = task_parent();
    is_conflict(
        parent.record_body(body(4, Some("task-thread")), at(1)),
        ConflictKind::GenerationNotNewer,
        "only increase",
    );
    is_conflict(
        parent.record_body(body(2, None), at(1)),
        ConflictKind::GenerationNotNewer,
        "only increase",
    );
    is_invalid(parent.record_body(body(0, None), at(1)), "at least 1");
    let next = parent.record_body(body(5, None), at(1)).unwrap();
    assert_eq!(next.body_generation(), 5);
    // The new body inherits the provider history it did not name.
    assert_eq!(next.provider_session_id(), Some("task-thread"));
    assert_eq!(
        next.latest_process()
            .and_then(|p| p.provider_session_id.as_deref()),
        Some("task-thread")
    );
}

#[test]
fn c10_record_body_preserves_provider_and_history() {
    let parent = task_parent();
    let mut other_provider = body(5, None);
    other_provider.provider = "claude".into();
    is_conflict(
        parent.record_body(other_provider, at(1)),
        ConflictKind::ProviderMismatch,
        "provider",
    );
    is_conflict(
        parent.record_body(body(5, Some("new-thread")), at(1)),
        ConflictKind::HistoryMismatch,
        "history",
    );
    let Parent::Task(mut task) = task_parent() else {
        unreachable!()
    };
    task.status = TaskSessionStatus::Completed;
    is_conflict(
        Parent::Task(task).record_body(body(5, None), at(1)),
        ConflictKind::ParentFinished,
        "terminal",
    );
}

#[test]
fn c10_a_new_body_fences_the_old_one_out_of_open() {
    let parent = task_parent();
    let next = parent.record_body(body(5, None), at(1)).unwrap();
    is_conflict(
        decide_open(
            &OpenRequest::on(&parent).build(),
            &next,
            None,
            handoff_id(1),
            at(2),
        ),
        ConflictKind::StaleGeneration,
        "stale",
    );
}

#[test]
fn c10_a_wave_adopts_its_first_recorded_body() {
    let parent = wave_parent();
    let next = parent
        .record_body(body(1, Some("wave-thread")), at(1))
        .unwrap();
    assert_eq!(next.body_generation(), 1);
    assert_eq!(next.provider(), Some("codex"));
    assert_eq!(next.provider_session_id(), Some("wave-thread"));
}

#[test]
fn validate_new_checks_parent_fields() {
    assert!(task_parent().validate_new().is_ok());
    let Parent::Task(mut task) = task_parent() else {
        unreachable!()
    };
    task.worktree = PathBuf::from("relative");
    is_invalid(Parent::Task(task).validate_new(), "absolute");
    let Parent::Task(mut task) = task_parent() else {
        unreachable!()
    };
    task.latest_process = Some(body(0, None));
    is_invalid(Parent::Task(task).validate_new(), "at least 1");
}

#[test]
fn c10_recording_the_current_body_again_is_recognised_as_a_replay() {
    let parent = task_parent();
    let next = parent.record_body(body(5, None), at(1)).unwrap();
    assert!(next.is_current_body(&body(5, None)));
    assert!(next.is_current_body(&body(5, Some("task-thread"))));
    assert!(!next.is_current_body(&body(6, None)));
    assert!(!parent.is_current_body(&body(5, None)));
}

fn step(text: &str) -> StepKey {
    StepKey::parse(text).unwrap()
}

/// Opens at `key` on `parent`, which has no handoff yet.
fn opened_at_step(parent: &Parent, key: &StepKey) -> InteractiveHandoff {
    match decide_open_with(
        &OpenRequest::on(parent)
            .build()
            .with_options(OpenOptions::at_step(key.clone())),
        parent,
        None,
        None,
        handoff_id(1),
        T0,
    )
    .unwrap()
    {
        OpenDecision::Create(handoff) => handoff,
        OpenDecision::Replay(_) => panic!("a parent without a handoff replayed"),
    }
}

#[test]
fn c12_open_at_a_step_records_it() {
    let parent = task_parent();
    let created = opened_at_step(&parent, &step("oauth-login@turn-17"));
    assert_eq!(created.step, Some(step("oauth-login@turn-17")));
    created.validate().unwrap();
    let row = created.list_row(at(1));
    assert_eq!(row.step, created.step);
}

#[test]
fn c12_a_step_the_parent_has_returns_its_handoff_whatever_its_status() {
    let parent = task_parent();
    let key = step("oauth-login@turn-17");
    let first = opened_at_step(&parent, &key);
    let done = finish(&first, &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    let claimed = claim_wake(&done, 4, at(2))
        .unwrap()
        .transition
        .into_handoff();
    for existing in [&first, &done, &claimed] {
        let active = existing.is_active().then_some(existing);
        let decision = decide_open_with(
            &OpenRequest::on(&parent)
                .build()
                .with_options(OpenOptions::at_step(key.clone())),
            &parent,
            active,
            Some(existing),
            handoff_id(2),
            at(3),
        )
        .unwrap();
        assert_eq!(decision, OpenDecision::Replay(existing.clone()));
    }
}

#[test]
fn c12_parent_checks_come_before_the_step_replay() {
    let parent = task_parent();
    let key = step("oauth-login@turn-17");
    let first = opened_at_step(&parent, &key);
    let next = parent.record_body(body(5, None), at(1)).unwrap();
    is_conflict(
        decide_open_with(
            &OpenRequest::on(&parent)
                .build()
                .with_options(OpenOptions::at_step(key.clone())),
            &next,
            Some(&first),
            Some(&first),
            handoff_id(2),
            at(2),
        ),
        ConflictKind::StaleGeneration,
        "stale",
    );
}

#[test]
fn c12_another_step_while_the_parent_is_busy_is_a_conflict_naming_the_active_handoff() {
    let parent = task_parent();
    let first = opened_at_step(&parent, &step("a"));
    let unnamed = waiting();
    for active in [&first, &unnamed] {
        is_conflict(
            decide_open_with(
                &OpenRequest::on(&parent)
                    .build()
                    .with_options(OpenOptions::at_step(step("b"))),
                &parent,
                Some(active),
                None,
                handoff_id(2),
                at(1),
            ),
            ConflictKind::ParentBusy,
            active.id.as_str(),
        );
    }
}

#[test]
fn c12_without_a_step_open_replays_the_active_handoff_whatever_its_step() {
    let parent = task_parent();
    let first = opened_at_step(&parent, &step("a"));
    let decision = decide_open(
        &OpenRequest::on(&parent).build(),
        &parent,
        Some(&first),
        handoff_id(2),
        at(1),
    );
    assert_eq!(decision.unwrap(), OpenDecision::Replay(first));
}

#[test]
fn c12_a_handoff_of_another_step_or_parent_is_not_returned() {
    let parent = task_parent();
    let first = opened_at_step(&parent, &step("a"));
    is_invalid(
        decide_open_with(
            &OpenRequest::on(&parent)
                .build()
                .with_options(OpenOptions::at_step(step("b"))),
            &parent,
            None,
            Some(&first),
            handoff_id(2),
            at(1),
        ),
        "step",
    );
}

#[test]
fn c13_the_parents_current_generation_takes_the_wake_over_from_an_older_holder() {
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    let held = claim_wake(&done, 5, at(2)).unwrap();
    assert!(held.claimed);
    let held = held.transition.into_handoff();

    let taken = claim_wake_for_parent(&held, 6, Some(6), at(3)).unwrap();
    assert!(taken.claimed);
    let Transition::Changed(taken) = taken.transition else {
        panic!("a take-over writes the new holder");
    };
    assert_eq!(taken.wake_claimed_by_generation, Some(6));
    assert_eq!(taken.wake_claimed_at, Some(at(3)));
    taken.validate().unwrap();

    // The old holder's retry now loses; the new holder's retry is a replay.
    let old = claim_wake_for_parent(&taken, 5, Some(6), at(4)).unwrap();
    assert!(!old.claimed && !old.transition.is_changed());
    let again = claim_wake_for_parent(&taken, 6, Some(6), at(4)).unwrap();
    assert!(again.claimed && !again.transition.is_changed());
}

#[test]
fn c13_no_take_over_unless_newer_and_current() {
    let done = finish(&waiting(), &handed_back(), None, at(1))
        .unwrap()
        .into_handoff();
    let held = claim_wake(&done, 5, at(2))
        .unwrap()
        .transition
        .into_handoff();
    for (generation, current) in [(6, None), (6, Some(7)), (7, Some(6)), (6, Some(5))] {
        let claim = claim_wake_for_parent(&held, generation, current, at(3)).unwrap();
        assert!(
            !claim.claimed && !claim.transition.is_changed(),
            "generation {generation} with the parent at {current:?}"
        );
    }
    // C7 still holds for the first claim: any generation not older than
    // the opener's may take an unclaimed wake.
    let first = claim_wake_for_parent(&done, 9, Some(6), at(3)).unwrap();
    assert!(first.claimed && first.transition.is_changed());
}
