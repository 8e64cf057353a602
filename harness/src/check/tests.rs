//! The checks of records and histories, on the histories the domain writes.

use std::path::Path;

use lf_handoff_adapters::GenerateId;
use lf_handoff_conformance::fixtures::{body, outcome};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    attach, claim_wake, claim_wake_for_parent, expire_if_due, extend, finish, open, Actor,
    HandoffChange,
};
use lf_handoff_domain::wave::Wave;
use time::macros::datetime;
use time::OffsetDateTime;

use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffStatus,
};

use super::*;
use crate::requests::wave_request;

const T0: OffsetDateTime = datetime!(2026-12-02 12:00:00 UTC);

fn at(seconds: i64) -> OffsetDateTime {
    T0 + time::Duration::seconds(seconds)
}

/// The same handoff waiting, attached, finished and claimed.
fn stages() -> [InteractiveHandoff; 4] {
    let wave = WaveId::new();
    let request = wave_request(&wave, Path::new("/src/x"));
    let waiting = open(&request, wave, InteractiveHandoffId::new(), at(0)).unwrap();
    let attached = attach(&waiting, at(1)).unwrap().into_handoff();
    let finished = finish(&attached, &outcome(1), None, at(2))
        .unwrap()
        .into_handoff();
    let claimed = claim_wake(&finished, 1, at(3))
        .unwrap()
        .transition
        .into_handoff();
    [waiting, attached, finished, claimed]
}

#[test]
fn the_same_record_or_a_later_one_is_accepted() {
    let stages = stages();
    for (i, acknowledged) in stages.iter().enumerate() {
        for stored in &stages[i..] {
            assert_eq!(handoff_same_or_later(acknowledged, stored), Ok(()));
        }
    }
}

#[test]
fn a_record_behind_what_was_acknowledged_is_lost() {
    let stages = stages();
    for (i, acknowledged) in stages.iter().enumerate() {
        for stored in &stages[..i] {
            let error = handoff_same_or_later(acknowledged, stored).unwrap_err();
            assert!(error.contains("went back"), "{error}");
        }
    }
}

#[test]
fn changed_acknowledged_facts_are_lost() {
    let [waiting, attached, finished, claimed] = stages();
    let mut reason = waiting.clone();
    reason.reason = "another reason".into();
    assert!(handoff_same_or_later(&waiting, &reason)
        .unwrap_err()
        .contains("fixed at open"));

    let reattached = attach(&waiting, at(5)).unwrap().into_handoff();
    assert!(handoff_same_or_later(&attached, &reattached)
        .unwrap_err()
        .contains("attached_at"));

    let other = finish(&attached, &outcome(2), None, at(2))
        .unwrap()
        .into_handoff();
    assert!(handoff_same_or_later(&finished, &other)
        .unwrap_err()
        .contains("outcome"));

    let other_claim = claim_wake(&finished, 2, at(3))
        .unwrap()
        .transition
        .into_handoff();
    assert!(handoff_same_or_later(&claimed, &other_claim)
        .unwrap_err()
        .contains("wake claim"));
}

#[test]
fn a_wake_handed_over_to_a_newer_generation_is_later_and_never_back() {
    let [_, _, _, claimed] = stages();
    let handed = claim_wake_for_parent(&claimed, 2, Some(2), at(4))
        .unwrap()
        .transition
        .into_handoff();
    assert_eq!(handed.wake_claimed_by_generation, Some(2));
    assert_eq!(handoff_same_or_later(&claimed, &handed), Ok(()));
    assert!(progress(&handed) > progress(&claimed));
    assert!(handoff_same_or_later(&handed, &claimed)
        .unwrap_err()
        .contains("wake claim"));
    let mut stepped = claimed.clone();
    stepped.step = Some(lf_handoff_domain::interactive_handoff::StepKey::parse("login").unwrap());
    assert!(handoff_same_or_later(&claimed, &stepped)
        .unwrap_err()
        .contains("fixed at open"));
}

#[test]
fn a_parent_may_only_move_on_to_a_newer_body() {
    let wave = Parent::Wave(Wave::new(WaveId::new(), "w".into(), "/src/w".into()));
    assert_eq!(parent_same_or_later(&wave, &wave), Ok(()));
    let newer = wave.record_body(body(2, None), at(1)).unwrap();
    assert_eq!(parent_same_or_later(&wave, &newer), Ok(()));
    assert!(parent_same_or_later(&newer, &wave).is_err());
    let Parent::Wave(inner) = &wave else {
        unreachable!()
    };
    let renamed = Parent::Wave(Wave::new(inner.id().clone(), "x".into(), "/src/w".into()));
    assert!(parent_same_or_later(&wave, &renamed)
        .unwrap_err()
        .contains("without a newer body"));
    let other = Parent::Wave(Wave::new(WaveId::new(), "w".into(), "/src/w".into()));
    assert!(parent_same_or_later(&wave, &other).is_err());
}
// ----- histories -----

const ACTOR: &str = "crash-child 0 lane 1";

/// The history the store writes for `records`, the states of one
/// handoff after each of its changes, and what the harness knows from
/// having seen each of them.
fn history_of(records: &[&InteractiveHandoff]) -> (Vec<HandoffEvent>, KnownChanges) {
    let mut known = KnownChanges::default();
    let mut events = Vec::new();
    let mut before = None;
    for (n, record) in (1u64..).zip(records) {
        let change = HandoffChange::between(before, record).unwrap();
        events.push(change.into_event(
            record.id.clone(),
            n,
            100 + 7 * n,
            Actor::parse(ACTOR).unwrap(),
        ));
        known.saw(record);
        before = Some(*record);
    }
    (events, known)
}

/// A handoff opened with a deadline, extended, attached, finished,
/// claimed by generation 1 and taken over by generation 2.
fn full_life() -> Vec<InteractiveHandoff> {
    let [mut waiting, ..] = stages();
    waiting.expires_at = Some(at(100));
    let extended = extend(&waiting, at(200), at(1)).unwrap().into_handoff();
    let attached = attach(&extended, at(2)).unwrap().into_handoff();
    let finished = finish(&attached, &outcome(1), None, at(3))
        .unwrap()
        .into_handoff();
    let claimed = claim_wake(&finished, 1, at(4))
        .unwrap()
        .transition
        .into_handoff();
    let taken = claim_wake_for_parent(&claimed, 2, Some(2), at(5))
        .unwrap()
        .transition
        .into_handoff();
    vec![waiting, extended, attached, finished, claimed, taken]
}

/// A handoff with a deadline that expired, then had its wake claimed.
fn expired_life() -> Vec<InteractiveHandoff> {
    let [mut waiting, ..] = stages();
    waiting.expires_at = Some(at(1));
    let expired = expire_if_due(&waiting, at(2)).into_handoff();
    let claimed = claim_wake(&expired, 1, at(3))
        .unwrap()
        .transition
        .into_handoff();
    vec![waiting, expired, claimed]
}

fn check(
    record: &InteractiveHandoff,
    events: &[HandoffEvent],
    known: &KnownChanges,
) -> HistoryFindings {
    let mut found = HistoryFindings {
        malformed: history_well_formed(&record.id, events),
        ..HistoryFindings::default()
    };
    found.append(history_matches_record(record, events, known));
    found
}

/// Every prefix of every life, and each record's own change.
fn lives() -> Vec<Vec<InteractiveHandoff>> {
    let [waiting, attached, finished, claimed] = stages();
    let mut lives = vec![
        vec![waiting.clone()],
        vec![waiting.clone(), attached.clone()],
        vec![
            waiting.clone(),
            finish(&waiting, &outcome(2), None, at(1))
                .unwrap()
                .into_handoff(),
        ],
        vec![waiting, attached, finished, claimed],
        expired_life(),
    ];
    let full = full_life();
    for end in 1..=full.len() {
        lives.push(full[..end].to_vec());
    }
    lives
}

#[test]
fn the_history_of_every_change_is_accepted() {
    for life in lives() {
        let records: Vec<&InteractiveHandoff> = life.iter().collect();
        let (events, known) = history_of(&records);
        let record = life.last().unwrap();
        assert_eq!(
            check(record, &events, &known),
            HistoryFindings::default(),
            "{life:#?}"
        );
        for (n, state) in life.iter().enumerate() {
            let what = match events[n].kind {
                HandoffEventKind::Opened => "open",
                HandoffEventKind::Attached => "attach",
                HandoffEventKind::Finished => "finish",
                HandoffEventKind::Expired => "expire",
                HandoffEventKind::Extended => "extend",
                HandoffEventKind::WakeClaimed | HandoffEventKind::WakeTakenOver => "claim",
            };
            let change = AckedChange::of(what, state, Some(ACTOR.into())).unwrap();
            assert_eq!(
                acked_change_has_event(&change, &events),
                HistoryFindings::default(),
                "{change:?}"
            );
        }
    }
}

#[test]
fn a_history_lacking_an_event_is_reported_as_a_change_without_its_event() {
    for life in lives() {
        let records: Vec<&InteractiveHandoff> = life.iter().collect();
        let (events, known) = history_of(&records);
        let record = life.last().unwrap();
        for gone in 0..events.len() {
            let mut lacking = events.clone();
            lacking.remove(gone);
            // Renumbered, so the history is well formed but for the
            // status chain where the change was.
            for (seq, event) in (1u64..).zip(&mut lacking) {
                event.seq = seq;
            }
            let found = history_matches_record(record, &lacking, &known);
            assert!(
                !found.missing.is_empty(),
                "event {gone} of {events:#?} removed, nothing missing: {found:?}"
            );
            // The acknowledgement of that change finds no event either.
            let state = &life[gone];
            let what = match events[gone].kind {
                HandoffEventKind::Opened => "open",
                HandoffEventKind::Attached => "attach",
                HandoffEventKind::Finished => "finish",
                HandoffEventKind::Expired => "expire",
                HandoffEventKind::Extended => "extend",
                HandoffEventKind::WakeClaimed | HandoffEventKind::WakeTakenOver => "claim",
            };
            let change = AckedChange::of(what, state, None).unwrap();
            let found = acked_change_has_event(&change, &lacking);
            assert_eq!(found.missing.len(), 1, "{change:?} in {lacking:#?}");
            assert!(found.missing[0].contains("has no event"), "{found:?}");
        }
    }
}

#[test]
fn an_event_without_its_change_is_reported() {
    let life = full_life();
    let records: Vec<&InteractiveHandoff> = life.iter().collect();
    let (events, known) = history_of(&records);
    let record = life.last().unwrap();
    let last = events.last().unwrap().clone();
    let appended = |kind, status_after, detail: Option<&str>| {
        let mut extra = events.clone();
        let mut event = last.clone();
        event.seq = last.seq + 1;
        event.position = last.position + 1;
        event.kind = kind;
        event.status_before = Some(last.status_after);
        event.status_after = status_after;
        event.detail = detail.map(str::to_string);
        extra.push(event);
        extra
    };
    let status = record.status;
    for (extra, says) in [
        // A well-formed take-over by a generation nobody saw.
        (
            appended(
                HandoffEventKind::WakeTakenOver,
                status,
                Some("generation 9 from 2"),
            ),
            "generation 9",
        ),
        // A second finish, a second attach, a second open.
        (appended(HandoffEventKind::Finished, status, None), "second"),
        (
            appended(
                HandoffEventKind::Attached,
                InteractiveHandoffStatus::Attached,
                None,
            ),
            "second",
        ),
        (
            appended(
                HandoffEventKind::Opened,
                InteractiveHandoffStatus::Waiting,
                None,
            ),
            "second `opened`",
        ),
        // An extension to a deadline no record showed.
        (
            appended(
                HandoffEventKind::Extended,
                status,
                Some("until 2027-01-01T00:00:00Z"),
            ),
            "no acknowledged or stored record",
        ),
    ] {
        let found = history_matches_record(record, &extra, &known);
        assert!(
            found.extra.iter().any(|message| message.contains(says)),
            "{says:?} not in {found:?}"
        );
    }

    // An attach event on a record never attached, and a claim event on
    // a record never claimed.
    let [waiting, attached, finished, _] = stages();
    let (mut events, known) = history_of(&[&waiting, &attached, &finished]);
    events.remove(1);
    let mut unattached = finished.clone();
    unattached.attached_at = None;
    let (honest, _) = history_of(&[&waiting, &unattached]);
    let mut events_of_unattached = honest.clone();
    events_of_unattached.insert(1, {
        let mut attach = events[0].clone();
        attach.kind = HandoffEventKind::Attached;
        attach
    });
    let found = history_matches_record(&unattached, &events_of_unattached, &known);
    assert!(
        found
            .extra
            .iter()
            .any(|message| message.contains("for no attach")),
        "{found:?}"
    );
}

#[test]
fn an_event_of_another_time_or_outcome_is_a_mismatch() {
    let life = expired_life();
    let records: Vec<&InteractiveHandoff> = life.iter().collect();
    let (events, known) = history_of(&records);
    let record = life.last().unwrap();

    let mut finished = events.clone();
    finished[1].kind = HandoffEventKind::Finished;
    finished[1].status_after = InteractiveHandoffStatus::Completed;
    let found = history_matches_record(record, &finished, &known);
    assert!(
        !found.missing.is_empty() && !found.extra.is_empty(),
        "{found:?}"
    );

    let mut late = events.clone();
    late[1].at += time::Duration::seconds(1);
    let found = history_matches_record(record, &late, &known);
    assert!(
        !found.missing.is_empty() && !found.extra.is_empty(),
        "{found:?}"
    );

    // The last event is not the record's last change.
    let mut later_record = record.clone();
    later_record.updated_at += time::Duration::seconds(1);
    later_record.wake_claimed_at = Some(later_record.updated_at);
    let found = history_matches_record(&later_record, &events, &known);
    assert!(!found.missing.is_empty(), "{found:?}");
}

#[test]
fn malformed_histories_are_reported() {
    let life = full_life();
    let records: Vec<&InteractiveHandoff> = life.iter().collect();
    let (events, _) = history_of(&records);
    let id = &life[0].id;
    assert_eq!(history_well_formed(id, &events), Vec::<String>::new());

    type Break = fn(&mut Vec<HandoffEvent>);
    let broken: [(&str, Break); 8] = [
        ("is numbered", |e| e[2].seq = 4),
        ("position", |e| e[3].position = e[2].position),
        ("earlier than", |e| {
            e[1].at = e[0].at - time::Duration::seconds(1)
        }),
        ("status before", |e| {
            e[3].status_before = Some(InteractiveHandoffStatus::Waiting)
        }),
        ("not `opened`", |e| {
            e.remove(0);
        }),
        ("belongs to", |e| {
            e[1].handoff_id = InteractiveHandoffId::new()
        }),
        ("unreadable detail", |e| {
            e[4].detail = Some("generation one".into())
        }),
        ("moves the wake", |e| {
            e[5].detail = Some("generation 3 from 2".into())
        }),
    ];
    for (says, break_it) in broken {
        let mut bad = events.clone();
        break_it(&mut bad);
        let problems = history_well_formed(id, &bad);
        assert!(
            problems.iter().any(|problem| problem.contains(says)),
            "{says:?} not in {problems:?}"
        );
    }
}

#[test]
fn an_acknowledged_change_by_another_actor_is_reported() {
    let [waiting, attached, ..] = stages();
    let (events, _) = history_of(&[&waiting, &attached]);
    let change = AckedChange::of("attach", &attached, Some("crash-child 3 lane 0".into())).unwrap();
    let found = acked_change_has_event(&change, &events);
    assert!(found.missing.is_empty(), "{found:?}");
    assert_eq!(found.malformed.len(), 1, "{found:?}");
    assert!(found.malformed[0].contains(ACTOR), "{found:?}");
}

#[test]
fn wake_and_deadline_details_are_read() {
    let life = full_life();
    let records: Vec<&InteractiveHandoff> = life.iter().collect();
    let (events, _) = history_of(&records);
    assert_eq!(deadline_detail(&events[0]), Ok(Some(at(100))));
    assert_eq!(deadline_detail(&events[1]), Ok(Some(at(200))));
    assert!(deadline_detail(&events[2]).is_err());
    assert_eq!(claim_detail(&events[4]), Some((1, None)));
    assert_eq!(claim_detail(&events[5]), Some((2, Some(1))));
    assert_eq!(claim_detail(&events[3]), None);
}
