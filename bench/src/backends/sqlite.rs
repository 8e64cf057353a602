//! SQLite: a file in the scratch directory; the raw baseline is a sqlx pool
//! on the same file with the adapter's pragmas.

use std::path::PathBuf;

use async_trait::async_trait;
use lf_handoff_adapters::raw_sql::column_list;
use lf_handoff_adapters::{StorageConfig, Synchronous};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::ConnectOptions as _;
use tokio::sync::Mutex;

use super::{created, remove_sqlite_files, BenchBackend, RawEngine};
use crate::error::{fail, BenchResult, Context};
use crate::raw_sql::RawSql;

/// SQLite stores under `dir`.
#[derive(Debug)]
pub struct SqliteBench {
    dir: PathBuf,
}

impl SqliteBench {
    /// Stores go in `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }
}

fn sqlite_config(config: &StorageConfig) -> BenchResult<&lf_handoff_adapters::SqliteConfig> {
    match config {
        StorageConfig::Sqlite(sqlite) => Ok(sqlite),
        other => fail(format!("not a SQLite store: {other}")),
    }
}

#[async_trait]
impl BenchBackend for SqliteBench {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn durability(&self) -> String {
        "WAL, synchronous=FULL (the default): one fsync of the WAL per commit".into()
    }

    fn disk_dir(&self) -> Option<PathBuf> {
        Some(self.dir.clone())
    }

    async fn new_store(&self, label: &str) -> BenchResult<StorageConfig> {
        let path = self.dir.join(format!("{label}.db"));
        remove_sqlite_files(&path);
        let config = StorageConfig::sqlite(path);
        let what = format!("create {config}");
        created(config, what).await
    }

    async fn raw(&self, config: &StorageConfig) -> BenchResult<Box<dyn RawEngine>> {
        let sqlite = sqlite_config(config)?;
        // The adapter's connection settings: WAL (already set in the file),
        // the same synchronous level, busy timeout and foreign keys.
        let options = SqliteConnectOptions::new()
            .filename(&sqlite.path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match sqlite.synchronous {
                Synchronous::Full => SqliteSynchronous::Full,
                Synchronous::Normal => SqliteSynchronous::Normal,
            })
            .busy_timeout(sqlite.busy_timeout)
            .foreign_keys(true);
        let conn = options.connect().await.context(format!(
            "raw SQLite connection to {}",
            sqlite.path.display()
        ))?;
        Ok(Box::new(RawSql::Sqlite(Mutex::new(conn))))
    }

    fn raw_get_command(&self, config: &StorageConfig, id: &str) -> Option<Vec<String>> {
        let sqlite = sqlite_config(config).ok()?;
        Some(vec![
            "sqlite3".into(),
            sqlite.path.display().to_string(),
            format!("SELECT {} FROM handoffs WHERE id = '{id}'", column_list()),
        ])
    }

    async fn remove(&self, config: &StorageConfig) {
        if let Ok(sqlite) = sqlite_config(config) {
            remove_sqlite_files(&sqlite.path);
        }
    }
}
