//! sled: a directory in the scratch directory; the raw baseline is sled
//! opened directly on it (see `raw_sled`).

use std::path::PathBuf;

use async_trait::async_trait;
use lf_handoff_adapters::{SledConfig, StorageConfig, DEFAULT_SLED_CACHE};

use super::{created, BenchBackend, RawEngine};
use crate::error::{fail, BenchResult};
use crate::raw_sled::RawSled;

/// sled stores under `dir`.
#[derive(Debug)]
pub struct SledBench {
    dir: PathBuf,
    /// sled's page cache of every store it opens, bytes.
    cache: u64,
}

impl SledBench {
    /// Stores go in `dir`, with the adapter's default cache.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            cache: DEFAULT_SLED_CACHE,
        }
    }

    /// The same, every store opened with a page cache of `cache` bytes
    /// (`--sled-cache`).
    pub fn with_cache(self, cache: u64) -> Self {
        Self { cache, ..self }
    }
}

fn sled_dir(config: &StorageConfig) -> BenchResult<PathBuf> {
    match config {
        StorageConfig::Sled(sled) => Ok(sled.path.clone()),
        other => fail(format!("not a sled store: {other}")),
    }
}

#[async_trait]
impl BenchBackend for SledBench {
    fn name(&self) -> &'static str {
        "sled"
    }

    fn durability(&self) -> String {
        "every write: Db::flush, then fdatasync of sled's log".into()
    }

    fn disk_dir(&self) -> Option<PathBuf> {
        Some(self.dir.clone())
    }

    async fn new_store(&self, label: &str) -> BenchResult<StorageConfig> {
        let path = self.dir.join(label);
        std::fs::remove_dir_all(&path).ok();
        let mut sled = SledConfig::new(path);
        sled.cache = self.cache;
        let config = StorageConfig::Sled(sled);
        let what = format!("create {config}");
        created(config, what).await
    }

    async fn raw(&self, config: &StorageConfig) -> BenchResult<Box<dyn RawEngine>> {
        Ok(Box::new(RawSled::open(&sled_dir(config)?).await?))
    }

    fn raw_get_command(&self, _config: &StorageConfig, _id: &str) -> Option<Vec<String>> {
        None
    }

    async fn remove(&self, config: &StorageConfig) {
        if let Ok(dir) = sled_dir(config) {
            std::fs::remove_dir_all(dir).ok();
        }
    }
}
