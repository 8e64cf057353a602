//! The history as a log to follow (C16): [`EventLog`] for [`SledStore`].
//!
//! Events are keyed by position (big-endian) in `handoff_events`, and
//! sled runs the writes that raise the position counter one at a time, so
//! positions become visible in order and every event read is final.
//!
//! The change signal of a store held while open is sled's own
//! subscription to that tree ([`Subscription`]): sled lets one process
//! open a store, so every write comes from this process. A store held
//! only during calls (`SledHold::DuringCalls`, the command line) may be
//! written by other processes between its calls: its signal is the
//! store's signal file ([`SignalFile`]), which every write touches once it
//! is durable.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_application::{Changes, EventBatch, EventLog, StoreResult, UnavailableKind};

use super::files::SIGNAL;
use super::{keys, record, SledStore};
use crate::changes::{ChangeSource, Notifier, RECHECK};
use crate::file_events::{FileIdentity, FileWatch, FILE_CHECK};

/// How often a [`SignalFile`] wakes its watchers when the kernel gives no
/// file notifications (not Linux, or past the inotify limits): each wake
/// opens the store and reads.
const SIGNAL_POLL: Duration = Duration::from_secs(1);

#[async_trait]
impl EventLog for SledStore {
    async fn last_position(&self) -> StoreResult<u64> {
        self.run(|shared| {
            let last = match shared
                .trees
                .counters
                .get(keys::POSITION)
                .map_err(|e| shared.engine(e))?
            {
                Some(bytes) => record::counter(&"the history's last position", &bytes)?,
                None => 0,
            };
            shared.settle_reads()?;
            Ok(last)
        })
        .await
    }

    async fn events_after(&self, after: u64, limit: usize) -> StoreResult<EventBatch> {
        let Some(first) = after.checked_add(1) else {
            return Ok(EventBatch::default());
        };
        self.run(move |shared| {
            let mut events = Vec::new();
            for entry in shared.trees.events.range(keys::event(first)..) {
                if events.len() >= limit {
                    break;
                }
                let (key, bytes) = entry.map_err(|e| shared.engine(e))?;
                let position = <[u8; 8]>::try_from(&key[..])
                    .map(u64::from_be_bytes)
                    .map_err(|_| {
                        lf_handoff_application::StoreError::damaged(format!(
                            "{}: an event key of {} bytes is not a position",
                            shared.dir.display(),
                            key.len()
                        ))
                    })?;
                events.push(record::event(position, &bytes)?);
            }
            shared.settle_reads()?;
            Ok(EventBatch {
                events,
                pending: false,
            })
        })
        .await
    }

    async fn changes(&self) -> StoreResult<Box<dyn Changes>> {
        Ok(self.feed.subscribe())
    }
}

/// sled's change signal: a subscription to the events tree, and a check
/// every [`FILE_CHECK`] that the store's directory is still there.
#[derive(Debug)]
pub(super) struct Subscription {
    pub events: ::sled::Tree,
    pub dir: PathBuf,
}

impl Subscription {
    pub(super) fn source(events: ::sled::Tree, dir: PathBuf) -> Arc<dyn ChangeSource> {
        Arc::new(Self { events, dir })
    }
}

#[async_trait]
impl ChangeSource for Subscription {
    async fn run(&self, out: &Arc<Notifier>) {
        let identity = FileIdentity::of(&self.dir);
        let mut subscriber = self.events.watch_prefix(Vec::<u8>::new());
        // A commit between a subscription and this one is covered by a
        // wake now.
        out.bump();
        while out.wanted() {
            match tokio::time::timeout(FILE_CHECK, &mut subscriber).await {
                Ok(Some(_)) => out.bump(),
                Ok(None) => {
                    return out.fail(
                        UnavailableKind::Other,
                        format!("{} was closed while it was watched", self.dir.display()),
                    )
                }
                Err(_) => {
                    if replaced(&self.dir, identity.as_ref(), out) {
                        return;
                    }
                }
            }
        }
    }
}

/// The signal of a store held only during calls: a file notification for
/// the store's signal file, which every write of this build touches once
/// it is durable (`handle::Signal`), from this process or another. Each
/// notification wakes the watchers, which then open the store and read
/// (waiting for the writer's process to let it go). Every [`FILE_CHECK`]
/// the directory is looked at, as for [`Subscription`]. A notification
/// can be missed, and reading a mark of the store would need it opened,
/// so the watchers are also woken every [`RECHECK`] (the safety check of
/// `changes`); a write of an older build, which touches no signal file,
/// reaches them then. Without file notifications they are woken every
/// [`SIGNAL_POLL`].
#[derive(Debug)]
pub(super) struct SignalFile {
    pub dir: PathBuf,
}

impl SignalFile {
    pub(super) fn source(dir: PathBuf) -> Arc<dyn ChangeSource> {
        Arc::new(Self { dir })
    }
}

#[async_trait]
impl ChangeSource for SignalFile {
    async fn run(&self, out: &Arc<Notifier>) {
        let identity = FileIdentity::of(&self.dir);
        let files = FileWatch::new(&self.dir, &[OsString::from(SIGNAL)]);
        // A write before the watch began sent no notification it saw.
        out.bump();
        let mut woken = std::time::Instant::now();
        while out.wanted() {
            if woken.elapsed() >= RECHECK {
                woken = std::time::Instant::now();
                out.bump();
            }
            let watched = files.as_ref().filter(|files| files.alive());
            let pause = if watched.is_some() {
                FILE_CHECK
            } else {
                SIGNAL_POLL
            };
            let notified = async {
                match watched {
                    Some(files) => files.changed().await,
                    None => std::future::pending().await,
                }
            };
            match tokio::time::timeout(pause, notified).await {
                Ok(()) => {
                    woken = std::time::Instant::now();
                    out.bump();
                }
                Err(_) => {
                    if replaced(&self.dir, identity.as_ref(), out) {
                        return;
                    }
                    if watched.is_none() {
                        out.bump();
                    }
                }
            }
        }
    }
}

/// Whether the store's directory is gone or another one (not the one of
/// `identity`); the watchers are then told so through `out`.
fn replaced(dir: &std::path::Path, identity: Option<&FileIdentity>, out: &Notifier) -> bool {
    if identity.is_some() && FileIdentity::of(dir).as_ref() == identity {
        return false;
    }
    out.fail(
        UnavailableKind::Io,
        format!(
            "{} was deleted or replaced while it was watched",
            dir.display()
        ),
    );
    true
}
