//! Unit tests for deadlines (C14) and the history events (C15), with no IO.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_domain::interactive_handoff::{
    attach, claim_wake, claim_wake_for_parent, decide_open_with, expire_if_due, extend, finish,
    Actor, HandoffChange, HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffStatus, OpenDecision, OpenOptions, StepKey, Transition,
};
use lf_handoff_domain::{ConflictKind, DomainError};
use support::*;

fn done() -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Completed {
        summary: "logged in".into(),
    }
}

/// A waiting handoff opened at T0 whose deadline is `after` seconds later.
fn due_in(after: i64) -> InteractiveHandoff {
    let parent = wave_parent();
    let options = OpenOptions {
        step: None,
        expires_at: Some(at(after)),
        ..OpenOptions::default()
    };
    match decide_open_with(
        &OpenRequest::on(&parent)
            .build()
            .with_options(options.clone()),
        &parent,
        None,
        None,
        handoff_id(7),
        T0,
    )
    .unwrap()
    {
        OpenDecision::Create(handoff) => handoff,
        other => panic!("expected a new handoff, got {other:?}"),
    }
}

fn changed(transition: Transition) -> InteractiveHandoff {
    match transition {
        Transition::Changed(handoff) => {
            handoff.validate().unwrap();
            handoff
        }
        Transition::Unchanged(handoff) => panic!("expected a change of {}", handoff.id),
    }
}

fn conflict_kind<T: std::fmt::Debug>(result: Result<T, DomainError>) -> ConflictKind {
    match result {
        Err(DomainError::Conflict { kind, .. }) => kind,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn open_keeps_a_future_deadline_and_refuses_a_past_one() {
    let handoff = due_in(60);
    assert_eq!(handoff.expires_at, Some(at(60)));
    handoff.validate().unwrap();
    let parent = wave_parent();
    for deadline in [at(0), at(-5)] {
        let options = OpenOptions {
            step: Some(StepKey::parse("login").unwrap()),
            expires_at: Some(deadline),
            ..OpenOptions::default()
        };
        let refused = decide_open_with(
            &OpenRequest::on(&parent)
                .build()
                .with_options(options.clone()),
            &parent,
            None,
            None,
            handoff_id(8),
            T0,
        );
        assert!(
            matches!(refused, Err(DomainError::InvalidInput(_))),
            "{refused:?}"
        );
    }
}

#[test]
fn a_handoff_is_due_only_while_active_and_past_its_deadline() {
    let handoff = due_in(60);
    assert!(!handoff.is_due(at(59)));
    assert!(handoff.is_due(at(60)), "due at the deadline itself");
    assert!(handoff.is_due(at(61)));
    let finished = changed(finish(&handoff, &done(), None, at(30)).unwrap());
    assert!(!finished.is_due(at(61)));
    assert!(!waiting().is_due(at(1_000_000)), "no deadline, never due");
}

#[test]
fn expiry_happens_once_and_only_when_due() {
    let handoff = due_in(60);
    assert_eq!(
        expire_if_due(&handoff, at(59)),
        Transition::Unchanged(handoff.clone())
    );
    let expired = changed(expire_if_due(&handoff, at(61)));
    assert_eq!(expired.status, InteractiveHandoffStatus::Expired);
    assert_eq!(expired.outcome, Some(InteractiveHandoffOutcome::Expired));
    assert_eq!(expired.terminal_at, Some(at(61)));
    assert_eq!(expired.updated_at, at(61));
    assert!(!expired.is_active());
    assert_eq!(
        expire_if_due(&expired, at(99)),
        Transition::Unchanged(expired.clone())
    );
    // A wake of an expired handoff is claimed like any other.
    let claim = claim_wake(&expired, 4, at(70)).unwrap();
    assert!(claim.claimed);
    changed(claim.transition);
}

#[test]
fn writes_on_a_due_or_expired_handoff_are_refused_as_expired() {
    let handoff = due_in(60);
    assert_eq!(
        conflict_kind(attach(&handoff, at(60))),
        ConflictKind::Expired
    );
    assert_eq!(
        conflict_kind(finish(&handoff, &done(), None, at(61))),
        ConflictKind::Expired
    );
    assert_eq!(
        conflict_kind(extend(&handoff, at(600), at(61))),
        ConflictKind::Expired
    );
    let expired = changed(expire_if_due(&handoff, at(61)));
    assert_eq!(
        conflict_kind(attach(&expired, at(62))),
        ConflictKind::Expired
    );
    assert_eq!(
        conflict_kind(finish(&expired, &done(), None, at(62))),
        ConflictKind::Expired
    );
    // Before the deadline, everything works as without one.
    let attached = changed(attach(&handoff, at(10)).unwrap());
    assert_eq!(attached.expires_at, Some(at(60)));
    changed(finish(&attached, &done(), None, at(20)).unwrap());
}

#[test]
fn nobody_finishes_a_handoff_as_expired() {
    let refused = finish(
        &due_in(60),
        &InteractiveHandoffOutcome::Expired,
        None,
        at(1),
    );
    assert!(
        matches!(refused, Err(DomainError::InvalidInput(_))),
        "{refused:?}"
    );
}

#[test]
fn extend_moves_an_active_deadline_to_a_later_instant_than_now() {
    let handoff = due_in(60);
    let later = changed(extend(&handoff, at(600), at(30)).unwrap());
    assert_eq!(later.expires_at, Some(at(600)));
    assert_eq!(later.updated_at, at(30));
    let sooner = changed(extend(&later, at(40), at(35)).unwrap());
    assert_eq!(sooner.expires_at, Some(at(40)));
    assert_eq!(
        extend(&sooner, at(40), at(36)).unwrap(),
        Transition::Unchanged(sooner.clone())
    );
    assert!(matches!(
        extend(&sooner, at(36), at(36)),
        Err(DomainError::InvalidInput(_))
    ));
    let without = changed(extend(&waiting(), at(100), at(1)).unwrap());
    assert_eq!(without.expires_at, Some(at(100)));
    let finished = changed(finish(&sooner, &done(), None, at(37)).unwrap());
    assert_eq!(
        conflict_kind(extend(&finished, at(900), at(38))),
        ConflictKind::AlreadyFinished
    );
}

#[test]
fn an_expired_record_before_its_deadline_breaks_i1() {
    let mut expired = changed(expire_if_due(&due_in(60), at(61)));
    expired.expires_at = Some(at(62));
    assert!(expired.validate().is_err());
    expired.expires_at = None;
    assert!(expired.validate().is_err());
}

#[test]
fn a_deadline_not_after_the_open_breaks_i7() {
    let mut handoff = due_in(60);
    handoff.expires_at = Some(handoff.created_at);
    assert!(handoff.validate().is_err());
}

#[test]
fn each_change_names_its_event() {
    let opened = due_in(60);
    let event = |before: Option<&InteractiveHandoff>, after: &InteractiveHandoff| {
        HandoffChange::between(before, after).unwrap()
    };
    let first = event(None, &opened);
    assert_eq!(first.kind, HandoffEventKind::Opened);
    assert_eq!(
        (first.status_before, first.status_after),
        (None, InteractiveHandoffStatus::Waiting)
    );
    assert_eq!(first.at, opened.created_at);

    let extended = changed(extend(&opened, at(120), at(5)).unwrap());
    assert_eq!(
        event(Some(&opened), &extended).kind,
        HandoffEventKind::Extended
    );
    let attached = changed(attach(&extended, at(6)).unwrap());
    assert_eq!(
        event(Some(&extended), &attached).kind,
        HandoffEventKind::Attached
    );
    let finished = changed(finish(&attached, &done(), None, at(7)).unwrap());
    let finish_event = event(Some(&attached), &finished);
    assert_eq!(finish_event.kind, HandoffEventKind::Finished);
    assert_eq!(
        finish_event.status_after,
        InteractiveHandoffStatus::Completed
    );
    let claimed = changed(claim_wake(&finished, 4, at(8)).unwrap().transition);
    let claim_event = event(Some(&finished), &claimed);
    assert_eq!(claim_event.kind, HandoffEventKind::WakeClaimed);
    assert_eq!(claim_event.detail.as_deref(), Some("generation 4"));
    let taken = changed(
        claim_wake_for_parent(&claimed, 5, Some(5), at(9))
            .unwrap()
            .transition,
    );
    let take_event = event(Some(&claimed), &taken);
    assert_eq!(take_event.kind, HandoffEventKind::WakeTakenOver);
    assert_eq!(take_event.detail.as_deref(), Some("generation 5 from 4"));
    let expired = changed(expire_if_due(&due_in(60), at(61)));
    assert_eq!(
        event(Some(&due_in(60)), &expired).kind,
        HandoffEventKind::Expired
    );

    // No change, or a change of another handoff, names no event.
    assert!(HandoffChange::between(Some(&opened), &opened).is_err());
    let other = changed(attach(&waiting(), at(3)).unwrap());
    assert!(HandoffChange::between(Some(&opened), &other).is_err());
}

#[test]
fn actors_are_checked_and_the_process_actor_is_always_valid() {
    assert!(Actor::parse("jack@laptop (pid 1)").is_ok());
    for bad in ["", "   ", "a\nb", &"x".repeat(201)] {
        assert!(Actor::parse(bad).is_err(), "{bad:?}");
    }
    for (user, host) in [("", ""), ("\u{7}", "\n"), (&*"ü".repeat(300), "h")] {
        let actor = Actor::of_process(user, host, 4_294_967_295);
        assert!(Actor::parse(actor.as_str()).is_ok(), "{actor}");
        assert!(actor.as_str().ends_with("(pid 4294967295)"), "{actor}");
    }
    assert_eq!(
        Actor::of_process("jack", "box", 42).as_str(),
        "jack@box (pid 42)"
    );
    assert_eq!(
        Actor::of_process("", "", 1).as_str(),
        "unknown@localhost (pid 1)"
    );
}
