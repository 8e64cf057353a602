//! The [`Registry`] trait: the operations of a handoff registry,
//! object-safe, whatever the registry runs on.

use std::fmt::Debug;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::id::{InteractiveHandoffId, TaskPrId};
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffEvent, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    OpenHandoff,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave::Wave;
use time::OffsetDateTime;

use crate::archive::{ArchiveSummary, Progress};
use crate::delivery::Deliveries;
use crate::error::StoreResult;
use crate::local::PruneOptions;
use crate::ports::{ListQuery, PruneCount};
use crate::retry::DEFAULT_RETRY_WINDOW;
use crate::revocation::Revocations;
use crate::system::this_process_actor;
use crate::watch::{Waited, WatchFilter, WatchFrom, Watcher};

/// What a handle of a registry carries of its own, whatever the registry
/// runs on: the actor it names in the history and how long it retries a
/// call that finds the backend unreachable. Every registry embeds one, and
/// [`Registry::with_actor`] and [`Registry::with_retry_window`] make a
/// handle with one of them changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleSettings {
    /// The actor named in the history of the changes made through the
    /// handle.
    pub actor: Actor,
    /// How long a call that finds the backend unreachable is retried.
    pub retry_window: Duration,
}

impl Default for HandleSettings {
    /// This process as the actor ([`this_process_actor`]), retrying for
    /// [`DEFAULT_RETRY_WINDOW`].
    fn default() -> Self {
        Self {
            actor: this_process_actor(),
            retry_window: DEFAULT_RETRY_WINDOW,
        }
    }
}

/// A [`Store`](crate::Store) is a facade over one `Arc<dyn Registry>`. Two
/// kinds implement it: the registry over a backend's storage ports (SQLite,
/// sled, PostgreSQL; built by [`Store::new`](crate::Store::new)), and a
/// client of a registry served over HTTP (the adapters' `http` backend).
/// So an orchestrator, and the command line, use one type and one code path
/// whichever it is.
///
/// # Contract
///
/// Each method does what the [`Store`](crate::Store) method of the same
/// name documents, with the same errors: an implementation MUST return the
/// same `StoreError` variant and kind that a local store returns for the
/// same situation (a served registry carries them across the wire), so a
/// caller never branches on where the registry runs. The conformance suite
/// runs its store-level scenarios against both kinds.
///
/// A registry is also where the notification service keeps its delivery
/// cursors ([`Deliveries`], what [`Store::delivery_cursor`](crate::Store::delivery_cursor)
/// and [`Store::swap_delivery_cursor`](crate::Store::swap_delivery_cursor) call),
/// and its revoked sign-ins ([`Revocations`], what [`Store::revoke`](crate::Store::revoke)
/// and [`Store::is_revoked`](crate::Store::is_revoked) call).
#[async_trait]
pub trait Registry: Deliveries + Revocations {
    /// The backend's name (`sqlite`, `sled`, `postgres`, `http`).
    fn backend(&self) -> &'static str;

    /// This handle's own settings: its actor and retry window.
    fn settings(&self) -> &HandleSettings;

    /// This registry, with `settings` for the handle it returns (other
    /// handles keep theirs).
    fn with_settings(&self, settings: HandleSettings) -> Arc<dyn Registry>;

    /// The actor this handle names in the history.
    fn actor(&self) -> &Actor {
        &self.settings().actor
    }

    /// This registry, naming `actor` in the history of the changes made
    /// through the handle it returns.
    fn with_actor(&self, actor: Actor) -> Arc<dyn Registry> {
        self.with_settings(HandleSettings {
            actor,
            ..self.settings().clone()
        })
    }

    /// How long a call that finds the backend unreachable is retried.
    fn retry_window(&self) -> Duration {
        self.settings().retry_window
    }

    /// This registry, retrying for `window` through the handle it returns.
    fn with_retry_window(&self, window: Duration) -> Arc<dyn Registry> {
        self.with_settings(HandleSettings {
            retry_window: window,
            ..self.settings().clone()
        })
    }

    /// The registry's clock reading.
    fn now(&self) -> OffsetDateTime;

    /// See [`Store::create_wave`](crate::Store::create_wave).
    async fn create_wave(&self, wave: &Wave) -> StoreResult<()>;

    /// See [`Store::create_project_session`](crate::Store::create_project_session).
    async fn create_project_session(&self, project: &ProjectSession) -> StoreResult<()>;

    /// See [`Store::create_task_session`](crate::Store::create_task_session).
    async fn create_task_session(&self, task: &TaskSession, pr: &TaskPr) -> StoreResult<()>;

    /// See [`Store::get_parent`](crate::Store::get_parent).
    async fn get_parent(&self, reference: &InteractiveHandoffParent)
        -> StoreResult<Option<Parent>>;

    /// See [`Store::get_task_pr`](crate::Store::get_task_pr).
    async fn get_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>>;

    /// See [`Store::record_body`](crate::Store::record_body).
    async fn record_body(
        &self,
        reference: &InteractiveHandoffParent,
        process: ChildProcessGeneration,
    ) -> StoreResult<Parent>;

    /// See [`Store::open_interactive_handoff`](crate::Store::open_interactive_handoff).
    async fn open_interactive_handoff(
        &self,
        opening: OpenHandoff,
    ) -> StoreResult<(InteractiveHandoff, bool)>;

    /// See [`Store::get_interactive_handoff`](crate::Store::get_interactive_handoff).
    async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>>;

    /// See [`Store::list_interactive_handoffs`](crate::Store::list_interactive_handoffs).
    async fn list_interactive_handoffs(
        &self,
        query: ListQuery,
    ) -> StoreResult<Vec<InteractiveHandoff>>;

    /// See [`Store::attach_interactive_handoff`](crate::Store::attach_interactive_handoff).
    async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff>;

    /// See [`Store::finish_interactive_handoff`](crate::Store::finish_interactive_handoff).
    async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
    ) -> StoreResult<InteractiveHandoff>;

    /// See [`Store::extend_interactive_handoff`](crate::Store::extend_interactive_handoff).
    async fn extend_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        until: OffsetDateTime,
    ) -> StoreResult<InteractiveHandoff>;

    /// See [`Store::claim_interactive_handoff_wake_with_record`](crate::Store::claim_interactive_handoff_wake_with_record).
    async fn claim_interactive_handoff_wake(
        &self,
        id: &InteractiveHandoffId,
        generation: u32,
    ) -> StoreResult<ClaimedWake>;

    /// See [`Store::history`](crate::Store::history).
    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>>;

    /// See [`Store::watch`](crate::Store::watch).
    async fn watch(&self, from: WatchFrom, filter: WatchFilter) -> StoreResult<Watcher>;

    /// See [`Store::wait`](crate::Store::wait).
    async fn wait(
        &self,
        id: &InteractiveHandoffId,
        timeout: Option<Duration>,
    ) -> StoreResult<Waited>;

    /// See [`Store::expire_due`](crate::Store::expire_due).
    async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>>;

    /// See [`Store::prune`](crate::Store::prune).
    async fn prune(&self, options: PruneOptions) -> StoreResult<PruneCount>;

    /// See [`Store::export`](crate::Store::export).
    async fn export(
        &self,
        out: &mut (dyn Write + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary>;

    /// See [`Store::import`](crate::Store::import).
    async fn import(
        &self,
        input: &mut (dyn BufRead + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary>;
}

/// What a wake claim answers (C7, C13): whether the claiming generation
/// holds the wake, and the handoff as the claim left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedWake {
    /// True if and only if the claiming generation holds the wake
    /// afterwards.
    pub claimed: bool,
    /// The handoff as the claim left it, read in the claim's own change:
    /// its `wake_claimed_by_generation` is the holder.
    pub handoff: InteractiveHandoff,
}
