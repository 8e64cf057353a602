//! Test fixtures shared by every test crate above the domain: everything
//! of [`lf_handoff_domain::testing`] (the open-request builder
//! [`OpenRequest`], bodies, project and task parents at fixed ids), and
//! parents with fresh ids for tests that create many in one store.
//!
//! Only with the `testing` feature (and in this crate's unit tests). The
//! adapters crate re-exports this module as `lf_handoff_adapters::testing`
//! under its own `testing` feature, so a test crate that depends on the
//! adapters turns that on in its `[dev-dependencies]`:
//!
//! ```toml
//! lf-handoff-adapters = { workspace = true, features = ["testing"] }
//! ```
//!
//! and writes:
//!
//! ```
//! # async fn example(store: &lf_handoff_application::Store, wave: &lf_handoff_domain::wave::Wave) -> lf_handoff_application::StoreResult<()> {
//! use lf_handoff_application::testing::OpenRequest;
//! let (handoff, created) = store
//!     .open_interactive_handoff(OpenRequest::on_wave(wave).cwd("/src/product").reason("a login").build())
//!     .await?;
//! # Ok(()) }
//! ```

use std::path::Path;

pub use lf_handoff_domain::testing::*;

use lf_handoff_domain::id::{ProjectSessionId, TaskPrId, TaskSessionId, WaveId};
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};

use crate::GenerateId;

/// A running project session under `wave` ([`project`]) with a fresh id.
pub fn fresh_project(wave: &WaveId) -> ProjectSession {
    project(ProjectSessionId::new(), wave)
}

/// A running task session under `project` in `worktree` ([`task`]) and its
/// first PR ([`task_pr`]), with fresh ids.
pub fn fresh_task(project: &ProjectSession, worktree: &Path) -> (TaskSession, TaskPr) {
    let task = task(TaskSessionId::new(), project, worktree);
    let pr = task_pr(TaskPrId::new(), &task);
    (task, pr)
}
