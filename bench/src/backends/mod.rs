//! The backends the benchmark measures, behind one trait.
//!
//! A backend creates empty stores (through the adapter, so the schema and
//! settings are the store's own), and opens the raw engine underneath a
//! store with the same durability settings: the baseline the store is
//! compared with, and the bulk loader for the big stores.

mod postgres;
mod sled;
mod sqlite;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use async_trait::async_trait;
use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, InteractiveHandoff};

use crate::error::{fail, BenchResult, Context};
use crate::population::Population;

pub use postgres::{PostgresBench, DEFAULT_URL as DEFAULT_POSTGRES_URL};
pub use sled::SledBench;
pub use sqlite::SqliteBench;

/// One storage engine under benchmark.
#[async_trait]
pub trait BenchBackend: Send + Sync {
    /// The backend's name, as in its URL scheme.
    fn name(&self) -> &'static str;

    /// The durability settings the store runs with (and the raw baseline
    /// uses too).
    fn durability(&self) -> String;

    /// A directory on the disk that holds the store, for the fsync probe;
    /// `None` when the store lives on a server.
    fn disk_dir(&self) -> Option<PathBuf>;

    /// Facts about the engine worth printing beside the figures.
    async fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Creates a fresh, empty store (schema made by the adapter) named
    /// `label` and returns its configuration.
    async fn new_store(&self, label: &str) -> BenchResult<StorageConfig>;

    /// Opens the raw engine under the store `config` names.
    async fn raw(&self, config: &StorageConfig) -> BenchResult<Box<dyn RawEngine>>;

    /// The command-line tool that reads one handoff straight from the
    /// engine, for the cold-start comparison: program and arguments.
    fn raw_get_command(&self, config: &StorageConfig, id: &str) -> Option<Vec<String>>;

    /// Deletes the store.
    async fn remove(&self, config: &StorageConfig);
}

/// The actor every raw side names in the history events it writes.
static RAW_ACTOR: LazyLock<Option<Actor>> = LazyLock::new(|| Actor::parse("bench raw").ok());

/// The actor the raw sides name in their events (C15), as the store names
/// its handle's actor.
///
/// # Errors
/// A failure if the name does not parse (a bug in this module).
pub fn raw_actor() -> BenchResult<&'static Actor> {
    match RAW_ACTOR.as_ref() {
        Some(actor) => Ok(actor),
        None => fail("the raw side's actor does not parse"),
    }
}

/// The engine under a store, used directly.
///
/// Each transition gets the record before (`current`) and after (`next`)
/// it, built by the caller with plain field updates: the raw side decides
/// nothing, it only writes, guarded the way a careful direct user would
/// guard it (a status or version check in the same atomic write). Every
/// write also appends the change's history event (C15) in that atomic
/// write, named by [`raw_actor`], as the store does.
#[async_trait]
pub trait RawEngine: Send + Sync {
    /// Inserts a fresh waiting handoff (the raw `open`), refusing a second
    /// active handoff for the parent.
    async fn insert(&self, handoff: &InteractiveHandoff) -> BenchResult<()>;
    /// Writes the attach of a waiting handoff.
    async fn attach(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()>;
    /// Writes the finish of an active handoff (freeing the parent's slot).
    async fn finish(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()>;
    /// Writes the wake claim of a terminal handoff.
    async fn claim(
        &self,
        current: &InteractiveHandoff,
        next: &InteractiveHandoff,
    ) -> BenchResult<()>;
    /// Reads handoff `id`'s stored row or record, undecoded; true if and
    /// only if it exists.
    async fn get(&self, id: &InteractiveHandoffId) -> BenchResult<bool>;
    /// Writes waves `parents` and handoffs `handoffs` of `population` as
    /// fast as the engine allows, each write a valid record.
    async fn bulk_load(
        &self,
        population: &Population,
        parents: Range<u64>,
        handoffs: Range<u64>,
    ) -> BenchResult<()>;
    /// Releases the engine.
    async fn close(self: Box<Self>);
}

/// Opens the raw engine under the store `config` names, whichever backend
/// it is: the way in of a child process that fills a store and has no
/// [`BenchBackend`].
///
/// # Errors
/// A failure for a served store (it has no engine of its own here) or when
/// the engine does not open.
pub async fn raw_engine(config: &StorageConfig) -> BenchResult<Box<dyn RawEngine>> {
    match config {
        StorageConfig::Sqlite(_) => SqliteBench::new(PathBuf::new()).raw(config).await,
        StorageConfig::Sled(_) => SledBench::new(PathBuf::new()).raw(config).await,
        StorageConfig::Postgres(_) => PostgresBench::raw_engine(config).await,
        _ => fail(format!("{} has no raw engine here", config.url())),
    }
}

#[cfg(test)]
mod tests;

/// Creates the store `config` names (the adapter makes its schema), closes
/// it again and returns `config`; `what` names it in an error.
async fn created(config: StorageConfig, what: String) -> BenchResult<StorageConfig> {
    let store = open_store(&config).await.context(what)?;
    drop(store);
    Ok(config)
}

/// Removes `path` and the files SQLite keeps beside it.
pub fn remove_sqlite_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        std::fs::remove_file(format!("{}{suffix}", path.display())).ok();
    }
}
