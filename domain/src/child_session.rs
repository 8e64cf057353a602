//! Body processes: the generations a parent's agent runs as.
//!
//! Each time a parent's body is replaced (after a crash, a restart or a
//! resume) the orchestrator records a new [`ChildProcessGeneration`] with a
//! generation one higher. Handoffs are fenced by generation: only the current
//! body may open one, and a stale body can never claim a wake.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::wave_home::WaveHome;

/// One body process of a parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildProcessGeneration {
    /// Starts at 1 and increases by one for every replacement body.
    pub generation: u32,
    /// The process id, once known.
    pub pid: Option<u32>,
    /// The process group, once known.
    pub process_group_id: Option<u32>,
    /// The tmux session the body runs in.
    pub tmux_name: String,
    /// The agent program (for example `codex`).
    pub agent: String,
    /// The model provider the agent talks to.
    pub provider: String,
    /// The provider's conversation id, when the provider keeps history.
    pub provider_session_id: Option<String>,
    /// When the process started.
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    /// Whether the process currently holds its lease.
    pub state: ChildLeaseState,
    /// How the process ended, once it has.
    pub outcome: Option<ChildProcessOutcome>,
}

/// The lease a body process holds on its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildLeaseState {
    /// Launched, not yet confirmed running.
    Starting,
    /// Running and holding the lease.
    Active,
    /// Released the lease by exiting.
    Released,
    /// Lost the lease (crashed or timed out).
    Lost,
}

/// How a body process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChildProcessOutcome {
    /// Exited with a status code.
    Exited {
        /// The exit status.
        code: i32,
    },
    /// Killed by a signal.
    Signalled {
        /// The signal number.
        signal: i32,
    },
    /// Disappeared without a recorded exit.
    Lost {
        /// What was observed.
        reason: String,
    },
}

/// Where and how a parent's bodies are executed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildExecutionContext {
    /// The machine the bodies run on.
    pub home: WaveHome,
    /// The tmux socket name, when not the default.
    pub tmux_socket: Option<String>,
    /// Extra environment given to every body.
    pub environment: BTreeMap<String, String>,
}

impl ChildExecutionContext {
    /// A fixed local context for tests and examples: `tester@local`, the
    /// default tmux socket and an empty environment. Only with the
    /// `testing` feature (see [`testing`](crate::testing)).
    #[cfg(any(test, feature = "testing"))]
    pub fn for_tests() -> Self {
        Self {
            home: WaveHome::Local {
                user: "tester".to_string(),
            },
            tmux_socket: None,
            environment: BTreeMap::new(),
        }
    }
}
