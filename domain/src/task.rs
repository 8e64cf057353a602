//! A task session (one issue, one worktree, one PR stack) and its PRs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::child_session::{ChildExecutionContext, ChildProcessGeneration};
use crate::id::{ProjectSessionId, WaveId};
pub use crate::id::{TaskPrId, TaskSessionId};
pub use crate::project_session::AbandonIntent;
use crate::session_context::TaskLaunchReceipt;

/// Where a task session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskSessionStatus {
    /// Launched, body not yet running.
    Starting,
    /// A body is running.
    Running,
    /// Paused by a person; may resume.
    Paused,
    /// Finished and merged (terminal).
    Completed,
    /// Gave up (terminal).
    Failed,
    /// Abandoned by a person (terminal).
    Abandoned,
}

impl TaskSessionStatus {
    /// Returns true if and only if the session will never run again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Abandoned)
    }
}

/// Whether the planning tool has been told the task's latest state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PmWritebackState {
    /// The planning tool is up to date.
    Current,
    /// A write-back is owed.
    Pending,
    /// The last write-back failed and will be retried.
    Failed,
}

/// A phase of a task's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskLifecyclePhase {
    /// Planning the change.
    Plan,
    /// Writing and revising the change.
    Iterate,
    /// Under review.
    Review,
    /// Waiting at a gate for a decision.
    Gate,
    /// Publishing the PR.
    Publish,
    /// Done.
    Done,
}

/// The phases a task goes through, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskLifecyclePlan {
    /// The plan's name.
    pub name: String,
    /// The phases, in order.
    pub phases: Vec<TaskLifecyclePhase>,
}

impl TaskLifecyclePlan {
    /// The standard plan: plan, iterate, review, gate, publish, done.
    pub fn standard(name: &str) -> Self {
        Self {
            name: name.to_string(),
            phases: vec![
                TaskLifecyclePhase::Plan,
                TaskLifecyclePhase::Iterate,
                TaskLifecyclePhase::Review,
                TaskLifecyclePhase::Gate,
                TaskLifecyclePhase::Publish,
                TaskLifecyclePhase::Done,
            ],
        }
    }
}

/// A proposal waiting at a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GateProposal {
    /// The phase the proposal would move to.
    pub next_phase: TaskLifecyclePhase,
    /// Why.
    pub rationale: String,
    /// When it was proposed.
    #[serde(with = "time::serde::rfc3339")]
    pub proposed_at: OffsetDateTime,
}

/// One task session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskSession {
    /// The session id.
    pub id: TaskSessionId,
    /// What the session was launched with.
    pub launch: TaskLaunchReceipt,
    /// Whether the planning tool is up to date.
    pub pm_writeback: PmWritebackState,
    /// The owning wave.
    pub wave_id: WaveId,
    /// The owning project session.
    pub project_session_id: ProjectSessionId,
    /// The newest directive version issued to the session.
    pub current_directive_version: u32,
    /// The newest directive version the body has taken in.
    pub incorporated_directive_version: u32,
    /// Where the session is in its life.
    pub status: TaskSessionStatus,
    /// Why it has that status.
    pub status_reason: String,
    /// When the status was set.
    #[serde(with = "time::serde::rfc3339")]
    pub status_at: OffsetDateTime,
    /// The git worktree; a handoff's cwd must be this directory.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub worktree: PathBuf,
    /// The workspace slug.
    pub workspace_slug: String,
    /// The lifecycle plan.
    pub lifecycle: TaskLifecyclePlan,
    /// The current phase.
    pub lifecycle_phase: TaskLifecyclePhase,
    /// Increases each time the phase changes.
    pub phase_epoch: u32,
    /// Position within the phase.
    pub phase_cursor: u32,
    /// Iterations within the phase.
    pub phase_iteration: u32,
    /// Gate round-trips so far.
    pub gate_cycle: u32,
    /// A proposal waiting at a gate.
    pub gate_proposal: Option<GateProposal>,
    /// The agent program.
    pub agent: String,
    /// The model provider; a handoff must name the same one.
    pub provider: String,
    /// The provider's conversation id; a handoff must carry the same one.
    pub provider_session_id: Option<String>,
    /// The current body process; its generation fences handoffs.
    pub latest_process: Option<ChildProcessGeneration>,
    /// Where bodies run.
    pub execution: Option<ChildExecutionContext>,
    /// A pending request to abandon the session.
    pub abandon_intent: Option<AbandonIntent>,
    /// When the session was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When the session last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// Where a PR has been published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrPublication {
    /// The forge's PR number.
    pub number: u64,
    /// The PR's URL.
    pub url: String,
    /// When it was published.
    #[serde(with = "time::serde::rfc3339")]
    pub published_at: OffsetDateTime,
}

/// The last CI result seen for a PR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CiObservation {
    /// The commit CI ran on.
    pub commit: String,
    /// Whether it passed.
    pub passed: bool,
    /// When it was observed.
    #[serde(with = "time::serde::rfc3339")]
    pub observed_at: OffsetDateTime,
}

/// One PR of a task's stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskPr {
    /// The PR id.
    pub id: TaskPrId,
    /// The owning task session.
    pub task_session_id: TaskSessionId,
    /// Position in the task's stack, from 1.
    pub sequence: u32,
    /// The PR slug.
    pub slug: String,
    /// The branch.
    pub branch: String,
    /// The commit the branch starts from.
    pub base_commit: String,
    /// The PR this one stacks on.
    pub parent_pr_id: Option<TaskPrId>,
    /// Where it is published.
    pub publication: Option<PrPublication>,
    /// The merge commit, once merged.
    pub merge_commit: Option<String>,
    /// When it was abandoned.
    #[serde(with = "time::serde::rfc3339::option")]
    pub abandoned_at: Option<OffsetDateTime>,
    /// The last CI result.
    pub ci_observation: Option<CiObservation>,
    /// When the PR record was created.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it last changed.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}
