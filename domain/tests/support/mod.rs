//! Fixtures shared by the domain's integration tests: fixed ids and parents
//! built without any IO, on top of the workspace's shared fixtures
//! ([`lf_handoff_domain::testing`]).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, TaskSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    decide_open, InteractiveHandoff, InteractiveHandoffParent, OpenDecision,
};
use lf_handoff_domain::parent::Parent;
pub use lf_handoff_domain::testing::*;
use lf_handoff_domain::wave::Wave;
use time::OffsetDateTime;
use uuid::Uuid;

pub fn at(seconds: i64) -> OffsetDateTime {
    T0 + time::Duration::seconds(seconds)
}

pub fn wave_id(n: u128) -> WaveId {
    WaveId::from_uuid(Uuid::from_u128(n))
}

pub fn handoff_id(n: u128) -> InteractiveHandoffId {
    InteractiveHandoffId::from_uuid(Uuid::from_u128(0x1000 + n))
}

pub fn project_id(n: u128) -> ProjectSessionId {
    ProjectSessionId::from_uuid(Uuid::from_u128(0x2000 + n))
}

pub fn task_id(n: u128) -> TaskSessionId {
    TaskSessionId::from_uuid(Uuid::from_u128(0x3000 + n))
}

pub fn wave(n: u128) -> Wave {
    Wave::new(wave_id(n), "product".into(), DEFAULT_CWD.into())
}

pub fn task_parent() -> Parent {
    let project = project(project_id(1), &wave_id(1));
    Parent::Task(task(
        task_id(1),
        &project,
        Path::new("/src/worktrees/task-1"),
    ))
}

pub fn wave_parent() -> Parent {
    Parent::Wave(wave(1))
}

/// A freshly opened handoff on the task parent.
pub fn waiting() -> InteractiveHandoff {
    let parent = task_parent();
    match decide_open(
        &OpenRequest::on(&parent).build(),
        &parent,
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

pub fn parent_ref(parent: &Parent) -> InteractiveHandoffParent {
    parent.reference()
}
