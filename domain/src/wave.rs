//! A wave: one stream of work on one repository, the root every other
//! parent hangs from.

use serde::{Deserialize, Serialize};

use crate::child_session::ChildProcessGeneration;
use crate::id::WaveId;

/// Whether a wave still accepts work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaveStatus {
    /// Running; handoffs may be opened under it.
    Active,
    /// Closed for good; a terminal parent.
    Closed,
}

/// One stream of work on one repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Wave {
    id: WaveId,
    name: String,
    repo: String,
    status: WaveStatus,
    latest_process: Option<ChildProcessGeneration>,
}

impl Wave {
    /// A new, active wave with no recorded body process.
    pub fn new(id: WaveId, name: String, repo: String) -> Self {
        Self {
            id,
            name,
            repo,
            status: WaveStatus::Active,
            latest_process: None,
        }
    }

    /// The wave's id.
    pub fn id(&self) -> &WaveId {
        &self.id
    }

    /// The display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The repository the wave works on.
    pub fn repo(&self) -> &str {
        &self.repo
    }

    /// Active or closed.
    pub fn status(&self) -> WaveStatus {
        self.status
    }

    /// The wave's current body process, if one was recorded.
    pub fn latest_process(&self) -> Option<&ChildProcessGeneration> {
        self.latest_process.as_ref()
    }

    /// The same wave with another status.
    pub fn with_status(mut self, status: WaveStatus) -> Self {
        self.status = status;
        self
    }

    /// The same wave with `process` as its current body. Generation rules are
    /// checked by [`Parent::record_body`](crate::parent::Parent::record_body).
    pub fn with_latest_process(mut self, process: ChildProcessGeneration) -> Self {
        self.latest_process = Some(process);
        self
    }
}
