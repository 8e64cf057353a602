//! Tests of SQLite's own mechanisms: the busy handler (`busy.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use lf_handoff_application::{GenerateId as _, Store, StoreError, UnavailableKind};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::wave::Wave;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions as _, Connection as _};

use crate::{open_store, StorageConfig};

/// A store at `path` whose writers wait at most `busy_timeout`.
async fn store_at(path: &Path, busy_timeout: &str) -> Store {
    let url = format!("sqlite://{}?busy_timeout={busy_timeout}", path.display());
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
