//! The operations of a handoff registry, each written once: the
//! [`Registry`] trait and the four groups of operations it is made of
//! ([`Parents`], [`Handoffs`], [`Waiting`], [`Upkeep`]), object-safe,
//! whatever the registry runs on. A [`Store`](crate::Store) is a handle
//! over one, so these are the methods an orchestrator calls.

use std::fmt::Debug;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::id::{InteractiveHandoffId, TaskPrId};
use lf_handoff_domain::interactive_handoff::{
    Actor, Answer, HandoffEvent, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent, OpenInteractiveHandoff,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave::Wave;
use time::OffsetDateTime;

use crate::archive::{ArchiveSummary, Progress};
use crate::delivery::Deliveries;
use crate::error::StoreResult;
use crate::ports::{ListQuery, ParentQuery, PruneCount};
use crate::retry::DEFAULT_RETRY_WINDOW;
use crate::revocation::Revocations;
use crate::system::this_process_actor;
use crate::watch::{Waited, WatchFilter, WatchFrom, Watcher};

/// What a handle of a registry carries of its own, whatever the registry
/// runs on: the actor it names in the history and how long it retries a
/// call that finds the backend unreachable. Every registry embeds one, and
/// [`Store::with_actor`](crate::Store::with_actor) and
/// [`Store::with_retry_window`](crate::Store::with_retry_window) make a
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

/// A handoff registry: what a [`Store`](crate::Store) is a handle over.
/// Two kinds implement it: the registry over a backend's storage ports
/// (SQLite, sled, PostgreSQL; built by [`Store::new`](crate::Store::new)),
/// and a client of a registry served over HTTP (the adapters' `http`
/// backend). So an orchestrator, and the command line, use one type and
/// one code path whichever it is.
///
/// The operations are grouped in the traits it is made of: [`Parents`],
/// [`Handoffs`], [`Waiting`], [`Upkeep`], and, for the service,
/// [`Deliveries`] (its notifiers' cursors) and [`Revocations`] (its
/// revoked sign-ins). Their methods are callable on a `Store` and on a
/// `dyn Registry` without importing the traits.
///
/// # Contract
///
/// Each method does what its documentation says, with the errors it
/// names: an implementation MUST return the same `StoreError` variant and
/// kind that the local registry returns for the same situation (a served
/// registry carries them across the wire), so a caller never branches on
/// where the registry runs. The conformance suite runs its store-level
/// scenarios against both kinds.
#[async_trait]
pub trait Registry: Parents + Handoffs + Waiting + Upkeep + Deliveries + Revocations {
    /// The backend's name (`sqlite`, `sled`, `postgres`, `http`).
    fn backend(&self) -> &'static str;

    /// This handle's own settings: its actor and retry window.
    fn settings(&self) -> &HandleSettings;

    /// This registry, with `settings` for the handle it returns (other
    /// handles keep theirs).
    fn with_settings(&self, settings: HandleSettings) -> Arc<dyn Registry>;

    /// The actor this handle names in the history of each change it makes
    /// (C15). On a served registry the server names the caller's token
    /// instead (C20).
    fn actor(&self) -> &Actor {
        &self.settings().actor
    }

    /// How long a call that finds the backend unreachable is retried
    /// after the first failure (C18, transient faults).
    fn retry_window(&self) -> Duration {
        self.settings().retry_window
    }

    /// The registry's clock reading, as used for `list_row(now)`.
    fn now(&self) -> OffsetDateTime;
}

/// Waves, project sessions and task sessions, the parents a handoff waits
/// for (C10).
#[async_trait]
pub trait Parents: Send + Sync {
    /// Stores a new wave. Creating an equal wave again is a no-op.
    ///
    /// # Errors
    /// `InvalidInput` for a blank name or repo; `Conflict` when a different
    /// wave has the id; `Unavailable` on storage failure.
    async fn create_wave(&self, wave: &Wave) -> StoreResult<()>;

    /// Stores a new project session under an existing wave.
    ///
    /// # Errors
    /// `NotFound` when the wave does not exist; otherwise as
    /// [`create_wave`](Self::create_wave).
    async fn create_project_session(&self, project: &ProjectSession) -> StoreResult<()>;

    /// Stores a new task session under an existing project session, with
    /// its first PR, atomically.
    ///
    /// # Errors
    /// `InvalidInput` when the PR belongs to another task; `NotFound` when the
    /// project does not exist; `Conflict` when the task's wave is not its
    /// project's; otherwise as [`create_wave`](Self::create_wave).
    async fn create_task_session(&self, task: &TaskSession, pr: &TaskPr) -> StoreResult<()>;

    /// Loads a parent (a wave, a project session or a task session); `None`
    /// for an unknown one.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    async fn get_parent(&self, reference: &InteractiveHandoffParent)
        -> StoreResult<Option<Parent>>;

    /// Lists parents (waves, project sessions, task sessions) in id order:
    /// those that pass every filter of `query` (and-ed), after
    /// `query.after` (which need not exist), at most `query.limit`.
    /// `query.wave` gives the wave with its projects and tasks,
    /// `query.project` the project with its tasks, `query.kind` only
    /// parents of that kind. The filters are checked on a scan of the
    /// parents (no index serves them), so a page costs up to what the
    /// store's parents number.
    ///
    /// # Errors
    /// `NotFound` when `query.wave` or `query.project` names no parent;
    /// `Unavailable` on storage failure or an unreadable record.
    async fn list_parents(&self, query: ParentQuery) -> StoreResult<Vec<Parent>>;

    /// Loads a task PR; `None` for an unknown one.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    async fn get_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>>;

    /// Records `process` as the parent's new body. Its generation must be
    /// higher than the current one; recording the current body again is a
    /// replay that writes nothing. Returns the parent as stored.
    ///
    /// # Errors
    /// `NotFound` for an unknown parent; `InvalidInput` for generation 0;
    /// `Conflict` for a generation that does not increase, another provider,
    /// lost provider history or a terminal parent.
    async fn record_body(
        &self,
        reference: &InteractiveHandoffParent,
        process: ChildProcessGeneration,
    ) -> StoreResult<Parent>;
}

/// Handoffs: open, read, act on and claim the wake of each (C1-C7, C9,
/// C12-C15).
#[async_trait]
pub trait Handoffs: Send + Sync {
    /// Opens a handoff for the request's parent, or returns the one the
    /// request is answered by, writing nothing (a replay). The flag is
    /// `true` if and only if a handoff was created.
    ///
    /// - Without a step, the parent's active handoff answers (C3).
    /// - With a step (C12, `request.options.step`), the parent's handoff
    ///   for that step answers, whatever its status, so a replaced body
    ///   that re-runs its step finds the handoff it opened before instead
    ///   of asking a person again.
    /// - With a deadline (C14, `request.options.expires_at`), a created
    ///   handoff expires then unless it was finished; a replay keeps the
    ///   deadline it has
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
    async fn open_interactive_handoff(
        &self,
        request: OpenInteractiveHandoff,
    ) -> StoreResult<(InteractiveHandoff, bool)>;

    /// Loads one handoff; `None` for an unknown id.
    ///
    /// # Errors
    /// `Unavailable` on storage failure or a damaged record.
    async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>>;

    /// Lists the handoffs that pass every filter of `query`, ordered by
    /// creation then id (C4, C17), or newest first: a parent, only active
    /// ones, statuses, a home, created before an instant, the order, and
    /// the page (those after `query.after`, the last id of the previous
    /// page; at most `query.limit`). `ListQuery::default()` lists every
    /// handoff; `ListQuery::from(&parent)` one parent's. Every filter and
    /// the page's start are served by an index.
    ///
    /// # Errors
    /// `NotFound` when `query.after` names no handoff (checked only when
    /// the page is empty, so a full page costs no extra read);
    /// `Unavailable` on storage failure or a damaged record.
    async fn list_interactive_handoffs(
        &self,
        query: ListQuery,
    ) -> StoreResult<Vec<InteractiveHandoff>>;

    /// Records that a person attached. Attaching again returns the record
    /// unchanged.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Conflict` when the handoff is terminal,
    /// of kind `Expired` when its deadline has passed (a due handoff is
    /// expired by this call).
    async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff>;

    /// Finishes a handoff with `outcome` and, on a handoff that asks with
    /// choices or a form, an `answer` (C26: a completion needs one that
    /// fits, a hand-back may carry one, a failure none). Finishing again
    /// with an equal outcome and answer returns the record unchanged; of
    /// racing finishers exactly one succeeds.
    ///
    /// # Errors
    /// `InvalidInput` for a blank outcome text, the expiry outcome
    /// (checked before any read) or an answer that does not fit, naming
    /// the field and the rule (nothing is written); `NotFound` for an
    /// unknown id; `Conflict` when another outcome or answer is already
    /// recorded, of kind `Expired` when the deadline has passed (a due
    /// handoff is expired by this call).
    async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
        answer: Option<&Answer>,
    ) -> StoreResult<InteractiveHandoff>;

    /// Moves the deadline of an active handoff to `until`, which
    /// must be later than now; a handoff without a deadline gets one.
    /// Extending to the deadline it has returns it unchanged.
    ///
    /// # Errors
    /// `InvalidInput` for a deadline not later than now; `NotFound` for an
    /// unknown id; `Conflict` of kind `Expired` when the deadline has
    /// already passed (a due handoff is expired by this call, never
    /// extended), `AlreadyFinished` for another terminal handoff.
    async fn extend_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        until: OffsetDateTime,
    ) -> StoreResult<InteractiveHandoff>;

    /// Claims the wake of a terminal handoff for body `generation`:
    /// `claimed` is true if and only if this generation holds it
    /// afterwards (the first claim, a retry by the holder, or a take-over
    /// by the parent's current body from an older holder). The answer
    /// carries the handoff as the claim left it, read in the claim's own
    /// change, so it names the holder and no other writer can come between
    /// the claim and the record.
    ///
    /// # Errors
    /// `InvalidInput` for generation 0 (checked before any read); `NotFound`
    /// for an unknown id; `Conflict` for a stale generation or a handoff that
    /// is not terminal.
    async fn claim_interactive_handoff_wake(
        &self,
        id: &InteractiveHandoffId,
        generation: u32,
    ) -> StoreResult<ClaimedWake>;

    /// The history of handoff `id`: every change, in order, with who
    /// made it. A handoff stored before the store kept history starts with
    /// its first change since the upgrade.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Unavailable` on storage failure or an
    /// unreadable event.
    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>>;
}

/// Watching the history and waiting for a handoff, without polling (C16).
#[async_trait]
pub trait Waiting: Send + Sync {
    /// Every event that passes `filter` from `from` on, in position order,
    /// then each new one as it commits.
    ///
    /// # Errors
    /// `Unavailable` when the store cannot be read (for [`WatchFrom::Now`],
    /// which reads the last position).
    async fn watch(&self, from: WatchFrom, filter: WatchFilter) -> StoreResult<Watcher>;

    /// Waits until handoff `id` is terminal, at most `timeout` when given,
    /// and returns it. A handoff whose deadline passes meanwhile is
    /// expired then and returned. It sleeps on the backend's change
    /// signal between reads, never busy polling.
    ///
    /// # Errors
    /// `NotFound` for an unknown id (or one pruned while waiting);
    /// `Unavailable` when the store fails or goes away.
    async fn wait(
        &self,
        id: &InteractiveHandoffId,
        timeout: Option<Duration>,
    ) -> StoreResult<Waited>;
}

/// Upkeep of the whole registry: expiring what is due (C14), pruning what
/// is finished, export and import (C17).
#[async_trait]
pub trait Upkeep: Send + Sync {
    /// Expires every handoff that is due, each with its own
    /// compare-and-swap, and returns those this call expired: a handoff a
    /// concurrent sweeper expired, or that was finished in time, is not in
    /// the list, so racing sweepers report each expiry once.
    ///
    /// # Errors
    /// `Unavailable` on storage failure; handoffs expired before it are
    /// expired all the same.
    async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>>;

    /// Prunes the registry: removes every terminal handoff whose wake has
    /// been claimed and that finished before `options.finished_before`,
    /// with its history, in atomic batches of at most `options.batch`
    /// handoffs, until a batch removes nothing. An active handoff and one
    /// whose wake is unclaimed are never removed. A dry run removes nothing
    /// and counts what would be removed now.
    ///
    /// A pruned handoff is gone: `get` returns `None`, `history` is
    /// `NotFound`, and its step is forgotten, so a body that opens at that
    /// step again gets a new handoff (its step key holds until the prune).
    ///
    /// # Errors
    /// `InvalidInput` for a batch of 0 (checked before anything is read);
    /// `Unavailable` on storage failure; the batches before it stay
    /// removed.
    async fn prune(&self, options: PruneOptions) -> StoreResult<PruneCount>;

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
    async fn export(
        &self,
        out: &mut (dyn Write + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary>;

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
    async fn import(
        &self,
        input: &mut (dyn BufRead + Send),
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary>;
}

/// How many handoffs one atomic write of [`Upkeep::prune`] removes at most,
/// unless its [`PruneOptions`] say otherwise: enough that a large prune
/// takes few writes, few enough that one write holds a transaction (and on
/// SQLite, the store's one writer) briefly.
pub const PRUNE_BATCH: usize = 256;

/// What [`Upkeep::prune`] removes, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneOptions {
    /// Only handoffs that finished (`terminal_at`) strictly before this
    /// instant.
    pub finished_before: OffsetDateTime,
    /// Remove nothing; count what would be removed now.
    pub dry_run: bool,
    /// At most this many handoffs per atomic write (at least 1;
    /// [`PRUNE_BATCH`] by default).
    pub batch: usize,
}

impl PruneOptions {
    /// Prune what finished before `finished_before`, in batches of
    /// [`PRUNE_BATCH`].
    pub fn finished_before(finished_before: OffsetDateTime) -> Self {
        Self {
            finished_before,
            dry_run: false,
            batch: PRUNE_BATCH,
        }
    }

    /// These options, counting instead of removing.
    #[must_use]
    pub fn dry_run(self) -> Self {
        Self {
            dry_run: true,
            ..self
        }
    }
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
