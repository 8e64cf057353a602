//! The history as a log to follow (C16): [`EventLog`] for [`SledStore`].
//!
//! Events are keyed by position (big-endian) in `handoff_events`, and
//! sled runs the writes that raise the position counter one at a time, so
//! positions become visible in order and every event read is final. The
//! change signal is sled's own subscription to that tree, in this process
//! only: sled lets one process open a store, so a watcher in another
//! process (the command line's `wait` and `watch`) opens the store only
//! while it reads, and reads again after a pause.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use lf_handoff_application::{Changes, EventBatch, EventLog, StoreResult, UnavailableKind};

use super::{keys, record, SledStore};
use crate::changes::{ChangeSource, FileIdentity, Notifier, FILE_CHECK};

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
                    if identity.is_none() || FileIdentity::of(&self.dir) != identity {
                        return out.fail(
                            UnavailableKind::Io,
                            format!(
                                "{} was deleted or replaced while it was watched",
                                self.dir.display()
                            ),
                        );
                    }
                }
            }
        }
    }
}
