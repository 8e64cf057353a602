//! Scenarios for watching and waiting (contract C16): a watcher yields
//! every event after its position in order, then each new one as it
//! commits; one that resumes never misses or repeats an event, even under
//! concurrent writers; a dropped connection is made again; a deleted store
//! ends the watch with `Unavailable`; `wait` returns the terminal handoff.

use lf_handoff_adapters::ListQuery;
use lf_handoff_adapters::WatchFrom;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_adapters::{open_store, GenerateId, Store, Waited, WatchFilter};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, HandoffEventKind, InteractiveHandoffParent, InteractiveHandoffStatus, OpenOptions,
};
use time::OffsetDateTime;

use crate::contract::{fresh, handles};
use crate::fixtures::{lifecycle, location, new_wave, open_on_new_wave, outcome, wave_request};
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! watch_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [watch];
            AnyBackend: [
                c16_watch_yields_the_history_then_each_new_event,
                c16_a_filtered_watch_sees_only_its_parent,
                c16_wait_returns_when_the_handoff_ends,
                c16_resumed_watchers_miss_and_repeat_nothing_under_8_writers,
            ],
            OwnStorage: [
                c16_a_watch_rides_out_a_dropped_connection,
                c16_a_deleted_store_ends_the_watch,
            ],
        );
    };
}

/// Long enough for any wake on a loaded machine; a test that needs it
/// has failed.
const PATIENCE: Duration = Duration::from_secs(30);

/// The next event of `watcher`, or a failure naming what was awaited.
async fn next(watcher: &mut lf_handoff_adapters::Watcher, what: &str) -> HandoffEvent {
    match tokio::time::timeout(PATIENCE, watcher.next()).await {
        Ok(Ok(event)) => event,
        Ok(Err(error)) => panic!("watching for {what}: {error}"),
        Err(_) => panic!("no event within {PATIENCE:?} while watching for {what}"),
    }
}

/// Asserts that `watcher` passes on nothing within `millis` ms.
pub(crate) async fn assert_quiet(watcher: &mut lf_handoff_adapters::Watcher, millis: u64) {
    let event = watcher
        .next_within(Duration::from_millis(millis))
        .await
        .unwrap();
    assert_eq!(event, None, "nothing to pass on within {millis} ms");
}

/// Every event of the store, in position order, read through histories.
pub(crate) async fn all_events(store: &Store) -> Vec<HandoffEvent> {
    let mut events = Vec::new();
    for handoff in store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
    {
        events.extend(store.history(&handoff.id).await.unwrap());
    }
    events.sort_by_key(|event| event.position);
    events
}

/// C16: a watcher from 0 yields the whole history in position order, then
/// each event as it commits, from another handle too; one started now
/// sees only what comes after.
pub async fn c16_watch_yields_the_history_then_each_new_event(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let other = handles(backend, &dir, 1).await.remove(0);
    let first = lifecycle(&store, dir.path(), 1).await;
    let history = store.history(&first).await.unwrap();
    assert_eq!(history.len(), 4);

    let mut watcher = store
        .watch(WatchFrom::After(0), WatchFilter::default())
        .await
        .unwrap();
    let mut new_only = store
        .watch(WatchFrom::Now, WatchFilter::default())
        .await
        .unwrap();
    for expected in &history {
        assert_eq!(&next(&mut watcher, "the history").await, expected);
    }
    assert_eq!(watcher.position(), history[3].position);
    // Nothing more yet.
    assert_quiet(&mut watcher, 200).await;

    // Live: a handoff opened on another handle, then attached here.
    let opened = open_on_new_wave(&other, dir.path()).await;
    let event = next(&mut watcher, "the open").await;
    assert_eq!(
        (event.handoff_id.clone(), event.kind, event.seq),
        (opened.id.clone(), HandoffEventKind::Opened, 1)
    );
    store.attach_interactive_handoff(&opened.id).await.unwrap();
    let event = next(&mut watcher, "the attach").await;
    assert_eq!(
        (event.kind, event.status_after),
        (
            HandoffEventKind::Attached,
            InteractiveHandoffStatus::Attached
        )
    );
    // The watcher started now saw the two new events only.
    let seen = next(&mut new_only, "the open, watching new events").await;
    assert_eq!((seen.handoff_id, seen.seq), (opened.id.clone(), 1));
    let seen = next(&mut new_only, "the attach, watching new events").await;
    assert_eq!(seen.kind, HandoffEventKind::Attached);
    // A replay appends nothing, so wakes nobody with an event.
    store.attach_interactive_handoff(&opened.id).await.unwrap();
    assert_quiet(&mut watcher, 300).await;
    // Resuming from a position yields what came after it, nothing else.
    let mut resumed = store
        .watch(
            WatchFrom::After(history[1].position),
            WatchFilter::default(),
        )
        .await
        .unwrap();
    let positions: Vec<u64> = [
        next(&mut resumed, "a resumed watch").await,
        next(&mut resumed, "a resumed watch").await,
        next(&mut resumed, "a resumed watch").await,
        next(&mut resumed, "a resumed watch").await,
    ]
    .iter()
    .map(|event| event.position)
    .collect();
    let all: Vec<u64> = all_events(&store)
        .await
        .iter()
        .map(|event| event.position)
        .collect();
    assert_eq!(positions, all[2..].to_vec());
}

/// C16: a watcher filtered by parent (or handoff) sees the events of that
/// parent's handoffs only, but its position moves past the others.
pub async fn c16_a_filtered_watch_sees_only_its_parent(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let ours = new_wave(&store, dir.path()).await;
    let theirs = new_wave(&store, dir.path()).await;
    let parent = InteractiveHandoffParent::Wave(ours.id().clone());
    let mut watcher = store
        .watch(
            WatchFrom::After(0),
            WatchFilter {
                parent: Some(parent.clone()),
                ..WatchFilter::default()
            },
        )
        .await
        .unwrap();
    let (other, _) = store
        .open_interactive_handoff(wave_request(&theirs, dir.path()))
        .await
        .unwrap();
    let (mine, _) = store
        .open_interactive_handoff(wave_request(&ours, dir.path()))
        .await
        .unwrap();
    store.attach_interactive_handoff(&other.id).await.unwrap();
    store.attach_interactive_handoff(&mine.id).await.unwrap();
    let first = next(&mut watcher, "our open").await;
    let second = next(&mut watcher, "our attach").await;
    assert_eq!(
        (first.handoff_id.clone(), first.kind),
        (mine.id.clone(), HandoffEventKind::Opened)
    );
    assert_eq!(
        (second.handoff_id.clone(), second.kind),
        (mine.id.clone(), HandoffEventKind::Attached)
    );
    assert_eq!(watcher.position(), second.position);
    assert_quiet(&mut watcher, 200).await;
    // By handoff.
    let mut one = store
        .watch(
            WatchFrom::After(0),
            WatchFilter {
                handoff: Some(other.id.clone()),
                ..WatchFilter::default()
            },
        )
        .await
        .unwrap();
    let kinds = [
        next(&mut one, "their open").await.kind,
        next(&mut one, "their attach").await.kind,
    ];
    assert_eq!(
        kinds,
        [HandoffEventKind::Opened, HandoffEventKind::Attached]
    );
}

/// C16: `wait` returns a finish made on another handle while it waits,
/// times out on a handoff nobody finishes, expires a due one, and names an
/// unknown id.
pub async fn c16_wait_returns_when_the_handoff_ends(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let other = handles(backend, &dir, 1).await.remove(0);
    let handoff = open_on_new_wave(&store, dir.path()).await;

    let waiter = {
        let store = store.clone();
        let id = handoff.id.clone();
        tokio::spawn(async move { store.wait(&id, Some(PATIENCE)).await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    other.attach_interactive_handoff(&handoff.id).await.unwrap();
    let finished = other
        .finish_interactive_handoff(&handoff.id, &outcome(7), None)
        .await
        .unwrap();
    match waiter.await.unwrap().unwrap() {
        Waited::Ended(ended) => assert_eq!(ended, finished),
        other => panic!("the wait did not see the finish: {other:?}"),
    }
    // Already terminal: at once.
    assert!(matches!(
        store.wait(&handoff.id, Some(Duration::ZERO)).await.unwrap(),
        Waited::Ended(_)
    ));

    // Nobody finishes it: the timeout.
    let idle = open_on_new_wave(&store, dir.path()).await;
    match store
        .wait(&idle.id, Some(Duration::from_millis(300)))
        .await
        .unwrap()
    {
        Waited::TimedOut(still) => assert_eq!(still.status, InteractiveHandoffStatus::Waiting),
        other => panic!("the wait should have timed out: {other:?}"),
    }

    // A deadline passes while waiting: expired then.
    let wave = new_wave(&store, dir.path()).await;
    let (due_soon, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()).with_options(OpenOptions {
            step: None,
            expires_at: Some(OffsetDateTime::now_utc() + Duration::from_millis(400)),
            ..OpenOptions::default()
        }))
        .await
        .unwrap();
    match store.wait(&due_soon.id, Some(PATIENCE)).await.unwrap() {
        Waited::Ended(ended) => assert_eq!(ended.status, InteractiveHandoffStatus::Expired),
        other => panic!("the deadline passed: {other:?}"),
    }

    let unknown = InteractiveHandoffId::new();
    assert!(store
        .wait(&unknown, Some(Duration::from_millis(10)))
        .await
        .unwrap_err()
        .is_not_found());
}

/// C16: 8 writers on handles of their own run lifecycles while a watcher
/// reads a few events at a time, drops its watch and resumes from its
/// position, again and again: it sees every event once, in position
/// order, and the same ones the histories hold.
pub async fn c16_resumed_watchers_miss_and_repeat_nothing_under_8_writers(backend: &dyn Backend) {
    const WRITERS: usize = 8;
    const LIFECYCLES: usize = 6;
    let (dir, store) = fresh(backend).await;
    let writers = handles(backend, &dir, WRITERS).await;
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (w, writer) in writers.into_iter().enumerate() {
        let path = dir.path().to_path_buf();
        tasks.push(tokio::spawn(async move {
            for n in 0..LIFECYCLES {
                lifecycle(&writer, &path, w * 100 + n).await;
            }
        }));
    }
    let finisher = {
        let done = done.clone();
        tokio::spawn(async move {
            for task in tasks {
                task.await.unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut seen: Vec<HandoffEvent> = Vec::new();
    let mut position = 0;
    let mut resumes = 0;
    let expected_total = WRITERS * LIFECYCLES * 4;
    while seen.len() < expected_total {
        let mut watcher = store
            .watch(WatchFrom::After(position), WatchFilter::default())
            .await
            .unwrap();
        // A few events, then the watch is dropped.
        for _ in 0..(3 + resumes % 5) {
            match tokio::time::timeout(PATIENCE, watcher.next()).await {
                Ok(Ok(event)) => seen.push(event),
                Ok(Err(error)) => panic!("watching: {error}"),
                Err(_) => panic!(
                    "no event within {PATIENCE:?}: {} of {expected_total} seen, writers done: {}",
                    seen.len(),
                    done.load(Ordering::SeqCst)
                ),
            }
            if seen.len() == expected_total {
                break;
            }
        }
        position = watcher.position();
        resumes += 1;
    }
    finisher.await.unwrap();
    assert!(resumes >= 10, "resumed {resumes} times");
    for pair in seen.windows(2) {
        assert!(
            pair[0].position < pair[1].position,
            "out of order or repeated: {pair:#?}"
        );
    }
    let all = all_events(&store).await;
    assert_eq!(all.len(), expected_total);
    assert_eq!(seen, all, "the watch saw exactly the stored events");
    // Nothing more comes.
    let mut watcher = store
        .watch(WatchFrom::After(position), WatchFilter::default())
        .await
        .unwrap();
    assert_quiet(&mut watcher, 200).await;
}

/// C16: a watcher whose connection the server drops (PostgreSQL:
/// `pg_terminate_backend` of every watching session) connects again and
/// catches up; backends without a connection to drop run the rest.
pub async fn c16_a_watch_rides_out_a_dropped_connection(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let mut watcher = store
        .watch(WatchFrom::Now, WatchFilter::default())
        .await
        .unwrap();
    // Nothing to read yet: the watcher sleeps, so it listens.
    assert_quiet(&mut watcher, 100).await;
    let first = open_on_new_wave(&store, dir.path()).await;
    assert_eq!(
        next(&mut watcher, "the first open").await.handoff_id,
        first.id
    );
    let cut = backend.cut_watch_connections().await;
    if backend.name() == "postgres" {
        assert!(cut >= 1, "the watching session was found and cut");
    }
    let second = open_on_new_wave(&store, dir.path()).await;
    assert_eq!(
        next(&mut watcher, "an open after the cut").await.handoff_id,
        second.id
    );
    // And a waiter on another handle sees a finish after a cut too.
    let waiter = {
        let store = store.clone();
        let id = second.id.clone();
        tokio::spawn(async move { store.wait(&id, Some(PATIENCE)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    backend.cut_watch_connections().await;
    store
        .finish_interactive_handoff(&second.id, &outcome(2), None)
        .await
        .unwrap();
    match waiter.await.unwrap().unwrap() {
        Waited::Ended(ended) => assert!(!ended.is_active(), "{ended:?}"),
        other => panic!("the wait did not see the finish: {other:?}"),
    }
}

/// C16: a store deleted while watched ends the watch with `Unavailable`.
pub async fn c16_a_deleted_store_ends_the_watch(backend: &dyn Backend) {
    let (dir, store) = fresh(backend).await;
    let mut watcher = store
        .watch(WatchFrom::Now, WatchFilter::default())
        .await
        .unwrap();
    let opened = open_on_new_wave(&store, dir.path()).await;
    assert_eq!(next(&mut watcher, "the open").await.handoff_id, opened.id);
    backend.delete_store(&location(dir.path())).await;
    let ended = tokio::time::timeout(PATIENCE, watcher.next())
        .await
        .expect("the watch ends within its patience");
    let error = ended.expect_err("a deleted store cannot be watched");
    assert!(error.is_unavailable(), "{error}");
    // A new handle on the path is a new, empty store (file backends) or
    // none at all; either way the old events are gone with it.
    drop(watcher);
    drop(store);
    if let Ok(again) = open_store(&backend.config(location(dir.path()))).await {
        let mut watcher = again
            .watch(WatchFrom::After(0), WatchFilter::default())
            .await
            .unwrap();
        let seen: BTreeSet<u64> = watcher
            .next_within(Duration::from_millis(100))
            .await
            .unwrap()
            .into_iter()
            .map(|event| event.position)
            .collect();
        assert!(seen.is_empty(), "{seen:?}");
    }
}
