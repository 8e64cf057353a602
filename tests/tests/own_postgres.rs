//! Tests on a PostgreSQL server of their own ([`OwnPostgres`]), which they
//! stop and start: a store rides out a restart of its server (C18,
//! transient faults), and so do waits and watches (C16).
// A test file: panicking on a failed expectation is the point, in its
// helpers as in its tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lf_handoff_adapters::ListQuery;
use lf_handoff_adapters::WatchFrom;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, Store};
use lf_handoff_conformance::fixtures::{open_on_new_wave, outcome, try_lifecycle};
use lf_handoff_conformance::own_postgres::{skip_or_fail, OwnPostgres};

/// A server of the test's own, or `None` when it cannot run here (after
/// saying why, or failing when CI requires it).
async fn own_server() -> Option<Arc<OwnPostgres>> {
    match tokio::task::spawn_blocking(OwnPostgres::start).await {
        Ok(Ok(server)) => Some(Arc::new(server)),
        Ok(Err(reason)) => {
            skip_or_fail(&reason);
            None
        }
        Err(panic) => panic!("starting the server panicked: {panic}"),
    }
}

/// A store handle on `server`.
async fn store_on(server: &OwnPostgres) -> Store {
    open_store(&server.config("pool_size=2"))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()))
}

/// Runs `operation` on `server` off the async threads (`pg_ctl` blocks).
async fn on_server(
    server: &Arc<OwnPostgres>,
    operation: impl FnOnce(&OwnPostgres) -> Result<(), String> + Send + 'static,
) {
    let server = server.clone();
    tokio::task::spawn_blocking(move || operation(&server))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Lifecycles in a loop on one store handle until stopped, counting those
/// done; the first that fails ends the loop with its error.
struct Lifecycles {
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<usize, String>>,
}

impl Lifecycles {
    fn start(store: Store, dir: &Path) -> Self {
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (done, stop, dir): (_, _, PathBuf) = (done.clone(), stop.clone(), dir.into());
            async move {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    try_lifecycle(&store, &dir, n).await.map_err(|e| {
                        format!("lifecycle {n} failed after {:?}: {e}", started.elapsed())
                    })?;
                    n += 1;
                    done.store(n, Ordering::SeqCst);
                }
                Ok(n)
            }
        });
        Self { done, stop, task }
    }

    /// How many are done.
    fn done(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    /// Waits (at most `limit`) until more than `count` are done.
    async fn progress_past(&self, count: usize, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.done() > count {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Stops the loop; how many it did, or the error that ended it.
    async fn stop(self) -> Result<usize, String> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// Lifecycles run in a loop through one store while its server is stopped
/// (`pg_ctl stop -m fast`, which terminates every session), left down for
/// a second and started again: no call fails (the outage is shorter than
/// the store's retry window), and lifecycles go on after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_rides_out_a_restart_of_its_server() {
    let Some(server) = own_server().await else {
        return;
    };
    let store = store_on(&server).await;
    let dir = tempfile::tempdir().unwrap();

    let running = Lifecycles::start(store.clone(), dir.path());
    assert!(
        running.progress_past(2, Duration::from_secs(5)).await,
        "no lifecycle completed before the restart"
    );
    on_server(&server, |server| server.restart(Duration::from_secs(1))).await;
    let after_restart = running.done();
    let progressed = running
        .progress_past(after_restart + 3, Duration::from_secs(10))
        .await;
    let lifecycles = running
        .stop()
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    println!("{lifecycles} lifecycles, {after_restart} before the restart");
    assert!(
        progressed,
        "lifecycles stalled after the restart ({lifecycles} in all, {after_restart} before)"
    );
    // Everything the loop was told is stored.
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .len(),
        lifecycles
    );
}

/// C16 with C18: a `Store::wait` in another process waits while the
/// server is stopped for a second and started again, and returns the
/// finish made after the restart; lifecycles running on another handle
/// through the restart do not fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_process_rides_out_a_restart_and_sees_the_finish() {
    lf_handoff_conformance::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
    let Some(server) = own_server().await else {
        return;
    };
    let store = store_on(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let handoff = open_on_new_wave(&store, dir.path()).await;
    let mut waiter = lf_handoff_conformance::worker::Worker::spawn(
        &server.url(""),
        &["wait".to_string(), handoff.id.to_string(), "60".to_string()],
    );
    assert_eq!(waiter.line().await.as_deref(), Some("waiting"));
    // Lifecycles run on another handle through the restart, as another
    // process's would.
    let running = Lifecycles::start(store_on(&server).await, dir.path());
    assert!(
        running.progress_past(1, Duration::from_secs(5)).await,
        "no lifecycle completed before the restart"
    );
    on_server(&server, |server| server.restart(Duration::from_secs(1))).await;
    let after_restart = running.done();
    assert!(
        running
            .progress_past(after_restart + 2, Duration::from_secs(10))
            .await,
        "lifecycles stalled after the restart"
    );
    running
        .stop()
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    // Then the finish the waiter is for, made after the restart.
    store.attach_interactive_handoff(&handoff.id).await.unwrap();
    store
        .finish_interactive_handoff(&handoff.id, &outcome(0), None)
        .await
        .unwrap();
    let said = tokio::time::timeout(Duration::from_secs(30), waiter.line())
        .await
        .expect("the waiter answers within 30 s of the finish");
    let status = store
        .get_interactive_handoff(&handoff.id)
        .await
        .unwrap()
        .unwrap()
        .status;
    assert_eq!(said, Some(format!("ended {}", status.as_str())));
}

/// C16: a watcher whose server stays down for longer than the store's
/// retry window ends with a typed `Unavailable` (`unreachable`); started
/// again from its position once the server is back, it goes on where it
/// stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_ends_with_unreachable_when_its_server_stays_down() {
    let Some(server) = own_server().await else {
        return;
    };
    let store = store_on(&server)
        .await
        .with_retry_window(Duration::from_secs(1));
    let dir = tempfile::tempdir().unwrap();
    try_lifecycle(&store, dir.path(), 0).await.unwrap();
    let mut watcher = store
        .watch(
            WatchFrom::After(0),
            lf_handoff_adapters::WatchFilter::default(),
        )
        .await
        .unwrap();
    for _ in 0..4 {
        watcher.next().await.unwrap();
    }
    let position = watcher.position();
    on_server(&server, |server| server.stop("fast")).await;
    let ended = tokio::time::timeout(Duration::from_secs(30), watcher.next())
        .await
        .expect("the watch ends within 30 s of the server going down");
    let error = ended.expect_err("the server is down");
    assert_eq!(
        error.unavailable_kind(),
        Some(lf_handoff_adapters::UnavailableKind::Unreachable),
        "{error}"
    );
    on_server(&server, OwnPostgres::start_again).await;
    try_lifecycle(&store, dir.path(), 1).await.unwrap();
    let mut resumed = store
        .watch(
            WatchFrom::After(position),
            lf_handoff_adapters::WatchFilter::default(),
        )
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(30), resumed.next())
        .await
        .expect("the resumed watch reads the new events")
        .unwrap();
    assert!(next.position > position);
    assert_eq!(next.seq, 1, "the next lifecycle's open: {next:?}");
}
