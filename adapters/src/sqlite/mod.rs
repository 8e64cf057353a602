//! The SQLite backend (the default): one file, several processes.
//!
//! - **Durability:** WAL journal, `synchronous=FULL` by default (a commit is
//!   on disk before the call returns, across power loss); `NORMAL` is an
//!   explicit opt-in.
//! - **Connections:** a few per store handle (`max_connections`), the most
//!   recently used first, never pinged (see `sql/connections.rs`).
//! - **Concurrency:** every write is a single autocommit statement, or a
//!   batch opened with `BEGIN IMMEDIATE`, so a writer takes the write lock
//!   before it reads and can never deadlock into `SQLITE_BUSY`; it waits up
//!   to the busy timeout for another process's lock, retrying after short,
//!   jittered sleeps (`busy.rs`, the workspace's one module of `unsafe`
//!   code: sqlx has no call for a busy handler).
//! - **Files:** the database is created with mode 0600 (and a missing
//!   directory with 0700); SQLite gives its `-wal` and `-shm` files the same
//!   mode. The path must be UTF-8 (the driver passes SQLite UTF-8 names);
//!   another path is refused with `InvalidInput` before anything is created.
//! - **Refusing what is not ours (C11):** before SQLite touches a file, its
//!   header is checked: a non-empty file that is not SQLite, or is shorter
//!   than its header says, is refused unchanged. A SQLite file that is not
//!   an lf-handoff store (another `application_id`, or tables but no
//!   version) is refused unchanged. A store written by a newer schema is
//!   refused unchanged. An empty file is a new store.
//! - **Upgrades:** a store of an older schema (release 0.1.0 wrote
//!   version 1) is migrated in place when opened, in one `BEGIN IMMEDIATE`
//!   transaction that reads the version again once it holds the write
//!   lock, so processes opening it at once migrate it once, and a
//!   `kill -9` leaves the old version or the new one. The header check
//!   skips the read-only probe only for a store at the latest version with
//!   no WAL frames; an older one is probed and then migrated.
//!
//! Files: `busy.rs` (the busy handler), `config.rs` (the settings and
//! their URL form), `dialect.rs`
//! (what the shared SQL repository asks of SQLite), `file.rs` (the file
//! before SQLite opens it), `error.rs` (every SQLite error, mapped once),
//! `inline.rs` (a handoff's load on the caller's thread), `watch.rs` (the
//! change signal); this file opens and migrates.

mod busy;
mod config;
pub(crate) mod dialect;
mod error;
mod file;
mod inline;
#[cfg(test)]
mod tests;
mod watch;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use sqlx::sqlite::{SqliteConnectOptions, SqliteQueryResult, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Connection as _};

use crate::sql::connections::Connections;
use crate::sql::schema::{statements_after, LATEST_VERSION};
use crate::sql::{Dialect, Engine, RowsAffected};
use error::{is_busy, open_error};
use file::{prepare_file, FileState};
use inline::InlineReads;

#[cfg(test)]
pub(crate) use config::DEFAULT_MAX_CONNECTIONS;
pub use config::{SqliteConfig, Synchronous, DEFAULT_BUSY_TIMEOUT, MAX_BUSY_TIMEOUT};

/// `PRAGMA application_id` of an lf-handoff store: "LFH1".
pub(crate) const APPLICATION_ID: i64 = 0x4C46_4831;

/// The type of an event's position in SQLite's DDL: the rowid, never
/// reused (AUTOINCREMENT), so a position stays unique even after the
/// newest events are pruned. Writers are serialised, so positions also
/// commit in order.
const POSITION: &str = "INTEGER PRIMARY KEY AUTOINCREMENT";

/// The statements that bring a store at `version` to the latest schema.
pub(crate) fn migrations_after(version: i64) -> impl Iterator<Item = String> {
    statements_after(version, POSITION, &[])
}

/// The SQLite engine: a few connections to one file.
pub(crate) type SqliteEngine = Engine<SqliteFile>;

/// SQLite's dialect: the store's file, which every message names, and the
/// busy timeout a writer waits for another process's lock.
#[derive(Debug)]
pub(crate) struct SqliteFile {
    path: PathBuf,
    busy_timeout: Duration,
    /// The connections that load a handoff on the caller's thread.
    inline: InlineReads,
}

impl RowsAffected for SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        SqliteQueryResult::rows_affected(self)
    }
}

impl SqliteEngine {
    /// Opens (creating when missing) and migrates the store at `config.path`.
    pub(crate) async fn open(config: &SqliteConfig) -> StoreResult<Self> {
        let path = config.path.clone();
        if path.to_str().is_none() {
            // sqlx hands SQLite UTF-8 file names only; refuse before anything
            // is created on disk.
            return Err(StoreError::InvalidInput(format!(
                "the SQLite store path {} is not valid UTF-8, which SQLite cannot open; \
                 choose a UTF-8 path",
                path.display()
            )));
        }
        // SQLite keeps its busy timeout in an `int` of milliseconds; a longer
        // value set directly on the struct would make the driver panic.
        let busy_timeout = config.busy_timeout.min(MAX_BUSY_TIMEOUT);
        let state = prepare_file(&path)?;
        // Check an existing file on a read-only connection first: a refused
        // store must not be modified, and a read-write connection would
        // checkpoint the WAL into the file when it closes. A file whose
        // header alone shows a current store needs no probe.
        let current = if state == FileState::New {
            false
        } else if state == FileState::Current {
            true
        } else {
            let probe_options = SqliteConnectOptions::new()
                .filename(&path)
                .read_only(true)
                .busy_timeout(busy_timeout);
            let mut probe = connect(&probe_options, busy_timeout)
                .await
                .map_err(|e| open_error(&path, e))?;
            let version = schema_version(&path, &mut probe).await;
            probe.close().await.map_err(|e| open_error(&path, e))?;
            version? == LATEST_VERSION
        };
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(false)
            .busy_timeout(busy_timeout)
            .synchronous(match config.synchronous {
                Synchronous::Full => SqliteSynchronous::Full,
                Synchronous::Normal => SqliteSynchronous::Normal,
            })
            .foreign_keys(true);
        // The first connection is opened now, so a file SQLite cannot use
        // is reported by open_store.
        let first = connect(&options, busy_timeout)
            .await
            .map_err(|e| open_error(&path, e))?;
        let pool = Connections::new(
            options,
            config.max_connections,
            busy_timeout + Duration::from_secs(5),
            None,
        )
        .with_setup(Box::new(move |conn| {
            Box::pin(busy::install(conn, busy_timeout))
        }));
        pool.give(first);
        let inline = InlineReads::new(path.clone());
        let engine = Engine::new(
            pool,
            SqliteFile {
                path,
                busy_timeout,
                inline,
            },
        );
        if !current {
            engine.migrate().await?;
        }
        Ok(engine)
    }

    async fn migrate(&self) -> StoreResult<()> {
        let file = &self.dialect;
        let mut conn = self.pool.acquire().await.map_err(|e| file.unavailable(e))?;
        let version = schema_version(&file.path, &mut conn).await?;
        if version == LATEST_VERSION {
            return Ok(());
        }
        // A new store: switch to WAL first (a store being upgraded has it
        // already, and this changes nothing). Changing the journal mode needs
        // an exclusive lock that the busy handler does not wait for, so retry.
        let deadline = Instant::now() + file.busy_timeout;
        loop {
            match sqlx::query_scalar::<_, String>("PRAGMA journal_mode = WAL")
                .fetch_one(&mut *conn)
                .await
            {
                Ok(mode) if mode.eq_ignore_ascii_case("wal") => break,
                Ok(mode) => {
                    return Err(StoreError::unavailable(
                        UnavailableKind::Other,
                        format!(
                            "{}: SQLite refused WAL mode (journal mode is {mode})",
                            file.path.display()
                        ),
                    ))
                }
                Err(e) if is_busy(&e) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(file.unavailable(e)),
            }
        }
        let mut tx = conn
            .begin_with(SqliteFile::BEGIN_WRITE)
            .await
            .map_err(|e| file.unavailable(e))?;
        // Another process may have migrated while we waited for the lock
        // (in WAL mode the write lock comes with the newest snapshot, so
        // this read sees its commit): then there is nothing to write.
        let version = schema_version(&file.path, &mut tx).await?;
        if version == LATEST_VERSION {
            return tx.commit().await.map_err(|e| file.unavailable(e));
        }
        for statement in migrations_after(version) {
            sqlx::query(&statement)
                .execute(&mut *tx)
                .await
                .map_err(|e| file.unavailable(e))?;
        }
        // PRAGMA values cannot be bound; both are integer constants.
        sqlx::query(&format!("PRAGMA application_id = {APPLICATION_ID}"))
            .execute(&mut *tx)
            .await
            .map_err(|e| file.unavailable(e))?;
        sqlx::query(&format!("PRAGMA user_version = {LATEST_VERSION}"))
            .execute(&mut *tx)
            .await
            .map_err(|e| file.unavailable(e))?;
        tx.commit().await.map_err(|e| file.unavailable(e))?;
        Ok(())
    }
}

/// A new connection made from `options`, with the busy handler of
/// [`busy`] waiting up to `busy_timeout` for another connection's lock.
async fn connect(
    options: &SqliteConnectOptions,
    busy_timeout: Duration,
) -> Result<sqlx::SqliteConnection, sqlx::Error> {
    let mut conn = options.connect().await?;
    busy::install(&mut conn, busy_timeout).await?;
    Ok(conn)
}

/// Reads the schema version, refusing a store this build must not touch.
async fn schema_version(path: &Path, conn: &mut sqlx::SqliteConnection) -> StoreResult<i64> {
    let read = |e: sqlx::Error| {
        StoreError::unavailable_because(
            UnavailableKind::Damaged,
            format!(
                "{} is damaged or not an lf-handoff store ({e}); it was left unchanged",
                path.display()
            ),
            e,
        )
    };
    // One statement, so the three values come from one snapshot: read one
    // by one, another process's first migration could commit in between
    // and make a new store look like someone else's database.
    let (application_id, version, tables): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT application_id FROM pragma_application_id), \
                (SELECT user_version FROM pragma_user_version), \
                (SELECT count(*) FROM sqlite_master)",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(read)?;
    let shown = path.display();
    if application_id == APPLICATION_ID {
        if version > LATEST_VERSION {
            return Err(StoreError::unavailable(
                UnavailableKind::NewerSchema,
                format!(
                    "{shown} was written by a newer lf-handoff (schema version {version}; this \
                     build understands up to {LATEST_VERSION}); upgrade lf-handoff to use it. \
                     The file was left unchanged"
                ),
            ));
        }
        return Ok(version);
    }
    if application_id == 0 && version == 0 && tables == 0 {
        return Ok(0);
    }
    Err(StoreError::damaged(format!(
        "{shown} is a SQLite database but not an lf-handoff store (application id \
         {application_id:#x}); point the store at another file. The file was left unchanged"
    )))
}
