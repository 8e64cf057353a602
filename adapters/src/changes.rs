//! Change signals (C16): one background task per open store that wakes
//! every watcher and waiter of this process when the store may have
//! changed, so none of them polls the store itself.
//!
//! A [`ChangeFeed`] runs its backend's [`ChangeSource`] on a task of its
//! own while anyone subscribes, and stops it when the last subscription
//! is dropped: an idle store costs nothing. The source says "may have
//! changed" ([`Notifier::bump`]) or "gone" ([`Notifier::fail`]); each
//! subscription ([`Subscription`], the application's
//! [`Changes`](lf_handoff_application::Changes)) sees every bump after it
//! subscribed at least once, several bumps as one.
//!
//! **The safety check.** A signal can be missed: a PostgreSQL `LISTEN`
//! connection that died without a word (a firewall dropping an idle
//! connection), a file notification the kernel dropped. So a source
//! that depends on one also reads, every [`RECHECK`], one cheap mark of
//! the store that moves whenever a change commits, and bumps when it
//! moved since its last reading (SQLite: `PRAGMA data_version`;
//! PostgreSQL: the last final event's position, a change's event being
//! written with it (C15)). Its first reading (after each reconnection)
//! bumps too: a change committed before it is one the readers then read
//! (SQLite's source, whose first reading comes 5 s after it starts to
//! spare a short watch the connection, skips that wake when no
//! notification or look at the files came meanwhile: it woke the readers
//! as it started). A change any signal missed thus wakes the readers within [`RECHECK`]
//! of becoming readable, at the cost of one read per store, not one per
//! watcher or waiter; the readers' own re-read
//! ([`SAFETY_RECHECK`](lf_handoff_application::SAFETY_RECHECK)) is only
//! a last resort. sled's source for a store held while open needs no
//! mark: its signal is sled's own subscription to the tree every write of
//! the store goes through, in the one process that may open the store,
//! polled again every [`FILE_CHECK`](crate::file_events::FILE_CHECK). A store held only during calls is
//! signalled by a file every write touches; reading a mark would need the
//! store opened, so that source wakes its readers every [`RECHECK`].

use std::fmt::{self, Debug};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_application::{Changes, StoreError, StoreResult, UnavailableKind};
use tokio::sync::watch;

/// What the feed last said: how many bumps, and whether the store is gone.
#[derive(Debug, Clone, Default)]
struct Signal {
    bumps: u64,
    failure: Option<(UnavailableKind, String)>,
}

/// How often a source whose signal can be missed reads its store's mark
/// (see the module docs): the bound on what a missed signal costs.
pub(crate) const RECHECK: Duration = Duration::from_secs(5);

/// A backend's way of noticing changes, run by a [`ChangeFeed`].
#[async_trait]
pub(crate) trait ChangeSource: Debug + Send + Sync + 'static {
    /// Watches the store and reports through `out` until
    /// [`Notifier::wanted`] turns false (checked at least every second or
    /// so), then returns. A change its signal misses is reported within
    /// [`RECHECK`] of becoming readable (see the module docs).
    async fn run(&self, out: &Arc<Notifier>);
}

/// The last reading of a store's mark (see the module docs), which the
/// SQL backends' change sources read.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, Default)]
pub(crate) struct Mark {
    seen: Option<i64>,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Mark {
    /// Takes `value`, read now: bumps `out` when it differs from the last
    /// reading, or is the first since [`forget`](Self::forget).
    pub(crate) fn read(&mut self, value: i64, out: &Notifier) {
        if self.seen != Some(value) {
            out.bump();
        }
        self.seen = Some(value);
    }

    /// Takes `value` as the first reading when there is none, waking
    /// nobody.
    #[cfg(feature = "sqlite")]
    pub(crate) fn baseline(&mut self, value: i64) {
        self.seen.get_or_insert(value);
    }

    /// Forgets the last reading (the connection it was read on broke):
    /// the next one bumps.
    pub(crate) fn forget(&mut self) {
        self.seen = None;
    }
}

/// The sending side of a feed, as a [`ChangeSource`] sees it.
#[derive(Debug)]
pub(crate) struct Notifier {
    tx: watch::Sender<Signal>,
}

impl Notifier {
    /// Wakes every subscription: the store may have changed.
    pub(crate) fn bump(&self) {
        self.tx
            .send_modify(|signal| signal.bumps = signal.bumps.wrapping_add(1));
    }

    /// Tells every subscription that the store is gone; they answer
    /// `Unavailable` from then on: for a store in a file, deleted or
    /// replaced while it was watched.
    #[cfg(any(feature = "sqlite", feature = "sled"))]
    pub(crate) fn fail(&self, kind: UnavailableKind, message: String) {
        self.tx.send_modify(|signal| {
            signal.bumps = signal.bumps.wrapping_add(1);
            signal.failure = Some((kind, message));
        });
    }

    /// Whether the source said the store is gone.
    fn failed(&self) -> bool {
        self.tx.borrow().failure.is_some()
    }

    /// Whether anyone still subscribes.
    pub(crate) fn wanted(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

/// The change signal of one open store (see the module docs).
pub(crate) struct ChangeFeed {
    out: Arc<Notifier>,
    running: Arc<AtomicBool>,
    source: Arc<dyn ChangeSource>,
}

impl Debug for ChangeFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeFeed")
            .field("source", &self.source)
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish()
    }
}

impl ChangeFeed {
    /// A feed of `source`'s changes, idle until the first subscription.
    pub(crate) fn new(source: Arc<dyn ChangeSource>) -> Self {
        let (tx, _) = watch::channel(Signal::default());
        Self {
            out: Arc::new(Notifier { tx }),
            running: Arc::new(AtomicBool::new(false)),
            source,
        }
    }

    /// A subscription live from now on, starting the source's task if it
    /// is not running.
    pub(crate) fn subscribe(&self) -> Box<dyn Changes> {
        let rx = self.out.tx.subscribe();
        if !self.running.swap(true, Ordering::SeqCst) {
            let (out, running, source) =
                (self.out.clone(), self.running.clone(), self.source.clone());
            tokio::spawn(async move {
                loop {
                    source.run(&out).await;
                    running.store(false, Ordering::SeqCst);
                    // A store that is gone stays gone: a later subscription
                    // starts the source again and hears so at once. One
                    // that came while the source was stopping saw it
                    // running and started nothing, so this task goes on.
                    if out.failed() || !out.wanted() || running.swap(true, Ordering::SeqCst) {
                        break;
                    }
                }
            });
        }
        Box::new(Subscription { rx })
    }
}

/// One subscription to a [`ChangeFeed`].
struct Subscription {
    rx: watch::Receiver<Signal>,
}

#[async_trait]
impl Changes for Subscription {
    async fn changed(&mut self, within: Duration) -> StoreResult<bool> {
        let woke = match tokio::time::timeout(within, self.rx.changed()).await {
            Err(_) => false,
            Ok(Ok(())) => true,
            Ok(Err(_)) => {
                return Err(StoreError::unavailable(
                    UnavailableKind::Other,
                    "the store's change signal stopped: the store was closed",
                ))
            }
        };
        if let Some((kind, message)) = &self.rx.borrow_and_update().failure {
            return Err(StoreError::unavailable(*kind, message.clone()));
        }
        Ok(woke)
    }
}
