//! The [`Store`]: the public API an orchestrator links against, one
//! facade over whichever [`Registry`] runs it.

use std::fmt;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

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
use crate::delivery::DeliveryCursor;
use crate::error::StoreResult;
use crate::local::{Local, PruneOptions, StorePorts};
use crate::ports::{ListQuery, PruneCount};
use crate::registry::{ClaimedWake, Registry};
use crate::watch::{Waited, WatchFilter, WatchFrom, Watcher};

/// The handoff registry: the public API an orchestrator links against.
///
/// Each operation has one method:
///
/// | what | method | contract |
/// | --- | --- | --- |
/// | parents | [`create_wave`](Self::create_wave), [`create_project_session`](Self::create_project_session), [`create_task_session`](Self::create_task_session), [`record_body`](Self::record_body), [`get_parent`](Self::get_parent), [`get_task_pr`](Self::get_task_pr) | C10 |
/// | open | [`open_interactive_handoff`](Self::open_interactive_handoff) (a request, or a request [`with_options`](lf_handoff_domain::interactive_handoff::OpenInteractiveHandoff::with_options): step, deadline) | C1-C3, C12, C14 |
/// | read | [`get_interactive_handoff`](Self::get_interactive_handoff), [`list_interactive_handoffs`](Self::list_interactive_handoffs) (a parent, or a [`ListQuery`]), [`history`](Self::history) | C4, C15, C17 |
/// | act | [`attach_interactive_handoff`](Self::attach_interactive_handoff), [`finish_interactive_handoff`](Self::finish_interactive_handoff), [`extend_interactive_handoff`](Self::extend_interactive_handoff), [`claim_interactive_handoff_wake`](Self::claim_interactive_handoff_wake) (a `bool`, or [`with_record`](Self::claim_interactive_handoff_wake_with_record): the handoff as the claim left it) | C5-C7, C13, C14 |
/// | wait | [`watch`](Self::watch), [`wait`](Self::wait) | C16 |
/// | upkeep | [`expire_due`](Self::expire_due), [`prune`](Self::prune), [`export`](Self::export), [`import`](Self::import) | C14, C17 |
///
/// A handle names an actor in the history of each change it makes
/// ([`with_actor`](Self::with_actor)) and rides out an unreachable backend
/// for a retry window ([`with_retry_window`](Self::with_retry_window)).
///
/// A store runs on a [`Registry`]: the one over a backend's storage ports
/// ([`Store::new`]), or a client of a served registry. Every method
/// behaves the same, with the same errors, on either.
///
/// Cheap to clone; clones share the same registry.
#[derive(Clone)]
pub struct Store {
    registry: Arc<dyn Registry>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Store").field(&self.registry).finish()
    }
}

impl From<Arc<dyn Registry>> for Store {
    fn from(registry: Arc<dyn Registry>) -> Self {
        Self { registry }
    }
}

impl Store {
    /// A store over a backend's ports. Its history names this process as
    /// the actor ([`this_process_actor`](crate::this_process_actor)) until
    /// [`with_actor`](Self::with_actor) says otherwise, and it retries a
    /// call that finds the server unreachable for
    /// [`DEFAULT_RETRY_WINDOW`](crate::DEFAULT_RETRY_WINDOW).
    pub fn new(ports: StorePorts) -> Self {
        Self {
            registry: Arc::new(Local::new(ports)),
        }
    }

    /// This handle, naming `actor` in the history of every change it makes
    /// (C15). Other clones keep their own actor. On a served registry the
    /// server names the caller's token instead (C20).
    #[must_use]
    pub fn with_actor(&self, actor: Actor) -> Self {
        Self {
            registry: self.registry.with_actor(actor),
        }
    }

    /// This handle, retrying a call that finds the backend unreachable for
    /// at most `window` after the first failure (C18, transient faults).
    /// `Duration::ZERO` fails at once. Other clones keep their own window.
    #[must_use]
    pub fn with_retry_window(&self, window: Duration) -> Self {
        Self {
            registry: self.registry.with_retry_window(window),
        }
    }

    /// The actor this handle names in the history.
    pub fn actor(&self) -> &Actor {
        self.registry.actor()
    }

    /// How long this handle retries a call that finds the backend
    /// unreachable.
    pub fn retry_window(&self) -> Duration {
        self.registry.retry_window()
    }

    /// The backend's name (`sqlite`, `sled`, `postgres`, `http`).
    pub fn backend(&self) -> &'static str {
        self.registry.backend()
    }

    /// The store's clock reading, as used for `list_row(now)`.
    pub fn now(&self) -> OffsetDateTime {
        self.registry.now()
    }

    // ----- parents (C10) -----

    /// Stores a new wave. Creating an equal wave again is a no-op.
    ///
    /// # Errors
    /// `InvalidInput` for a blank name or repo; `Conflict` when a different
    /// wave has the id; `Unavailable` on storage failure.
    pub async fn create_wave(&self, wave: &Wave) -> StoreResult<()> {
        self.registry.create_wave(wave).await
    }

    /// Stores a new project session under an existing wave.
    ///
    /// # Errors
    /// `NotFound` when the wave does not exist; otherwise as
    /// [`create_wave`](Self::create_wave).
    pub async fn create_project_session(&self, project: &ProjectSession) -> StoreResult<()> {
        self.registry.create_project_session(project).await
    }

    /// Stores a new task session under an existing project session, with
    /// its first PR, atomically.
    ///
    /// # Errors
    /// `InvalidInput` when the PR belongs to another task; `NotFound` when the
    /// project does not exist; `Conflict` when the task's wave is not its
    /// project's; otherwise as [`create_wave`](Self::create_wave).
    pub async fn create_task_session(&self, task: &TaskSession, pr: &TaskPr) -> StoreResult<()> {
        self.registry.create_task_session(task, pr).await
    }

    /// Loads a parent (a wave, a project session or a task session); `None`
    /// for an unknown one.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    pub async fn get_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Parent>> {
        self.registry.get_parent(reference).await
    }

    /// Loads a task PR.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    pub async fn get_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        self.registry.get_task_pr(id).await
    }

    /// Records `process` as the parent's new body. Its generation must be
    /// higher than the current one; recording the current body again is a
    /// replay that writes nothing. Returns the parent as stored.
    ///
    /// # Errors
    /// `NotFound` for an unknown parent; `InvalidInput` for generation 0;
    /// `Conflict` for a generation that does not increase, another provider,
    /// lost provider history or a terminal parent.
    pub async fn record_body(
        &self,
        reference: &InteractiveHandoffParent,
        process: ChildProcessGeneration,
    ) -> StoreResult<Parent> {
        self.registry.record_body(reference, process).await
    }

    // ----- handoffs (C1-C7, C9, C12-C15) -----

    /// Opens a handoff for the request's parent, or returns the one the
    /// request is answered by, writing nothing (a replay). The flag is
    /// `true` if and only if a handoff was created.
    ///
    /// `request` is an [`OpenInteractiveHandoff`](lf_handoff_domain::interactive_handoff::OpenInteractiveHandoff) (as the first version
    /// sent it) or one [`with_options`](lf_handoff_domain::interactive_handoff::OpenInteractiveHandoff::with_options):
    ///
    /// - without a step, the parent's active handoff answers (C3);
    /// - with a step (C12), the parent's handoff for that step answers,
    ///   whatever its status, so a replaced body that re-runs its step
    ///   finds the handoff it opened before instead of asking a person
    ///   again;
    /// - with a deadline (C14), a created handoff expires then unless it
    ///   was finished; a replay keeps the deadline it has
    ///   ([`extend_interactive_handoff`](Self::extend_interactive_handoff)
    ///   moves it).
    ///
    /// # Errors
    /// `InvalidInput` for a malformed request or a deadline not later than
    /// now (checked before any read); `NotFound` for an unknown parent;
    /// `Conflict` naming the parent rule broken (stale generation,
    /// provider, history, worktree, terminal), or of kind `ParentBusy`
    /// naming the parent's active handoff when it is for another step (or
    /// none).
    pub async fn open_interactive_handoff(
        &self,
        request: impl Into<OpenHandoff>,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        self.registry.open_interactive_handoff(request.into()).await
    }

    /// Loads one handoff; `None` for an unknown id.
    ///
    /// # Errors
    /// `Unavailable` on storage failure or a damaged record.
    pub async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>> {
        self.registry.get_interactive_handoff(id).await
    }

    /// Lists the handoffs that pass every filter of `query`, ordered by
    /// creation then id (C4, C17), or newest first. `query` is a parent
    /// (`None` for every handoff, `Some(&parent)` for one parent's) or a
    /// whole [`ListQuery`]: a parent, only active ones, statuses, a home,
    /// created before an instant, the order, and the page (those after
    /// `query.after`, the last id of the previous page; at most
    /// `query.limit`). Every filter and the page's start are served by an
    /// index.
    ///
    /// # Errors
    /// `NotFound` when `query.after` names no handoff (checked only when
    /// the page is empty, so a full page costs no extra read);
    /// `Unavailable` on storage failure or a damaged record.
    pub async fn list_interactive_handoffs(
        &self,
        query: impl Into<ListQuery>,
    ) -> StoreResult<Vec<InteractiveHandoff>> {
        self.registry.list_interactive_handoffs(query.into()).await
    }

    /// Records that a person attached. Attaching again returns the record
    /// unchanged.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Conflict` when the handoff is terminal,
    /// of kind `Expired` when its deadline has passed (a due handoff is
    /// expired by this call, C14).
    pub async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        self.registry.attach_interactive_handoff(id).await
    }

    /// Finishes a handoff with `outcome`. Finishing again with an equal
    /// outcome returns the record unchanged; of racing finishers exactly one
    /// succeeds.
    ///
    /// # Errors
    /// `InvalidInput` for a blank outcome text or the expiry outcome
    /// (checked before any read); `NotFound` for an unknown id; `Conflict`
    /// when another outcome is already recorded, of kind `Expired` when the
    /// deadline has passed (a due handoff is expired by this call, C14).
    pub async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
    ) -> StoreResult<InteractiveHandoff> {
        self.registry.finish_interactive_handoff(id, outcome).await
    }

    /// Moves the deadline of an active handoff to `until` (C14), which
    /// must be later than now; a handoff without a deadline gets one.
    /// Extending to the deadline it has returns it unchanged.
    ///
    /// # Errors
    /// `InvalidInput` for a deadline not later than now; `NotFound` for an
    /// unknown id; `Conflict` of kind `Expired` when the deadline has
    /// already passed (a due handoff is expired by this call, never
    /// extended), `AlreadyFinished` for another terminal handoff.
    pub async fn extend_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        until: OffsetDateTime,
    ) -> StoreResult<InteractiveHandoff> {
        self.registry.extend_interactive_handoff(id, until).await
    }

    /// Claims the wake of a terminal handoff for body `generation`: `true`
    /// if and only if this generation holds it afterwards (the first claim,
    /// a retry by the holder, or a take-over by the parent's current body
    /// from an older holder, C13). The first version's answer; the same
    /// claim answering with the handoff as it left it is
    /// [`claim_interactive_handoff_wake_with_record`](Self::claim_interactive_handoff_wake_with_record).
    ///
    /// # Errors
    /// `InvalidInput` for generation 0 (checked before any read); `NotFound`
    /// for an unknown id; `Conflict` for a stale generation or a handoff that
    /// is not terminal.
    pub async fn claim_interactive_handoff_wake(
        &self,
        id: &InteractiveHandoffId,
        parent_generation: u32,
    ) -> StoreResult<bool> {
        Ok(self
            .claim_interactive_handoff_wake_with_record(id, parent_generation)
            .await?
            .claimed)
    }

    /// The same claim as
    /// [`claim_interactive_handoff_wake`](Self::claim_interactive_handoff_wake),
    /// answering also with the handoff as the claim left it, read in the
    /// claim's own change (so it says which generation holds the wake, and
    /// no prune or other writer can come between the claim and the record).
    /// The service's `claim-wake` answers with it.
    ///
    /// # Errors
    /// As [`claim_interactive_handoff_wake`](Self::claim_interactive_handoff_wake).
    pub async fn claim_interactive_handoff_wake_with_record(
        &self,
        id: &InteractiveHandoffId,
        parent_generation: u32,
    ) -> StoreResult<ClaimedWake> {
        self.registry
            .claim_interactive_handoff_wake(id, parent_generation)
            .await
    }

    /// The history of handoff `id` (C15): every change, in order, with who
    /// made it. A handoff stored by a release without history starts with
    /// its first change since the upgrade.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Unavailable` on storage failure or an
    /// unreadable event.
    pub async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        self.registry.history(id).await
    }

    // ----- the service's delivery cursors (C23) -----

    /// The delivery cursor of notification endpoint `endpoint` (a key the
    /// service derives from the endpoint; 1 to 128 bytes, no control
    /// characters), if one was stored. For the service's notifier: an
    /// orchestrator has no use for it.
    ///
    /// # Errors
    /// `InvalidInput` for a bad key (and on a store served over HTTP,
    /// whose cursors belong to the server); `Unavailable` on storage
    /// failure.
    pub async fn delivery_cursor(&self, endpoint: &str) -> StoreResult<Option<DeliveryCursor>> {
        self.registry.delivery_cursor(endpoint).await
    }

    /// Stores `cursor` as `endpoint`'s if the stored cursor's version is
    /// still `expected` (`None`: none is stored), with the next version;
    /// returns whether it did. Of racing swaps from one version exactly
    /// one succeeds (see [`Deliveries`](crate::Deliveries)).
    ///
    /// # Errors
    /// As [`delivery_cursor`](Self::delivery_cursor).
    pub async fn swap_delivery_cursor(
        &self,
        endpoint: &str,
        expected: Option<u64>,
        cursor: &DeliveryCursor,
    ) -> StoreResult<bool> {
        self.registry
            .swap_delivery_cursor(endpoint, expected, cursor)
            .await
    }

    // ----- the service's revoked sign-ins (C29) -----

    /// Revokes `key` (a key the service derives from what it revokes, such
    /// as a sign-in session; 1 to 128 bytes, no control characters) until
    /// `until`, when it would have run out anyway; every handle on the
    /// store, in every process, then finds it revoked. For the service: an
    /// orchestrator has no use for it.
    ///
    /// # Errors
    /// `InvalidInput` for a bad key (and on a store served over HTTP,
    /// whose revocations belong to the server); `Unavailable` on storage
    /// failure.
    pub async fn revoke(&self, key: &str, until: OffsetDateTime) -> StoreResult<()> {
        self.registry.revoke(key, until, self.now()).await
    }

    /// Whether `key` is revoked now.
    ///
    /// # Errors
    /// As [`revoke`](Self::revoke).
    pub async fn is_revoked(&self, key: &str) -> StoreResult<bool> {
        self.registry.is_revoked(key, self.now()).await
    }

    // ----- waiting (C16) -----

    /// Every event that passes `filter` from `from` on, in position order,
    /// then each new one as it commits (C16).
    ///
    /// # Errors
    /// `Unavailable` when the store cannot be read (for [`WatchFrom::Now`],
    /// which reads the last position).
    pub async fn watch(&self, from: WatchFrom, filter: WatchFilter) -> StoreResult<Watcher> {
        self.registry.watch(from, filter).await
    }

    /// Waits until handoff `id` is terminal, at most `timeout` when given,
    /// and returns it (C16). A handoff whose deadline passes meanwhile is
    /// expired then (C14) and returned. It sleeps on the backend's change
    /// signal between reads, never busy polling.
    ///
    /// # Errors
    /// `NotFound` for an unknown id (or one pruned while waiting);
    /// `Unavailable` when the store fails or goes away.
    pub async fn wait(
        &self,
        id: &InteractiveHandoffId,
        timeout: Option<Duration>,
    ) -> StoreResult<Waited> {
        self.registry.wait(id, timeout).await
    }

    // ----- upkeep (C14, C17) -----

    /// Expires every handoff that is due (C14), each with its own
    /// compare-and-swap, and returns those this call expired: a handoff a
    /// concurrent sweeper expired, or that was finished in time, is not in
    /// the list, so racing sweepers report each expiry once.
    ///
    /// # Errors
    /// `Unavailable` on storage failure; handoffs expired before it are
    /// expired all the same.
    pub async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>> {
        self.registry.expire_due().await
    }

    /// Prunes the registry (C17): removes every terminal handoff whose wake
    /// has been claimed and that finished before `options.finished_before`,
    /// with its history, in atomic batches of at most `options.batch`
    /// handoffs, until a batch removes nothing. An active handoff and one
    /// whose wake is unclaimed are never removed. A dry run removes nothing
    /// and counts what would be removed now.
    ///
    /// A pruned handoff is gone: `get` returns `None`, `history` is
    /// `NotFound`, and its step is forgotten, so a body that opens at that
    /// step again gets a new handoff (C12 holds until the prune).
    ///
    /// # Errors
    /// `InvalidInput` for a batch of 0 (checked before anything is read);
    /// `Unavailable` on storage failure; the batches before it stay
    /// removed.
    pub async fn prune(&self, options: PruneOptions) -> StoreResult<PruneCount> {
        self.registry.prune(options).await
    }

    /// Writes the whole registry to `out` as an export (versioned JSON
    /// lines, see [`archive`](crate::archive)) read from one consistent
    /// snapshot, while other handles and processes go on writing, calling
    /// `progress` (when given) with the counts so far after every record.
    /// Returns what it wrote. `out` is written as the records come; buffer
    /// it.
    ///
    /// # Errors
    /// `Unavailable` when the store fails or `out` cannot be written (what
    /// was written before is not a whole export: it has no end line, and
    /// an import refuses it).
    pub async fn export<W: Write + Send>(
        &self,
        mut out: W,
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        self.registry.export(&mut out, progress).await
    }

    /// Loads an export read from `input` into this store, which must be
    /// empty, atomically, and returns what it loaded, calling `progress`
    /// (when given) with the counts so far after every record read. Every
    /// line is checked as it is read; the store is changed only if the
    /// whole export is good.
    ///
    /// # Errors
    /// `InvalidInput` for a damaged line (naming its number), a file cut
    /// short or one written by a newer lf-handoff; `Conflict` of kind
    /// `NotEmpty` for a store that holds anything; `Unavailable` when the
    /// store fails or `input` cannot be read. Nothing was imported then.
    pub async fn import<R: BufRead + Send>(
        &self,
        mut input: R,
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        self.registry.import(&mut input, progress).await
    }
}
