//! Bad input: store configurations that are out of range never make
//! `open_store` panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lf_handoff_adapters::{open_store, SqliteConfig, StorageConfig, Synchronous, MAX_BUSY_TIMEOUT};

/// A busy timeout set directly on the struct, beyond what SQLite can hold,
/// used to panic inside the driver (or overflow a `Duration` addition); it is
/// now treated as the longest allowed.
#[tokio::test]
async fn an_enormous_busy_timeout_set_in_code_opens_the_store() {
    let dir = tempfile::tempdir().unwrap();
    for (n, timeout) in [
        MAX_BUSY_TIMEOUT + Duration::from_secs(1),
        Duration::from_millis(u64::from(u32::MAX)),
        Duration::MAX,
    ]
    .into_iter()
    .enumerate()
    {
        let config = StorageConfig::Sqlite(SqliteConfig {
            path: dir.path().join(format!("r{n}.db")),
            synchronous: Synchronous::Full,
            busy_timeout: timeout,
            max_connections: 2,
        });
        let store = open_store(&config).await.unwrap();
        assert!(store
            .list_interactive_handoffs(None)
            .await
            .unwrap()
            .is_empty());
    }
}
