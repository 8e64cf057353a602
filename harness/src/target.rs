//! Where a harness run keeps its store.
//!
//! Every run gets a fresh store, so nothing a previous run left can hide or
//! cause a failure: a new temporary directory for the embedded backends
//! (SQLite, sled), a new schema on the server for PostgreSQL, dropped when
//! the run ends. When a run fails its store is kept, and its place printed,
//! so it can be inspected.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use lf_handoff_adapters::{GenerateId, StorageConfig};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tempfile::TempDir;

/// The backends this build can exercise, in the order runs report them.
pub const BACKENDS: &[&str] = &["sqlite", "sled", "postgres"];

/// The PostgreSQL server used when neither `--postgres-url` nor
/// `LF_HANDOFF_TEST_POSTGRES_URL` names one.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Connections each PostgreSQL store handle of a run may open. Kept small:
/// a race runs up to 64 worker processes against one server.
const POSTGRES_POOL_SIZE: u32 = 2;

/// Settings that say where stores are made.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The directory under which each run's temporary directory is made.
    pub base_dir: PathBuf,
    /// The PostgreSQL server (a `postgres://` URL) in which each run makes a
    /// fresh schema.
    pub postgres_url: String,
}

impl Placement {
    /// `base_dir`, and the PostgreSQL server from `postgres_url`, else
    /// `LF_HANDOFF_TEST_POSTGRES_URL`, else [`DEFAULT_POSTGRES_URL`].
    pub fn new(base_dir: PathBuf, postgres_url: Option<String>) -> Self {
        let postgres_url = postgres_url
            .or_else(|| std::env::var("LF_HANDOFF_TEST_POSTGRES_URL").ok())
            .unwrap_or_else(|| DEFAULT_POSTGRES_URL.to_string());
        Self {
            base_dir,
            postgres_url,
        }
    }
}

/// A fresh store for one backend, removed when the run is done.
#[derive(Debug)]
pub struct StoreTarget {
    backend: &'static str,
    config: StorageConfig,
    /// Always made: the handoffs' working directory, and the embedded
    /// backends' store.
    dir: TempDir,
    /// For PostgreSQL: the server connection options and the run's schema.
    schema: Option<(PgConnectOptions, String)>,
    /// The configuration child processes use: for PostgreSQL it names their
    /// sessions (`application_name`), so [`settle`](Self::settle) can wait
    /// for them to end.
    child_config: StorageConfig,
}

impl StoreTarget {
    /// Makes a fresh, empty store location for `backend`.
    ///
    /// # Errors
    /// A sentence naming the problem: an unknown backend (naming the known
    /// ones), a directory that cannot be made, a PostgreSQL URL that is not
    /// usable or a server that cannot be reached.
    pub async fn create(backend: &str, placement: &Placement) -> Result<Self, String> {
        let backend = parse_backend(backend)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("lf-harness-{backend}-"))
            .tempdir_in(&placement.base_dir)
            .map_err(|e| {
                format!(
                    "cannot make a temporary directory in {}: {e}",
                    placement.base_dir.display()
                )
            })?;
        let (config, schema) = match backend {
            "sqlite" => (StorageConfig::sqlite(dir.path().join("registry.db")), None),
            "sled" => (StorageConfig::sled(dir.path().join("registry.sled")), None),
            "postgres" => {
                let (config, options, schema) = fresh_schema(&placement.postgres_url).await?;
                (config, Some((options, schema)))
            }
            other => return Err(format!("backend {other} has no store placement")),
        };
        let child_config = match (&config, &schema) {
            (StorageConfig::Postgres(postgres), Some((_, schema))) => {
                let mut child = postgres.clone();
                let separator = if child.connection.contains('?') {
                    '&'
                } else {
                    '?'
                };
                child.connection = format!(
                    "{}{separator}application_name={}",
                    child.connection,
                    child_session_name(schema)
                );
                StorageConfig::Postgres(child)
            }
            _ => config.clone(),
        };
        Ok(Self {
            backend,
            config,
            dir,
            schema,
            child_config,
        })
    }

    /// The URL child processes open: the store's, naming their sessions on
    /// a server.
    pub fn child_url(&self) -> String {
        self.child_config.url()
    }

    /// Waits until every child process's work has reached the store.
    ///
    /// An embedded store is settled once the child is dead. A server may
    /// still be running a killed client's last statement, and commit it,
    /// after the client is gone; this waits (up to a minute) until the
    /// server has no session of a child left, so a later check sees the
    /// final state.
    ///
    /// # Errors
    /// A sentence naming why it could not tell.
    pub async fn settle(&self) -> Result<(), String> {
        let Some((options, schema)) = &self.schema else {
            return Ok(());
        };
        let name = child_session_name(schema);
        let mut conn = options
            .connect()
            .await
            .map_err(|e| format!("cannot connect to see the children's sessions end: {e}"))?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let sessions: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            )
            .bind(&name)
            .fetch_one(&mut conn)
            .await
            .map_err(|e| format!("cannot read the server's sessions: {e}"))?;
            if sessions == 0 {
                let _ = conn.close().await;
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "{sessions} session(s) of a killed child still open on the server after 60 s"
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The store's configuration.
    pub fn config(&self) -> &StorageConfig {
        &self.config
    }

    /// The store's URL, which a child process opens.
    pub fn url(&self) -> String {
        self.config.url()
    }

    /// A directory the run may use (as a handoff's cwd, a task's worktree).
    pub fn work_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether separate OS processes may use the store at once.
    pub fn shares_across_processes(&self) -> bool {
        self.backend != "sled"
    }

    /// Removes the store, or keeps it when `keep` and says where it is.
    pub async fn finish(self, keep: bool) -> Option<String> {
        if keep {
            let dir = self.dir.keep();
            return Some(match self.schema {
                Some((_, schema)) => {
                    format!("schema {schema} of {} (and {})", self.config, dir.display())
                }
                None => dir.display().to_string(),
            });
        }
        if let Some((options, schema)) = &self.schema {
            if let Err(message) = drop_schema(options, schema).await {
                eprintln!("warning: {message}");
            }
        }
        None
    }
}

/// Names a fresh schema on the server of `url` (checking the server
/// answers), with a small pool per store handle.
async fn fresh_schema(url: &str) -> Result<(StorageConfig, PgConnectOptions, String), String> {
    let Ok(StorageConfig::Postgres(mut config)) = StorageConfig::from_url(url) else {
        return Err(format!(
            "the PostgreSQL URL {url:?} is not usable; pass --postgres-url postgres://user@host:port/db"
        ));
    };
    let options = PgConnectOptions::from_str(&config.connection)
        .map_err(|e| format!("the PostgreSQL URL is malformed: {e}"))?;
    let shown = StorageConfig::Postgres(config.clone()).to_string();
    let conn = tokio::time::timeout(config.acquire_timeout, options.connect())
        .await
        .map_err(|_| format!("the PostgreSQL server {shown} does not answer"))?
        .map_err(|e| {
            format!(
                "cannot reach the PostgreSQL server {shown}: {e}; start it, pass --postgres-url, \
                 or leave postgres out of --backends"
            )
        })?;
    let _ = conn.close().await;
    // A fresh name: the id generator's UUID v7, hex digits only.
    let unique: String = lf_handoff_domain::id::WaveId::new()
        .as_str()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    let schema = format!("lf_harness_{unique}");
    config.schema = schema.clone();
    config.pool_size = POSTGRES_POOL_SIZE;
    Ok((StorageConfig::Postgres(config), options, schema))
}

/// The `application_name` of child sessions in `schema`'s run.
fn child_session_name(schema: &str) -> String {
    format!("{schema}_child")
}

async fn drop_schema(options: &PgConnectOptions, schema: &str) -> Result<(), String> {
    let mut conn = options
        .connect()
        .await
        .map_err(|e| format!("cannot connect to drop schema {schema}: {e}"))?;
    sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .execute(&mut conn)
        .await
        .map_err(|e| format!("cannot drop schema {schema}: {e}"))?;
    let _ = conn.close().await;
    Ok(())
}

/// Checks a backend name against [`BACKENDS`].
///
/// # Errors
/// A sentence naming the backends this build has.
pub fn parse_backend(name: &str) -> Result<&'static str, String> {
    BACKENDS
        .iter()
        .copied()
        .find(|known| *known == name)
        .ok_or_else(|| {
            format!(
                "unknown backend {name:?}; this build has: {}",
                BACKENDS.join(", ")
            )
        })
}

/// Parses a comma-separated backend list such as `sqlite,sled`; `all`
/// means every backend of this build.
///
/// # Errors
/// As [`parse_backend`], or for an empty list.
pub fn parse_backends(list: &str) -> Result<Vec<&'static str>, String> {
    if list.trim() == "all" {
        return Ok(BACKENDS.to_vec());
    }
    let mut backends = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let backend = parse_backend(name)?;
        if !backends.contains(&backend) {
            backends.push(backend);
        }
    }
    if backends.is_empty() {
        return Err("name at least one backend".into());
    }
    Ok(backends)
}
