//! A project session: the orchestrating body of one project under a wave.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::child_session::{ChildExecutionContext, ChildProcessGeneration};
pub use crate::id::ProjectSessionId;
use crate::id::WaveId;
use crate::session_context::ProjectLaunchReceipt;

/// Where a project session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProjectSessionStatus {
    /// Launched, body not yet running.
    Starting,
    /// A body is running.
    Running,
    /// Paused by a person; may resume.
    Paused,
    /// Finished its work (terminal).
    Completed,
    /// Gave up (terminal).
    Failed,
    /// Abandoned by a person (terminal).
    Abandoned,
}

impl ProjectSessionStatus {
    /// Returns true if and only if the session will never run again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Abandoned)
    }
}

/// A request to abandon a session, recorded before it is carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AbandonIntent {
    /// Why.
    pub reason: String,
    /// When it was requested.
    #[serde(with = "time::serde::rfc3339")]
    pub requested_at: OffsetDateTime,
}

/// The orchestrating body of one project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProjectSession {
    /// The session id.
    pub id: ProjectSessionId,
    /// What the session was launched with.
    pub launch: ProjectLaunchReceipt,
    /// The owning wave.
    pub wave_id: WaveId,
    /// The newest directive version issued to the session.
    pub current_directive_version: u32,
    /// The newest directive version the body has taken in.
    pub incorporated_directive_version: u32,
    /// Where the session is in its life.
    pub status: ProjectSessionStatus,
    /// Why it has that status.
    pub status_reason: String,
    /// When the status was set.
    #[serde(with = "time::serde::rfc3339")]
    pub status_at: OffsetDateTime,
    /// How many iterations the body has run.
    pub iteration: u32,
    /// How far the body has read its observations.
    pub observation_cursor: u64,
    /// A fingerprint of the last observed state.
    pub last_state_fingerprint: Option<String>,
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
