//! When this process holds a sled store ([`SledHold`]).
//!
//! [`Hold::Kept`] is the open store for the handle's whole life.
//! [`Hold::Lent`] opens the store for a call and lets it go once no call
//! has run for [`SLED_LINGER`]: a call takes a [`Lease`] (opening the
//! store when this process has it closed), and a reaper task, started
//! with each open, closes it again after the calls end. Calls that follow
//! each other closely (the reads and the write of one command) share one
//! open. While it is closed, another process may open the store; a call
//! of this one then waits for it like any open does (up to
//! `handle::LOCK_PATIENCE`), and reports the store `Locked` after that.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use ::sled::{IVec, Tree};
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};

use super::config::{SledHold, SLED_LINGER};
use super::handle::{self, panic_text, Shared};
use super::trees::Trees;
use super::{blocking, keys, SledConfig};

/// How a store handle holds its store.
#[derive(Debug)]
pub(super) enum Hold {
    /// Open from the handle's open until it is dropped.
    Kept(Arc<Shared>),
    /// Open only while calls run (and [`SLED_LINGER`] after).
    Lent(Arc<Lender>),
}

impl Hold {
    /// Opens the store of `config` and holds it as `config.hold` says.
    ///
    /// # Errors
    /// As [`open_checked`].
    pub(super) async fn open(config: &SledConfig) -> StoreResult<Self> {
        let (path, cache) = (config.path.clone(), config.cache);
        match config.hold {
            SledHold::WhileOpen => {
                let shared = blocking(move || open_checked(&path, cache)).await?;
                Ok(Self::Kept(shared))
            }
            SledHold::DuringCalls => {
                // Opened once now, so that a store that cannot be opened
                // is refused by the open, as when it is kept.
                let shared = blocking(move || open_checked(&path, cache)).await?;
                let lender = Arc::new(Lender {
                    dir: shared.dir.clone(),
                    cache,
                    state: Mutex::new(Lent {
                        shared: Some(shared),
                        last_done: Some(Instant::now()),
                        ..Lent::default()
                    }),
                });
                Lender::reap_later(&lender);
                Ok(Self::Lent(lender))
            }
        }
    }

    /// Runs `operation` on the open store, on tokio's blocking pool.
    pub(super) async fn run<T, F>(&self, operation: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Shared) -> StoreResult<T> + Send + 'static,
    {
        match self {
            Self::Kept(shared) => {
                let shared = shared.clone();
                blocking(move || operation(&shared)).await
            }
            Self::Lent(lender) => {
                let lease = lender.clone();
                let result = blocking(move || operation(&lease.lease()?.shared)).await;
                Lender::reap_later(lender);
                result
            }
        }
    }

    /// Reads `key` of the tree `tree` picks and decodes it with `decode`,
    /// settled as [`Shared::get`] settles it.
    ///
    /// A store kept open and quiet (no write of this process in flight:
    /// sled serves one process, so none of any) is read on the caller's
    /// thread: a lookup in sled's cache takes a few microseconds, where the
    /// hop to the blocking pool and back took several times that (a `get`
    /// ran at 29,000 a second through the pool; see
    /// `docs/history/BENCHMARKS-2026-12.md`).
    /// A page sled must read from its file is a read of the file system's
    /// cache as a rule, and it blocks the caller's thread for that read
    /// only. While a write is in flight a read may wait for sled's lock on
    /// its transactions and must settle, so it goes to the blocking pool,
    /// as does every read of a store held during calls (it may have to
    /// open the store). A panic in sled or in the decoding is an error,
    /// as it is on the pool.
    pub(super) async fn get<T, D>(
        &self,
        tree: fn(&Trees) -> &Tree,
        key: Vec<u8>,
        decode: D,
    ) -> StoreResult<Option<T>>
    where
        T: Send + 'static,
        D: FnOnce(IVec) -> StoreResult<T> + Send + 'static,
    {
        let read = move |shared: &Shared| shared.get(tree(&shared.trees), &key, decode);
        match self {
            Self::Kept(shared) if shared.settled() => {
                let inline = AssertUnwindSafe(|| {
                    // A write that began since the check makes this read
                    // settle at once, on this thread (the rare case).
                    read(shared)
                });
                std::panic::catch_unwind(inline).unwrap_or_else(|panic| {
                    Err(StoreError::unavailable(
                        UnavailableKind::Other,
                        format!("a sled read failed: {}", panic_text(&*panic)),
                    ))
                })
            }
            _ => self.run(read).await,
        }
    }

    /// The open store for a longer piece of work (an export or an import)
    /// on a thread of its own; the store stays open until the lease is
    /// dropped.
    pub(super) async fn lease(&self) -> StoreResult<Lease> {
        match self {
            Self::Kept(shared) => Ok(Lease {
                shared: shared.clone(),
                lender: None,
            }),
            Self::Lent(lender) => {
                let lease = lender.clone();
                let lease = blocking(move || lease.lease()).await?;
                Lender::reap_later(lender);
                Ok(lease)
            }
        }
    }

    /// The store's canonical directory.
    pub(super) fn dir(&self) -> &std::path::Path {
        match self {
            Self::Kept(shared) => &shared.dir,
            Self::Lent(lender) => &lender.dir,
        }
    }
}

/// The open store for one call (see [`Hold::lease`]). While any lease
/// lives the store stays open.
pub(super) struct Lease {
    pub shared: Arc<Shared>,
    lender: Option<Arc<Lender>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(lender) = &self.lender {
            let mut state = lender.state();
            state.busy = state.busy.saturating_sub(1);
            state.last_done = Some(Instant::now());
        }
    }
}

/// Opens the store in `path`, held while the handle lives.
#[derive(Debug)]
pub(super) struct Lender {
    /// The canonical store directory.
    dir: PathBuf,
    cache: u64,
    state: Mutex<Lent>,
}

/// What a [`Lender`] has: the store while it is open, how many calls run
/// on it, when the last one ended, and whether a reaper waits to close it.
#[derive(Debug, Default)]
struct Lent {
    shared: Option<Arc<Shared>>,
    busy: usize,
    last_done: Option<Instant>,
    reaping: bool,
}

impl Lender {
    fn state(&self) -> MutexGuard<'_, Lent> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open store, opened now when this process has it closed
    /// (blocking: it may wait for another process's lock).
    fn lease(self: &Arc<Self>) -> StoreResult<Lease> {
        let mut state = self.state();
        let shared = match &state.shared {
            Some(shared) => shared.clone(),
            None => {
                let shared = open_checked(&self.dir, self.cache)?;
                state.shared = Some(shared.clone());
                shared
            }
        };
        state.busy += 1;
        Ok(Lease {
            shared,
            lender: Some(self.clone()),
        })
    }

    /// Starts the task that closes the store once it has been idle for
    /// [`SLED_LINGER`], unless one waits already or the store is closed.
    fn reap_later(lender: &Arc<Self>) {
        {
            let mut state = lender.state();
            if state.reaping || state.shared.is_none() {
                return;
            }
            state.reaping = true;
        }
        let lender = lender.clone();
        tokio::spawn(async move {
            let mut pause = SLED_LINGER;
            loop {
                tokio::time::sleep(pause).await;
                let closing = {
                    let mut state = lender.state();
                    // Idle for the linger since the last call ended: the
                    // next look is when that will be true, so the store
                    // goes to other processes on time, not up to a
                    // second linger late.
                    let left = if state.busy > 0 {
                        Some(SLED_LINGER)
                    } else {
                        state
                            .last_done
                            .map(|done| SLED_LINGER.saturating_sub(done.elapsed()))
                            .filter(|left| !left.is_zero())
                    };
                    if let (Some(left), Some(_)) = (left, &state.shared) {
                        pause = left;
                        continue;
                    }
                    state.reaping = false;
                    state.shared.take()
                };
                // sled writes out its buffers when the last handle of a
                // `Db` drops: off the executor's threads.
                if let Some(shared) = closing {
                    let _ = tokio::task::spawn_blocking(move || drop(shared)).await;
                }
                return;
            }
        });
    }
}

/// Opens (creating when missing) the store in `path`, sharing the `Db` of
/// any handle this process already has on it, and refuses a store an
/// import left half loaded.
///
/// # Errors
/// `Unavailable` when the directory is refused, locked by another
/// process, or sled fails; nothing was changed.
fn open_checked(path: &std::path::Path, cache: u64) -> StoreResult<Arc<Shared>> {
    let shared = handle::open(path, cache)?;
    if shared
        .trees
        .counters
        .contains_key(keys::IMPORTING)
        .map_err(|e| shared.engine(e))?
    {
        return Err(StoreError::damaged(format!(
            "an import into {} is running or did not finish (the process died, or \
             emptying the store after a failed import failed), so the store may hold \
             part of a registry; delete the directory and run the import again",
            shared.dir.display()
        )));
    }
    Ok(shared)
}
