//! The fsync rate of the disk under a store: the physical limit of a
//! durable write.
//!
//! The probe appends 4 KiB to a scratch file in the store's directory and
//! calls `fdatasync` after each append, as a write-ahead log does on every
//! commit, for about a second.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{BenchResult, Context};

/// What the probe measured.
#[derive(Debug, Clone, Serialize)]
pub struct FsyncRate {
    /// The directory probed.
    pub dir: String,
    /// Appends + fdatasync per second.
    pub per_sec: f64,
    /// Median time of one append + fdatasync, µs.
    pub median_us: f64,
}

/// Measures the rate for about `budget` (at least 50 syncs).
pub fn measure(dir: &Path, budget: Duration) -> BenchResult<FsyncRate> {
    let path = dir.join(format!("fsync-probe-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .context(format!("fsync probe {}", path.display()))?;
    let block = [0x5Au8; 4096];
    let mut timings = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || timings.len() < 50 {
        let one = Instant::now();
        file.write_all(&block).context("fsync probe: write")?;
        file.sync_data().context("fsync probe: fdatasync")?;
        timings.push(one.elapsed());
    }
    let elapsed = start.elapsed();
    drop(file);
    fs::remove_file(&path).ok();
    let summary = crate::stats::Summary::of(&timings);
    Ok(FsyncRate {
        dir: dir.display().to_string(),
        per_sec: timings.len() as f64 / elapsed.as_secs_f64(),
        median_us: summary.median_us,
    })
}
