//! Transient faults (contract C18, "Transient faults"): a write whose
//! connection dies after the commit but before the reply is retried by the
//! `Store`, and the retry returns the committed result, with exactly one
//! event in the history for it.
//!
//! [`LostReplies`] wraps a real backend's ports: once armed for a kind of
//! write, the next such write is performed for real and then reported as
//! `Unavailable` of kind `Unreachable`, as a server whose connection died
//! at that moment would. The scenarios run on every backend. It can also
//! take the store down for a while ([`LostReplies::take_down`]): every call
//! then fails before it reaches the store, as a server that went away
//! (the service's tests use it).

use crate::fixtures::{stored_project, stored_task, stored_wave};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_adapters::ports::{
    Decision, HandoffRepository, InsertOutcome, ListQuery, ParentInsert, ParentQuery,
    ParentRegistry, ParentWithActive, PruneCount, SwapOutcome, TransitionOutcome, Versioned,
};
use lf_handoff_adapters::{
    open_ports, GenerateId as _, Store, StoreError, StorePorts, StoreResult, UnavailableKind,
};
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::id::{InteractiveHandoffId, TaskPrId};
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffEvent, InteractiveHandoff, InteractiveHandoffParent, InteractiveHandoffStatus,
    OpenOptions, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskPr;
use tempfile::TempDir;
use time::OffsetDateTime;

use crate::fixtures::{
    body, fresh_project, fresh_task, location, new_wave, outcome, task_request, wave_request,
};
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! faults_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [faults];
            AnyBackend: [
                transient_a_write_whose_reply_was_lost_returns_its_committed_result,
                transient_without_a_retry_window_a_lost_reply_is_unreachable,
            ],
        );
    };
}

/// The kind of write whose reply [`LostReplies`] loses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `HandoffRepository::insert` (open).
    Insert,
    /// `HandoffRepository::transition` (attach, finish, extend, claim).
    Transition,
    /// `ParentRegistry::insert_parent` (create a parent).
    InsertParent,
    /// `ParentRegistry::swap_parent` (record a body).
    SwapParent,
}

/// A backend's ports that lose the reply of one armed write: the write is
/// performed, then `Unreachable` is returned instead of its result.
#[derive(Debug)]
pub struct LostReplies {
    handoffs: Arc<dyn HandoffRepository>,
    parents: Arc<dyn ParentRegistry>,
    armed: Mutex<Option<Fault>>,
    lost: AtomicUsize,
    down: Mutex<Option<UnavailableKind>>,
}

impl LostReplies {
    /// Wraps `handoffs` and `parents`, nothing armed.
    pub fn new(handoffs: Arc<dyn HandoffRepository>, parents: Arc<dyn ParentRegistry>) -> Self {
        Self {
            handoffs,
            parents,
            armed: Mutex::new(None),
            lost: AtomicUsize::new(0),
            down: Mutex::new(None),
        }
    }

    /// From now on every call fails with `Unavailable` of `kind` before it
    /// reaches the store, until `take_down(None)` brings it back.
    pub fn take_down(&self, kind: Option<UnavailableKind>) {
        *self.down.lock().unwrap_or_else(PoisonError::into_inner) = kind;
    }

    /// The outage's error while the store is down.
    fn reachable(&self) -> StoreResult<()> {
        match *self.down.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(kind) => Err(StoreError::unavailable(
                kind,
                format!("the store is down ({kind}, injected)"),
            )),
            None => Ok(()),
        }
    }

    /// Loses the reply of the next write of kind `fault` that changes the
    /// store.
    pub fn arm(&self, fault: Fault) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(fault);
    }

    /// Whether a fault is armed and has not fired yet.
    pub fn is_armed(&self) -> bool {
        self.armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// How many replies were lost so far.
    pub fn lost(&self) -> usize {
        self.lost.load(Ordering::SeqCst)
    }

    /// After a write of kind `fault` committed: its reply, or the lost
    /// connection's error when that fault was armed (it fires once).
    fn reply<T>(&self, fault: Fault, committed: T) -> StoreResult<T> {
        let mut armed = self.armed.lock().unwrap_or_else(PoisonError::into_inner);
        if *armed != Some(fault) {
            return Ok(committed);
        }
        *armed = None;
        self.lost.fetch_add(1, Ordering::SeqCst);
        Err(StoreError::unavailable(
            UnavailableKind::Unreachable,
            format!("the connection died after the {fault:?} committed (injected fault)"),
        ))
    }
}

#[async_trait]
impl HandoffRepository for LostReplies {
    async fn load(
        &self,
        id: &InteractiveHandoffId,
    ) -> StoreResult<Option<Versioned<InteractiveHandoff>>> {
        self.reachable()?;
        self.handoffs.load(id).await
    }

    async fn list(&self, query: &ListQuery) -> StoreResult<Vec<InteractiveHandoff>> {
        self.reachable()?;
        self.handoffs.list(query).await
    }

    async fn insert(
        &self,
        handoff: &InteractiveHandoff,
        parent_version: u64,
        actor: &Actor,
    ) -> StoreResult<InsertOutcome> {
        self.reachable()?;
        match self.handoffs.insert(handoff, parent_version, actor).await? {
            InsertOutcome::Inserted => self.reply(Fault::Insert, InsertOutcome::Inserted),
            other => Ok(other),
        }
    }

    async fn transition(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
        actor: &Actor,
    ) -> StoreResult<Option<TransitionOutcome>> {
        self.reachable()?;
        match self.handoffs.transition(id, decide, actor).await? {
            Some(applied @ TransitionOutcome::Applied { .. }) => {
                self.reply(Fault::Transition, Some(applied))
            }
            other => Ok(other),
        }
    }

    async fn due(
        &self,
        now: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<Vec<InteractiveHandoffId>> {
        self.reachable()?;
        self.handoffs.due(now, limit).await
    }

    async fn history(&self, id: &InteractiveHandoffId) -> StoreResult<Vec<HandoffEvent>> {
        self.reachable()?;
        self.handoffs.history(id).await
    }

    async fn count_prunable(&self, finished_before: OffsetDateTime) -> StoreResult<PruneCount> {
        self.reachable()?;
        self.handoffs.count_prunable(finished_before).await
    }

    async fn prune_batch(
        &self,
        finished_before: OffsetDateTime,
        limit: usize,
    ) -> StoreResult<PruneCount> {
        self.reachable()?;
        self.handoffs.prune_batch(finished_before, limit).await
    }
}

#[async_trait]
impl ParentRegistry for LostReplies {
    async fn insert_parent<'a>(
        &self,
        parent: &Parent,
        first_pr: Option<&'a TaskPr>,
    ) -> StoreResult<ParentInsert> {
        self.reachable()?;
        match self.parents.insert_parent(parent, first_pr).await? {
            ParentInsert::Inserted => self.reply(Fault::InsertParent, ParentInsert::Inserted),
            other => Ok(other),
        }
    }

    async fn load_parent(
        &self,
        reference: &InteractiveHandoffParent,
    ) -> StoreResult<Option<Versioned<Parent>>> {
        self.reachable()?;
        self.parents.load_parent(reference).await
    }

    async fn load_parent_with_active<'a>(
        &self,
        reference: &InteractiveHandoffParent,
        step: Option<&'a StepKey>,
    ) -> StoreResult<Option<ParentWithActive>> {
        self.reachable()?;
        self.parents.load_parent_with_active(reference, step).await
    }

    async fn list_parents(&self, query: &ParentQuery) -> StoreResult<Vec<Parent>> {
        self.reachable()?;
        self.parents.list_parents(query).await
    }

    async fn swap_parent(&self, expected: u64, parent: &Parent) -> StoreResult<SwapOutcome> {
        self.reachable()?;
        match self.parents.swap_parent(expected, parent).await? {
            SwapOutcome::Swapped => self.reply(Fault::SwapParent, SwapOutcome::Swapped),
            other => Ok(other),
        }
    }

    async fn load_task_pr(&self, id: &TaskPrId) -> StoreResult<Option<TaskPr>> {
        self.reachable()?;
        self.parents.load_task_pr(id).await
    }
}

/// A store in a new temporary directory (or the test's schema) whose ports
/// lose the replies [`LostReplies::arm`] says.
pub async fn store_losing_replies(backend: &dyn Backend) -> (TempDir, Store, Arc<LostReplies>) {
    let dir = tempfile::tempdir().unwrap();
    let ports = open_ports(&backend.config(location(dir.path())))
        .await
        .unwrap();
    let faulty = Arc::new(LostReplies::new(
        ports.handoffs.clone(),
        ports.parents.clone(),
    ));
    let store = Store::new(StorePorts {
        handoffs: faulty.clone(),
        parents: faulty.clone(),
        ..ports
    });
    (dir, store, faulty)
}

/// Runs `write` with the reply of its `fault` lost, and checks that the
/// fault fired (the write committed once) and the store retried past it.
async fn losing<T>(
    faulty: &LostReplies,
    fault: Fault,
    write: impl std::future::Future<Output = StoreResult<T>>,
) -> T {
    let lost = faulty.lost();
    faulty.arm(fault);
    let result = write
        .await
        .unwrap_or_else(|e| panic!("a write whose {fault:?} reply was lost failed: {e}"));
    assert!(!faulty.is_armed(), "the {fault:?} fault did not fire");
    assert_eq!(faulty.lost(), lost + 1);
    result
}

/// The events of `id` in the store.
async fn events(store: &Store, id: &InteractiveHandoffId) -> Vec<HandoffEvent> {
    store.history(id).await.unwrap()
}

/// Every kind of write, its reply lost once after it committed: the store
/// retries, and the retry finds the committed result and returns it (a
/// created parent, a recorded body, an open reported as created, an
/// attach, extend, finish and claim), with one event per change.
pub async fn transient_a_write_whose_reply_was_lost_returns_its_committed_result(
    backend: &dyn Backend,
) {
    let (dir, store, faulty) = store_losing_replies(backend).await;

    // Parents: a retried create finds the equal parent stored.
    let wave = losing(&faulty, Fault::InsertParent, async {
        let wave = lf_handoff_domain::wave::Wave::new(
            lf_handoff_domain::id::WaveId::new(),
            "product".into(),
            dir.path().display().to_string(),
        );
        store.create_wave(&wave).await.map(|()| wave)
    })
    .await;
    assert_eq!(stored_wave(&store, wave.id()).await, Some(wave.clone()));
    let project = fresh_project(wave.id());
    losing(
        &faulty,
        Fault::InsertParent,
        store.create_project_session(&project),
    )
    .await;
    assert_eq!(
        stored_project(&store, &project.id).await,
        Some(project.clone())
    );
    let (task, pr) = fresh_task(&project, dir.path());
    losing(
        &faulty,
        Fault::InsertParent,
        store.create_task_session(&task, &pr),
    )
    .await;
    assert_eq!(stored_task(&store, &task.id).await, Some(task.clone()));
    assert_eq!(store.get_task_pr(&pr.id).await.unwrap(), Some(pr));

    // A recorded body: the retry finds it current and returns the parent.
    let reference = InteractiveHandoffParent::Task(task.id.clone());
    let process: ChildProcessGeneration = body(5, Some("task-thread"));
    let recorded = losing(
        &faulty,
        Fault::SwapParent,
        store.record_body(&reference, process),
    )
    .await;
    assert_eq!(recorded.body_generation(), 5);
    assert_eq!(
        store.get_parent(&reference).await.unwrap(),
        Some(recorded.clone())
    );
    let Parent::Task(task) = recorded else {
        panic!("a task's parent record is a task: {recorded:?}")
    };

    // Open: the retry finds the handoff this call stored, as created.
    let (opened, created) = losing(
        &faulty,
        Fault::Insert,
        store.open_interactive_handoff(task_request(&task)),
    )
    .await;
    assert!(
        created,
        "the open that stored the handoff reports it created"
    );
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(opened.clone())
    );
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::from(&reference))
            .await
            .unwrap(),
        vec![opened.clone()],
        "one handoff, not two"
    );
    assert_eq!(events(&store, &opened.id).await.len(), 1);

    // Transitions: the retry is the domain's replay of what committed.
    let attached = losing(
        &faulty,
        Fault::Transition,
        store.attach_interactive_handoff(&opened.id),
    )
    .await;
    assert_eq!(attached.status, InteractiveHandoffStatus::Attached);
    assert_eq!(events(&store, &opened.id).await.len(), 2);

    let until = OffsetDateTime::now_utc() + Duration::from_secs(3600);
    let extended = losing(
        &faulty,
        Fault::Transition,
        store.extend_interactive_handoff(&opened.id, until),
    )
    .await;
    assert!(extended.expires_at.is_some());
    assert_eq!(extended.attached_at, attached.attached_at);
    assert_eq!(events(&store, &opened.id).await.len(), 3);

    let finished = losing(
        &faulty,
        Fault::Transition,
        store.finish_interactive_handoff(&opened.id, &outcome(0), None),
    )
    .await;
    assert_eq!(finished.status, InteractiveHandoffStatus::Completed);
    assert_eq!(finished.outcome, Some(outcome(0)));
    assert_eq!(events(&store, &opened.id).await.len(), 4);

    let claimed = losing(
        &faulty,
        Fault::Transition,
        store.claim_interactive_handoff_wake(&opened.id, 5),
    )
    .await;
    assert!(
        claimed.claimed,
        "the generation whose claim committed holds the wake"
    );
    let after_claim = store.get_interactive_handoff(&opened.id).await.unwrap();
    assert_eq!(
        after_claim.and_then(|h| h.wake_claimed_by_generation),
        Some(5)
    );
    assert_eq!(events(&store, &opened.id).await.len(), 5);

    // Open at a step (C12): the same, and the step's handoff is that one.
    let step = StepKey::parse("oauth-login@turn-3").unwrap();
    let options = OpenOptions {
        step: Some(step.clone()),
        expires_at: None,
        ..OpenOptions::default()
    };
    let (at_step, created) = losing(
        &faulty,
        Fault::Insert,
        store.open_interactive_handoff(task_request(&task).with_options(options.clone())),
    )
    .await;
    assert!(created);
    let (again, created_again) = store
        .open_interactive_handoff(
            task_request(&task).with_options(OpenOptions::at_step(step.clone())),
        )
        .await
        .unwrap();
    assert!(!created_again);
    assert_eq!(again, at_step);
    assert_eq!(events(&store, &at_step.id).await.len(), 1);
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::from(&reference))
            .await
            .unwrap()
            .len(),
        2
    );
}

/// The same lost reply with a retry window of zero fails the call with
/// `Unavailable` of kind `Unreachable`, although the write committed: what
/// the retry window rides out is real.
pub async fn transient_without_a_retry_window_a_lost_reply_is_unreachable(backend: &dyn Backend) {
    let (dir, store, faulty) = store_losing_replies(backend).await;
    let store = store.with_retry_window(Duration::ZERO);
    assert_eq!(store.retry_window(), Duration::ZERO);
    let wave = new_wave(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    faulty.arm(Fault::Transition);
    let error = store
        .attach_interactive_handoff(&opened.id)
        .await
        .unwrap_err();
    assert_eq!(
        error.unavailable_kind(),
        Some(UnavailableKind::Unreachable),
        "{error}"
    );
    assert_eq!(faulty.lost(), 1);
    let stored = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, InteractiveHandoffStatus::Attached);
    // Asking again is the replay the retry would have made.
    assert_eq!(
        store.attach_interactive_handoff(&opened.id).await.unwrap(),
        stored
    );
    assert_eq!(events(&store, &opened.id).await.len(), 2);
}
