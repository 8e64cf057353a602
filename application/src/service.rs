//! The `Store`: the use cases an orchestrator and the command line call.
//!
//! Every write follows one loop: load the record with its version, ask the
//! domain what the transition yields, and store a changed record with a
//! compare-and-swap. A lost swap means another writer got there first; the
//! loop reloads and asks the domain again, which resolves the race as a
//! replay (same request) or a conflict (different request). A replay writes
//! nothing (contract C9). For a handoff's transitions the repository runs
//! one round of that loop in one call (`HandoffRepository::transition`),
//! with the domain's decision passed in; the service retries lost rounds.
//!
//! Every public call runs in a `tracing` span at level INFO named after it,
//! with the backend and the handoff or parent it concerns; a lost race is a
//! DEBUG event inside it, and the call's end an INFO event with its
//! duration (`duration_us`), also inside it.
//!
//! Every port call rides out a transient fault ([`crate::retry`]): one that
//! finds the server unreachable is tried again, for at most the handle's
//! retry window, an INFO event for each retry.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::error::DomainResult;
use lf_handoff_domain::id::{
    InteractiveHandoffId, ProjectSessionId, TaskPrId, TaskSessionId, WaveId,
};
use lf_handoff_domain::interactive_handoff::{
    self as handoff, check_claim_generation, check_person_outcome, decide_open_with, Actor,
    HandoffEvent, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    OpenDecision, OpenOptions, StepKey, Transition,
};
use lf_handoff_domain::parent::{check_task_pr, Parent};
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::{TaskPr, TaskSession};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::ConflictKind;
use time::OffsetDateTime;

use crate::archive::{Archive, ArchiveReader, ArchiveSummary, ArchiveWriter, Progress};
use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::ports::{
    Clock, Decided, Decision, HandoffRepository, IdSource, InsertOutcome, ListQuery, ParentInsert,
    ParentRegistry, ParentWithActive, PruneCount, SwapOutcome, TransitionOutcome, Versioned,
};
use crate::retry::{retry, Retries, DEFAULT_RETRY_WINDOW};

/// How many lost races in a row one call tolerates before giving up.
///
/// A handoff changes at most three times (attach, finish, claim), so a call
/// that keeps losing means something other than this protocol is writing.
pub const MAX_RACE_ATTEMPTS: usize = 32;

/// How many due handoffs one round of [`Store::expire_due`] reads.
const EXPIRE_BATCH: usize = 256;

/// How many handoffs one atomic write of [`Store::prune`] removes at most:
/// enough that a large prune takes few writes, few enough that one write
/// holds a transaction (and on SQLite, the store's one writer) briefly.
pub const PRUNE_BATCH: usize = 256;

/// The handoff registry: the public API an orchestrator links against.
///
/// Cheap to clone; clones share the same storage.
#[derive(Clone)]
pub struct Store {
    handoffs: Arc<dyn HandoffRepository>,
    parents: Arc<dyn ParentRegistry>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdSource>,
    backend: &'static str,
    actor: Actor,
    archive: Option<Arc<dyn Archive>>,
    pub(crate) events: Option<Arc<dyn crate::watch::EventLog>>,
    retry_window: Duration,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .field("actor", &self.actor)
            .field("retry_window", &self.retry_window)
            .field("handoffs", &self.handoffs)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Builds a store from its ports. `backend` names the storage engine in
    /// diagnostics (`sqlite`, `sled`, `postgres`, ...). Its history names
    /// this process as the actor ([`this_process_actor`](crate::this_process_actor))
    /// until [`with_actor`](Self::with_actor) says otherwise.
    pub fn new(
        backend: &'static str,
        handoffs: Arc<dyn HandoffRepository>,
        parents: Arc<dyn ParentRegistry>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
    ) -> Self {
        Self {
            handoffs,
            parents,
            clock,
            ids,
            backend,
            actor: crate::system::this_process_actor(),
            archive: None,
            events: None,
            retry_window: DEFAULT_RETRY_WINDOW,
        }
    }

    /// This store, watched and waited on (C16) through `events`, the
    /// backend's [`EventLog`](crate::watch::EventLog). A store built
    /// without one answers [`watch`](Self::watch) and [`wait`](Self::wait)
    /// with `Unavailable`.
    #[must_use]
    pub fn with_event_log(mut self, events: Arc<dyn crate::watch::EventLog>) -> Self {
        self.events = Some(events);
        self
    }

    /// This store, exporting and importing (C17) through `archive`, the
    /// backend's [`Archive`]. A store built without one answers
    /// [`export_to`](Self::export_to) and [`import_from`](Self::import_from)
    /// with `Unavailable`.
    #[must_use]
    pub fn with_archive(mut self, archive: Arc<dyn Archive>) -> Self {
        self.archive = Some(archive);
        self
    }

    /// This handle, naming `actor` in the history of every change it makes
    /// (C15). Other clones keep their own actor.
    #[must_use]
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// Names `actor` in the history of every change this handle makes.
    pub fn set_actor(&mut self, actor: Actor) {
        self.actor = actor;
    }

    /// This handle, retrying a call that finds the server unreachable for
    /// at most `window` after the first failure (C18, transient faults;
    /// [`DEFAULT_RETRY_WINDOW`](crate::DEFAULT_RETRY_WINDOW) unless set).
    /// `Duration::ZERO` fails at once. Other clones keep their own window.
    #[must_use]
    pub fn with_retry_window(mut self, window: Duration) -> Self {
        self.retry_window = window;
        self
    }

    /// Retries a call that finds the server unreachable for at most
    /// `window` (see [`with_retry_window`](Self::with_retry_window)).
    pub fn set_retry_window(&mut self, window: Duration) {
        self.retry_window = window;
    }

    /// How long this handle retries a call that finds the server
    /// unreachable.
    pub fn retry_window(&self) -> Duration {
        self.retry_window
    }

    /// Runs one port call, again while it finds the server unreachable and
    /// the retry window lasts ([`crate::retry`]). Every port call but
    /// `open`'s insert (which decides again instead) goes through it.
    async fn retry<T, Fut>(&self, what: &str, call: impl FnMut() -> Fut) -> StoreResult<T>
    where
        Fut: Future<Output = StoreResult<T>>,
    {
        retry(self.retry_window, what, call).await
    }

    /// The actor this handle names in the history.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The storage engine's name.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    // ----- export and import (contract C17) -----

    /// Writes the whole registry to `out` as an export (versioned JSON
    /// lines, see [`archive`](crate::archive)) read from one consistent
    /// snapshot, while other handles and processes go on writing. Returns
    /// what it wrote. `out` is written as the records come; buffer it.
    ///
    /// # Errors
    /// `Unavailable` when the backend has no export, the store fails or
    /// `out` cannot be written (what was written before is not a whole
    /// export: it has no end line, and an import refuses it).
    pub async fn export_to<W: std::io::Write + Send>(&self, out: W) -> StoreResult<ArchiveSummary> {
        self.export_with_progress(out, None).await
    }

    /// [`export_to`](Self::export_to), calling `progress` with the counts
    /// so far after every record.
    ///
    /// # Errors
    /// As [`export_to`](Self::export_to).
    pub async fn export_with_progress<W: std::io::Write + Send>(
        &self,
        out: W,
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let archive = self.archive()?;
        let mut writer = ArchiveWriter::new(out, progress)?;
        archive.export(&mut writer).await
    }

    /// Loads an export read from `input` into this store, which must be
    /// empty, atomically, and returns what it loaded. Every line is checked
    /// as it is read; the store is changed only if the whole export is
    /// good.
    ///
    /// # Errors
    /// `InvalidInput` for a damaged line (naming its number), a file cut
    /// short or one written by a newer lf-handoff; `Conflict` of kind
    /// `NotEmpty` for a store that holds anything; `Unavailable` when the
    /// backend has no import, the store fails or `input` cannot be read.
    /// Nothing was imported then.
    pub async fn import_from<R: std::io::BufRead + Send>(
        &self,
        input: R,
    ) -> StoreResult<ArchiveSummary> {
        self.import_with_progress(input, None).await
    }

    /// [`import_from`](Self::import_from), calling `progress` with the
    /// counts so far after every record read.
    ///
    /// # Errors
    /// As [`import_from`](Self::import_from).
    pub async fn import_with_progress<R: std::io::BufRead + Send>(
        &self,
        input: R,
        progress: Option<Progress<'_>>,
    ) -> StoreResult<ArchiveSummary> {
        let archive = self.archive()?;
        let mut reader = ArchiveReader::new(input, progress);
        archive.import(&mut reader).await
    }

    fn archive(&self) -> StoreResult<&Arc<dyn Archive>> {
        self.archive.as_ref().ok_or_else(|| {
            StoreError::unavailable(
                UnavailableKind::Other,
                format!(
                    "this {} store was built without export and import (Store::with_archive)",
                    self.backend
                ),
            )
        })
    }

    /// The store's clock reading, as used for `list_row(now)`.
    pub fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    // ----- parents (contract C10) -----

    /// Stores a new wave. Creating an equal wave again is a no-op.
    ///
    /// # Errors
    /// `InvalidInput` for a blank name or repo; `Conflict` when a different
    /// wave has the id; `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, wave = %wave.id()))]
    pub async fn create_wave(&self, wave: &Wave) -> StoreResult<()> {
        let _call = CallTimer::start();
        self.create_parent(Parent::Wave(wave.clone()), None).await
    }

    /// Stores a new project session under an existing wave.
    ///
    /// # Errors
    /// `NotFound` when the wave does not exist; otherwise as
    /// [`create_wave`](Self::create_wave).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, project = %project.id))]
    pub async fn create_project_session(&self, project: &ProjectSession) -> StoreResult<()> {
        let _call = CallTimer::start();
        self.require(&InteractiveHandoffParent::Wave(project.wave_id.clone()))
            .await?;
        self.create_parent(Parent::Project(project.clone()), None)
            .await
    }

    /// Stores a new task session under an existing project session, with
    /// its first PR, atomically.
    ///
    /// # Errors
    /// `InvalidInput` when the PR belongs to another task; `NotFound` when the
    /// project does not exist; `Conflict` when the task's wave is not its
    /// project's; otherwise as [`create_wave`](Self::create_wave).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, task = %task.id))]
    pub async fn create_task_session(&self, task: &TaskSession, pr: &TaskPr) -> StoreResult<()> {
        let _call = CallTimer::start();
        check_task_pr(task, pr)?;
        let project = self
            .require(&InteractiveHandoffParent::Project(
                task.project_session_id.clone(),
            ))
            .await?;
        if project.value.wave_id() != &task.wave_id {
            return Err(StoreError::conflict(
                ConflictKind::WaveMismatch,
                format!(
                    "task {} names wave {} but its project {} belongs to wave {}",
                    task.id,
                    task.wave_id,
                    task.project_session_id,
                    project.value.wave_id()
                ),
            ));
        }
        self.create_parent(Parent::Task(task.clone()), Some(pr))
            .await
    }

    async fn create_parent(&self, parent: Parent, first_pr: Option<&TaskPr>) -> StoreResult<()> {
        parent.validate_new()?;
        let reference = parent.reference();
        match self
            .retry("storing the parent", || {
                self.parents.insert_parent(&parent, first_pr)
            })
            .await?
        {
            ParentInsert::Inserted => Ok(()),
            ParentInsert::AlreadyExists => {
                let stored = self.require(&reference).await?;
                let same_pr = match first_pr {
                    None => true,
                    Some(pr) => {
                        self.retry("loading the task PR", || self.parents.load_task_pr(&pr.id))
                            .await?
                            .as_ref()
                            == Some(pr)
                    }
                };
                if stored.value == parent && same_pr {
                    Ok(())
                } else {
                    Err(StoreError::conflict(
                        ConflictKind::AlreadyExists,
                        format!("{reference} already exists with different fields"),
                    ))
                }
            }
        }
    }

    /// Loads any parent.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %reference))]
    pub async fn get_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Parent>> {
        let _call = CallTimer::start();
        Ok(self
            .retry("loading the parent", || self.parents.load_parent(reference))
            .await?
            .map(|v| v.value))
    }

    /// Loads a wave.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, wave = %id))]
    pub async fn get_wave(&self, id: &WaveId) -> StoreResult<Option<Wave>> {
        let _call = CallTimer::start();
        match self
            .get_parent(&InteractiveHandoffParent::Wave(id.clone()))
            .await?
        {
            Some(Parent::Wave(wave)) => Ok(Some(wave)),
            _ => Ok(None),
        }
    }

    /// Loads a project session.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, project = %id))]
    pub async fn get_project_session(
        &self,
        id: &ProjectSessionId,
    ) -> StoreResult<Option<ProjectSession>> {
        let _call = CallTimer::start();
        match self
            .get_parent(&InteractiveHandoffParent::Project(id.clone()))
            .await?
        {
            Some(Parent::Project(project)) => Ok(Some(project)),
            _ => Ok(None),
        }
    }

    /// Loads a task session.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, task = %id))]
    pub async fn get_task_session(&self, id: &TaskSessionId) -> StoreResult<Option<TaskSession>> {
        let _call = CallTimer::start();
        match self
            .get_parent(&InteractiveHandoffParent::Task(id.clone()))
            .await?
        {
            Some(Parent::Task(task)) => Ok(Some(task)),
            _ => Ok(None),
        }
    }

    /// Loads a task PR.
    ///
    /// # Errors
    /// `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, pr = %id))]
    pub async fn get_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        let _call = CallTimer::start();
        self.retry("loading the task PR", || self.parents.load_task_pr(id))
            .await
    }

    /// Records `process` as the parent's new body. Its generation must be
    /// higher than the current one; recording the current body again is a
    /// replay that writes nothing. Returns the parent as stored.
    ///
    /// # Errors
    /// `NotFound` for an unknown parent; `InvalidInput` for generation 0;
    /// `Conflict` for a generation that does not increase, another provider,
    /// lost provider history or a terminal parent.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %reference, generation = process.generation))]
    pub async fn record_body(
        &self,
        reference: &InteractiveHandoffParent,
        process: ChildProcessGeneration,
    ) -> StoreResult<Parent> {
        let _call = CallTimer::start();
        for _ in 0..MAX_RACE_ATTEMPTS {
            let current = self.require(reference).await?;
            if current.value.is_current_body(&process) {
                return Ok(current.value);
            }
            let next = current
                .value
                .record_body(process.clone(), self.clock.now())?;
            match self
                .retry("storing the parent", || {
                    self.parents.swap_parent(current.version, &next)
                })
                .await?
            {
                SwapOutcome::Swapped => return Ok(next),
                SwapOutcome::Lost => lost_a_race("the parent"),
            }
        }
        Err(lost_too_often(reference))
    }

    async fn require(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Versioned<Parent>> {
        self.retry("loading the parent", || self.parents.load_parent(reference))
            .await?
            .ok_or_else(|| not_found(reference))
    }

    // ----- handoffs (contracts C1-C7, C9) -----

    /// Opens a handoff for the request's parent, or returns the parent's
    /// active one. The flag is `true` if and only if a handoff was created.
    ///
    /// # Errors
    /// `InvalidInput` for a malformed request (checked before any read);
    /// `NotFound` for an unknown parent; `Conflict` naming the parent rule
    /// broken (stale generation, provider, history, worktree, terminal).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %request.parent))]
    pub async fn open_interactive_handoff(
        &self,
        request: handoff::OpenInteractiveHandoff,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let _call = CallTimer::start();
        self.open(request, &OpenOptions::default()).await
    }

    /// Opens a handoff for the request's parent at the body's `step` (C12),
    /// or returns the parent's handoff for that step, whatever its status,
    /// writing nothing. A replaced body that re-runs its step so finds the
    /// handoff it opened before instead of asking a person again. The flag
    /// is `true` if and only if a handoff was created.
    ///
    /// The step travels beside the request, not in it, so code written
    /// against the first version (which builds requests field by field)
    /// compiles unchanged.
    ///
    /// # Errors
    /// As [`open_interactive_handoff`](Self::open_interactive_handoff), and
    /// `Conflict` of kind `ParentBusy` naming the parent's active handoff
    /// when it is for another step (or none).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %request.parent, step = %step))]
    pub async fn open_interactive_handoff_at_step(
        &self,
        request: handoff::OpenInteractiveHandoff,
        step: &StepKey,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let _call = CallTimer::start();
        let options = OpenOptions {
            step: Some(step.clone()),
            expires_at: None,
        };
        self.open(request, &options).await
    }

    /// Opens a handoff with [`OpenOptions`]: a step (as
    /// [`open_interactive_handoff_at_step`](Self::open_interactive_handoff_at_step))
    /// and a deadline (C14), after which the handoff expires unless it was
    /// finished. A replay returns the existing handoff with its own
    /// deadline; [`extend_interactive_handoff`](Self::extend_interactive_handoff)
    /// moves it.
    ///
    /// # Errors
    /// As [`open_interactive_handoff_at_step`](Self::open_interactive_handoff_at_step),
    /// and `InvalidInput` for a deadline that is not later than now.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, parent = %request.parent))]
    pub async fn open_interactive_handoff_with(
        &self,
        request: handoff::OpenInteractiveHandoff,
        options: &OpenOptions,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let _call = CallTimer::start();
        self.open(request, options).await
    }

    async fn open(
        &self,
        request: handoff::OpenInteractiveHandoff,
        options: &OpenOptions,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        request.validate()?;
        // The handoffs this call tried to insert. An insert whose reply was
        // lost may have committed: the next round then finds it, and the
        // domain replays it (C3, C12), as created by this call.
        let mut tried = Vec::new();
        let mut retries = Retries::new(self.retry_window);
        let mut lost = 0;
        while lost < MAX_RACE_ATTEMPTS {
            let ParentWithActive {
                parent,
                active,
                at_step,
            } = self
                .retry("loading the parent", || {
                    self.parents
                        .load_parent_with_active(&request.parent, options.step.as_ref())
                })
                .await?
                .ok_or_else(|| not_found(&request.parent))?;
            let decision = decide_open_with(
                &request,
                options,
                &parent.value,
                active.as_ref().map(|versioned| &versioned.value),
                at_step.as_ref().map(|versioned| &versioned.value),
                self.ids.new_handoff_id(),
                self.clock.now(),
            )?;
            match decision {
                OpenDecision::Replay(existing) => {
                    let created = tried.contains(&existing.id);
                    return Ok((existing, created));
                }
                OpenDecision::Create(created) => {
                    tried.push(created.id.clone());
                    match self
                        .handoffs
                        .insert(&created, parent.version, &self.actor)
                        .await
                    {
                        Ok(InsertOutcome::Inserted) => return Ok((created, true)),
                        // Another writer got there first: decide again on
                        // what it stored.
                        Ok(
                            InsertOutcome::ParentBusy
                            | InsertOutcome::ParentChanged
                            | InsertOutcome::StepTaken,
                        ) => {
                            lost += 1;
                            lost_a_race("the parent's open");
                        }
                        // Not the same insert again (its id may be stored
                        // by now): the next round reads what is stored.
                        Err(error) => {
                            retries.after_failure("storing the handoff", error).await?;
                        }
                    }
                }
            }
        }
        Err(lost_too_often(&request.parent))
    }

    /// Loads one handoff; `None` for an unknown id.
    ///
    /// # Errors
    /// `Unavailable` on storage failure or a damaged record.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn get_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<InteractiveHandoff>> {
        let _call = CallTimer::start();
        Ok(self
            .retry("loading the handoff", || self.handoffs.load(id))
            .await?
            .map(|versioned| versioned.value))
    }

    /// Lists every handoff, or one parent's, ordered by creation.
    ///
    /// # Errors
    /// `Unavailable` on storage failure or a damaged record.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn list_interactive_handoffs(
        &self,
        parent: Option<&InteractiveHandoffParent>,
    ) -> StoreResult<Vec<InteractiveHandoff>> {
        let _call = CallTimer::start();
        let query = ListQuery {
            parent: parent.cloned(),
            ..ListQuery::default()
        };
        self.retry("listing handoffs", || self.handoffs.list(&query))
            .await
    }

    /// Lists the handoffs that pass every filter of `query` (a parent, only
    /// active ones, statuses, a home, created before an instant), ordered
    /// by creation then id, one page at a time: those after `query.after`
    /// (the last id of the previous page), at most `query.limit` (C4,
    /// C17). Every filter and the page's start are served by an index.
    ///
    /// # Errors
    /// `NotFound` when `query.after` names no handoff (checked only when
    /// the page is empty, so a full page costs no extra read);
    /// `Unavailable` on storage failure or a damaged record.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn query_interactive_handoffs(
        &self,
        query: &ListQuery,
    ) -> StoreResult<Vec<InteractiveHandoff>> {
        let _call = CallTimer::start();
        let page = self
            .retry("listing handoffs", || self.handoffs.list(query))
            .await?;
        if let (true, Some(after)) = (page.is_empty(), &query.after) {
            if self
                .retry("loading the handoff", || self.handoffs.load(after))
                .await?
                .is_none()
            {
                return Err(StoreError::NotFound(format!(
                    "handoff {after}, the page's start, does not exist (it may have been \
                     pruned); list from the start again"
                )));
            }
        }
        Ok(page)
    }

    /// Prunes the registry (C17): removes every terminal handoff whose wake
    /// has been claimed and that finished (`terminal_at`) before
    /// `finished_before`, with its history, in atomic batches of at most
    /// [`PRUNE_BATCH`] handoffs, until a batch removes nothing. An active
    /// handoff and one whose wake is unclaimed are never removed. With
    /// `dry_run`, removes nothing and counts what would be removed now.
    ///
    /// A pruned handoff is gone: `get` returns `None`, `history` is
    /// `NotFound`, and its step is forgotten, so a body that opens at that
    /// step again gets a new handoff (C12 holds until the prune).
    ///
    /// # Errors
    /// `Unavailable` on storage failure; the batches before it stay
    /// removed.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, dry_run = dry_run))]
    pub async fn prune(
        &self,
        finished_before: OffsetDateTime,
        dry_run: bool,
    ) -> StoreResult<PruneCount> {
        let _call = CallTimer::start();
        if dry_run {
            return self
                .retry("counting prunable handoffs", || {
                    self.handoffs.count_prunable(finished_before)
                })
                .await;
        }
        self.prune_in_batches(finished_before, PRUNE_BATCH).await
    }

    /// [`prune`](Self::prune) (not a dry run) in batches of at most `batch`
    /// handoffs each.
    ///
    /// # Errors
    /// `InvalidInput` for a batch of 0 (checked before anything is read);
    /// otherwise as [`prune`](Self::prune).
    pub async fn prune_in_batches(
        &self,
        finished_before: OffsetDateTime,
        batch: usize,
    ) -> StoreResult<PruneCount> {
        if batch == 0 {
            return Err(StoreError::InvalidInput(
                "a prune batch must remove at least one handoff".into(),
            ));
        }
        let mut removed = PruneCount::default();
        loop {
            let count = self
                .retry("pruning", || {
                    self.handoffs.prune_batch(finished_before, batch)
                })
                .await?;
            if count.handoffs == 0 {
                return Ok(removed);
            }
            removed += count;
        }
    }

    /// Records that a person attached. Attaching again returns the record
    /// unchanged.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Conflict` when the handoff is terminal,
    /// of kind `Expired` when its deadline has passed (a due handoff is
    /// expired by this call, C14).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn attach_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(id, self.expiring(handoff::attach))
            .await
            .map(|(handoff, _)| handoff)
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
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, status = %outcome.status()))]
    pub async fn finish_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        check_person_outcome(outcome)?;
        let outcome = outcome.clone();
        self.apply(
            id,
            self.expiring(move |current, now| handoff::finish(current, &outcome, now)),
        )
        .await
        .map(|(handoff, _)| handoff)
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
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn extend_interactive_handoff(
        &self,
        id: &InteractiveHandoffId,
        until: OffsetDateTime,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(
            id,
            self.expiring(move |current, now| handoff::extend(current, until, now)),
        )
        .await
        .map(|(handoff, _)| handoff)
    }

    /// Expires handoff `id` if it is due (C14) and returns it as it then
    /// is, expired or not: what a waiter calls when the deadline passes.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Unavailable` on storage failure.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn expire_if_due(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<InteractiveHandoff> {
        let _call = CallTimer::start();
        self.apply(id, self.expiry())
            .await
            .map(|(handoff, _)| handoff)
    }

    /// Expires every handoff that is due (C14), each with its own
    /// compare-and-swap, and returns those this call expired: a handoff a
    /// concurrent sweeper expired, or that was finished in time, is not in
    /// the list, so racing sweepers report each expiry once.
    ///
    /// # Errors
    /// `Unavailable` on storage failure; handoffs expired before it are
    /// expired all the same.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend))]
    pub async fn expire_due(&self) -> StoreResult<Vec<InteractiveHandoff>> {
        let _call = CallTimer::start();
        let mut expired = Vec::new();
        let mut tried = std::collections::HashSet::new();
        loop {
            let due = self
                .retry("reading due handoffs", || {
                    self.handoffs.due(self.clock.now(), EXPIRE_BATCH)
                })
                .await?;
            let fresh: Vec<_> = due
                .into_iter()
                .filter(|id| tried.insert(id.clone()))
                .collect();
            if fresh.is_empty() {
                return Ok(expired);
            }
            for id in fresh {
                match self.apply(&id, self.expiry()).await {
                    Ok((handoff, true)) => expired.push(handoff),
                    // Finished in time, or expired by another sweeper, or
                    // removed meanwhile.
                    Ok((_, false)) | Err(StoreError::NotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }

    /// The history of handoff `id` (C15): every change, in order, with who
    /// made it. A handoff stored by a release without history starts with
    /// its first change since the upgrade.
    ///
    /// # Errors
    /// `NotFound` for an unknown id; `Unavailable` on storage failure or an
    /// unreadable event.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id))]
    pub async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        let _call = CallTimer::start();
        let events = self
            .retry("reading the history", || self.handoffs.history(id))
            .await?;
        if events.is_empty()
            && self
                .retry("loading the handoff", || self.handoffs.load(id))
                .await?
                .is_none()
        {
            return Err(StoreError::NotFound(format!("handoff {id} does not exist")));
        }
        Ok(events)
    }

    /// The decision of a transition that a due handoff refuses (C14): when
    /// `transition` refuses a handoff that is due, its expiry is stored in
    /// the same round and the refusal is the caller's answer.
    fn expiring(
        &self,
        transition: impl Fn(&InteractiveHandoff, OffsetDateTime) -> DomainResult<Transition>
            + Send
            + Sync
            + 'static,
    ) -> Decision {
        let clock = self.clock.clone();
        Arc::new(move |current| {
            let now = clock.now();
            match transition(current, now) {
                Err(refusal) if current.is_due(now) => Ok(Decided {
                    transition: handoff::expire_if_due(current, now),
                    answer: Err(refusal),
                }),
                decided => Ok(decided?.into()),
            }
        })
    }

    /// The decision of a sweep: expire the handoff if it is due; the answer
    /// says whether this decision expired it.
    fn expiry(&self) -> Decision {
        let clock = self.clock.clone();
        Arc::new(move |current| {
            let transition = handoff::expire_if_due(current, clock.now());
            let expired = transition.is_changed();
            Ok(Decided {
                transition,
                answer: Ok(expired),
            })
        })
    }

    /// Claims the wake of a terminal handoff for body `generation`: `true`
    /// if and only if this generation holds it afterwards (the first claim,
    /// a retry by the holder, or a take-over by the parent's current body
    /// from an older holder, C13).
    ///
    /// # Errors
    /// `InvalidInput` for generation 0 (checked before any read); `NotFound`
    /// for an unknown id; `Conflict` for a stale generation or a handoff that
    /// is not terminal.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, generation = parent_generation))]
    pub async fn claim_interactive_handoff_wake(
        &self,
        id: &InteractiveHandoffId,
        parent_generation: u32,
    ) -> StoreResult<bool> {
        let _call = CallTimer::start();
        self.claim_interactive_handoff_wake_with_record(id, parent_generation)
            .await
            .map(|(claimed, _)| claimed)
    }

    /// [`claim_interactive_handoff_wake`](Self::claim_interactive_handoff_wake),
    /// also returning the record after the claim.
    ///
    /// # Errors
    /// As `claim_interactive_handoff_wake`.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend, handoff = %id, generation = parent_generation))]
    pub async fn claim_interactive_handoff_wake_with_record(
        &self,
        id: &InteractiveHandoffId,
        parent_generation: u32,
    ) -> StoreResult<(bool, InteractiveHandoff)> {
        let _call = CallTimer::start();
        check_claim_generation(parent_generation)?;
        let (handoff, claimed) = self.claim_once(id, parent_generation, None).await?;
        let older_holder = handoff
            .wake_claimed_by_generation
            .is_some_and(|holder| holder < parent_generation);
        if claimed || !older_holder {
            return Ok((claimed, handoff));
        }
        // An older generation holds the wake: this one takes it over if it
        // is the parent's current body (C13). The parent read is not part
        // of the compare-and-swap: a body replaced between this read and
        // the swap may still take the wake over, and its successor takes it
        // over in turn when it claims. One generation holds it at a time.
        let parent = self
            .retry("loading the parent", || {
                self.parents.load_parent(&handoff.parent)
            })
            .await?
            .ok_or_else(|| not_found(&handoff.parent))?;
        if parent.value.body_generation() != parent_generation {
            return Ok((false, handoff));
        }
        let (handoff, claimed) = self
            .claim_once(id, parent_generation, Some(parent_generation))
            .await?;
        Ok((claimed, handoff))
    }

    /// One wake claim through [`apply`](Self::apply), knowing the parent's
    /// current generation or not.
    async fn claim_once(
        &self,
        id: &InteractiveHandoffId,
        generation: u32,
        parent_generation: Option<u32>,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        let clock = self.clock.clone();
        self.apply(
            id,
            Arc::new(move |current| {
                Ok(handoff::claim_wake_for_parent(
                    current,
                    generation,
                    parent_generation,
                    clock.now(),
                )?
                .into())
            }),
        )
        .await
    }

    /// The load / decide / compare-and-swap loop shared by every transition
    /// on an existing handoff: one round per repository call, retried while
    /// another writer wins the compare-and-swap.
    async fn apply(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        for _ in 0..MAX_RACE_ATTEMPTS {
            match self
                .retry("changing the handoff", || {
                    self.handoffs.transition(id, decide.clone(), &self.actor)
                })
                .await?
            {
                None => return Err(StoreError::NotFound(format!("handoff {id} does not exist"))),
                Some(TransitionOutcome::Applied { handoff, answer }) => {
                    return Ok((*handoff, answer?))
                }
                Some(TransitionOutcome::Lost) => lost_a_race("the handoff"),
            }
        }
        Err(lost_too_often(id))
    }
}

/// Logs, when a call ends (and only then), how long it took, inside the
/// call's span. A span's own close event cannot say it: the engine may hold
/// the span a little longer (sqlx's SQLite worker keeps it with each
/// statement it runs), so the close can come late, or never before the
/// process exits.
struct CallTimer(std::time::Instant);

impl CallTimer {
    fn start() -> Self {
        Self(std::time::Instant::now())
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        let micros = u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX);
        tracing::info!(
            duration_us = micros,
            "done in {:.3} ms",
            micros as f64 / 1000.0
        );
    }
}

/// Notes a lost compare-and-swap race (another writer changed `what`
/// first) before the loop decides again on the new record.
fn lost_a_race(what: &str) {
    tracing::debug!("another writer changed {what} first; deciding again on what it stored");
}

fn not_found(reference: &InteractiveHandoffParent) -> StoreError {
    StoreError::NotFound(format!("parent {reference} does not exist"))
}

fn lost_too_often(what: &dyn fmt::Display) -> StoreError {
    StoreError::unavailable(
        UnavailableKind::Contended,
        format!(
            "gave up on {what} after losing {MAX_RACE_ATTEMPTS} compare-and-swap races in a row; \
         something outside lf-handoff may be writing to the store"
        ),
    )
}
