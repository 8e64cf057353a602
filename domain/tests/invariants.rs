//! Unit tests for invariants I1-I7: each broken on purpose is reported as
//! itself, and every record the transitions produce passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_domain::interactive_handoff::{
    attach, check_one_active_per_parent, claim_wake, finish, InteractiveHandoff,
    InteractiveHandoffOutcome, InteractiveHandoffParent, InteractiveHandoffStatus, Invariant,
};
use std::path::PathBuf;
use support::*;
use time::macros::datetime;

fn done() -> InteractiveHandoff {
    let attached = attach(&waiting(), at(1)).unwrap().into_handoff();
    finish(
        &attached,
        &InteractiveHandoffOutcome::Completed {
            summary: "done".into(),
        },
        None,
        at(2),
    )
    .unwrap()
    .into_handoff()
}

fn claimed() -> InteractiveHandoff {
    claim_wake(&done(), 5, at(3))
        .unwrap()
        .transition
        .into_handoff()
}

#[track_caller]
fn breaks(handoff: InteractiveHandoff, invariant: Invariant) {
    let violation = handoff.validate().expect_err("a broken record validated");
    assert_eq!(violation.invariant, invariant, "{violation}");
    assert!(violation.to_string().contains(handoff.id.as_str()));
}

#[test]
fn every_lifecycle_stage_validates() {
    for handoff in [
        waiting(),
        attach(&waiting(), at(1)).unwrap().into_handoff(),
        done(),
        claimed(),
    ] {
        handoff.validate().unwrap();
    }
}

#[test]
fn i1_terminal_status_outcome_and_terminal_at_go_together() {
    let mut h = done();
    h.terminal_at = None;
    breaks(h, Invariant::I1);
    let mut h = done();
    h.outcome = None;
    breaks(h, Invariant::I1);
    let mut h = waiting();
    h.outcome = Some(InteractiveHandoffOutcome::Failed { reason: "x".into() });
    breaks(h, Invariant::I1);
    let mut h = done();
    h.status = InteractiveHandoffStatus::Failed;
    breaks(h, Invariant::I1);
    let mut h = done();
    h.outcome = Some(InteractiveHandoffOutcome::Completed {
        summary: " ".into(),
    });
    breaks(h, Invariant::I1);
}

#[test]
fn i2_attached_at_is_set_exactly_when_attached() {
    let mut h = waiting();
    h.attached_at = Some(T0);
    breaks(h, Invariant::I2);
    let mut h = attach(&waiting(), at(1)).unwrap().into_handoff();
    h.attached_at = None;
    h.updated_at = T0;
    breaks(h, Invariant::I2);
}

#[test]
fn i3_wake_claim_fields_go_together_and_only_when_terminal() {
    let mut h = claimed();
    h.wake_claimed_at = None;
    breaks(h, Invariant::I3);
    let mut h = claimed();
    h.wake_claimed_by_generation = None;
    breaks(h, Invariant::I3);
    let mut h = waiting();
    h.wake_claimed_at = Some(at(1));
    h.wake_claimed_by_generation = Some(5);
    h.updated_at = at(1);
    breaks(h, Invariant::I3);
    let mut h = claimed();
    h.wake_claimed_by_generation = Some(2);
    breaks(h, Invariant::I3);
}

#[test]
fn i4_a_wave_parent_owns_the_handoff() {
    let mut h = waiting();
    h.parent = InteractiveHandoffParent::Wave(wave_id(7));
    breaks(h, Invariant::I4);
}

#[test]
fn i5_field_rules_hold_on_stored_records() {
    type Mutation = Box<dyn Fn(&mut InteractiveHandoff)>;
    let cases: Vec<Mutation> = vec![
        Box::new(|h| h.provider = String::new()),
        Box::new(|h| h.provider_session_id = Some(" ".into())),
        Box::new(|h| h.body_generation = 0),
        Box::new(|h| h.reason = String::new()),
        Box::new(|h| h.cwd = PathBuf::from("rel")),
        Box::new(|h| h.attach_argv = vec![]),
        Box::new(|h| h.attach_argv = vec!["tmux".into(), String::new()]),
        Box::new(|h| {
            h.environment.insert(String::new(), "v".into());
        }),
    ];
    for mutate in cases {
        let mut h = waiting();
        mutate(&mut h);
        breaks(h, Invariant::I5);
    }
}

#[test]
fn i6_at_most_one_active_handoff_per_parent() {
    let first = waiting();
    let mut second = waiting();
    second.id = handoff_id(2);
    let violation = check_one_active_per_parent([&first, &second]).unwrap_err();
    assert_eq!(violation.invariant, Invariant::I6);
    // A finished handoff beside an active one is fine.
    check_one_active_per_parent([&done(), &second]).unwrap();
}

#[test]
fn i7_timestamps_never_go_backwards() {
    let mut h = done();
    h.attached_at = Some(at(5));
    breaks(h, Invariant::I7);
    let mut h = claimed();
    h.wake_claimed_at = Some(at(1));
    h.updated_at = at(2);
    breaks(h, Invariant::I7);
    let mut h = waiting();
    h.updated_at = at(-1);
    breaks(h, Invariant::I7);
    let mut h = waiting();
    h.created_at = datetime!(2026-12-02 12:00:00.000_000_5 UTC);
    h.updated_at = h.created_at;
    breaks(h, Invariant::I7);
}

#[test]
fn list_row_never_carries_environment_or_argv() {
    let mut h = waiting();
    h.environment.insert("TOKEN".into(), "s3cret-value".into());
    h.attach_argv.push("--password=hunter2".into());
    let row = h.list_row(at(90));
    let json = serde_json::to_string(&row).unwrap();
    let debug = format!("{row:?}");
    for shown in [&json, &debug] {
        assert!(
            !shown.contains("s3cret-value") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
    assert_eq!(row.age_secs, Some(90));
    assert_eq!(row.parent_kind, "task");
    assert_eq!(row.home, "jack@local");
    // A clock behind the record never gives a negative age.
    assert_eq!(h.list_row(at(-10)).age_secs, Some(0));
}

#[test]
fn attach_descriptor_names_localhost_for_a_local_home() {
    let h = waiting();
    let descriptor = h.attach_descriptor();
    assert_eq!(descriptor.host, "localhost");
    assert_eq!(descriptor.argv, h.attach_argv);
    assert_eq!(descriptor.environment, h.environment);
    let mut remote = waiting();
    remote.home = "ssh://jack@build-1:2222".parse().unwrap();
    assert_eq!(remote.attach_descriptor().host, "build-1");
}

#[test]
fn json_shapes_follow_the_contract() {
    let value = serde_json::to_value(claimed()).unwrap();
    assert_eq!(value["parent"]["kind"], "task");
    assert!(value["parent"]["id"].as_str().unwrap().starts_with("ts_"));
    assert_eq!(value["status"], "completed");
    assert_eq!(value["outcome"]["kind"], "completed");
    assert_eq!(value["outcome"]["summary"], "done");
    assert_eq!(value["created_at"], "2026-12-02T12:00:00Z");
    assert_eq!(value["wake_claimed_by_generation"], 5);
    assert_eq!(value["home"], "jack@local");
    let back: InteractiveHandoff = serde_json::from_value(value).unwrap();
    assert_eq!(back, claimed());
    let failed = InteractiveHandoffOutcome::Failed { reason: "r".into() };
    assert_eq!(
        serde_json::to_value(failed).unwrap(),
        serde_json::json!({"kind": "failed", "reason": "r"})
    );
}
