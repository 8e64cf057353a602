//! Builders shared by the contract scenarios and the worker process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::domain::child_session::{ChildLeaseState, ChildProcessGeneration};
use lf_handoff_adapters::domain::id::{
    InteractiveHandoffId, ProjectSessionId, TaskPrId, TaskSessionId, WaveId,
};
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent, OpenInteractiveHandoff,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::project_session::{ProjectSession, ProjectSessionStatus};
use lf_handoff_adapters::domain::session_context::{
    LinearIssueId, LinearIssueSnapshot, LinearProjectId, LinearProjectSnapshot,
    ProjectLaunchReceipt, TaskLaunchReceipt,
};
use lf_handoff_adapters::domain::task::{
    PmWritebackState, TaskLifecyclePhase, TaskLifecyclePlan, TaskPr, TaskSession, TaskSessionStatus,
};
use lf_handoff_adapters::domain::wave::Wave;
use lf_handoff_adapters::domain::wave_home::WaveHome;
use lf_handoff_adapters::{GenerateId, Store, StoreError, Waited};
use time::OffsetDateTime;

/// A body process of `generation` talking to codex.
pub fn body(generation: u32, provider_session_id: Option<&str>) -> ChildProcessGeneration {
    ChildProcessGeneration {
        generation,
        pid: Some(4242),
        process_group_id: Some(4242),
        tmux_name: format!("lf-body-{generation}"),
        agent: "codex".into(),
        provider: "codex".into(),
        provider_session_id: provider_session_id.map(str::to_string),
        started_at: OffsetDateTime::now_utc(),
        state: ChildLeaseState::Active,
        outcome: None,
    }
}

/// The stored parent `reference`, through [`Store::get_parent`].
async fn stored_parent(store: &Store, reference: InteractiveHandoffParent) -> Option<Parent> {
    store.get_parent(&reference).await.unwrap()
}

/// The stored wave `id`; `None` when there is none.
pub async fn stored_wave(store: &Store, id: &WaveId) -> Option<Wave> {
    match stored_parent(store, InteractiveHandoffParent::Wave(id.clone())).await? {
        Parent::Wave(wave) => Some(wave),
        other => panic!("wave {id} was stored as {other:?}"),
    }
}

/// The stored project session `id`; `None` when there is none.
pub async fn stored_project(store: &Store, id: &ProjectSessionId) -> Option<ProjectSession> {
    match stored_parent(store, InteractiveHandoffParent::Project(id.clone())).await? {
        Parent::Project(project) => Some(project),
        other => panic!("project {id} was stored as {other:?}"),
    }
}

/// The stored task session `id`; `None` when there is none.
pub async fn stored_task(store: &Store, id: &TaskSessionId) -> Option<TaskSession> {
    match stored_parent(store, InteractiveHandoffParent::Task(id.clone())).await? {
        Parent::Task(task) => Some(task),
        other => panic!("task {id} was stored as {other:?}"),
    }
}

/// Handoff `id` as a wait that does not wait finds it: expired when it was
/// due (C14), as it is otherwise.
pub async fn waited_now(store: &Store, id: &InteractiveHandoffId) -> InteractiveHandoff {
    match store
        .wait(id, Some(std::time::Duration::ZERO))
        .await
        .unwrap()
    {
        Waited::Ended(handoff) | Waited::TimedOut(handoff) => handoff,
    }
}

/// Claims the wake of `id` for `generation`, then reads the handoff as it
/// is after the claim (to see who holds the wake).
///
/// # Errors
/// As [`Store::claim_interactive_handoff_wake`]; `NotFound` when the
/// handoff is gone in between.
pub async fn claim_and_read(
    store: &Store,
    id: &InteractiveHandoffId,
    generation: u32,
) -> Result<(bool, InteractiveHandoff), StoreError> {
    let claimed = store.claim_interactive_handoff_wake(id, generation).await?;
    let handoff = store
        .get_interactive_handoff(id)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("handoff {id} does not exist")))?;
    Ok((claimed, handoff))
}

/// Creates and returns a new wave whose repo is `repo`.
pub async fn new_wave(store: &Store, repo: &Path) -> Wave {
    let wave = Wave::new(WaveId::new(), "product".into(), repo.display().to_string());
    store.create_wave(&wave).await.unwrap();
    wave
}

/// A request to open a handoff on a wave with no recorded body (generation 1).
pub fn wave_request(wave: &Wave, cwd: &Path) -> OpenInteractiveHandoff {
    OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Wave(wave.id().clone()),
        home: WaveHome::parse("jack@local").unwrap(),
        cwd: cwd.to_path_buf(),
        provider: "codex".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: "OAuth login requires a human".into(),
        environment: BTreeMap::from([("LF_HOME".to_string(), "/tmp/lf".to_string())]),
        attach_argv: vec![
            "tmux".into(),
            "attach-session".into(),
            "-t".into(),
            "lf-x".into(),
        ],
    }
}

/// Creates a wave and opens a handoff on it.
pub async fn open_on_new_wave(store: &Store, dir: &Path) -> InteractiveHandoff {
    let wave = new_wave(store, dir).await;
    let (handoff, created) = store
        .open_interactive_handoff(wave_request(&wave, dir))
        .await
        .unwrap();
    assert!(created);
    handoff
}

fn project_snapshot() -> LinearProjectSnapshot {
    LinearProjectSnapshot {
        id: LinearProjectId::new("project-1").unwrap(),
        slug: "loopflow-api".into(),
        name: "Loopflow API".into(),
        prompt_context: "Keep one model everywhere.".into(),
    }
}

/// A running project session under `wave` at body generation 1.
pub fn project(wave: &WaveId) -> ProjectSession {
    let now = OffsetDateTime::now_utc();
    ProjectSession {
        id: ProjectSessionId::new(),
        launch: ProjectLaunchReceipt {
            project: project_snapshot(),
            pm_snapshot_synced_at: now.unix_timestamp(),
        },
        wave_id: wave.clone(),
        current_directive_version: 1,
        incorporated_directive_version: 1,
        status: ProjectSessionStatus::Running,
        status_reason: "project body active".into(),
        status_at: now,
        iteration: 1,
        observation_cursor: 7,
        last_state_fingerprint: Some("fp-1".into()),
        agent: "codex".into(),
        provider: "codex".into(),
        provider_session_id: Some("project-thread".into()),
        latest_process: Some(body(1, Some("project-thread"))),
        execution: None,
        abandon_intent: None,
        created_at: now,
        updated_at: now,
    }
}

/// A running task session under `project` in `worktree` at body generation 4,
/// with its first PR.
pub fn task(project: &ProjectSession, worktree: &Path) -> (TaskSession, TaskPr) {
    let now = OffsetDateTime::now_utc();
    let id = TaskSessionId::new();
    let task = TaskSession {
        id: id.clone(),
        launch: TaskLaunchReceipt {
            issue: LinearIssueSnapshot {
                id: LinearIssueId::new("issue-1").unwrap(),
                identifier: "W2-175".into(),
                title: "Hand interactive work to a human".into(),
                description: "Preserve the same provider history.".into(),
            },
            project: project_snapshot(),
            pm_snapshot_synced_at: now.unix_timestamp(),
        },
        pm_writeback: PmWritebackState::Pending,
        wave_id: project.wave_id.clone(),
        project_session_id: project.id.clone(),
        current_directive_version: 2,
        incorporated_directive_version: 1,
        status: TaskSessionStatus::Running,
        status_reason: "task body active".into(),
        status_at: now,
        worktree: worktree.to_path_buf(),
        workspace_slug: "interactive-handoff".into(),
        lifecycle: TaskLifecyclePlan::standard("task"),
        lifecycle_phase: TaskLifecyclePhase::Iterate,
        phase_epoch: 1,
        phase_cursor: 0,
        phase_iteration: 3,
        gate_cycle: 0,
        gate_proposal: None,
        agent: "codex".into(),
        provider: "codex".into(),
        provider_session_id: Some("task-thread".into()),
        latest_process: Some(body(4, Some("task-thread"))),
        execution: None,
        abandon_intent: None,
        created_at: now,
        updated_at: now,
    };
    let pr = TaskPr {
        id: TaskPrId::new(),
        task_session_id: id,
        sequence: 1,
        slug: "interactive-handoff".into(),
        branch: "jack/interactive-handoff".into(),
        base_commit: "deadbeef".into(),
        parent_pr_id: None,
        publication: None,
        merge_commit: None,
        abandoned_at: None,
        ci_observation: None,
        created_at: now,
        updated_at: now,
    };
    (task, pr)
}

/// A request that the task parent accepts.
pub fn task_request(task: &TaskSession) -> OpenInteractiveHandoff {
    OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Task(task.id.clone()),
        home: WaveHome::parse("jack@local").unwrap(),
        cwd: task.worktree.clone(),
        provider: "codex".into(),
        provider_session_id: task.provider_session_id.clone(),
        body_generation: task.latest_process.as_ref().map_or(1, |p| p.generation),
        reason: "a credential is needed".into(),
        environment: BTreeMap::new(),
        attach_argv: vec!["tmux".into(), "attach".into()],
    }
}

/// Creates a wave, project and task under `dir` and returns the task.
pub async fn new_task(store: &Store, dir: &Path) -> TaskSession {
    let wave = new_wave(store, dir).await;
    let project = project(wave.id());
    store.create_project_session(&project).await.unwrap();
    let (task, pr) = task(&project, dir);
    store.create_task_session(&task, &pr).await.unwrap();
    task
}

/// The three outcome kinds with distinct texts, indexed by `n`.
pub fn outcome(n: usize) -> InteractiveHandoffOutcome {
    match n % 3 {
        0 => InteractiveHandoffOutcome::Completed {
            summary: format!("finished by {n}"),
        },
        1 => InteractiveHandoffOutcome::HandedBack {
            summary: format!("handed back by {n}"),
        },
        _ => InteractiveHandoffOutcome::Failed {
            reason: format!("failed by {n}"),
        },
    }
}

/// One whole lifecycle on a new wave, `outcome(n)` its outcome: open,
/// attach, finish, claim the wake (generation 1); the handoff's id. Store
/// errors are returned (a test of faults tells them apart); a step that
/// does not do what the contract says panics.
///
/// # Errors
/// The first store call that failed.
pub async fn try_lifecycle(
    store: &Store,
    dir: &Path,
    n: usize,
) -> Result<InteractiveHandoffId, StoreError> {
    let wave = Wave::new(WaveId::new(), "product".into(), dir.display().to_string());
    store.create_wave(&wave).await?;
    let (opened, created) = store
        .open_interactive_handoff(wave_request(&wave, dir))
        .await?;
    assert!(created, "lifecycle {n}: the open created no handoff");
    store.attach_interactive_handoff(&opened.id).await?;
    let finished = store
        .finish_interactive_handoff(&opened.id, &outcome(n))
        .await?;
    assert_eq!(finished.outcome, Some(outcome(n)));
    assert!(
        store.claim_interactive_handoff_wake(&opened.id, 1).await?,
        "lifecycle {n}: generation 1 does not hold the wake"
    );
    Ok(opened.id)
}

/// [`try_lifecycle`], panicking on a store error.
pub async fn lifecycle(store: &Store, dir: &Path, n: usize) -> InteractiveHandoffId {
    try_lifecycle(store, dir, n)
        .await
        .unwrap_or_else(|e| panic!("lifecycle {n}: {e}"))
}

/// A path inside `dir` where a store lives.
pub fn location(dir: &Path) -> PathBuf {
    dir.join("registry.db")
}
