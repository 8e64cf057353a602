//! Tests on a PostgreSQL server of their own ([`OwnPostgres`]), which they
//! stop and start: a store rides out a restart of its server (C18,
//! transient faults).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, Store, StoreError};
use lf_handoff_conformance::fixtures::{outcome, wave_request};
use lf_handoff_conformance::own_postgres::{skip_or_fail, OwnPostgres};

/// One lifecycle: a new wave, open, attach, finish and claim its wake.
async fn lifecycle(store: &Store, dir: &std::path::Path, n: usize) -> Result<(), StoreError> {
    let wave = lf_handoff_adapters::domain::wave::Wave::new(
        <lf_handoff_adapters::domain::id::WaveId as lf_handoff_adapters::GenerateId>::new(),
        format!("wave {n}"),
        dir.display().to_string(),
    );
    store.create_wave(&wave).await?;
    let (opened, created) = store
        .open_interactive_handoff(wave_request(&wave, dir))
        .await?;
    assert!(created, "lifecycle {n}: the open created no handoff");
    store.attach_interactive_handoff(&opened.id).await?;
    let finished = store
        .finish_interactive_handoff(&opened.id, &outcome(n))
        .await?;
    assert_eq!(finished.outcome, Some(outcome(n)));
    assert!(
        store.claim_interactive_handoff_wake(&opened.id, 1).await?,
        "lifecycle {n}: generation 1 does not hold the wake"
    );
    Ok(())
}

/// Waits (at most `limit`) until `done` passes `count`.
async fn progress_past(done: &AtomicUsize, count: usize, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if done.load(Ordering::SeqCst) > count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Lifecycles run in a loop through one store while its server is stopped
/// (`pg_ctl stop -m fast`, which terminates every session), left down for
/// a second and started again: no call fails (the outage is shorter than
/// the store's retry window), and lifecycles go on after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_rides_out_a_restart_of_its_server() {
    let server = match tokio::task::spawn_blocking(OwnPostgres::start).await {
        Ok(Ok(server)) => Arc::new(server),
        Ok(Err(reason)) => return skip_or_fail(&reason),
        Err(panic) => panic!("starting the server panicked: {panic}"),
    };
    let store = open_store(&server.config("pool_size=2"))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    let dir = tempfile::tempdir().unwrap();

    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = tokio::spawn({
        let (store, done, stop) = (store.clone(), done.clone(), stop.clone());
        let dir = dir.path().to_path_buf();
        async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                lifecycle(&store, &dir, n).await.map_err(|e| {
                    format!("lifecycle {n} failed after {:?}: {e}", started.elapsed())
                })?;
                n += 1;
                done.store(n, Ordering::SeqCst);
            }
            Ok::<usize, String>(n)
        }
    });

    assert!(
        progress_past(&done, 2, Duration::from_secs(5)).await,
        "no lifecycle completed before the restart"
    );
    let restart = server.clone();
    tokio::task::spawn_blocking(move || restart.restart(Duration::from_secs(1)))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    let after_restart = done.load(Ordering::SeqCst);
    let progressed = progress_past(&done, after_restart + 3, Duration::from_secs(10)).await;
    stop.store(true, Ordering::SeqCst);
    let finished = worker.await.unwrap();
    let lifecycles = finished.unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    println!("{lifecycles} lifecycles, {after_restart} before the restart");
    assert!(
        progressed,
        "lifecycles stalled after the restart ({lifecycles} in all, {after_restart} before)"
    );
    // Everything the loop was told is stored.
    assert_eq!(
        store.list_interactive_handoffs(None).await.unwrap().len(),
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
    let server = match tokio::task::spawn_blocking(OwnPostgres::start).await {
        Ok(Ok(server)) => Arc::new(server),
        Ok(Err(reason)) => return skip_or_fail(&reason),
        Err(panic) => panic!("starting the server panicked: {panic}"),
    };
    let store = open_store(&server.config("pool_size=2"))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    let dir = tempfile::tempdir().unwrap();
    let wave = lf_handoff_adapters::domain::wave::Wave::new(
        <lf_handoff_adapters::domain::id::WaveId as lf_handoff_adapters::GenerateId>::new(),
        "waited".into(),
        dir.path().display().to_string(),
    );
    store.create_wave(&wave).await.unwrap();
    let (handoff, _) = store
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let mut waiter = lf_handoff_conformance::worker::Worker::spawn(
        &server.url(""),
        &["wait".to_string(), handoff.id.to_string(), "60".to_string()],
    );
    assert_eq!(waiter.line().await.as_deref(), Some("waiting"));
    // Lifecycles run on another handle through the restart, as another
    // process's would.
    let runner = open_store(&server.config("pool_size=2"))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let lifecycles = tokio::spawn({
        let (done, stop) = (done.clone(), stop.clone());
        let dir = dir.path().to_path_buf();
        async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                lifecycle(&runner, &dir, n)
                    .await
                    .map_err(|e| format!("lifecycle {n} failed: {e}"))?;
                n += 1;
                done.store(n, Ordering::SeqCst);
            }
            Ok::<usize, String>(n)
        }
    });
    assert!(
        progress_past(&done, 1, Duration::from_secs(5)).await,
        "no lifecycle completed before the restart"
    );
    let restart = server.clone();
    tokio::task::spawn_blocking(move || restart.restart(Duration::from_secs(1)))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    let after_restart = done.load(Ordering::SeqCst);
    assert!(
        progress_past(&done, after_restart + 2, Duration::from_secs(10)).await,
        "lifecycles stalled after the restart"
    );
    stop.store(true, Ordering::SeqCst);
    lifecycles
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()));
    // Then the finish the waiter is for, made after the restart.
    store.attach_interactive_handoff(&handoff.id).await.unwrap();
    store
        .finish_interactive_handoff(&handoff.id, &outcome(0))
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
    let server = match tokio::task::spawn_blocking(OwnPostgres::start).await {
        Ok(Ok(server)) => Arc::new(server),
        Ok(Err(reason)) => return skip_or_fail(&reason),
        Err(panic) => panic!("starting the server panicked: {panic}"),
    };
    let store = open_store(&server.config("pool_size=2"))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", server.log_tail()))
        .with_retry_window(Duration::from_secs(1));
    let dir = tempfile::tempdir().unwrap();
    lifecycle(&store, dir.path(), 0).await.unwrap();
    let mut watcher = store
        .watch(0, lf_handoff_adapters::WatchFilter::default())
        .await
        .unwrap();
    for _ in 0..4 {
        watcher.next().await.unwrap();
    }
    let position = watcher.position();
    let stop = server.clone();
    tokio::task::spawn_blocking(move || stop.stop("fast"))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    let ended = tokio::time::timeout(Duration::from_secs(30), watcher.next())
        .await
        .expect("the watch ends within 30 s of the server going down");
    let error = ended.expect_err("the server is down");
    assert_eq!(
        error.unavailable_kind(),
        Some(lf_handoff_adapters::UnavailableKind::Unreachable),
        "{error}"
    );
    let start = server.clone();
    tokio::task::spawn_blocking(move || start.start_again())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    lifecycle(&store, dir.path(), 1).await.unwrap();
    let mut resumed = store
        .watch(position, lf_handoff_adapters::WatchFilter::default())
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(30), resumed.next())
        .await
        .expect("the resumed watch reads the new events")
        .unwrap();
    assert!(next.position > position);
    assert_eq!(next.seq, 1, "the next lifecycle's open: {next:?}");
}
