//! One open `sled::Db` per store directory per process.
//!
//! sled takes an exclusive `flock` on its log when it opens a directory, and
//! that lock belongs to the open file, so even a second open *in the same
//! process* would be refused. Store handles therefore share one [`Shared`]
//! through a process-wide registry keyed by the canonical directory, which
//! holds only weak references: the `Db` closes when the last handle drops.
//!
//! Opening waits briefly for the lock before reporting it: a `Db` that is
//! still closing on another thread (its last handle just dropped) holds the
//! lock for a moment. A lock that outlasts [`LOCK_PATIENCE`] belongs to
//! another process, and the error says so. Before each attempt, under the
//! same lock, the store is prepared for sled (`recovery`): what a killed
//! writer left that sled cannot open is repaired, and damage sled would
//! cut away is refused.
//!
//! A store of an older format has its marker upgraded here, right after
//! sled opened it and before the first handle is returned: sled's lock is
//! held (no other process can be using the store), and no record of the
//! new format can be written before the marker names it. The index trees
//! older formats lack (by status, by home, prunable) are filled from the
//! records first, so the new marker always names a store that has them.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

use ::sled::transaction::ConflictableTransactionResult;
use ::sled::{Db, IVec, Tree};
use lf_handoff_application::{StoreError, StoreResult};

use super::error::{engine, io, is_locked, locked, settle, Abort};
use super::files::{self, SIGNAL};
use super::indexes::fill_list_indexes;
use super::log_audit::LOG;
use super::recovery::{self, Prepared};
use super::trees::{Trees, TxTrees};

/// How long an open waits for sled's file lock before reporting that
/// another process holds it.
pub(super) const LOCK_PATIENCE: Duration = Duration::from_secs(1);
/// The first pause between lock attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(2);
/// The longest pause between lock attempts: a process holding the store
/// only during calls lets it go [`SLED_LINGER`](super::SLED_LINGER) after
/// its last call, and the next process in line (a `wait` woken by that
/// call's write) should have it within a few milliseconds of that, not a
/// long sleep later. An attempt is a few system calls.
const MAX_PAUSE: Duration = Duration::from_millis(10);

/// The open stores of this process, by canonical directory.
static OPEN: Mutex<BTreeMap<PathBuf, Weak<Shared>>> = Mutex::new(BTreeMap::new());

/// An open store: the `Db`, its trees, and the log file to `fdatasync`.
pub(super) struct Shared {
    /// The canonical store directory, for messages.
    pub dir: PathBuf,
    pub db: Db,
    /// Every tree, opened once.
    pub trees: Trees,
    /// sled's log, opened a second time (without a lock) only to sync it.
    log: File,
    /// Writes begun and not yet durable (see [`Shared::write`]); a write
    /// that failed stays counted.
    writes: AtomicUsize,
    /// Every write of this process's handles holds it shared for as long
    /// as it runs (see [`Shared::write`]); an export or an import holds it
    /// exclusively ([`Shared::quiet`]), so no write starts or is halfway
    /// while it reads or loads the trees.
    gate: RwLock<()>,
    /// Touched after every durable write, for other processes' watchers.
    signal: Signal,
}

/// The store's signal file ([`SIGNAL`]): every write, once durable, writes
/// one byte into it, which the kernel announces to whoever watches the
/// directory (inotify). A process that holds the store only during calls
/// (`SledHold::DuringCalls`, the command line) cannot subscribe to sled's
/// trees between its calls, so its watchers and waiters wake on that
/// notification and then open the store and read.
///
/// Best effort: a store whose directory refuses the file (read-only) still
/// works, its watchers in other processes wake only on their safety
/// re-check; and a write is never failed for its signal. The byte is not
/// synced: the file carries no data, only the notification.
#[derive(Debug)]
struct Signal(Option<File>);

impl Signal {
    fn open(dir: &Path) -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join(SIGNAL));
        Self(file.ok())
    }

    fn send(&self) {
        use std::os::unix::fs::FileExt;
        if let Some(file) = &self.0 {
            let _ = file.write_at(&[1], 0);
        }
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").field("dir", &self.dir).finish()
    }
}

impl Shared {
    /// Makes every write committed so far durable, across power loss: sled
    /// writes its log buffer (`Db::flush`), then the log is `fdatasync`ed.
    ///
    /// sled's own flush on Linux ends with `sync_file_range`, which neither
    /// flushes the drive's write cache nor records a grown file's length,
    /// hence the explicit `fdatasync`.
    pub(super) fn make_durable(&self) -> StoreResult<()> {
        self.db.flush().map_err(|e| engine(&self.dir, e))?;
        self.log
            .sync_data()
            .map_err(|e| io(&self.dir, "cannot sync the sled log", e))
    }

    /// Runs `body` as one write transaction over the trees (counted as a
    /// write, see [`Shared::write`]) and settles it: when it committed,
    /// makes it durable before returning `Ok(Ok(value))`; an expected abort
    /// is `Ok(Err(_))`, anything else an error.
    pub(super) fn commit<T>(
        &self,
        body: impl Fn(&TxTrees<'_>) -> ConflictableTransactionResult<T, Abort>,
    ) -> StoreResult<Result<T, Abort>> {
        self.write(|| {
            let outcome = settle(&self.dir, self.trees.transaction(body))?;
            if outcome.is_ok() {
                self.make_durable()?;
            }
            Ok(outcome)
        })
    }

    /// Reads one key of `tree` and decodes it with `decode`, once the read
    /// is settled (see [`Shared::settle_reads`]).
    pub(super) fn get<T>(
        &self,
        tree: &Tree,
        key: &[u8],
        decode: impl FnOnce(IVec) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        let stored = tree.get(key).map_err(|e| engine(&self.dir, e))?;
        self.settle_reads()?;
        stored.map(decode).transpose()
    }

    /// Runs `write`, which changes the trees and returns once its changes
    /// are durable: [`Shared::commit`] runs every transaction through it,
    /// and a single-key write (the record's compare-and-swap) is wrapped in
    /// it directly.
    /// While it runs, reads settle (see [`Shared::settle_reads`]). A write
    /// that fails may have left a change in memory only, so reads keep
    /// settling for the rest of this `Db`'s life.
    ///
    /// It holds the gate shared while it runs, so a write never overlaps
    /// an export's read or an import ([`Shared::quiet`]).
    pub(super) fn write<T>(&self, write: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        let _gate = self.gate.read().unwrap_or_else(PoisonError::into_inner);
        self.writes.fetch_add(1, Ordering::SeqCst);
        let result = write();
        if result.is_ok() {
            self.writes.fetch_sub(1, Ordering::SeqCst);
            self.signal.send();
        }
        result
    }

    /// Waits until no write of this process is running and holds off
    /// every new one until the guard drops: what an export reads while it
    /// holds the guard is one state of the store, which no write has
    /// half-changed. sled serves one process, so no write comes from
    /// elsewhere.
    pub(super) fn quiet(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `write` (an import) while no other write runs ([`quiet`](Self::quiet)),
    /// counted as a write so reads settle meanwhile. `write` returns
    /// `Ok` once everything it changed is durable, with its own answer
    /// inside (which may be a refusal, or a failure it undid durably);
    /// an `Err` stays counted, as a failed [`write`](Self::write) does.
    pub(super) fn exclusive<T>(
        &self,
        write: impl FnOnce() -> StoreResult<StoreResult<T>>,
    ) -> StoreResult<T> {
        let _gate = self.quiet();
        self.writes.fetch_add(1, Ordering::SeqCst);
        let result = write()?;
        self.writes.fetch_sub(1, Ordering::SeqCst);
        self.signal.send();
        result
    }

    /// Before a read returns: if a write of this process is in flight,
    /// writes sled's log buffer out (no sync), so a read never reports a
    /// write that exists only in memory, even if the process dies before
    /// that write is durable.
    ///
    /// With no write in flight everything a write changed is already
    /// durable, and what the buffer may hold is sled's own reorganisation
    /// (a read splits a node it finds oversized), which changes no answer:
    /// it is left to the next write or to sled's background flush. On a
    /// large store read cold that spares about one read in fifteen a write
    /// to disk (measured: 0.3-0.4 ms each, at 1M handoffs).
    ///
    /// The counter is raised before a write touches a tree and lowered only
    /// once the write is durable, so a read that sees a write's change
    /// (after sled's own synchronisation of the tree) also sees the count,
    /// unless the write is already durable.
    pub(super) fn settle_reads(&self) -> StoreResult<()> {
        if self.settled() {
            return Ok(());
        }
        self.db.flush().map(drop).map_err(|e| engine(&self.dir, e))
    }

    /// Whether a read made now needs no settling: no write of this process
    /// is in flight (see [`Shared::settle_reads`]).
    pub(super) fn settled(&self) -> bool {
        self.writes.load(Ordering::SeqCst) == 0
    }
}

/// The open store at `path`, shared with this process's other handles on
/// it, or opened (and created when missing).
///
/// # Errors
/// `Unavailable` when the directory is refused (see `files`), when another
/// process holds it, or when sled fails.
///
/// `cache` is sled's page cache, in bytes, for a store this call opens; a
/// store this process already has open keeps the cache it was opened with.
pub(super) fn open(path: &Path, cache: u64) -> StoreResult<Arc<Shared>> {
    let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
    open.retain(|_, weak| weak.strong_count() > 0);
    if let Ok(dir) = std::fs::canonicalize(path) {
        if let Some(shared) = open.get(&dir).and_then(Weak::upgrade) {
            return Ok(shared);
        }
    }
    let dir = files::prepare(path)?;
    if let Some(shared) = open.get(&dir).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    let shared = Arc::new(open_db(dir.clone(), cache)?);
    // sled's lock is ours now: decide about the marker again (it may have
    // changed while the lock was awaited) and upgrade an older one, once
    // the index trees older formats lack are filled (and durable).
    files::settle_marker(&shared.dir, || {
        fill_list_indexes(&shared.trees, &shared.dir)?;
        shared.make_durable()
    })?;
    open.insert(dir, Arc::downgrade(&shared));
    Ok(shared)
}

fn open_db(dir: PathBuf, cache: u64) -> StoreResult<Shared> {
    // Read before sled opens (and creates) the log: another process can
    // only make an empty log non-empty, never the reverse, so a log that
    // holds data here belongs to an existing store.
    let sync = sync_at_open(&dir);
    let db = lock_and_open(&dir, cache)?;
    let log = OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(LOG))
        .map_err(|e| io(&dir, "cannot open the sled log", e))?;
    let shared = Shared {
        trees: Trees::open(&db, &dir)?,
        log,
        writes: AtomicUsize::new(0),
        gate: RwLock::new(()),
        signal: Signal::open(&dir),
        db,
        dir,
    };
    // A new store's trees and settings are made durable now (sled writes
    // its settings file `conf` once, when it creates a store, and never
    // syncs it; a log without it is refused), and so are the files sled
    // created in the directory (an existing store's new snapshot among
    // them). See [`sync_at_open`] for why an existing store is not synced.
    if sync == SyncAtOpen::Log {
        shared.make_durable()?;
        files::sync_sled_conf(&shared.dir)?;
    }
    files::sync_dir(&shared.dir)?;
    Ok(shared)
}

/// Whether opening a store ends with [`Shared::make_durable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SyncAtOpen {
    /// A new store (no log, or an empty one): sled creates its trees and
    /// settings, and they are made durable before the store is used.
    Log,
    /// An existing store: only the directory is synced.
    ///
    /// What sled writes while opening an existing store is its own
    /// reorganisation, and none of it needs our sync: recovery syncs what
    /// it repairs itself (the torn tail it zeroes, the new snapshot), and
    /// the rest (every free segment of the log zeroed again on each open,
    /// a tree this build adds to an older store) changes no stored answer
    /// and is sled's to redo on the next open if a crash loses it. The
    /// first write after the open syncs the whole log with it, as every
    /// write does. The sync is not free: sled zeroes every free 512 KiB
    /// segment on each open (150 MB on a bench store of 1M handoffs), so
    /// the `fdatasync` cost about 45 ms of every command on that store.
    Directory,
}

/// Decides [`SyncAtOpen`] from sled's log as it is before sled opens it;
/// when in doubt (the log cannot be read), the log is synced.
pub(super) fn sync_at_open(dir: &Path) -> SyncAtOpen {
    match std::fs::metadata(dir.join(LOG)) {
        Ok(metadata) if metadata.len() > 0 => SyncAtOpen::Directory,
        _ => SyncAtOpen::Log,
    }
}

/// Opens the `Db`, retrying the store's lock with a short, bounded
/// backoff. Each attempt first prepares the store under its lock
/// ([`recovery::before_sled`]: repairs what a killed writer left, refuses
/// damage), then lets sled open it; another process may take the lock in
/// between, which is waited for like any other holder.
fn lock_and_open(dir: &Path, cache: u64) -> StoreResult<Db> {
    let deadline = Instant::now() + LOCK_PATIENCE;
    let mut pause = FIRST_PAUSE;
    loop {
        let held = match recovery::before_sled(dir)? {
            Prepared::Locked(error) => locked(dir, error),
            Prepared::Ready => match open_sled(dir, cache)? {
                Ok(db) => return Ok(db),
                Err(error) if is_locked(&error) => locked(dir, error),
                Err(error) => return Err(engine(dir, error)),
            },
        };
        if Instant::now() >= deadline {
            return Err(held);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// What a caught panic said.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// One `Config::open` of the store. sled asserts on some damage it meets
/// while recovering; a panic is reported as a damaged store instead of
/// unwinding into the caller.
fn open_sled(dir: &Path, cache: u64) -> StoreResult<Result<Db, ::sled::Error>> {
    let config = ::sled::Config::new().path(dir).cache_capacity(cache);
    catch_unwind(AssertUnwindSafe(|| config.open())).map_err(|panic| {
        let detail = panic_text(&*panic);
        StoreError::damaged(format!(
            "{} could not be opened: sled failed while recovering it ({detail}); the store \
             may be damaged. Restore it from a backup",
            dir.display()
        ))
    })
}
