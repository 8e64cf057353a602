//! Tests of SQLite's own mechanisms: the busy handler (`busy.rs`), the
//! change signal's file notifications (`watch.rs`) and the loads on the
//! caller's thread (`inline.rs`).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_application::{Changes, GenerateId as _, Store, StoreError, UnavailableKind};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::wave::Wave;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions as _, Connection as _};

use super::watch::{watch_files, DataVersion, Schedule, CHASE_FOR, DATA_VERSION_POLL};
use crate::changes::ChangeFeed;
use crate::{open_store, StorageConfig};

/// A store at `path` whose writers wait at most `busy_timeout`.
async fn store_at(path: &Path, busy_timeout: &str) -> Store {
    store_with(path, &format!("busy_timeout={busy_timeout}")).await
}

/// A store at `path` opened with the URL options `query`.
async fn store_with(path: &Path, query: &str) -> Store {
    let url = format!("sqlite://{}?{query}", path.display());
    open_store(&StorageConfig::from_url(&url).unwrap())
        .await
        .unwrap()
}

fn wave(dir: &Path) -> Wave {
    Wave::new(WaveId::new(), "w".into(), dir.display().to_string())
}

/// A plain connection to `path` holding its write lock.
async fn hold_write_lock(path: &Path) -> SqliteConnection {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writer_kept_from_the_lock_past_the_busy_timeout_fails_as_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = store_at(&path, "300ms").await;
    store.create_wave(&wave(dir.path())).await.unwrap();

    let mut holder = hold_write_lock(&path).await;
    let started = Instant::now();
    let refused = store.create_wave(&wave(dir.path())).await;
    let waited = started.elapsed();
    match refused {
        Err(StoreError::Unavailable {
            kind: UnavailableKind::Locked,
            message,
            ..
        }) => assert!(message.contains("300 ms"), "{message}"),
        other => panic!("expected Unavailable (locked), got {other:?}"),
    }
    // It gave up at the busy timeout, not before.
    assert!(
        waited >= Duration::from_millis(300),
        "gave up after {waited:?}"
    );

    // Nothing was written, and the store writes again once the lock is free.
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    holder.close().await.unwrap();
    store.create_wave(&wave(dir.path())).await.unwrap();
    assert_eq!(waves(&path).await, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writer_kept_waiting_gets_the_lock_once_it_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = store_at(&path, "30s").await;
    store.create_wave(&wave(dir.path())).await.unwrap();

    let mut holder = hold_write_lock(&path).await;
    let writer = {
        let (store, wave) = (store.clone(), wave(dir.path()));
        tokio::spawn(async move { store.create_wave(&wave).await })
    };
    // The writer waits (and keeps trying) while the lock is held.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writer.is_finished());
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    writer.await.unwrap().unwrap();
    holder.close().await.unwrap();
    assert_eq!(waves(&path).await, 2);
}

/// How many waves (parents) the store at `path` holds.
async fn waves(path: &Path) -> i64 {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap();
    let n = sqlx::query_scalar("SELECT count(*) FROM parents")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    n
}

/// Set in the child process of
/// [`a_commit_of_another_process_wakes_a_watch_through_the_file_notification`]:
/// the store the child writes to.
const CHILD_WRITES_TO: &str = "LF_HANDOFF_TEST_CHILD_WRITES_TO";

/// Runs this test binary again as a child process that opens the store at
/// `path` and writes one wave to it.
fn write_from_another_process(path: &Path, test: &str) {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD_WRITES_TO, path)
        .output()
        .unwrap();
    assert!(
        child.status.success(),
        "the writing child failed ({}): {}{}",
        child.status,
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
}

/// The change signal of the store at `path` alone, its value read every
/// `recheck` without a notification and its files looked at once an
/// hour, with a subscription whose first wake (the baseline's) is taken.
async fn signal_of(path: &Path, recheck: Duration) -> (ChangeFeed, Box<dyn Changes>) {
    let feed = ChangeFeed::new(Arc::new(DataVersion {
        path: path.to_path_buf(),
        options: SqliteConnectOptions::new().filename(path),
        look_every: Duration::from_secs(3600),
        recheck,
    }));
    let mut changes = feed.subscribe();
    // The start of the watch wakes the readers once.
    assert!(changes.changed(Duration::from_secs(60)).await.unwrap());
    (feed, changes)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_of_another_process_wakes_a_watch_through_the_file_notification() {
    let this_test = format!(
        "{}::a_commit_of_another_process_wakes_a_watch_through_the_file_notification",
        module_path!().split_once("::").map_or("", |(_, path)| path)
    );
    if let Some(path) = std::env::var_os(CHILD_WRITES_TO) {
        // The child: one write, through a store handle of its own.
        let path = Path::new(&path);
        let store = open_store(&StorageConfig::sqlite(path.to_path_buf()))
            .await
            .unwrap();
        store
            .create_wave(&wave(path.parent().unwrap()))
            .await
            .unwrap();
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = store_at(&path, "30s").await;
    store.create_wave(&wave(dir.path())).await.unwrap();
    assert!(
        watch_files(&std::fs::canonicalize(&path).unwrap()).is_some(),
        "this machine gives no file notifications (inotify) for {}",
        path.display()
    );
    // The change signal alone (without the readers' own re-read), its
    // value read without a notification once an hour: only a
    // notification can wake it within the test.
    let (_feed, mut changes) = signal_of(&path, Duration::from_secs(3600)).await;

    write_from_another_process(&path, &this_test);
    assert!(
        changes.changed(Duration::from_secs(60)).await.unwrap(),
        "another process's commit did not wake the watch"
    );

    // A checkpoint that truncates the WAL, then a commit once the reads
    // that follow a notification have stopped: the commit writes the WAL
    // from its start, and that wakes the watch too.
    let mut conn = SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    assert_eq!(busy, 0, "the checkpoint could not run");
    let wal = dir.path().join("store.db-wal");
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
    tokio::time::sleep(CHASE_FOR + Duration::from_millis(500)).await;
    // A checkpoint changes no data, but SQLite may count the WAL's restart
    // as a change of `data_version`: take that wake, if any, now.
    changes.changed(Duration::ZERO).await.unwrap();

    write_from_another_process(&path, &this_test);
    assert!(
        changes.changed(Duration::from_secs(60)).await.unwrap(),
        "a commit after a truncating checkpoint did not wake the watch"
    );
    drop(store);
}

#[test]
fn the_value_is_read_after_notifications_and_every_recheck_without_them() {
    let recheck = Duration::from_secs(5);
    let start = Instant::now();
    // Without file notifications, the first read at once.
    assert_eq!(Schedule::new(start, false, recheck).next, start);
    // With them, the first read (the baseline) at the first notification,
    // or without one after the recheck; then the next after another.
    let mut schedule = Schedule::new(start, true, recheck);
    assert_eq!(schedule.next, start + recheck);
    // Quiet until a notification: that first reading wakes nobody.
    assert!(schedule.quiet);
    schedule.read(start + recheck, true);
    assert_eq!(schedule.next, start + recheck * 2);
    // A notification brings the next read close, and reads go on at
    // growing gaps for a while after it, then fall back to the recheck.
    let notified = start + recheck + Duration::from_secs(1);
    schedule.notified(notified);
    assert!(!schedule.quiet);
    assert!(schedule.next <= notified + Duration::from_millis(1));
    let mut at = schedule.next;
    let mut reads = 0;
    while at < notified + CHASE_FOR + recheck {
        schedule.read(at, true);
        reads += 1;
        if schedule.next - at == recheck {
            break;
        }
        at = schedule.next;
    }
    assert!(at >= notified + CHASE_FOR, "the reads stopped at {at:?}");
    assert!(reads < 20, "{reads} reads after one notification");
    assert_eq!(schedule.next, at + recheck);
    // A failed read is tried again after a pause.
    schedule.read(at, false);
    assert!(schedule.next < at + Duration::from_secs(1) + Duration::from_millis(1));
    // Without notifications the value is polled.
    schedule.unwatched(at);
    assert_eq!(schedule.next, at);
    schedule.read(at, true);
    assert_eq!(schedule.next, at + DATA_VERSION_POLL);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_store_wakes_nobody_and_a_commit_wakes_its_watch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = store_at(&path, "30s").await;
    store.create_wave(&wave(dir.path())).await.unwrap();
    // The value read every 100 ms without a notification.
    let (_feed, mut changes) = signal_of(&path, Duration::from_millis(100)).await;
    // Let the baseline (the first reading) and the reads that follow
    // notifications (if any) pass, and take their wakes (if any).
    tokio::time::sleep(CHASE_FOR + Duration::from_millis(200)).await;
    changes.changed(Duration::ZERO).await.unwrap();
    // Ten safety reads of a store nobody writes wake nobody.
    assert!(!changes.changed(Duration::from_secs(1)).await.unwrap());
    store.create_wave(&wave(dir.path())).await.unwrap();
    assert!(changes.changed(Duration::from_secs(60)).await.unwrap());
}

/// A store at `path` holding one handoff, which it returns.
async fn store_with_a_handoff(
    path: &Path,
    query: &str,
) -> (
    Store,
    lf_handoff_domain::interactive_handoff::InteractiveHandoff,
) {
    let store = store_with(path, query).await;
    let dir = path.parent().unwrap();
    let wave = wave(dir);
    store.create_wave(&wave).await.unwrap();
    let parent =
        lf_handoff_domain::interactive_handoff::InteractiveHandoffParent::Wave(wave.id().clone());
    let (handoff, _) = store
        .open_interactive_handoff(
            lf_handoff_application::testing::OpenRequest::new(&parent)
                .cwd(dir)
                .build(),
        )
        .await
        .unwrap();
    (store, handoff)
}

/// Runs `statements` on a plain connection to `path`.
async fn run_sql(path: &Path, statements: &[&str]) {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap();
    for statement in statements {
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_does_not_wait_behind_a_writer_kept_from_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // One pool connection, which the writer below keeps while it waits.
    let (store, handoff) = store_with_a_handoff(&path, "busy_timeout=20s&max_connections=1").await;

    let mut holder = hold_write_lock(&path).await;
    let writer = tokio::spawn({
        let store = store.clone();
        let wave = wave(dir.path());
        async move { store.create_wave(&wave).await }
    });
    // Let the writer take the pool's connection and start waiting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished());

    // Through the pool the load would wait for that connection (20 s and
    // more); it reads on its own thread at once.
    let loaded = tokio::time::timeout(
        Duration::from_secs(10),
        store.get_interactive_handoff(&handoff.id),
    )
    .await
    .expect("the load waited for the writer's connection")
    .unwrap();
    assert_eq!(loaded, Some(handoff.clone()));
    assert!(!writer.is_finished(), "the writer still waits for the lock");

    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    holder.close().await.unwrap();
    writer.await.unwrap().unwrap();
    assert_eq!(waves(&path).await, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_load_sees_every_commit_made_before_it_through_any_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (store, handoff) = store_with_a_handoff(&path, "max_connections=1").await;
    let other = store_at(&path, "5s").await;
    for round in 0..20 {
        let reason = format!("changed {round}");
        run_sql(
            &path,
            &[&format!(
                "UPDATE handoffs SET reason = '{reason}', version = version + 1 WHERE id = '{}'",
                handoff.id
            )],
        )
        .await;
        for reader in [&store, &other] {
            let loaded = reader
                .get_interactive_handoff(&handoff.id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(loaded.reason, reason);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_row_is_refused_whichever_way_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (store, handoff) = store_with_a_handoff(&path, "max_connections=1").await;
    // A value of the wrong type fails the read on the caller's thread, and
    // the pool's read reports it; a value of the right type that the
    // domain refuses is refused by the one check every row passes.
    for damage in ["created_at = 'yesterday'", "status = 'bogus'"] {
        run_sql(
            &path,
            &[&format!(
                "UPDATE handoffs SET {damage} WHERE id = '{}'",
                handoff.id
            )],
        )
        .await;
        match store.get_interactive_handoff(&handoff.id).await {
            Err(StoreError::Unavailable {
                kind: UnavailableKind::Damaged,
                message,
                ..
            }) => assert!(message.contains("unreadable"), "{damage}: {message}"),
            other => panic!("{damage}: expected Unavailable (damaged), got {other:?}"),
        }
        run_sql(
            &path,
            &[&format!(
                "UPDATE handoffs SET created_at = {}, status = '{}' WHERE id = '{}'",
                lf_handoff_domain::timestamp::to_unix_micros(handoff.created_at),
                handoff.status.as_str(),
                handoff.id
            )],
        )
        .await;
        let loaded = store.get_interactive_handoff(&handoff.id).await.unwrap();
        assert_eq!(loaded, Some(handoff.clone()), "{damage}: mended");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn inline_reads_answer_only_when_a_connection_of_their_own_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (_store, handoff) = store_with_a_handoff(&path, "max_connections=1").await;
    let reads = super::inline::InlineReads::new(path.clone());

    let row = reads.handoff(handoff.id.as_str()).expect("read at once");
    assert_eq!(
        row.map(|row| row.id.into_owned()),
        Some(handoff.id.to_string())
    );
    assert_eq!(reads.handoff("ih_unknown"), Some(None));

    // Every connection in use by other threads: the caller goes through
    // the pool rather than wait.
    let held = reads.hold_all();
    assert!(!held.is_empty());
    assert!(reads.handoff(handoff.id.as_str()).is_none());
    drop(held);
    assert!(reads.handoff(handoff.id.as_str()).is_some());

    // A file that cannot be opened turns them off for a while, and
    // nothing is created.
    let missing = super::inline::InlineReads::new(dir.path().join("missing.db"));
    assert!(missing.handoff(handoff.id.as_str()).is_none());
    assert!(!dir.path().join("missing.db").exists(), "nothing created");
    assert!(format!("{missing:?}").contains("off: true"), "{missing:?}");
}
