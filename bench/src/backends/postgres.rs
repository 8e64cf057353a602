//! PostgreSQL: every store is a fresh schema on the test server; the raw
//! baseline is one direct connection with the same `search_path`.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::str::FromStr;

use async_trait::async_trait;
use lf_handoff_adapters::raw_sql::column_list;
use lf_handoff_adapters::{PostgresConfig, StorageConfig};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions as _, Connection as _, Row as _};
use tokio::sync::Mutex;

use super::{created, BenchBackend, RawEngine};
use crate::error::{fail, BenchResult, Context};
use crate::raw_sql::RawSql;

/// The server the benchmark uses when neither `--postgres-url` nor
/// `LF_HANDOFF_TEST_POSTGRES_URL` names one.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Stores in fresh schemas of one database.
#[derive(Debug)]
pub struct PostgresBench {
    /// The server URL, without a schema.
    url: String,
    scratch: PathBuf,
    settings: Vec<(String, String)>,
    data_directory: Option<String>,
}

impl PostgresBench {
    /// Connects to `url` once to check it is usable and read its settings.
    ///
    /// # Errors
    /// Why the server cannot be used.
    pub async fn connect(url: &str, scratch: PathBuf) -> BenchResult<Self> {
        let config = PostgresConfig::from_url(url).context("postgres URL")?;
        let mut conn = PgConnectOptions::from_str(&config.connection)
            .context("postgres URL")?
            .connect()
            .await
            .context(format!("cannot reach {}", config.redacted_url()))?;
        let mut settings = Vec::new();
        for name in [
            "server_version",
            "fsync",
            "synchronous_commit",
            "wal_sync_method",
            "full_page_writes",
            "shared_buffers",
        ] {
            let value: String = sqlx::query(&format!("SHOW {name}"))
                .fetch_one(&mut conn)
                .await
                .and_then(|row| row.try_get(0))
                .context(format!("SHOW {name}"))?;
            settings.push((name.to_string(), value));
        }
        // Reading the data directory needs privileges the server may not
        // grant; it only serves a note.
        let data_directory = sqlx::query("SHOW data_directory")
            .fetch_one(&mut conn)
            .await
            .and_then(|row| row.try_get::<String, _>(0))
            .ok();
        conn.close().await.ok();
        Ok(Self {
            url: url.to_string(),
            scratch,
            settings,
            data_directory,
        })
    }

    fn schema(label: &str) -> String {
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        format!("lf_bench_{}_{label}", std::process::id())
    }

    fn config(&self, schema: &str) -> BenchResult<StorageConfig> {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        StorageConfig::postgres(&format!("{}{separator}schema={schema}", self.url))
            .context("postgres store URL")
    }

    /// The raw engine under the store `config` names: one connection to
    /// its schema.
    pub(crate) async fn raw_engine(config: &StorageConfig) -> BenchResult<Box<dyn RawEngine>> {
        let conn = Self::connect_to(config).await?;
        Ok(Box::new(RawSql::Postgres(Mutex::new(conn))))
    }

    async fn connect_to(config: &StorageConfig) -> BenchResult<PgConnection> {
        let postgres = postgres_config(config)?;
        PgConnectOptions::from_str(&postgres.connection)
            .context("postgres URL")?
            .options([("search_path", postgres.schema.as_str())])
            .connect()
            .await
            .context("raw PostgreSQL connection")
    }
}

fn postgres_config(config: &StorageConfig) -> BenchResult<&PostgresConfig> {
    match config {
        StorageConfig::Postgres(postgres) => Ok(postgres),
        other => fail(format!("not a PostgreSQL store: {other}")),
    }
}

#[async_trait]
impl BenchBackend for PostgresBench {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn durability(&self) -> String {
        let setting = |name: &str| {
            self.settings
                .iter()
                .find(|(key, _)| key == name)
                .map_or("?", |(_, value)| value.as_str())
        };
        format!(
            "server fsync={}, synchronous_commit={}, wal_sync_method={}: a commit returns once \
             the server's WAL is on disk",
            setting("fsync"),
            setting("synchronous_commit"),
            setting("wal_sync_method")
        )
    }

    fn disk_dir(&self) -> Option<PathBuf> {
        Some(self.scratch.clone())
    }

    async fn notes(&self) -> Vec<String> {
        let mut notes = vec![format!(
            "server {} ({}), PostgreSQL {}, shared_buffers {}",
            PostgresConfig::from_url(&self.url)
                .map(|c| c.redacted_url())
                .unwrap_or_default(),
            "TCP, same machine",
            self.settings
                .iter()
                .find(|(k, _)| k == "server_version")
                .map_or("?", |(_, v)| v.as_str()),
            self.settings
                .iter()
                .find(|(k, _)| k == "shared_buffers")
                .map_or("?", |(_, v)| v.as_str()),
        )];
        let scratch_dev = std::fs::metadata(&self.scratch).map(|m| m.dev()).ok();
        let note = match &self.data_directory {
            Some(dir) => match std::fs::metadata(dir).map(|m| m.dev()) {
                Ok(dev) if Some(dev) == scratch_dev => format!(
                    "the server's data directory {dir} is on the same device as the fsync probe"
                ),
                Ok(_) => format!(
                    "the server's data directory {dir} is on another device than the fsync \
                     probe; the probe's rate is not the server's"
                ),
                Err(_) => format!(
                    "the server's data directory {dir} is not visible here; the fsync probe \
                     measures this machine's scratch directory only"
                ),
            },
            None => "the server's data directory is unknown; the fsync probe measures this \
                     machine's scratch directory only"
                .to_string(),
        };
        notes.push(note);
        notes
    }

    async fn new_store(&self, label: &str) -> BenchResult<StorageConfig> {
        let config = self.config(&Self::schema(label))?;
        self.remove(&config).await;
        created(config, format!("create schema {}", Self::schema(label))).await
    }

    async fn raw(&self, config: &StorageConfig) -> BenchResult<Box<dyn RawEngine>> {
        Self::raw_engine(config).await
    }

    fn raw_get_command(&self, config: &StorageConfig, id: &str) -> Option<Vec<String>> {
        let postgres = postgres_config(config).ok()?;
        Some(vec![
            "psql".into(),
            "-w".into(),
            "-At".into(),
            postgres.connection.clone(),
            "-c".into(),
            format!(
                "SELECT {} FROM \"{}\".handoffs WHERE id = '{id}'",
                column_list(),
                postgres.schema
            ),
        ])
    }

    async fn remove(&self, config: &StorageConfig) {
        let Ok(postgres) = postgres_config(config) else {
            return;
        };
        let schema = postgres.schema.clone();
        if let Ok(mut conn) = Self::connect_to(config).await {
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .execute(&mut conn)
                .await;
            conn.close().await.ok();
        }
    }
}
