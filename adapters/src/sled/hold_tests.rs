//! Tests of how a process holds a sled store (`SledHold`): kept while
//! open, or only during calls, as the command line does; and of the
//! signal file every write touches.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use lf_handoff_application::testing::OpenRequest;
use lf_handoff_application::{GenerateId, ListQuery, Store, Waited};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus,
};
use lf_handoff_domain::wave::Wave;

use super::files::SIGNAL;
use super::{SledHold, SLED_LINGER};
use crate::file_events::FileWatch;
use crate::{open_store, StorageConfig};

async fn open_handoff(store: &Store, dir: &Path) -> InteractiveHandoff {
    let wave = Wave::new(WaveId::new(), "w".into(), dir.display().to_string());
    store.create_wave(&wave).await.unwrap();
    let parent = InteractiveHandoffParent::Wave(wave.id().clone());
    store
        .open_interactive_handoff(OpenRequest::new(&parent).cwd(dir).build())
        .await
        .unwrap()
        .0
}

/// Whether another holder (as another process would be) can open the
/// store's `Db` within `patience`: sled's lock is free.
fn lock_is_free_within(path: &Path, patience: Duration) -> bool {
    let until = Instant::now() + patience;
    loop {
        match ::sled::Config::new().path(path).open() {
            Ok(db) => {
                drop(db);
                return true;
            }
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => return false,
        }
    }
}

fn done(summary: &str) -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Completed {
        summary: summary.into(),
    }
}

// In a build of sled alone, its variant is the only one.
#[allow(irrefutable_let_patterns)]
#[test]
fn the_command_line_setting_holds_only_a_sled_store_during_calls() {
    let sled = StorageConfig::sled("/srv/lf").shared_with_other_processes();
    let StorageConfig::Sled(config) = &sled else {
        panic!("{sled:?}");
    };
    assert_eq!(config.hold, SledHold::DuringCalls);
    assert_eq!(sled.url(), "sled:///srv/lf?hold=calls");
    #[cfg(feature = "sqlite")]
    {
        let sqlite = StorageConfig::sqlite("/srv/lf.db");
        assert_eq!(sqlite.clone().shared_with_other_processes(), sqlite);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_held_during_calls_lets_it_go_when_idle_and_opens_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = open_store(&StorageConfig::sled(&path).shared_with_other_processes())
        .await
        .unwrap();
    let handoff = open_handoff(&store, dir.path()).await;
    tokio::time::sleep(SLED_LINGER * 2).await;
    let free = tokio::task::spawn_blocking({
        let path = path.clone();
        move || lock_is_free_within(&path, Duration::from_secs(10))
    });
    assert!(free.await.unwrap(), "the idle store is still held");
    // Its next call opens the store again and finds what it wrote.
    let read = store.get_interactive_handoff(&handoff.id).await.unwrap();
    assert_eq!(read, Some(handoff));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_held_while_open_keeps_it_between_calls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = open_store(&StorageConfig::sled(&path)).await.unwrap();
    open_handoff(&store, dir.path()).await;
    tokio::time::sleep(SLED_LINGER * 2).await;
    let free = tokio::task::spawn_blocking({
        let path = path.clone();
        move || lock_is_free_within(&path, Duration::ZERO)
    });
    assert!(!free.await.unwrap(), "a kept store was let go");
}

/// Every durable write touches the signal file, which the kernel announces;
/// a read does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_and_no_read_touches_the_signal_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = open_store(&StorageConfig::sled(&path)).await.unwrap();
    let handoff = open_handoff(&store, dir.path()).await;
    let Some(watch) = FileWatch::new(&path, &[OsString::from(SIGNAL)]) else {
        eprintln!("skipped: this kernel gives no file notifications here");
        return;
    };
    store.get_interactive_handoff(&handoff.id).await.unwrap();
    store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    let read = tokio::time::timeout(Duration::from_millis(300), watch.changed()).await;
    assert!(read.is_err(), "a read touched the signal file");
    store
        .finish_interactive_handoff(&handoff.id, &done("ok"), None)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), watch.changed())
        .await
        .expect("the finish touched no signal file");
}

/// A waiter on a store held during calls is woken by a write of another
/// holder, made while it had let the store go, and reads the finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_holding_the_store_during_calls_sees_another_holders_finish() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let waiting = open_store(&StorageConfig::sled(&path).shared_with_other_processes())
        .await
        .unwrap();
    let handoff = open_handoff(&waiting, dir.path()).await;
    let id = handoff.id.clone();
    let waiter =
        tokio::spawn(async move { waiting.wait(&id, Some(Duration::from_secs(60))).await });
    tokio::time::sleep(SLED_LINGER * 3).await;
    // The waiter let the store go; another holder takes it and finishes.
    let other = open_store(&StorageConfig::sled(&path)).await.unwrap();
    other
        .finish_interactive_handoff(&handoff.id, &done("by the person"), None)
        .await
        .unwrap();
    drop(other);
    match waiter.await.unwrap().unwrap() {
        Waited::Ended(ended) => {
            assert_eq!(ended.status, InteractiveHandoffStatus::Completed);
        }
        Waited::TimedOut(handoff) => panic!("the waiter was not woken: {handoff:?}"),
    }
}
