//! The store directory: creating it, recognising it, and refusing what is
//! not a usable lf-handoff store *before* sled sees it.
//!
//! sled repairs whatever it is given when it opens a directory: it rewrites
//! a missing or short `conf`, and treats a log it cannot read as a torn
//! tail to truncate or zero. So every check that decides whether a store may
//! be opened happens before sled sees it, on plain reads, and a refused
//! store is left byte for byte as it was (contract C11). These checks, here,
//! need no lock:
//!
//! - the path must be a directory (created with mode 0700 when missing);
//! - a non-empty directory must hold the marker file [`MARKER`], which names
//!   the store's format (the newest record format it may hold); a newer
//!   format is refused;
//! - when sled's log `db` holds data, sled's `conf` must be whole (its CRC
//!   matches) and name sled 0.34, and at least one log segment must start
//!   with a valid header (a file of garbage has none).
//!
//! The checks that decide on sled's snapshots and the contents of its log,
//! and the repairs of what a killed writer leaves, run under the store's
//! lock once these passed (see `recovery` and `log_audit`).
//!
//! A new store's marker is written (temporary file, `fsync`, rename,
//! `fsync` of the directory) before sled creates anything, so a crash at
//! any point leaves either an empty directory or a recognisable store.
//!
//! A store of an older format (release 0.1.0's format 1, format 2 of the
//! builds with steps and without deadlines, format 3 of release 0.3.0 and
//! the builds without answers) is upgraded to this build's by
//! rewriting its marker the same way, once sled has opened the store (see
//! [`settle_marker`]): the rename is the whole upgrade, so a crash leaves
//! the old marker (the next open upgrades) or the new one (it finds the
//! store upgraded), never a torn one.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};

use super::log_audit::{segment_header, segment_slots, LOG, SEGMENT_HEADER_LEN};
use super::record::{FORMAT, OLDEST_FORMAT};

/// The marker file that makes a directory an lf-handoff sled store.
pub(crate) const MARKER: &str = "lf-handoff-store";
/// The marker while it is being written.
const MARKER_TEMP: &str = "lf-handoff-store.tmp";
/// The first line of the marker.
const MARKER_TITLE: &str = "lf-handoff sled store";
/// sled's settings file inside the store directory.
pub(super) const SLED_CONF: &str = "conf";
/// The file every write of this build touches once it is durable, so that
/// other processes' watchers and waiters wake (see `handle::Signal`). It
/// holds no data.
pub(super) const SIGNAL: &str = "lf-handoff-signal";
/// The sled on-disk version this build reads, as `conf` records it.
const SLED_VERSION: &str = "0.34";

/// Makes `path` ready for sled and returns its canonical form: creates a
/// missing directory (0700) with its marker, or checks an existing one.
/// Changes nothing in an existing store: an older one's marker is upgraded
/// only by [`settle_marker`], once sled has opened the store.
///
/// # Errors
/// `Unavailable` naming the path and what to do when it is not a
/// directory, not an lf-handoff store, written by a newer format, or
/// damaged; nothing was changed.
pub(super) fn prepare(path: &Path) -> StoreResult<PathBuf> {
    let shown = path.display();
    match fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => {
            return Err(StoreError::damaged(format!(
                "{shown} is not a directory: a sled store URL must name a directory (sled \
                 keeps several files in it). It was left unchanged; name a new or empty \
                 directory instead"
            )))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => create_dir(path)?,
        Err(e) => return Err(io_error(format!("cannot read {shown}"), e)),
    }
    let dir = fs::canonicalize(path).map_err(|e| io_error(format!("cannot resolve {shown}"), e))?;
    match read_marker(&dir)? {
        Some(format) => {
            check_format(&dir, format)?;
        }
        None if is_empty(&dir)? => write_marker(&dir, "create")?,
        None => {
            return Err(StoreError::damaged(format!(
                "{} is not an lf-handoff store: the directory holds files but no {MARKER} \
                 marker. It was left unchanged; name a new or empty directory",
                dir.display()
            )))
        }
    }
    check_sled_files(&dir)?;
    Ok(dir)
}

/// Reads the marker again once this process has sled open on `dir` (so
/// holds sled's lock), and upgrades an older one to this build's format,
/// after `prepare_upgrade` (which fills what the older format lacks and
/// makes it durable) succeeded.
///
/// [`prepare`] read the marker before the lock, and waiting for the lock
/// takes time: meanwhile another process may have upgraded the store (to a
/// format this build does not know) or released it. Deciding again under
/// the lock means an older marker is upgraded only while no other process
/// uses the store, and a store that became newer is refused.
///
/// # Errors
/// `Unavailable` (kind NewerSchema) for a marker newer than this build's,
/// Damaged for a missing or unreadable one, `prepare_upgrade`'s error
/// (the marker is left as it was), or an I/O error.
pub(super) fn settle_marker(
    dir: &Path,
    prepare_upgrade: impl FnOnce() -> StoreResult<()>,
) -> StoreResult<()> {
    match read_marker(dir)? {
        Some(format) if check_format(dir, format)? < FORMAT => {
            prepare_upgrade()?;
            upgrade_marker(dir)
        }
        Some(_) => Ok(()),
        None => Err(StoreError::damaged(format!(
            "{} lost its {MARKER} marker while this process opened it; it was left as it \
             is",
            dir.display()
        ))),
    }
}

/// Reads the marker again under the store's lock, before sled opens the
/// store (see `recovery`): a marker that became newer while the lock was
/// awaited is refused before anything is repaired.
///
/// # Errors
/// As [`settle_marker`], without upgrading anything.
pub(super) fn check_marker(dir: &Path) -> StoreResult<()> {
    match read_marker(dir)? {
        Some(format) => check_format(dir, format).map(drop),
        None => Err(StoreError::damaged(format!(
            "{} lost its {MARKER} marker while this process opened it; it was left as it \
             is",
            dir.display()
        ))),
    }
}

/// Upgrades the store's marker to this build's format, atomically (see
/// [`write_marker`]). Records are not rewritten: each moves to the current
/// record format when it is next written (see `record`).
///
/// Call it only while this process has sled open on `dir` (see
/// [`settle_marker`]): sled's lock then guarantees no other process uses
/// the store, so the marker of a store another process holds is never
/// rewritten.
///
/// # Errors
/// `Unavailable` on an I/O error; the store keeps its old marker (or, if
/// only the directory sync failed, may already have the new one) and the
/// next open upgrades it again.
fn upgrade_marker(dir: &Path) -> StoreResult<()> {
    write_marker(dir, "upgrade")
}

/// Creates `path` and any missing ancestors with mode 0700, and syncs the
/// directories that gained an entry, so the new store's directory survives
/// a crash along with what is written in it.
fn create_dir(path: &Path) -> StoreResult<()> {
    let existing = path
        .ancestors()
        .skip(1)
        .find(|ancestor| ancestor.is_dir())
        .map(Path::to_path_buf);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| {
            io_error(
                format!("cannot create the store directory {}", path.display()),
                e,
            )
        })?;
    if let Some(existing) = existing {
        for dir in path.ancestors().skip(1) {
            sync_dir(dir)?;
            if dir == existing {
                break;
            }
        }
    }
    Ok(())
}

/// Syncs the directory itself, so entries created in it survive a crash.
///
/// # Errors
/// `Unavailable` on an I/O error.
pub(super) fn sync_dir(dir: &Path) -> StoreResult<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| {
        io_error(
            format!("cannot sync the store directory {}", dir.display()),
            e,
        )
    })
}

/// Syncs sled's settings file `conf` of a store sled just created.
///
/// # Errors
/// `Unavailable` on an I/O error.
pub(super) fn sync_sled_conf(dir: &Path) -> StoreResult<()> {
    let path = dir.join(SLED_CONF);
    File::open(&path)
        .and_then(|conf| conf.sync_all())
        .map_err(|e| io_error(format!("cannot sync {}", path.display()), e))
}

/// The marker's format number, or `None` when there is no marker.
fn read_marker(dir: &Path) -> StoreResult<Option<u64>> {
    let path = dir.join(MARKER);
    let text = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(format!("cannot read {}", path.display()), e)),
    };
    let parsed = std::str::from_utf8(&text).ok().and_then(|text| {
        let mut lines = text.lines();
        let title = lines.next()?;
        let format = lines.next()?.strip_prefix("format ")?.parse::<u64>().ok()?;
        (title == MARKER_TITLE && lines.next().is_none()).then_some(format)
    });
    match parsed {
        Some(format) => Ok(Some(format)),
        None => Err(StoreError::damaged(format!(
            "{} is damaged: its marker {MARKER} is unreadable. It was left unchanged; restore \
             it from a backup",
            dir.display()
        ))),
    }
}

/// Accepts a marker format this build opens (upgrading an older one) and
/// returns it.
fn check_format(dir: &Path, format: u64) -> StoreResult<u8> {
    let current = u64::from(FORMAT);
    if format > current {
        return Err(StoreError::unavailable(
            UnavailableKind::NewerSchema,
            format!(
                "{} was written by a newer lf-handoff (store format {format}; this build \
                 understands up to {current}); upgrade lf-handoff to use it. It was left \
                 unchanged",
                dir.display()
            ),
        ));
    }
    match u8::try_from(format) {
        Ok(format) if format >= OLDEST_FORMAT => Ok(format),
        _ => Err(StoreError::damaged(format!(
            "{} is damaged: its marker names store format {format}, which no lf-handoff \
             wrote. It was left unchanged",
            dir.display()
        ))),
    }
}

/// True when the directory holds nothing but, perhaps, a half-written
/// marker from a crashed creation.
fn is_empty(dir: &Path) -> StoreResult<bool> {
    let entries =
        fs::read_dir(dir).map_err(|e| io_error(format!("cannot list {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_error(format!("cannot list {}", dir.display()), e))?;
        if entry.file_name() != MARKER_TEMP {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Writes the marker of this build's format: a temporary file, `fsync`ed,
/// renamed over [`MARKER`], then an `fsync` of the directory. A crash
/// leaves the old marker (or none) or the new one, and perhaps a stale
/// temporary file that the next write replaces.
fn write_marker(dir: &Path, action: &str) -> StoreResult<()> {
    let temp = dir.join(MARKER_TEMP);
    let write = || -> std::io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        writeln!(file, "{MARKER_TITLE}")?;
        writeln!(file, "format {FORMAT}")?;
        file.sync_all()?;
        fs::rename(&temp, dir.join(MARKER))
    };
    write().map_err(|e| io_error(format!("cannot {action} the store in {}", dir.display()), e))?;
    sync_dir(dir)
}

/// Refuses sled files that sled would "repair" on open. A store whose log
/// is missing or empty holds nothing and is fine.
fn check_sled_files(dir: &Path) -> StoreResult<()> {
    let log_path = dir.join(LOG);
    let log_len = match fs::metadata(&log_path) {
        Ok(metadata) if metadata.is_file() => metadata.len(),
        Ok(_) => {
            return Err(damaged(dir, &format!("its sled log {LOG} is not a file")));
        }
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(format!("cannot read {}", log_path.display()), e)),
    };
    if log_len == 0 {
        return Ok(());
    }
    let segment_size = read_sled_conf(dir)?;
    let log = File::open(&log_path)
        .map_err(|e| io_error(format!("cannot read {}", log_path.display()), e))?;
    for index in 0..segment_slots(log_len, segment_size) {
        let found = segment_header(&log, index * segment_size)
            .map_err(|e| io_error(format!("cannot read {}", log_path.display()), e))?;
        if found.is_some() {
            return Ok(());
        }
    }
    Err(damaged(
        dir,
        &format!(
            "its sled log {LOG} ({log_len} bytes) holds no valid segment: it is corrupt or not \
             a sled log"
        ),
    ))
}

/// Checks sled's `conf` (text, then a little-endian CRC32 of the text) and
/// returns its segment size.
pub(super) fn read_sled_conf(dir: &Path) -> StoreResult<u64> {
    let path = dir.join(SLED_CONF);
    let mut bytes = Vec::new();
    match File::open(&path) {
        Ok(mut file) => file
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(format!("cannot read {}", path.display()), e))?,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(damaged(
                dir,
                &format!("its sled log exists but {SLED_CONF} is missing"),
            ))
        }
        Err(e) => return Err(io_error(format!("cannot read {}", path.display()), e)),
    };
    let broken = || {
        damaged(
            dir,
            &format!("its sled settings file {SLED_CONF} is corrupt"),
        )
    };
    let Some((text, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(broken());
    };
    if crc32fast::hash(text) != u32::from_le_bytes(*crc) {
        return Err(broken());
    }
    let text = std::str::from_utf8(text).map_err(|_| broken())?;
    let mut segment_size = None;
    let mut version = None;
    for line in text.lines() {
        let (key, value) = line.split_once(": ").ok_or_else(broken)?;
        match key {
            "segment_size" => segment_size = value.parse::<u64>().ok(),
            "version" => version = Some(value),
            _ => {}
        }
    }
    match version {
        Some(SLED_VERSION) => {}
        Some(other) => {
            return Err(StoreError::damaged(format!(
                "{} was written by sled {other}; this build uses sled {SLED_VERSION}. It was \
                 left unchanged",
                dir.display()
            )))
        }
        None => return Err(broken()),
    }
    segment_size
        .filter(|size| *size >= SEGMENT_HEADER_LEN)
        .ok_or_else(broken)
}

/// The error for a store refused as damaged: names it and `detail`, and
/// says it was left unchanged.
pub(super) fn damaged(dir: &Path, detail: &str) -> StoreError {
    StoreError::damaged(format!(
        "{} is damaged: {detail}. It was left unchanged; restore it from a backup",
        dir.display()
    ))
}

/// An I/O error of this module's plain file calls, with `context`.
pub(super) fn io_error(context: String, error: std::io::Error) -> StoreError {
    StoreError::unavailable_because(
        UnavailableKind::of_io_error(&error),
        format!("{context}: {error}"),
        error,
    )
}
