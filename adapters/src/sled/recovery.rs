//! Opening a store that a killed writer left behind: what sled 0.34 writes
//! on open and cannot open again when a kill cuts it short, the repair of
//! exactly that, and the refusal of damage sled would silently cut away.
//!
//! What sled 0.34.7 writes, renames and reads when it opens a directory
//! (`config.rs`, `pagecache/snapshot.rs`, `pagecache/iterator.rs`,
//! `pagecache/segment.rs`):
//!
//! 1. It creates `blobs/`, then reads `conf` (its settings). A missing
//!    `conf`, or one of 8 bytes or fewer, is written anew: the settings
//!    text, then (a second `write`) its CRC32. One with more bytes is
//!    parsed; a bad CRC is only logged, but text the kill cut short does
//!    not parse and sled refuses the store.
//! 2. It opens (creating) `db`, its log, and takes an exclusive `flock` on
//!    that open file. Everything below happens under that lock.
//! 3. It reads the newest snapshot: of the files named `snap.*` (except
//!    `*.in___motion`), the last in name order. Names are `snap.<lsn>` in
//!    16 hex digits, so the newest is the highest sequence number, and a
//!    `snap.<lsn>.generating` sorts right after `snap.<lsn>`. A file of 12
//!    bytes or fewer, or whose CRC32 fails, makes sled refuse the store
//!    ("corrupted data"); it does not fall back to an older snapshot.
//! 4. It walks the log from the snapshot's segment on, zeroes the rest of
//!    the segment after the last readable message (and syncs), then, if
//!    the walk got further than the snapshot, writes a new one:
//!    `snap.<lsn>.generating` is created (without truncation), written,
//!    `fsync`ed and renamed to `snap.<lsn>`, and every other `snap.*` file
//!    is removed. Then it zeroes the segments after the tear and removes
//!    large-value files (`blobs/`) newer than the snapshot.
//! 5. It zeroes every segment the snapshot does not use (no sync), and
//!    shortens the log when its last segments are free.
//!
//! sled writes snapshots only when it opens, so a kill during an open can
//! leave an empty or partial `snap.<lsn>.generating`: the newest file, and
//! one sled refuses. The open that was killed had only read the log and
//! zeroed its tail before it began that file, and the next open does the
//! same again, so the broken file holds nothing sled needs: it is removed,
//! and sled recovers from the snapshot before it (which sled removes only
//! once a newer one is complete) and the log, as the killed open did. A
//! complete `.generating` (the kill landed between its `fsync` and the
//! rename) is a valid snapshot that sled reads; it is left alone. A broken
//! `snap.<lsn>` (never renamed before it was synced) is damage, refused.
//!
//! A kill during a store's creation can leave `conf` holding the settings
//! text without its CRC; sled then refuses the store, whose log is empty
//! or missing. The rest of `conf` is written, exactly the bytes sled
//! writes (the settings this backend opens with are sled's defaults).
//! Every other state a killed creation leaves (the marker alone, an empty
//! or torn log) sled opens as a new or crashed store.
//!
//! **Only the holder of the store's lock repairs.** Before sled opens,
//! [`before_sled`] opens `db` itself and takes the same exclusive `flock`
//! sled takes (so a process with sled open, this build or an older one
//! that knows only sled's lock, excludes it, and the other way round),
//! decides under the lock from what it reads then, repairs, and closes the
//! file (which releases the lock) before sled opens the store: an `flock`
//! belongs to the open file, so sled's own lock on a second open of `db`
//! would otherwise conflict with it, even in this process. Another process
//! that opens the store in between finds it repaired. A store whose log
//! does not exist yet has no lock to take, and nothing sled could recover;
//! the one repair there (completing `conf`) writes the very bytes a
//! creator still writing it would, so it is safe without one.
//!
//! Whatever is refused (a damaged log, see [`log_audit`]; a broken
//! snapshot other than a `.generating`) is refused before anything is
//! changed.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use fs2::FileExt as _;
use lf_handoff_application::StoreResult;

use super::files::{self, SLED_CONF};
use super::log_audit;
use super::log_audit::LOG;

/// The file name prefix of sled's snapshots.
const SNAPSHOT_PREFIX: &[u8] = b"snap.";
/// The suffix of a snapshot sled is still writing.
const GENERATING: &[u8] = b".generating";
/// The suffix of files sled's snapshot search skips.
const IN_MOTION: &[u8] = b".in___motion";
/// A snapshot ends with its length (8 bytes) and a CRC32 (4).
const SNAPSHOT_TRAILER: usize = 12;
/// The segment size this backend opens stores with (sled's default).
pub(super) const SEGMENT_SIZE: u64 = 512 * 1024;

/// Whether sled may now open the store.
#[derive(Debug)]
pub(super) enum Prepared {
    /// Repaired if it needed it: open it.
    Ready,
    /// Another open file holds the store's lock (another process, or a
    /// `Db` of this one still closing): the error `flock` gave.
    Locked(std::io::Error),
}

/// Prepares the existing store `dir` for sled, under the store's lock:
/// repairs what a killed writer left that sled cannot open, and refuses
/// damage before sled would cut it away.
///
/// # Errors
/// `Unavailable`: Damaged naming what is wrong (nothing was changed), a
/// marker that became newer while the lock was awaited, or an I/O error.
pub(super) fn before_sled(dir: &Path) -> StoreResult<Prepared> {
    let log_path = dir.join(LOG);
    let log = match OpenOptions::new().read(true).write(true).open(&log_path) {
        Ok(log) => log,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            complete_conf(dir)?;
            return Ok(Prepared::Ready);
        }
        Err(e) => {
            return Err(files::io_error(
                format!("cannot open {}", log_path.display()),
                e,
            ))
        }
    };
    match log.try_lock_exclusive() {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Prepared::Locked(e)),
        Err(e) => {
            return Err(files::io_error(
                format!("cannot lock {}", log_path.display()),
                e,
            ))
        }
    }
    // The lock is ours until `log` is closed, when this returns.
    files::check_marker(dir)?;
    let len = log
        .metadata()
        .map_err(|e| files::io_error(format!("cannot read {}", log_path.display()), e))?
        .len();
    if len == 0 {
        complete_conf(dir)?;
        return Ok(Prepared::Ready);
    }
    let segment_size = files::read_sled_conf(dir)?;
    let plan = plan_snapshots(dir)?;
    let audited = log_audit::audit(dir, &log, segment_size, plan.stable_lsn)
        .map_err(|e| files::io_error(format!("cannot read {}", log_path.display()), e))?;
    if let Some(damage) = audited {
        return Err(files::damaged(dir, &damage.what));
    }
    for broken in &plan.remove {
        tracing::warn!(
            file = %broken.display(),
            "removing a sled snapshot that a killed open left unfinished"
        );
        fs::remove_file(broken)
            .map_err(|e| files::io_error(format!("cannot remove {}", broken.display()), e))?;
    }
    if !plan.remove.is_empty() {
        files::sync_dir(dir)?;
    }
    Ok(Prepared::Ready)
}

/// What sled will find of its snapshots once the broken ones a killed
/// open left are removed.
#[derive(Debug, Default)]
struct SnapshotPlan {
    /// The unfinished `.generating` files that sled would read first.
    remove: Vec<PathBuf>,
    /// The stable sequence number of the snapshot sled will read (0 when
    /// there is none).
    stable_lsn: i64,
}

/// Finds the snapshot sled will read: the newest by name that is whole,
/// removing (in the plan) every unfinished `.generating` newer than it.
///
/// # Errors
/// `Unavailable` (Damaged) when the newest snapshot that is not a
/// `.generating` is broken; an I/O error.
fn plan_snapshots(dir: &Path) -> StoreResult<SnapshotPlan> {
    let entries = fs::read_dir(dir)
        .map_err(|e| files::io_error(format!("cannot list {}", dir.display()), e))?;
    let mut names: Vec<OsString> = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| files::io_error(format!("cannot list {}", dir.display()), e))?;
        let name = entry.file_name();
        let bytes = name.as_bytes();
        if bytes.starts_with(SNAPSHOT_PREFIX) && !bytes.ends_with(IN_MOTION) {
            names.push(name);
        }
    }
    // sled sorts the paths; in one directory that is the names' order.
    names.sort();
    let mut plan = SnapshotPlan::default();
    while let Some(name) = names.pop() {
        let path = dir.join(&name);
        match read_snapshot(&path)? {
            Some(stable_lsn) => {
                plan.stable_lsn = stable_lsn;
                return Ok(plan);
            }
            None if name.as_bytes().ends_with(GENERATING) => plan.remove.push(path),
            None => {
                return Err(files::damaged(
                    dir,
                    &format!(
                        "its sled snapshot {} is corrupt (its checksum fails)",
                        name.to_string_lossy()
                    ),
                ))
            }
        }
    }
    Ok(plan)
}

/// The stable sequence number a snapshot file records, or `None` when the
/// file is not a whole snapshot (as sled's `read_snapshot` decides: more
/// than 12 bytes, and a CRC32 of the contents before the trailer that
/// matches the last 4 bytes).
fn read_snapshot(path: &Path) -> StoreResult<Option<i64>> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(|e| files::io_error(format!("cannot read {}", path.display()), e))?;
    if bytes.len() <= SNAPSHOT_TRAILER {
        return Ok(None);
    }
    let (body, trailer) = bytes.split_at(bytes.len() - SNAPSHOT_TRAILER);
    let stored = u32::from_le_bytes([trailer[8], trailer[9], trailer[10], trailer[11]]);
    if crc32fast::hash(body) != stored {
        return Ok(None);
    }
    // The snapshot starts with its stable sequence number: an `i64`,
    // shifted up by one when not negative so that 0 means none.
    let mut word = [0u8; 8];
    if let Some(first) = body.get(..8) {
        word.copy_from_slice(first);
    }
    let shifted = i64::from_le_bytes(word);
    Ok(Some(if shifted > 0 {
        shifted - 1
    } else {
        shifted.max(0)
    }))
}

/// The whole of the `conf` sled writes for the settings this backend uses:
/// its text, then the text's CRC32, little-endian.
fn sled_conf() -> Vec<u8> {
    let mut bytes =
        format!("segment_size: {SEGMENT_SIZE}\nuse_compression: false\nversion: 0.34\n")
            .into_bytes();
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Completes a `conf` that a kill cut short while sled created the store
/// (its log is empty or missing): when the file is a strict beginning of
/// what sled writes, the rest is written after it and synced. Any other
/// `conf` is left for sled to judge.
fn complete_conf(dir: &Path) -> StoreResult<()> {
    let path = dir.join(SLED_CONF);
    let mut bytes = Vec::new();
    let mut file = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(files::io_error(
                format!("cannot open {}", path.display()),
                e,
            ))
        }
    };
    file.read_to_end(&mut bytes)
        .map_err(|e| files::io_error(format!("cannot read {}", path.display()), e))?;
    let whole = sled_conf();
    if bytes.len() >= whole.len() || !whole.starts_with(&bytes) {
        return Ok(());
    }
    tracing::warn!(
        file = %path.display(),
        "completing sled's settings file, which a killed creation left unfinished"
    );
    let at = bytes.len();
    file.write_all_at(&whole[at..], at as u64)
        .and_then(|()| file.sync_all())
        .map_err(|e| files::io_error(format!("cannot write {}", path.display()), e))
}
