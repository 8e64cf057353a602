//! Builders shared by the contract scenarios and the worker process: the
//! workspace's test fixtures (`lf_handoff_adapters::testing`, re-exported
//! here) and the store calls the scenarios repeat.

use lf_handoff_adapters::ListQuery;
use std::path::{Path, PathBuf};

pub use lf_handoff_adapters::testing::*;
use lf_handoff_adapters::{open_store, GenerateId, StorageConfig, Store, StoreError, Waited};
use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, TaskSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffParent};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::TaskSession;
use lf_handoff_domain::wave::Wave;

/// The stored parent `reference`, through [`get_parent`](lf_handoff_adapters::Parents::get_parent).
async fn stored_parent(store: &Store, reference: InteractiveHandoffParent) -> Option<Parent> {
    store.get_parent(&reference).await.unwrap()
}

/// The stored wave `id`; `None` when there is none.
pub async fn stored_wave(store: &Store, id: &WaveId) -> Option<Wave> {
    match stored_parent(store, InteractiveHandoffParent::Wave(id.clone())).await? {
        Parent::Wave(wave) => Some(wave),
        other => panic!("wave {id} was stored as {other:?}"),
    }
}

/// The stored project session `id`; `None` when there is none.
pub async fn stored_project(store: &Store, id: &ProjectSessionId) -> Option<ProjectSession> {
    match stored_parent(store, InteractiveHandoffParent::Project(id.clone())).await? {
        Parent::Project(project) => Some(project),
        other => panic!("project {id} was stored as {other:?}"),
    }
}

/// The stored task session `id`; `None` when there is none.
pub async fn stored_task(store: &Store, id: &TaskSessionId) -> Option<TaskSession> {
    match stored_parent(store, InteractiveHandoffParent::Task(id.clone())).await? {
        Parent::Task(task) => Some(task),
        other => panic!("task {id} was stored as {other:?}"),
    }
}

/// Handoff `id` as a wait that does not wait finds it: expired when it was
/// due (C14), as it is otherwise.
pub async fn waited_now(store: &Store, id: &InteractiveHandoffId) -> InteractiveHandoff {
    match store
        .wait(id, Some(std::time::Duration::ZERO))
        .await
        .unwrap()
    {
        Waited::Ended(handoff) | Waited::TimedOut(handoff) => handoff,
    }
}

/// Claims the wake of `id` for `generation`, with the handoff as the claim
/// left it (to see who holds the wake).
///
/// # Errors
/// As [`claim_interactive_handoff_wake`](lf_handoff_adapters::Handoffs::claim_interactive_handoff_wake).
pub async fn claim_and_read(
    store: &Store,
    id: &InteractiveHandoffId,
    generation: u32,
) -> Result<(bool, InteractiveHandoff), StoreError> {
    let answer = store.claim_interactive_handoff_wake(id, generation).await?;
    Ok((answer.claimed, answer.handoff))
}

/// Creates and returns a new wave whose repo is `repo`.
pub async fn new_wave(store: &Store, repo: &Path) -> Wave {
    let wave = Wave::new(WaveId::new(), "product".into(), repo.display().to_string());
    store.create_wave(&wave).await.unwrap();
    wave
}

/// Creates a wave and opens a handoff on it.
pub async fn open_on_new_wave(store: &Store, dir: &Path) -> InteractiveHandoff {
    let wave = new_wave(store, dir).await;
    let (handoff, created) = store
        .open_interactive_handoff(wave_request(&wave, dir))
        .await
        .unwrap();
    assert!(created);
    handoff
}

/// Opens, on a new wave, the handoff `shape` makes of the default request
/// (a question with choices or a form, C26, a deadline, ...).
pub async fn ask(
    store: &Store,
    dir: &Path,
    shape: impl FnOnce(OpenRequest) -> OpenRequest,
) -> InteractiveHandoff {
    let wave = new_wave(store, dir).await;
    let request = shape(OpenRequest::on_wave(&wave).cwd(dir));
    let (handoff, created) = store
        .open_interactive_handoff(request.build())
        .await
        .unwrap();
    assert!(created);
    handoff
}

/// Creates a wave, project and task under `dir` and returns the task.
pub async fn new_task(store: &Store, dir: &Path) -> TaskSession {
    let wave = new_wave(store, dir).await;
    let project = fresh_project(wave.id());
    store.create_project_session(&project).await.unwrap();
    let (task, pr) = fresh_task(&project, dir);
    store.create_task_session(&task, &pr).await.unwrap();
    task
}

/// One whole lifecycle on a new wave, `outcome(n)` its outcome: open,
/// attach, finish, claim the wake (generation 1); the handoff's id. Store
/// errors are returned (a test of faults tells them apart); a step that
/// does not do what the contract says panics.
///
/// # Errors
/// The first store call that failed.
pub async fn try_lifecycle(
    store: &Store,
    dir: &Path,
    n: usize,
) -> Result<InteractiveHandoffId, StoreError> {
    let wave = Wave::new(WaveId::new(), "product".into(), dir.display().to_string());
    store.create_wave(&wave).await?;
    let (opened, created) = store
        .open_interactive_handoff(wave_request(&wave, dir))
        .await?;
    assert!(created, "lifecycle {n}: the open created no handoff");
    store.attach_interactive_handoff(&opened.id).await?;
    let finished = store
        .finish_interactive_handoff(&opened.id, &outcome(n), None)
        .await?;
    assert_eq!(finished.outcome, Some(outcome(n)));
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await?
            .claimed,
        "lifecycle {n}: generation 1 does not hold the wake"
    );
    Ok(opened.id)
}

/// [`try_lifecycle`], panicking on a store error.
pub async fn lifecycle(store: &Store, dir: &Path, n: usize) -> InteractiveHandoffId {
    try_lifecycle(store, dir, n)
        .await
        .unwrap_or_else(|e| panic!("lifecycle {n}: {e}"))
}

/// Opens the store at `config`, runs a [`lifecycle`] on it, and opens it
/// again: the lifecycle's handoff is there. Returns the reopened store.
pub async fn works_across_a_reopen(config: &StorageConfig, dir: &Path) -> Store {
    let store = open_store(config)
        .await
        .unwrap_or_else(|e| panic!("{config} does not open: {e}"));
    let id = lifecycle(&store, dir, 1).await;
    drop(store);
    let store = open_store(config)
        .await
        .unwrap_or_else(|e| panic!("{config} does not open again: {e}"));
    assert!(
        store.get_interactive_handoff(&id).await.unwrap().is_some(),
        "{config}: the lifecycle's handoff {id} is gone after a reopen"
    );
    store
}

/// Opens the store at `config`, which must hold no handoff (a store whose
/// creation was killed: nothing was acknowledged), then checks it
/// [`works_across_a_reopen`].
pub async fn opens_empty_and_works(config: &StorageConfig, dir: &Path) {
    let store = open_store(config)
        .await
        .unwrap_or_else(|e| panic!("{config} does not open: {e}"));
    let listed = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert!(listed.is_empty(), "{config} holds {listed:?}");
    drop(store);
    works_across_a_reopen(config, dir).await;
}

/// A path inside `dir` where a store lives.
pub fn location(dir: &Path) -> PathBuf {
    dir.join("registry.db")
}
