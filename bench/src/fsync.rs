//! The fsync rate of the disk under a store: the physical limit of a
//! durable write.
//!
//! Two probes, about a second each, in the store's directory:
//!
//! - **overwrite**: write 4 KiB at the next offset of a preallocated 1 MiB
//!   file, cycling, then `fdatasync`. This is a write-ahead log that is
//!   reused (SQLite's WAL after a checkpoint, PostgreSQL's preallocated WAL
//!   segments): only data reaches the disk.
//! - **append**: append 4 KiB to a growing file, then `fdatasync`. The
//!   file's length changes with every sync, so the filesystem commits its
//!   journal too: a log that grows (a new store's WAL, sled's log) pays
//!   this.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{BenchResult, Context};
use crate::stats::Summary;

/// What the probes measured.
#[derive(Debug, Clone, Serialize)]
pub struct FsyncRate {
    /// The directory probed.
    pub dir: String,
    /// Overwrite + fdatasync per second.
    pub overwrite_per_sec: f64,
    /// Median of one overwrite + fdatasync, µs.
    pub overwrite_median_us: f64,
    /// Append + fdatasync per second.
    pub append_per_sec: f64,
    /// Median of one append + fdatasync, µs.
    pub append_median_us: f64,
}

const BLOCK: usize = 4096;
const BLOCKS: u64 = 256;

/// Runs both probes for about `budget` each (at least 50 syncs).
pub fn measure(dir: &Path, budget: Duration) -> BenchResult<FsyncRate> {
    let path = dir.join(format!("fsync-probe-{}", std::process::id()));
    let result = probe(&path, budget, true)
        .and_then(|overwrite| probe(&path, budget, false).map(|append| (overwrite, append)));
    fs::remove_file(&path).ok();
    let ((overwrite_per_sec, overwrite), (append_per_sec, append)) = result?;
    Ok(FsyncRate {
        dir: dir.display().to_string(),
        overwrite_per_sec,
        overwrite_median_us: overwrite.median_us,
        append_per_sec,
        append_median_us: append.median_us,
    })
}

fn probe(path: &Path, budget: Duration, overwrite: bool) -> BenchResult<(f64, Summary)> {
    let what = format!("fsync probe {}", path.display());
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .context(&what)?;
    let block = [0x5Au8; BLOCK];
    if overwrite {
        for _ in 0..BLOCKS {
            file.write_all(&block).context(&what)?;
        }
        file.sync_all().context(&what)?;
    }
    let mut timings = Vec::new();
    let start = Instant::now();
    let mut n: u64 = 0;
    while start.elapsed() < budget || timings.len() < 50 {
        let one = Instant::now();
        if overwrite {
            file.write_all_at(&block, (n % BLOCKS) * BLOCK as u64)
                .context(&what)?;
        } else {
            file.write_all(&block).context(&what)?;
        }
        file.sync_data().context(&what)?;
        timings.push(one.elapsed());
        n += 1;
    }
    let elapsed = start.elapsed();
    Ok((
        timings.len() as f64 / elapsed.as_secs_f64(),
        Summary::of(&timings),
    ))
}
