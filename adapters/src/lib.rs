//! # lf-handoff adapters
//!
//! Storage backends for the lf-handoff registry, and [`open_store`], the one
//! call an orchestrator needs:
//!
//! ```
//! # async fn example() -> Result<(), lf_handoff_adapters::StoreError> {
//! use lf_handoff_adapters::{open_store, StorageConfig};
//! let dir = std::env::temp_dir().join(format!("lf-doc-{}", std::process::id()));
//! let store = open_store(&StorageConfig::sqlite(dir.join("registry.db"))).await?;
//! assert!(store.list_interactive_handoffs(None).await?.is_empty());
//! # std::fs::remove_dir_all(dir).ok();
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(example()).unwrap();
//! ```
//!
//! ## Backends
//!
//! - **SQLite** (`sqlite:///abs/path.db`, the default): one file, several
//!   processes on one machine. See [`sqlite`](crate::StorageConfig::sqlite).
//! - **sled** (`sled:///abs/path/dir`): one directory, one process; a second
//!   process gets a clear "locked by another process" error. See
//!   [`sled`](crate::StorageConfig::sled).
//! - **PostgreSQL** (`postgres://user@host:port/db`): one server that
//!   processes on several machines share. See
//!   [`postgres`](crate::StorageConfig::postgres).
//!
//! Every backend implements the same two ports ([`HandoffRepository`] and
//! [`ParentRegistry`]) and export and import ([`Archive`], contract C17),
//! and passes the same conformance suite (the `lf-handoff-conformance`
//! crate).
//!
//! ## Design decisions
//!
//! - **Adapters store, the domain decides.** No backend contains a
//!   transition rule; each stores what the domain decided with a
//!   compare-and-swap the engine itself settles.
//! - **Engine errors are mapped in one place per backend** into
//!   [`StoreError::Unavailable`] with a message that names the file or
//!   server and says what to do; no sqlx type crosses the boundary.
//! - **Everything an orchestrator needs is re-exported here**, so it
//!   depends on this crate alone.

#![deny(missing_docs)]

mod changes;
mod config;
mod postgres;
mod sled;
mod sql;
mod sqlite;

use std::sync::Arc;

use lf_handoff_application::{Archive, EventLog, HandoffRepository, ParentRegistry};

pub use config::text::parse_duration;
pub use config::{StorageConfig, ACCEPTED_SCHEMES};
pub use lf_handoff_application::{
    archive, domain, ports, watch, ArchiveSummary, ConflictKind, GenerateId, ListQuery, Store,
    StoreError, StoreResult, SystemClock, UnavailableKind, UuidV7Ids, Waited, WatchFilter, Watcher,
    DEFAULT_RETRY_WINDOW,
};
pub use postgres::{
    PostgresConfig, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_POSTGRES_SCHEMA,
};
pub use sled::SledConfig;
pub use sqlite::{SqliteConfig, Synchronous, DEFAULT_BUSY_TIMEOUT, MAX_BUSY_TIMEOUT};

use crate::postgres::PostgresEngine;
use crate::sled::SledStore;
use crate::sql::{Dialect, Engine, SqlStore};
use crate::sqlite::SqliteEngine;

/// The SQL backends' handoff columns and statements, for the benchmark's
/// raw side, which issues the same statements directly. Not a stable API.
#[doc(hidden)]
pub mod sql_columns {
    pub use crate::postgres::dialect::{with_event, SWAP_HANDOFF_WITH_EVENT};
    pub use crate::sql::columns::{
        column_list, Column, HandoffRow, Role, COLUMN_COUNT, HANDOFF_COLUMNS, SWAP_PARAMS,
    };
    pub use crate::sql::engine::{bind, Driver, Param};
    pub use crate::sql::events::event_values;
    pub use crate::sql::statements::{EVENT_PARAMS, HANDOFF_BY_ID, SWAP_HANDOFF};
    pub use crate::sqlite::dialect::INSERT_EVENT;
}

/// Opens (creating when missing) the store `config` names.
///
/// # Errors
/// `Unavailable` when the backend cannot be used: a file that is corrupt,
/// not an lf-handoff store, written by a newer version or locked; a server
/// that cannot be reached. The message names the file or server and says
/// what to do, and nothing on disk was changed. `InvalidInput` when the
/// configuration can never work (a SQLite path that is not UTF-8); nothing
/// is created then.
pub async fn open_store(config: &StorageConfig) -> StoreResult<Store> {
    match config {
        StorageConfig::Sqlite(sqlite) => Ok(sql_store("sqlite", SqliteEngine::open(sqlite).await?)),
        StorageConfig::Postgres(postgres) => {
            Ok(sql_store("postgres", PostgresEngine::open(postgres).await?))
        }
        StorageConfig::Sled(sled) => Ok(store_on("sled", SledStore::open(sled).await?)),
    }
}

/// The storage ports of an opened store, for tests that wrap them (fault
/// injection: `tests/src/faults.rs`) before building a [`Store`] on them.
/// Not a stable API.
#[doc(hidden)]
#[derive(Debug)]
pub struct StorePorts {
    /// The backend's name, as [`Store::backend`] gives it.
    pub backend: &'static str,
    /// The handoff repository.
    pub handoffs: Arc<dyn HandoffRepository>,
    /// The parent registry.
    pub parents: Arc<dyn ParentRegistry>,
}

/// Opens the store `config` names, as [`open_store`] does, and returns its
/// ports instead of a [`Store`]. Not a stable API.
///
/// # Errors
/// As [`open_store`].
#[doc(hidden)]
pub async fn open_ports(config: &StorageConfig) -> StoreResult<StorePorts> {
    fn ports<S: HandoffRepository + ParentRegistry>(
        backend: &'static str,
        storage: S,
    ) -> StorePorts {
        let storage = Arc::new(storage);
        StorePorts {
            backend,
            handoffs: storage.clone(),
            parents: storage,
        }
    }
    match config {
        StorageConfig::Sqlite(sqlite) => Ok(ports(
            "sqlite",
            SqlStore::new(SqliteEngine::open(sqlite).await?),
        )),
        StorageConfig::Postgres(postgres) => Ok(ports(
            "postgres",
            SqlStore::new(PostgresEngine::open(postgres).await?),
        )),
        StorageConfig::Sled(sled) => Ok(ports("sled", SledStore::open(sled).await?)),
    }
}

/// A `Store` over the shared SQL repository on `engine`.
fn sql_store<D: Dialect>(backend: &'static str, engine: Engine<D>) -> Store {
    store_on(backend, SqlStore::new(engine))
}

/// A `Store` whose ports are all `storage`, with the system clock and ids.
fn store_on<S: HandoffRepository + ParentRegistry + Archive + EventLog>(
    backend: &'static str,
    storage: S,
) -> Store {
    let storage = Arc::new(storage);
    Store::new(
        backend,
        storage.clone(),
        storage.clone(),
        Arc::new(SystemClock),
        Arc::new(UuidV7Ids),
    )
    .with_archive(storage.clone())
    .with_event_log(storage)
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
