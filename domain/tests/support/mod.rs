//! Fixtures shared by the domain's integration tests: fixed ids, a fixed
//! clock and parents built without any IO.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use lf_handoff_domain::child_session::{ChildLeaseState, ChildProcessGeneration};
use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, TaskSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    decide_open, InteractiveHandoff, InteractiveHandoffParent, OpenDecision, OpenInteractiveHandoff,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::{ProjectSession, ProjectSessionStatus};
use lf_handoff_domain::session_context::{
    LinearIssueId, LinearIssueSnapshot, LinearProjectId, LinearProjectSnapshot,
    ProjectLaunchReceipt, TaskLaunchReceipt,
};
use lf_handoff_domain::task::{
    PmWritebackState, TaskLifecyclePhase, TaskLifecyclePlan, TaskSession, TaskSessionStatus,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use time::macros::datetime;
use time::OffsetDateTime;
use uuid::Uuid;

pub const T0: OffsetDateTime = datetime!(2026-12-02 12:00:00 UTC);

pub fn at(seconds: i64) -> OffsetDateTime {
    T0 + time::Duration::seconds(seconds)
}

pub fn wave_id(n: u128) -> WaveId {
    WaveId::from_uuid(Uuid::from_u128(n))
}

pub fn handoff_id(n: u128) -> InteractiveHandoffId {
    InteractiveHandoffId::from_uuid(Uuid::from_u128(0x1000 + n))
}

pub fn process(generation: u32, session: Option<&str>) -> ChildProcessGeneration {
    ChildProcessGeneration {
        generation,
        pid: Some(42),
        process_group_id: Some(42),
        tmux_name: "lf-task-body".to_string(),
        agent: "codex".to_string(),
        provider: "codex".to_string(),
        provider_session_id: session.map(str::to_string),
        started_at: T0,
        state: ChildLeaseState::Active,
        outcome: None,
    }
}

pub fn wave(n: u128) -> Wave {
    Wave::new(wave_id(n), "product".into(), "/src/product".into())
}

fn project_snapshot() -> LinearProjectSnapshot {
    LinearProjectSnapshot {
        id: LinearProjectId::new("project-1").unwrap(),
        slug: "loopflow-api".into(),
        name: "Loopflow API".into(),
        prompt_context: "Keep one model everywhere.".into(),
    }
}

pub fn project(n: u128, wave: &WaveId) -> ProjectSession {
    ProjectSession {
        id: ProjectSessionId::from_uuid(Uuid::from_u128(0x2000 + n)),
        launch: ProjectLaunchReceipt {
            project: project_snapshot(),
            pm_snapshot_synced_at: T0.unix_timestamp(),
        },
        wave_id: wave.clone(),
        current_directive_version: 1,
        incorporated_directive_version: 1,
        status: ProjectSessionStatus::Running,
        status_reason: "project body active".into(),
        status_at: T0,
        iteration: 1,
        observation_cursor: 0,
        last_state_fingerprint: None,
        agent: "codex".into(),
        provider: "codex".into(),
        provider_session_id: Some("project-thread".into()),
        latest_process: Some(process(1, Some("project-thread"))),
        execution: None,
        abandon_intent: None,
        created_at: T0,
        updated_at: T0,
    }
}

pub fn task(n: u128, project: &ProjectSession) -> TaskSession {
    TaskSession {
        id: TaskSessionId::from_uuid(Uuid::from_u128(0x3000 + n)),
        launch: TaskLaunchReceipt {
            issue: LinearIssueSnapshot {
                id: LinearIssueId::new("issue-1").unwrap(),
                identifier: "W2-175".into(),
                title: "Hand interactive work to a human".into(),
                description: "Preserve the same provider history.".into(),
            },
            project: project_snapshot(),
            pm_snapshot_synced_at: T0.unix_timestamp(),
        },
        pm_writeback: PmWritebackState::Current,
        wave_id: project.wave_id.clone(),
        project_session_id: project.id.clone(),
        current_directive_version: 1,
        incorporated_directive_version: 1,
        status: TaskSessionStatus::Running,
        status_reason: "task body active".into(),
        status_at: T0,
        worktree: PathBuf::from(format!("/src/worktrees/task-{n}")),
        workspace_slug: "interactive-handoff".into(),
        lifecycle: TaskLifecyclePlan::standard("task"),
        lifecycle_phase: TaskLifecyclePhase::Iterate,
        phase_epoch: 1,
        phase_cursor: 0,
        phase_iteration: 0,
        gate_cycle: 0,
        gate_proposal: None,
        agent: "codex".into(),
        provider: "codex".into(),
        provider_session_id: Some("task-thread".into()),
        latest_process: Some(process(4, Some("task-thread"))),
        execution: None,
        abandon_intent: None,
        created_at: T0,
        updated_at: T0,
    }
}

pub fn task_parent() -> Parent {
    Parent::Task(task(1, &project(1, &wave_id(1))))
}

pub fn wave_parent() -> Parent {
    Parent::Wave(wave(1))
}

/// A request that `parent` accepts.
pub fn request_for(parent: &Parent) -> OpenInteractiveHandoff {
    OpenInteractiveHandoff {
        parent: parent.reference(),
        home: WaveHome::parse("jack@local").unwrap(),
        cwd: parent
            .worktree()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/src/product")),
        provider: "codex".into(),
        provider_session_id: parent.provider_session_id().map(str::to_string),
        body_generation: parent.body_generation(),
        reason: "OAuth login requires a human".into(),
        environment: BTreeMap::from([("LF_HOME".to_string(), "/tmp/lf".to_string())]),
        attach_argv: vec![
            "tmux".into(),
            "attach-session".into(),
            "-t".into(),
            "lf-task-interactive".into(),
        ],
    }
}

/// A freshly opened handoff on the task parent.
pub fn waiting() -> InteractiveHandoff {
    let parent = task_parent();
    match decide_open(&request_for(&parent), &parent, None, handoff_id(1), T0).unwrap() {
        OpenDecision::Create(handoff) => handoff,
        OpenDecision::Replay(_) => panic!("a parent without a handoff replayed"),
    }
}

pub fn parent_ref(parent: &Parent) -> InteractiveHandoffParent {
    parent.reference()
}
