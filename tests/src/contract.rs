//! One scenario (at least) per store clause C1-C11, each named after its
//! clause and written once for every backend.

use crate::fixtures::{stored_project, stored_task, stored_wave};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_adapters::{open_store, ConflictKind, GenerateId, ListQuery, Store, StoreError};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenInteractiveHandoff, OpenOptions, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::task::TaskSessionStatus;
use lf_handoff_domain::wave::Wave;
use tempfile::TempDir;

use crate::fixtures::*;
use crate::worker::{race, race_all, Worker};
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! contract_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [contract];
            AnyBackend: [
                c1_open_validates_its_request,
                c2_open_validates_the_parent,
                c2_c7_a_stale_generation_is_refused,
                c3_open_is_idempotent_per_parent,
                c3_racing_opens_for_one_parent_create_exactly_one,
                c4_get_returns_none_for_an_unknown_id,
                c4_list_orders_by_creation_and_filters_by_parent_and_activity,
                c5_attach_is_recorded_once,
                c5_attach_refuses_terminal_and_unknown_handoffs,
                c6_finish_records_the_first_outcome,
                c6_racing_finishers_on_2_handles,
                c6_racing_finishers_on_8_handles,
                c6_a_handle_never_decides_on_a_record_another_changed,
                c7_claim_wake_rules,
                c7_same_generation_claim_retry,
                c7_racing_claims_have_one_winner,
                c8_reopen_after_drop,
                c8_kill_9_loses_nothing_acknowledged,
                c9_replays_write_nothing,
                c10_parents_persist_exactly,
                c10_body_generations_only_increase,
                c29_open_refuses_environment_that_changes_how_programs_start,
            ],
            SeveralProcesses: [
                c3_racing_opens_from_separate_processes_create_exactly_one,
                c6_racing_finishers_in_separate_processes,
                c6_racing_finishers_in_8_processes_over_many_handoffs,
            ],
            OwnStorage: [
                c11_unusable_stores_are_refused_unchanged,
            ],
            SeveralProcessesOwnStorage: [
                first_opens_from_8_processes_migrate_once,
            ],
        );
    };
}

/// A fresh store in a fresh temporary directory.
pub(crate) async fn fresh(backend: &dyn Backend) -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    (dir, store)
}

/// `count` more handles on the store in `dir`.
pub(crate) async fn handles(backend: &dyn Backend, dir: &TempDir, count: usize) -> Vec<Store> {
    let mut stores = Vec::new();
    for _ in 0..count {
        stores.push(
            open_store(&backend.config(location(dir.path())))
                .await
                .unwrap(),
        );
    }
    stores
}

#[track_caller]
pub(crate) fn assert_invalid<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::InvalidInput(_)) => {}
        other => panic!("{what}: expected InvalidInput, got {other:?}"),
    }
}

#[track_caller]
fn assert_conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, kind: ConflictKind) {
    match result {
        Err(StoreError::Conflict {
            kind: actual,
            message,
        }) => assert_eq!(actual, kind, "{message}"),
        other => panic!("expected a {kind} conflict, got {other:?}"),
    }
}

/// C1: a malformed request is `InvalidInput`, checked before anything is
/// read (even for a parent that does not exist) or written.
pub async fn c1_open_validates_its_request(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let ghost = Wave::new(WaveId::new(), "ghost".into(), "/nowhere".into());
    type Mutation = Box<dyn Fn(&mut OpenInteractiveHandoff) + Send + Sync>;
    let cases: Vec<(&str, Mutation)> = vec![
        ("blank provider", Box::new(|r| r.provider = " ".into())),
        (
            "blank provider session",
            Box::new(|r| r.provider_session_id = Some(String::new())),
        ),
        ("generation 0", Box::new(|r| r.body_generation = 0)),
        ("blank reason", Box::new(|r| r.reason = "\t".into())),
        (
            "relative cwd",
            Box::new(|r| r.cwd = PathBuf::from("relative/dir")),
        ),
        ("empty argv", Box::new(|r| r.attach_argv.clear())),
        (
            "empty argument",
            Box::new(|r| r.attach_argv.push(String::new())),
        ),
        (
            "blank env key",
            Box::new(|r| {
                r.environment.insert("  ".into(), "v".into());
            }),
        ),
        (
            "env key with =",
            Box::new(|r| {
                r.environment.insert("A=B".into(), "v".into());
            }),
        ),
        ("NUL in reason", Box::new(|r| r.reason = "a\0b".into())),
    ];
    for (what, mutate) in &cases {
        let mut request = wave_request(&wave, dir.path());
        mutate(&mut request);
        assert_invalid(store.open_interactive_handoff(request).await, what);
        let mut for_ghost = wave_request(&ghost, dir.path());
        mutate(&mut for_ghost);
        assert_invalid(store.open_interactive_handoff(for_ghost).await, what);
    }
    assert!(store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .is_empty());
}

/// C29: an open request whose environment sets a name that changes how
/// programs load or start is `InvalidInput` naming it, checked before
/// anything is read (even for a parent that does not exist) or written,
/// whether the open would create a handoff, replay the parent's active one
/// or return its handoff for a step.
pub async fn c29_open_refuses_environment_that_changes_how_programs_start(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let stepped = new_wave(&store, dir.path()).await;
    let ghost = Wave::new(WaveId::new(), "ghost".into(), "/nowhere".into());
    let step = StepKey::parse("login@turn-1").unwrap();
    let at_step = || OpenOptions::at_step(step.clone());
    let names = [
        "BASH_ENV",
        "LD_PRELOAD",
        "PATH",
        "PYTHONSTARTUP",
        "NODE_OPTIONS",
    ];
    let with = |mut request: OpenInteractiveHandoff, name: &str| {
        request
            .environment
            .insert(name.to_string(), "/tmp/x".to_string());
        request
    };
    let assert_refused =
        |result: Result<(InteractiveHandoff, bool), StoreError>, name: &str| match result {
            Err(StoreError::InvalidInput(message)) => assert!(
                message.contains(&format!("{name:?}")),
                "{message:?} does not name {name}"
            ),
            other => panic!("{name}: expected InvalidInput, got {other:?}"),
        };
    for name in names {
        for parent in [&wave, &ghost] {
            let request = with(wave_request(parent, dir.path()), name);
            assert_refused(store.open_interactive_handoff(request.clone()).await, name);
            let request = request.with_options(at_step());
            assert_refused(store.open_interactive_handoff(request).await, name);
        }
    }
    assert!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .is_empty(),
        "a refused open wrote a handoff"
    );

    let (active, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let (at_the_step, _) = store
        .open_interactive_handoff(wave_request(&stepped, dir.path()).with_options(at_step()))
        .await
        .unwrap();
    for name in names {
        let replay = with(wave_request(&wave, dir.path()), name);
        assert_refused(store.open_interactive_handoff(replay).await, name);
        let replay = with(wave_request(&stepped, dir.path()), name).with_options(at_step());
        assert_refused(store.open_interactive_handoff(replay).await, name);
    }
    for handoff in [&active, &at_the_step] {
        let stored = store.get_interactive_handoff(&handoff.id).await.unwrap();
        assert_eq!(
            stored.as_ref(),
            Some(handoff),
            "a refused replay changed it"
        );
    }
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .len(),
        2
    );
}

/// C2: the parent must exist, be live, own the generation, use the same
/// provider, preserve provider history, and (a task) own the cwd.
pub async fn c2_open_validates_the_parent(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let ghost = Wave::new(WaveId::new(), "ghost".into(), "/nowhere".into());
    match store
        .open_interactive_handoff(wave_request(&ghost, dir.path()))
        .await
    {
        Err(StoreError::NotFound(message)) => assert!(message.contains(ghost.id().as_str())),
        other => panic!("expected NotFound, got {other:?}"),
    }

    let task = new_task(&store, dir.path()).await;
    let mut stale = task_request(&task);
    stale.body_generation = 3;
    assert_conflict(
        store.open_interactive_handoff(stale).await,
        ConflictKind::StaleGeneration,
    );
    let mut future = task_request(&task);
    future.body_generation = 5;
    assert_conflict(
        store.open_interactive_handoff(future).await,
        ConflictKind::GenerationNotRecorded,
    );
    let mut provider = task_request(&task);
    provider.provider = "claude".into();
    assert_conflict(
        store.open_interactive_handoff(provider).await,
        ConflictKind::ProviderMismatch,
    );
    let mut history = task_request(&task);
    history.provider_session_id = Some("another-thread".into());
    assert_conflict(
        store.open_interactive_handoff(history).await,
        ConflictKind::HistoryMismatch,
    );
    let mut worktree = task_request(&task);
    worktree.cwd = PathBuf::from("/src/some-other-task");
    assert_conflict(
        store.open_interactive_handoff(worktree).await,
        ConflictKind::WorktreeMismatch,
    );
    let parent = InteractiveHandoffParent::Task(task.id.clone());
    assert!(store
        .list_interactive_handoffs(ListQuery::from(&parent))
        .await
        .unwrap()
        .is_empty());

    // Lexical normalisation: a trailing slash or `.` does not matter.
    let mut trailing = task_request(&task);
    trailing.cwd = PathBuf::from(format!("{}/./", task.worktree.display()));
    let (_, created) = store.open_interactive_handoff(trailing).await.unwrap();
    assert!(created);

    // A terminal parent refuses handoffs.
    let wave = new_wave(&store, dir.path()).await;
    let project = fresh_project(wave.id());
    store.create_project_session(&project).await.unwrap();
    let (mut done, pr) = crate::fixtures::fresh_task(&project, dir.path());
    done.status = TaskSessionStatus::Completed;
    store.create_task_session(&done, &pr).await.unwrap();
    assert_conflict(
        store.open_interactive_handoff(task_request(&done)).await,
        ConflictKind::ParentFinished,
    );
}

/// C2 and C7: once a new body is recorded, the old generation can neither
/// obtain the parent's handoff nor claim its wake.
pub async fn c2_c7_a_stale_generation_is_refused(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let task = new_task(&store, dir.path()).await;
    let (opened, created) = store
        .open_interactive_handoff(task_request(&task))
        .await
        .unwrap();
    assert!(created);
    let parent = InteractiveHandoffParent::Task(task.id.clone());
    store.record_body(&parent, body(5, None)).await.unwrap();
    // The stale body is refused even though an active handoff exists.
    assert_conflict(
        store.open_interactive_handoff(task_request(&task)).await,
        ConflictKind::StaleGeneration,
    );
    let mut current = task_request(&task);
    current.body_generation = 5;
    let (replayed, created) = store.open_interactive_handoff(current).await.unwrap();
    assert!(!created);
    assert_eq!(replayed, opened);
    store
        .finish_interactive_handoff(&opened.id, &outcome(0), None)
        .await
        .unwrap();
    assert_conflict(
        store.claim_interactive_handoff_wake(&opened.id, 3).await,
        ConflictKind::StaleGeneration,
    );
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 5)
            .await
            .unwrap()
            .claimed
    );
}

/// C3: while the parent has an active handoff, open returns it unchanged.
pub async fn c3_open_is_idempotent_per_parent(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let (first, created) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert!(created);
    let mut different_reason = wave_request(&wave, dir.path());
    different_reason.reason = "another reason".into();
    let (second, created) = store
        .open_interactive_handoff(different_reason)
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(second, first);
    assert_eq!(
        store.get_interactive_handoff(&first.id).await.unwrap(),
        Some(first.clone())
    );
    // Once finished, the parent may open a new one.
    store
        .finish_interactive_handoff(&first.id, &outcome(1), None)
        .await
        .unwrap();
    let (third, created) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert!(created);
    assert_ne!(third.id, first.id);
}

/// C3: of 8 handles racing to open for one parent, exactly one creates.
pub async fn c3_racing_opens_for_one_parent_create_exactly_one(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let stores = handles(backend, &dir, 8).await;
    for _ in 0..5 {
        let wave = new_wave(&store, dir.path()).await;
        let tasks: Vec<_> = stores
            .iter()
            .map(|handle| {
                let handle = handle.clone();
                let request = wave_request(&wave, dir.path());
                tokio::spawn(async move { handle.open_interactive_handoff(request).await })
            })
            .collect();
        let mut created = 0;
        let mut ids = BTreeSet::new();
        for task in tasks {
            let (handoff, was_created) = task.await.unwrap().unwrap();
            created += usize::from(was_created);
            ids.insert(handoff.id);
        }
        assert_eq!(created, 1, "exactly one open creates");
        assert_eq!(ids.len(), 1, "every racer gets the same handoff");
        let parent = InteractiveHandoffParent::Wave(wave.id().clone());
        assert_eq!(
            store
                .list_interactive_handoffs(ListQuery::from(&parent))
                .await
                .unwrap()
                .len(),
            1
        );
    }
}

/// C3: of 8 OS processes racing to open for one parent, exactly one creates.
pub async fn c3_racing_opens_from_separate_processes_create_exactly_one(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let url = backend.config(location(dir.path())).url();
    for _ in 0..3 {
        let wave = new_wave(&store, dir.path()).await;
        let runs: Vec<Vec<String>> = (0..8)
            .map(|_| {
                vec![
                    "open".into(),
                    wave.id().to_string(),
                    dir.path().display().to_string(),
                ]
            })
            .collect();
        let results = race(&url, &runs).await;
        let created = results
            .iter()
            .filter(|line| line.starts_with("created "))
            .count();
        assert_eq!(created, 1, "{results:?}");
        let ids: BTreeSet<&str> = results
            .iter()
            .filter_map(|line| line.split(' ').nth(1))
            .collect();
        assert_eq!(ids.len(), 1, "{results:?}");
        let parent = InteractiveHandoffParent::Wave(wave.id().clone());
        assert_eq!(
            store
                .list_interactive_handoffs(ListQuery::from(&parent))
                .await
                .unwrap()
                .len(),
            1
        );
    }
}

/// C4: get of an unknown id is `None`, not an error.
pub async fn c4_get_returns_none_for_an_unknown_id(backend: &dyn Backend) {
    let (_dir, store) = fresh(backend).await;
    assert_eq!(
        store
            .get_interactive_handoff(&InteractiveHandoffId::new())
            .await
            .unwrap(),
        None
    );
}

/// C4: list is ordered by created_at then id; the parent and active filters
/// return exactly the matching handoffs.
pub async fn c4_list_orders_by_creation_and_filters_by_parent_and_activity(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let mut opened = Vec::new();
    for _ in 0..6 {
        opened.push(open_on_new_wave(&store, dir.path()).await);
    }
    store
        .finish_interactive_handoff(&opened[1].id, &outcome(0), None)
        .await
        .unwrap();
    store
        .finish_interactive_handoff(&opened[4].id, &outcome(2), None)
        .await
        .unwrap();
    let all = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 6);
    let mut sorted = all.clone();
    sorted.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    assert_eq!(all, sorted);
    let ids: BTreeSet<_> = all.iter().map(|h| h.id.clone()).collect();
    assert_eq!(ids, opened.iter().map(|h| h.id.clone()).collect());

    let parent = opened[4].parent.clone();
    let mine = store
        .list_interactive_handoffs(ListQuery::from(&parent))
        .await
        .unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].id, opened[4].id);

    let active = store
        .list_interactive_handoffs(ListQuery {
            parent: None,
            active_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let active_ids: Vec<_> = active.iter().map(|h| h.id.clone()).collect();
    let expected: Vec<_> = all
        .iter()
        .filter(|h| h.is_active())
        .map(|h| h.id.clone())
        .collect();
    assert_eq!(active_ids, expected);
    assert_eq!(active.len(), 4);
    assert!(store
        .list_interactive_handoffs(ListQuery {
            parent: Some(parent),
            active_only: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
    let live_parent = opened[0].parent.clone();
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery {
                parent: Some(live_parent),
                active_only: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .len(),
        1
    );
}

/// C5: Waiting -> Attached records attached_at once; attaching again returns
/// the same record and descriptor.
pub async fn c5_attach_is_recorded_once(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
    assert_eq!(attached.status, InteractiveHandoffStatus::Attached);
    assert!(attached
        .attached_at
        .is_some_and(|at| at >= opened.created_at));
    tokio::time::sleep(Duration::from_millis(5)).await;
    let again = store.attach_interactive_handoff(&opened.id).await.unwrap();
    assert_eq!(again, attached);
    assert_eq!(again.attach_descriptor(), attached.attach_descriptor());
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(attached)
    );
}

/// C5: attaching a terminal handoff is a conflict; an unknown id is not found.
pub async fn c5_attach_refuses_terminal_and_unknown_handoffs(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    store
        .finish_interactive_handoff(&opened.id, &outcome(0), None)
        .await
        .unwrap();
    assert_conflict(
        store.attach_interactive_handoff(&opened.id).await,
        ConflictKind::AlreadyFinished,
    );
    assert!(matches!(
        store
            .attach_interactive_handoff(&InteractiveHandoffId::new())
            .await,
        Err(StoreError::NotFound(_))
    ));
}

/// C6: finish records outcome, status and terminal_at; an equal repeat is a
/// no-op; a different outcome is a conflict and the first stays.
pub async fn c6_finish_records_the_first_outcome(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let handed_back = InteractiveHandoffOutcome::HandedBack {
        summary: "continue with the tests".into(),
    };
    let finished = store
        .finish_interactive_handoff(&opened.id, &handed_back, None)
        .await
        .unwrap();
    assert_eq!(finished.status, InteractiveHandoffStatus::HandedBack);
    assert_eq!(finished.outcome.as_ref(), Some(&handed_back));
    assert!(finished.terminal_at.is_some());
    assert_eq!(
        store
            .finish_interactive_handoff(&opened.id, &handed_back, None)
            .await
            .unwrap(),
        finished
    );
    let failed = InteractiveHandoffOutcome::Failed {
        reason: "gave up".into(),
    };
    assert_conflict(
        store
            .finish_interactive_handoff(&opened.id, &failed, None)
            .await,
        ConflictKind::OtherOutcome,
    );
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(finished)
    );
    assert!(matches!(
        store
            .finish_interactive_handoff(&InteractiveHandoffId::new(), &failed, None)
            .await,
        Err(StoreError::NotFound(_))
    ));
}

async fn racing_finishers(backend: &dyn Backend, count: usize, rounds: usize) {
    let (dir, store) = fresh(backend).await;
    let stores = handles(backend, &dir, count).await;
    for _ in 0..rounds {
        let opened = open_on_new_wave(&store, dir.path()).await;
        let tasks: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(n, handle)| {
                let handle = handle.clone();
                let id = opened.id.clone();
                tokio::spawn(async move {
                    (
                        n,
                        handle
                            .finish_interactive_handoff(&id, &outcome(n), None)
                            .await,
                    )
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (n, result) = task.await.unwrap();
            match result {
                Ok(handoff) => {
                    assert_eq!(handoff.outcome, Some(outcome(n)));
                    winners.push(n);
                }
                Err(StoreError::Conflict {
                    kind: ConflictKind::OtherOutcome,
                    ..
                }) => {}
                Err(other) => panic!("finisher {n} failed: {other}"),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one finisher wins: {winners:?}");
        let stored = store
            .get_interactive_handoff(&opened.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            stored.outcome,
            Some(outcome(winners[0])),
            "the stored outcome is the winner's"
        );
    }
}

/// C6: of 2 handles racing to finish with different outcomes, exactly one
/// succeeds and its outcome is stored.
pub async fn c6_racing_finishers_on_2_handles(backend: &dyn Backend) {
    racing_finishers(backend, 2, 20).await;
}

/// C6: the same with 8 handles.
pub async fn c6_racing_finishers_on_8_handles(backend: &dyn Backend) {
    racing_finishers(backend, 8, 10).await;
}

/// C6: the same with 8 OS processes.
pub async fn c6_racing_finishers_in_separate_processes(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let url = backend.config(location(dir.path())).url();
    for _ in 0..3 {
        let opened = open_on_new_wave(&store, dir.path()).await;
        let runs: Vec<Vec<String>> = (0..8)
            .map(|n| vec!["finish".into(), opened.id.to_string(), n.to_string()])
            .collect();
        let results = race(&url, &runs).await;
        let winners: Vec<usize> = results
            .iter()
            .filter_map(|line| line.strip_prefix("ok ").map(|n| n.parse().unwrap()))
            .collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        assert_eq!(
            results.iter().filter(|l| *l == "conflict").count(),
            7,
            "{results:?}"
        );
        let stored = store
            .get_interactive_handoff(&opened.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.outcome, Some(outcome(winners[0])));
    }
}

/// C6: 8 OS processes finish the same 100 handoffs in the same order, each
/// with its own outcome: every handoff has exactly one winner, the other
/// seven get `Conflict`, and the stored outcome is the winner's.
pub async fn c6_racing_finishers_in_8_processes_over_many_handoffs(backend: &dyn Backend) {
    const HANDOFFS: usize = 100;
    let (dir, store) = fresh(backend).await;
    let url = backend.config(location(dir.path())).url();
    let mut ids = Vec::new();
    for _ in 0..HANDOFFS {
        ids.push(open_on_new_wave(&store, dir.path()).await.id);
    }
    let runs: Vec<Vec<String>> = (0..8)
        .map(|n| {
            let mut args = vec!["finish-each".to_string(), n.to_string()];
            args.extend(ids.iter().map(ToString::to_string));
            args
        })
        .collect();
    let results = race_all(&url, &runs).await;
    let mut winners: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (n, lines) in results.iter().enumerate() {
        assert_eq!(lines.len(), HANDOFFS, "worker {n} printed {lines:?}");
        for line in lines {
            match line.split(' ').collect::<Vec<_>>()[..] {
                [id, "ok", won] => {
                    assert_eq!(won, n.to_string(), "{line}");
                    winners.entry(id).or_default().push(n);
                }
                [_, "conflict"] => {}
                _ => panic!("worker {n}: {line}"),
            }
        }
    }
    let mut wins_per_process = [0usize; 8];
    for id in &ids {
        let won = winners.get(id.as_str()).cloned().unwrap_or_default();
        assert_eq!(won.len(), 1, "{id} was won by processes {won:?}");
        wins_per_process[won[0]] += 1;
        let stored = store.get_interactive_handoff(id).await.unwrap().unwrap();
        assert_eq!(stored.outcome, Some(outcome(won[0])), "{id}");
    }
    println!("handoffs won per process: {wins_per_process:?}");
}

/// Eight processes that open a store which does not exist yet all succeed
/// and share one store: creating and migrating it happens once, safely.
/// Repeated over fresh stores, because a lost race here is a matter of
/// timing (one round in three failed on SQLite before its version check
/// read one snapshot).
pub async fn first_opens_from_8_processes_migrate_once(backend: &dyn Backend) {
    let runs = vec![vec!["list".to_string()]; 8];
    for _ in 0..11 {
        let dir = tempfile::tempdir().unwrap();
        let config = backend.config(location(dir.path()));
        assert_eq!(race(&config.url(), &runs).await, vec!["listed 0"; 8]);
    }
    let dir = tempfile::tempdir().unwrap();
    let config = backend.config(location(dir.path()));
    assert_eq!(race(&config.url(), &runs).await, vec!["listed 0"; 8]);
    let store = open_store(&config).await.unwrap();
    open_on_new_wave(&store, dir.path()).await;
    assert_eq!(race(&config.url(), &runs).await, vec!["listed 1"; 8]);
}

/// C7: generation 0 is invalid, an older generation is stale, a live
/// handoff cannot be claimed, the first claim wins, a retry by the same
/// generation is `true`, any other generation `false`.
pub async fn c7_claim_wake_rules(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let task = new_task(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff(task_request(&task))
        .await
        .unwrap();
    assert_invalid(
        store.claim_interactive_handoff_wake(&opened.id, 0).await,
        "generation 0",
    );
    assert_conflict(
        store.claim_interactive_handoff_wake(&opened.id, 5).await,
        ConflictKind::NotFinished,
    );
    store
        .finish_interactive_handoff(&opened.id, &outcome(2), None)
        .await
        .unwrap();
    assert_conflict(
        store.claim_interactive_handoff_wake(&opened.id, 3).await,
        ConflictKind::StaleGeneration,
    );
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 5)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        !store
            .claim_interactive_handoff_wake(&opened.id, 6)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        !store
            .claim_interactive_handoff_wake(&opened.id, 4)
            .await
            .unwrap()
            .claimed
    );
    let stored = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.wake_claimed_by_generation, Some(5));
    assert!(stored.wake_claimed_at.is_some());
    assert!(matches!(
        store
            .claim_interactive_handoff_wake(&InteractiveHandoffId::new(), 5)
            .await,
        Err(StoreError::NotFound(_))
    ));
}

/// C7: a claim retried by the same generation (after a lost reply) is
/// `true` again and changes nothing.
pub async fn c7_same_generation_claim_retry(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    store
        .finish_interactive_handoff(&opened.id, &outcome(1), None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 2)
            .await
            .unwrap()
            .claimed
    );
    let after_first = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let reopened = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    assert!(
        reopened
            .claim_interactive_handoff_wake(&opened.id, 2)
            .await
            .unwrap()
            .claimed
    );
    assert_eq!(
        reopened.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(after_first)
    );
}

/// C7: of 8 generations racing to claim one wake, exactly one holds it.
pub async fn c7_racing_claims_have_one_winner(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let stores = handles(backend, &dir, 8).await;
    for _ in 0..5 {
        let opened = open_on_new_wave(&store, dir.path()).await;
        store
            .finish_interactive_handoff(&opened.id, &outcome(0), None)
            .await
            .unwrap();
        let tasks: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(n, handle)| {
                let handle = handle.clone();
                let id = opened.id.clone();
                let generation = 2 + n as u32;
                tokio::spawn(async move {
                    (
                        generation,
                        handle
                            .claim_interactive_handoff_wake(&id, generation)
                            .await
                            .unwrap()
                            .claimed,
                    )
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (generation, claimed) = task.await.unwrap();
            if claimed {
                winners.push(generation);
            }
        }
        assert_eq!(winners.len(), 1, "{winners:?}");
        let stored = store
            .get_interactive_handoff(&opened.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.wake_claimed_by_generation, Some(winners[0]));
    }
}

/// C8: everything written survives dropping every handle and reopening.
pub async fn c8_reopen_after_drop(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let task = new_task(&store, dir.path()).await;
    let (waiting_task, _) = store
        .open_interactive_handoff(task_request(&task))
        .await
        .unwrap();
    let attached = store
        .attach_interactive_handoff(&waiting_task.id)
        .await
        .unwrap();
    let done = open_on_new_wave(&store, dir.path()).await;
    store
        .finish_interactive_handoff(&done.id, &outcome(1), None)
        .await
        .unwrap();
    store
        .claim_interactive_handoff_wake(&done.id, 3)
        .await
        .unwrap();
    let before = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    let parent_before = stored_task(&store, &task.id).await;
    drop(store);
    let reopened = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    assert_eq!(
        reopened
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        before
    );
    assert_eq!(
        reopened
            .get_interactive_handoff(&attached.id)
            .await
            .unwrap(),
        Some(attached)
    );
    assert_eq!(stored_task(&reopened, &task.id).await, parent_before);
}

/// C8: a process killed with SIGKILL at an arbitrary moment loses nothing it
/// had acknowledged, and leaves nothing half-written.
pub async fn c8_kill_9_loses_nothing_acknowledged(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.config(location(dir.path()));
    let mut acknowledged: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for round in 0..3u64 {
        let mut worker = Worker::spawn(
            &config.url(),
            &["churn".into(), dir.path().display().to_string()],
        );
        assert_eq!(worker.line().await.as_deref(), Some("ready"));
        // Kill after a varying number of acknowledged steps.
        let steps = 15 + round * 11;
        for _ in 0..steps {
            let Some(line) = worker.line().await else {
                break;
            };
            let words: Vec<String> = line.split(' ').map(str::to_string).collect();
            assert_eq!(words[0], "ack", "{line}");
            acknowledged
                .entry(words[2].clone())
                .or_default()
                .push(words[1..].join(" "));
        }
        worker.child.start_kill().unwrap();
        worker.child.wait().await.unwrap();
    }
    let store = open_store(&config).await.unwrap();
    for (id, steps) in &acknowledged {
        let last = steps.last().unwrap();
        if last.starts_with("wave ") {
            let wave = stored_wave(&store, &WaveId::parse(id).unwrap()).await;
            assert!(wave.is_some(), "acknowledged wave {id} was lost");
            continue;
        }
        let handoff = store
            .get_interactive_handoff(&InteractiveHandoffId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged handoff {id} was lost"));
        check_at_least(&handoff, last);
    }
    // Every record reads back valid (reads validate), and at most one is
    // active per parent.
    let all = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    lf_handoff_domain::interactive_handoff::check_one_active_per_parent(&all).unwrap();
}

fn check_at_least(handoff: &InteractiveHandoff, step: &str) {
    let words: Vec<&str> = step.split(' ').collect();
    match words[0] {
        "open" => {}
        "attach" => assert_ne!(handoff.status, InteractiveHandoffStatus::Waiting, "{step}"),
        "finish" => {
            let n: usize = words[2].parse().unwrap();
            assert_eq!(handoff.outcome, Some(outcome(n)), "{step}");
        }
        "claim" => assert_eq!(handoff.wake_claimed_by_generation, Some(2), "{step}"),
        other => panic!("unknown step {other}"),
    }
}

/// C6, C9: a handle that wrote a record last and then finds it changed by
/// another handle never decides on what it wrote: its finish with another
/// outcome is refused (the first outcome stays), its attach of the now
/// terminal handoff is refused, and its replay returns the stored record.
pub async fn c6_a_handle_never_decides_on_a_record_another_changed(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let other = handles(backend, &dir, 1).await.remove(0);
    let handoff = open_on_new_wave(&store, dir.path()).await;
    store.attach_interactive_handoff(&handoff.id).await.unwrap();
    let first = other
        .finish_interactive_handoff(&handoff.id, &outcome(1), None)
        .await
        .unwrap();
    let refused = store
        .finish_interactive_handoff(&handoff.id, &outcome(2), None)
        .await
        .unwrap_err();
    assert_eq!(
        refused.conflict_kind(),
        Some(ConflictKind::OtherOutcome),
        "{refused}"
    );
    let replayed = store
        .finish_interactive_handoff(&handoff.id, &outcome(1), None)
        .await
        .unwrap();
    assert_eq!(replayed, first);
    assert!(store.attach_interactive_handoff(&handoff.id).await.is_err());
    assert_eq!(
        store.get_interactive_handoff(&handoff.id).await.unwrap(),
        Some(first)
    );
    // Three changes, three events: nothing stale was written.
    assert_eq!(store.history(&handoff.id).await.unwrap().len(), 3);
    // And the other way round: the handle that finished claims on a record
    // the first handle then changed no further.
    assert!(
        other
            .claim_interactive_handoff_wake(&handoff.id, 1)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        store
            .claim_interactive_handoff_wake(&handoff.id, 1)
            .await
            .unwrap()
            .claimed
    );
    assert_eq!(store.history(&handoff.id).await.unwrap().len(), 4);
}

/// C9: replayed open, attach, finish and claim leave every field, including
/// updated_at, as it was.
pub async fn c9_replays_write_nothing(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let pause = || tokio::time::sleep(Duration::from_millis(3));
    pause().await;
    let (replayed, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert_eq!(replayed, opened);
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(opened.clone())
    );

    let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
    pause().await;
    assert_eq!(
        store.attach_interactive_handoff(&opened.id).await.unwrap(),
        attached
    );
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(attached)
    );

    let finished = store
        .finish_interactive_handoff(&opened.id, &outcome(0), None)
        .await
        .unwrap();
    pause().await;
    assert_eq!(
        store
            .finish_interactive_handoff(&opened.id, &outcome(0), None)
            .await
            .unwrap(),
        finished
    );
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(finished)
    );

    store
        .claim_interactive_handoff_wake(&opened.id, 1)
        .await
        .unwrap();
    let claimed = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    pause().await;
    store
        .claim_interactive_handoff_wake(&opened.id, 1)
        .await
        .unwrap();
    store
        .claim_interactive_handoff_wake(&opened.id, 9)
        .await
        .unwrap();
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(claimed)
    );
}

/// C10: waves, project and task sessions and task PRs read back equal;
/// creating an equal parent again is a no-op, a different one a conflict.
pub async fn c10_parents_persist_exactly(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let wave = new_wave(&store, dir.path()).await;
    assert_eq!(stored_wave(&store, wave.id()).await, Some(wave.clone()));
    let project = fresh_project(wave.id());
    store.create_project_session(&project).await.unwrap();
    assert_eq!(
        stored_project(&store, &project.id).await,
        Some(project.clone())
    );
    let (task, pr) = crate::fixtures::fresh_task(&project, dir.path());
    store.create_task_session(&task, &pr).await.unwrap();
    assert_eq!(stored_task(&store, &task.id).await, Some(task.clone()));
    assert_eq!(store.get_task_pr(&pr.id).await.unwrap(), Some(pr.clone()));
    assert_eq!(
        store
            .get_parent(&InteractiveHandoffParent::Task(task.id.clone()))
            .await
            .unwrap(),
        Some(Parent::Task(task.clone()))
    );

    store.create_wave(&wave).await.unwrap();
    store.create_task_session(&task, &pr).await.unwrap();
    let renamed = Wave::new(wave.id().clone(), "renamed".into(), wave.repo().into());
    assert_conflict(
        store.create_wave(&renamed).await,
        ConflictKind::AlreadyExists,
    );
    let mut changed = task.clone();
    changed.status_reason = "something else".into();
    assert_conflict(
        store.create_task_session(&changed, &pr).await,
        ConflictKind::AlreadyExists,
    );

    let orphan = crate::fixtures::fresh_project(&WaveId::new());
    assert!(matches!(
        store.create_project_session(&orphan).await,
        Err(StoreError::NotFound(_))
    ));
    let (other_task, mut other_pr) = crate::fixtures::fresh_task(&project, dir.path());
    other_pr.task_session_id = task.id.clone();
    assert_invalid(
        store.create_task_session(&other_task, &other_pr).await,
        "PR of another task",
    );
    assert_eq!(stored_task(&store, &other_task.id).await, None);
}

/// C10: a new body generation is recorded; generations only increase, and
/// recording the current body again changes nothing.
pub async fn c10_body_generations_only_increase(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let task = new_task(&store, dir.path()).await;
    let parent = InteractiveHandoffParent::Task(task.id.clone());
    let recorded = store.record_body(&parent, body(5, None)).await.unwrap();
    assert_eq!(recorded.body_generation(), 5);
    let stored = stored_task(&store, &task.id).await.unwrap();
    assert_eq!(Parent::Task(stored.clone()), recorded);
    assert_eq!(
        stored.latest_process.as_ref().map(|p| p.generation),
        Some(5)
    );
    assert_eq!(stored.provider_session_id.as_deref(), Some("task-thread"));
    let again = store
        .record_body(&parent, stored.latest_process.clone().unwrap())
        .await
        .unwrap();
    assert_eq!(again, recorded);
    assert_conflict(
        store.record_body(&parent, body(3, None)).await,
        ConflictKind::GenerationNotNewer,
    );
    assert_conflict(
        store.record_body(&parent, body(5, Some("other"))).await,
        ConflictKind::GenerationNotNewer,
    );
    assert_invalid(
        store.record_body(&parent, body(0, None)).await,
        "generation 0",
    );
    let ghost = InteractiveHandoffParent::Wave(WaveId::new());
    assert!(matches!(
        store.record_body(&ghost, body(1, None)).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(stored_task(&store, &task.id).await, Some(stored));
}

/// C11: corrupt, truncated, foreign, newer-schema, locked or unreachable
/// stores give `Unavailable` with a message naming the problem, never a
/// panic, and the files are left byte-for-byte unchanged.
pub async fn c11_unusable_stores_are_refused_unchanged(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let cases = backend.unusable_stores(dir.path()).await;
    assert!(
        !cases.is_empty(),
        "{} prepares no unusable stores",
        backend.name()
    );
    for case in cases {
        let before: Vec<Vec<u8>> = case
            .guarded
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        match open_store(&case.config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, case.kind, "{}: {message}", case.what);
                assert!(
                    message.contains(&case.message_names),
                    "{}: {message:?} does not name {:?}",
                    case.what,
                    case.message_names
                );
            }
            Err(other) => panic!("{}: expected Unavailable, got {other}", case.what),
            Ok(_) => panic!("{}: the store opened", case.what),
        }
        let after: Vec<Vec<u8>> = case
            .guarded
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        assert!(before == after, "{}: the file was modified", case.what);
    }
}
