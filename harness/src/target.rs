//! Where a harness run keeps its store.
//!
//! Every run gets a fresh store: a new temporary directory for the embedded
//! backends, so nothing a previous run left can hide or cause a failure.
//! When a run fails, the directory is kept and its path printed, so the
//! store can be inspected.

use std::path::{Path, PathBuf};

use lf_handoff_adapters::StorageConfig;
use tempfile::TempDir;

/// The backends this build can exercise, in the order runs report them.
pub const BACKENDS: &[&str] = &["sqlite"];

/// Settings that say where stores are made.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The directory under which each run's temporary directory is made.
    pub base_dir: PathBuf,
}

/// A fresh store for one backend, removed when the run is done.
#[derive(Debug)]
pub struct StoreTarget {
    backend: &'static str,
    config: StorageConfig,
    dir: TempDir,
}

impl StoreTarget {
    /// Makes a fresh, empty store location for `backend`.
    ///
    /// # Errors
    /// A sentence naming the problem: an unknown backend (naming the known
    /// ones) or a directory that cannot be made.
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
        let config = match backend {
            "sqlite" => StorageConfig::sqlite(dir.path().join("registry.db")),
            other => return Err(format!("backend {other} has no store placement")),
        };
        Ok(Self {
            backend,
            config,
            dir,
        })
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

    /// Removes the store, or keeps it when `keep` and returns where it is.
    pub async fn finish(self, keep: bool) -> Option<PathBuf> {
        if keep {
            Some(self.dir.keep())
        } else {
            None
        }
    }
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
