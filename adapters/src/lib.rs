//! # lf-handoff adapters
//!
//! Storage backends for the lf-handoff registry, and [`open_store`], the one
//! call an orchestrator needs:
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # async fn example() -> Result<(), lf_handoff_adapters::StoreError> {
//! use lf_handoff_adapters::{open_store, ListQuery, StorageConfig};
//! let dir = std::env::temp_dir().join(format!("lf-doc-{}", std::process::id()));
//! let store = open_store(&StorageConfig::sqlite(dir.join("registry.db"))).await?;
//! assert!(store.list_interactive_handoffs(ListQuery::default()).await?.is_empty());
//! # std::fs::remove_dir_all(dir).ok();
//! # Ok(())
//! # }
//! # #[cfg(feature = "sqlite")]
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
//! - **A served registry** (`http://host:port`, `https://...`): the
//!   registry `lf-handoff serve` serves, for a program without access to
//!   its storage; the token comes from `LF_HANDOFF_TOKEN` or a token
//!   file. Its client ([`http`]) implements the same
//!   [`Registry`](lf_handoff_application::Registry) as a local store, so
//!   [`open_store`] gives the same [`Store`] with the same error kinds.
//!
//! Each backend is a cargo feature of this crate (`sqlite`, `sled`,
//! `postgres`, `http`), all on by default; a build without one refuses
//! its store URL as invalid input naming the feature to enable.
//!
//! Every storage backend implements the same storage ports
//! ([`ports::HandoffRepository`], [`ports::ParentRegistry`], the event log
//! [`watch::EventLog`], export and import [`archive::Archive`] and the
//! notifiers' delivery cursors [`delivery::Deliveries`]), which
//! [`open_ports`] returns as one [`StorePorts`], and passes the same
//! conformance suite (the `lf-handoff-conformance` crate).
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

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "sled"))]
mod changes;
mod config;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "sled"))]
mod delivery_record;
#[cfg(any(feature = "sqlite", feature = "sled"))]
mod file_events;
mod gate;
#[cfg(feature = "http")]
pub mod http;
#[cfg(test)]
#[cfg(any(feature = "sled", all(feature = "sqlite", feature = "postgres")))]
mod list_ties;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sled")]
mod sled;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use config::text::parse_duration;
pub use config::{StorageConfig, ACCEPTED_SCHEMES};
pub use gate::Gated;
#[cfg(feature = "http")]
pub use http::{HttpConfig, Token, TOKEN_ENV};
pub use lf_handoff_application::{
    archive, delivery, ports, retries_total, watch, ArchiveSummary, ClaimedWake, ConflictKind,
    DeliveryCursor, DeniedKind, GenerateId, Handoffs, ListQuery, ParentQuery, Parents,
    PruneOptions, Registry, Store, StoreError, StorePorts, StoreResult, SystemClock,
    UnavailableKind, Upkeep, UuidV7Ids, Waited, Waiting, WatchFilter, WatchFrom, Watcher,
    DEFAULT_RETRY_WINDOW,
};
#[cfg(feature = "postgres")]
pub use postgres::{
    Pooler, PostgresConfig, TargetSessionAttrs, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_POOL_SIZE,
    DEFAULT_POSTGRES_SCHEMA,
};
#[cfg(feature = "sled")]
pub use sled::{SledConfig, SledHold, DEFAULT_SLED_CACHE, SLED_LINGER};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteConfig, Synchronous, DEFAULT_BUSY_TIMEOUT, MAX_BUSY_TIMEOUT};

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "sled"))]
use std::sync::Arc;

#[cfg(feature = "postgres")]
use crate::postgres::PostgresEngine;
#[cfg(feature = "sled")]
use crate::sled::SledStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::sql::SqlStore;
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteEngine;

/// The SQL the SQL backends issue, for programs that measure it raw (the
/// benchmark's raw side sends the store's own statements straight to the
/// engine, so "store against raw" compares like with like). Only with the
/// `raw-sql` feature (which builds SQLite and PostgreSQL); not part of the
/// stable API.
#[cfg(feature = "raw-sql")]
pub mod raw_sql {
    pub use crate::postgres::dialect::{with_event, SWAP_HANDOFF_WITH_EVENT};
    pub use crate::sql::columns::{
        column_list, Column, HandoffRow, Role, COLUMN_COUNT, HANDOFF_COLUMNS, SWAP_PARAMS,
    };
    pub use crate::sql::driver::{bind, Driver, Param};
    pub use crate::sql::events::event_values;
    pub use crate::sql::statements::{EVENT_PARAMS, HANDOFF_BY_ID, SWAP_HANDOFF};
    pub use crate::sqlite::dialect::INSERT_EVENT;
}

/// Test fixtures (an open-request builder, bodies, parents): see
/// [`lf_handoff_application::testing`]. Only with the `testing` feature.
#[cfg(feature = "testing")]
pub use lf_handoff_application::testing;

/// Opens (creating when missing) the store `config` names.
///
/// # Errors
/// `Unavailable` when the backend cannot be used: a file that is corrupt,
/// not an lf-handoff store, written by a newer version or locked; a server
/// that cannot be reached (a PostgreSQL server is tried again within the
/// URL's `retry_window` first, so a restart or a failover under way when
/// the store opens costs a delay, not an error). The message names the file
/// or server and says what to do, and nothing on disk was changed. `InvalidInput` when the
/// configuration can never work (a SQLite path that is not UTF-8); nothing
/// is created then.
pub async fn open_store(config: &StorageConfig) -> StoreResult<Store> {
    match config {
        #[cfg(feature = "http")]
        StorageConfig::Http(http) => http::ServiceRegistry::open(http).map(Store::from),
        #[cfg(feature = "postgres")]
        StorageConfig::Postgres(postgres) => {
            Ok(Store::new(open_ports(config).await?).with_retry_window(postgres.retry_window))
        }
        #[allow(unreachable_patterns)]
        _ => Ok(Store::new(open_ports(config).await?)),
    }
}

/// Opens the store `config` names, as [`open_store`] does, and returns its
/// ports instead of a [`Store`]: for a program that wraps a port (to count
/// calls, inject faults or log) or replaces the clock before it builds the
/// [`Store`] with [`Store::new`].
///
/// # Errors
/// As [`open_store`]; `InvalidInput` for a served registry (`http://`),
/// whose storage is the service's.
pub async fn open_ports(config: &StorageConfig) -> StoreResult<StorePorts> {
    match config {
        #[cfg(feature = "sqlite")]
        StorageConfig::Sqlite(sqlite) => Ok(StorePorts::of(
            "sqlite",
            Arc::new(SqlStore::new(SqliteEngine::open(sqlite).await?)),
        )),
        #[cfg(feature = "postgres")]
        StorageConfig::Postgres(postgres) => Ok(StorePorts::of(
            "postgres",
            Arc::new(SqlStore::new(PostgresEngine::open(postgres).await?)),
        )),
        #[cfg(feature = "sled")]
        StorageConfig::Sled(sled) => Ok(StorePorts::of(
            "sled",
            Arc::new(SledStore::open(sled).await?),
        )),
        #[cfg(feature = "http")]
        StorageConfig::Http(http) => Err(StoreError::InvalidInput(format!(
            "{} is a served registry: its storage ports are the service's; open it with \
             open_store",
            http.base
        ))),
    }
}

/// The README's examples, compiled and run as doctests (with every
/// backend, as the README uses them).
#[cfg(all(
    doctest,
    feature = "sqlite",
    feature = "sled",
    feature = "postgres",
    feature = "http"
))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
