//! A handoff's load on the caller's thread ([`InlineReads`], SQLite's
//! `Dialect::handoff_at_once`).
//!
//! sqlx runs each SQLite connection on a thread of its own: a load
//! through the pool hands its statement to that thread and waits to be
//! woken with the row, two thread wakes that cost more than the read
//! itself (a `get` took 40 µs, most of it those wakes;
//! `docs/history/BENCHMARKS-2026-12.md`).
//! A handoff's load by id instead runs on the caller's thread, on a
//! connection of its own opened through `rusqlite`. It links the same
//! SQLite library as sqlx (one copy in the binary, one `libsqlite3-sys`),
//! so its locks and the pool's are one process's locks on one file, as
//! SQLite's POSIX locking requires.
//!
//! - **It does not wait for others.** In WAL mode a reader needs no lock a
//!   writer holds. Its busy timeout is zero, so a lock it cannot take at
//!   once (another process recovering the WAL, or holding the file in
//!   exclusive locking mode) fails the read instead of sleeping on the
//!   caller's thread (SQLite's own WAL read path may still retry for a
//!   moment while a checkpoint moves the read marks). When every
//!   connection here is in use by another thread, it does not wait for
//!   one either.
//! - **It answers only what it read whole.** A read that fails for any
//!   reason, or that finds no free connection, answers nothing, and the
//!   load goes through the pool as before, which waits as it always did
//!   and reports any error in the store's words. A row it read is checked
//!   as every row is (`HandoffRow::into_domain`).
//! - **It sees what the pool sees.** Each read is its own read transaction
//!   begun at the statement, whose snapshot is the newest committed one:
//!   every commit that returned before the load began is in it.
//! - **It writes nothing** (`PRAGMA query_only`). It is opened read-write
//!   so that when it is the last connection to the file to close, it
//!   checkpoints and removes the WAL as the pool's connections would.
//! - **What it may still do on the caller's thread** is read a page of the
//!   file that the operating system does not cache, as any read of a file
//!   does; a few pages per load (the key's index, then the row).
//!
//! At most [`MAX_CONNECTIONS`] connections (no more than the machine has
//! cores), each opened when a load first needs it, beside the pool's
//! `max_connections`. One that cannot be opened (say, the process is out
//! of file descriptors) turns these reads off for [`RETRY_OPEN_AFTER`];
//! meanwhile every load goes through the pool.

use std::fmt;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, Row};

use crate::sql::columns::{Cells, HandoffRow, Positions};
use crate::sql::statements::HANDOFF_BY_ID;

/// The most connections one store handle reads on at once this way.
pub(crate) const MAX_CONNECTIONS: usize = 4;

/// How long loads go through the pool after a connection of their own
/// could not be opened.
pub(crate) const RETRY_OPEN_AFTER: Duration = Duration::from_secs(10);

/// The connections of the loads on callers' threads of one store handle.
pub(crate) struct InlineReads {
    path: PathBuf,
    /// Each a connection once a load opened it.
    slots: Box<[Mutex<Option<Connection>>]>,
    /// When these reads were made: what `off_until` counts from.
    made: Instant,
    /// Milliseconds after `made` before which loads go through the pool (a
    /// connection could not be opened); 0 while they are on.
    off_until: AtomicU64,
}

impl fmt::Debug for InlineReads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InlineReads")
            .field("path", &self.path)
            .field("connections", &self.slots.len())
            .field("off", &self.is_off())
            .finish()
    }
}

impl InlineReads {
    /// The reads of the store at `path`: as many connections as the
    /// machine has cores, at most [`MAX_CONNECTIONS`], none opened yet.
    pub(crate) fn new(path: PathBuf) -> Self {
        // Read once per process: on Linux it reads the scheduler's
        // affinity and the cgroup's CPU quota, files every store open
        // would read again.
        static CORES: OnceLock<usize> = OnceLock::new();
        let cores = *CORES
            .get_or_init(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get));
        Self {
            path,
            slots: (0..cores.clamp(1, MAX_CONNECTIONS))
                .map(|_| Mutex::new(None))
                .collect(),
            made: Instant::now(),
            off_until: AtomicU64::new(0),
        }
    }

    /// Milliseconds since these reads were made.
    fn now(&self) -> u64 {
        u64::try_from(self.made.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether loads go through the pool for now.
    fn is_off(&self) -> bool {
        let until = self.off_until.load(Ordering::Relaxed);
        until != 0 && self.now() < until
    }

    /// The row of the handoff `id` (`Some(None)`: there is none), read on
    /// this thread; `None` when it could not be read at once.
    pub(crate) fn handoff(&self, id: &str) -> Option<Option<HandoffRow<'static>>> {
        if self.is_off() {
            return None;
        }
        for slot in &self.slots {
            let mut held = match slot.try_lock() {
                Ok(held) => held,
                // In use by another thread, or left by a read that
                // panicked: try the next one.
                Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => continue,
            };
            let conn = match &mut *held {
                Some(conn) => conn,
                empty => match open(&self.path) {
                    Ok(conn) => empty.insert(conn),
                    Err(error) => {
                        tracing::debug!(%error, path = %self.path.display(),
                            "SQLite loads go through the pool: a connection of their own did not open");
                        let until = self.now().saturating_add(
                            u64::try_from(RETRY_OPEN_AFTER.as_millis()).unwrap_or(u64::MAX),
                        );
                        self.off_until.store(until.max(1), Ordering::Relaxed);
                        return None;
                    }
                },
            };
            return match read(conn, id) {
                Ok(row) => Some(row),
                Err(error) => {
                    tracing::debug!(%error, "a load on the caller's thread goes through the pool");
                    None
                }
            };
        }
        None
    }

    /// Holds every connection, as loads on other threads would, until the
    /// guards drop.
    #[cfg(test)]
    pub(crate) fn hold_all(&self) -> Vec<std::sync::MutexGuard<'_, Option<Connection>>> {
        self.slots
            .iter()
            .map(|slot| {
                slot.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .collect()
    }
}

/// A connection to the store at `path` that reads at once or not at all.
fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::ZERO)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// The row of the handoff `id` on `conn`, if there is one.
fn read(conn: &Connection, id: &str) -> rusqlite::Result<Option<HandoffRow<'static>>> {
    let mut statement = conn.prepare_cached(&HANDOFF_BY_ID)?;
    let mut rows = statement.query([id])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    HandoffRow::decode_cells(row, &Positions::in_table_order()).map(Some)
}

impl Cells for Row<'_> {
    type Error = rusqlite::Error;
    fn text(&self, at: usize) -> rusqlite::Result<String> {
        self.get(at)
    }
    fn optional_text(&self, at: usize) -> rusqlite::Result<Option<String>> {
        self.get(at)
    }
    fn int(&self, at: usize) -> rusqlite::Result<i64> {
        self.get(at)
    }
    fn optional_int(&self, at: usize) -> rusqlite::Result<Option<i64>> {
        self.get(at)
    }
}
