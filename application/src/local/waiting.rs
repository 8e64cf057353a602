//! Watching and waiting on the local registry (C16): a watcher reads the
//! backend's [`EventLog`] and sleeps on its change signal; a waiter reads
//! the handoff again at each signal.

use std::collections::{HashMap, VecDeque};
use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::HandoffEvent;

use super::Local;
use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::registry::{Handoffs, Registry, Waiting};
use crate::watch::{
    Changes, EventLog, EventStream, Waited, WatchFilter, WatchFrom, Watcher, SAFETY_RECHECK,
};

/// How long a wait or a watch pauses between reads while its server is
/// unreachable or another process holds the store ([`rides_out`]).
const UNREACHABLE_PAUSE: Duration = Duration::from_millis(250);

/// Whether a wait waits out `error` instead of ending: a server that is
/// down longer than the retry window, or a store another process holds
/// (sled, whose command line opens the store only while it reads, finds
/// it held while the person's command runs). A watch waits out only the
/// latter.
fn rides_out(error: &StoreError) -> bool {
    matches!(
        error.unavailable_kind(),
        Some(UnavailableKind::Unreachable | UnavailableKind::Locked)
    )
}

/// How soon a watcher reads again when events are pending
/// ([`EventBatch::pending`]); the pause doubles up to [`PENDING_LONGEST`].
const PENDING_FIRST: Duration = Duration::from_millis(10);
const PENDING_LONGEST: Duration = Duration::from_millis(200);

/// How many events one read of a watcher takes at most.
const WATCH_BATCH: usize = 256;

/// How many handoffs' parents a filtered watcher remembers before it
/// forgets them all and starts again.
const PARENT_CACHE: usize = 4096;

/// The watcher of a local registry: it reads its backend's [`EventLog`]
/// and sleeps on the backend's change signal.
struct LogWatcher {
    store: Local,
    log: Arc<dyn EventLog>,
    /// Subscribed the first time the watcher has to sleep (then it reads
    /// once more before it sleeps), so a watcher that only catches up
    /// never holds the backend's signal.
    changes: Option<Box<dyn Changes>>,
    filter: WatchFilter,
    position: u64,
    ready: VecDeque<HandoffEvent>,
    parents: HashMap<InteractiveHandoffId, bool>,
}

impl Debug for LogWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogWatcher")
            .field("position", &self.position)
            .field("filter", &self.filter)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl EventStream for LogWatcher {
    fn position(&self) -> u64 {
        self.position
    }

    async fn next_within(&mut self, within: Duration) -> StoreResult<Option<HandoffEvent>> {
        let until = Instant::now() + within;
        let mut pending_pause = PENDING_FIRST;
        loop {
            // Looked at before it is taken: a failed filter lookup leaves
            // the event (and the position) for the next call.
            while let Some(event) = self.ready.front().cloned() {
                let passes = self.passes(&event).await?;
                self.ready.pop_front();
                self.position = event.position;
                if passes {
                    return Ok(Some(event));
                }
            }
            let (log, after) = (&self.log, self.position);
            let read = crate::retry::retry(self.store.retry_window(), "reading events", || {
                log.events_after(after, WATCH_BATCH)
            })
            .await;
            let batch = match read {
                Ok(batch) => batch,
                // A watch ends when its server stays unreachable past the
                // retry window (the watcher resumes from its position),
                // but waits while another process holds the store.
                Err(error) if error.unavailable_kind() == Some(UnavailableKind::Locked) => {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    tracing::info!("a watch waits for the store: {error}");
                    tokio::time::sleep(left.min(UNREACHABLE_PAUSE)).await;
                    continue;
                }
                Err(error) => return Err(error),
            };
            if let Some(bad) = batch
                .events
                .iter()
                .find(|event| event.position <= self.position)
            {
                return Err(StoreError::unavailable(
                    UnavailableKind::Other,
                    format!(
                        "the store returned event {} at position {}, not after {}",
                        bad.seq, bad.position, self.position
                    ),
                ));
            }
            if !batch.events.is_empty() {
                self.ready.extend(batch.events);
                continue;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut nap = left.min(SAFETY_RECHECK);
            if batch.pending {
                nap = nap.min(pending_pause);
                pending_pause = (pending_pause * 2).min(PENDING_LONGEST);
            }
            match &mut self.changes {
                Some(changes) => {
                    changes.changed(nap).await?;
                }
                // Subscribed before the next read, so nothing committed
                // after that read goes unsignalled.
                None => self.changes = Some(self.log.changes().await?),
            }
        }
    }
}

impl LogWatcher {
    async fn passes(&mut self, event: &HandoffEvent) -> StoreResult<bool> {
        if self
            .filter
            .handoff
            .as_ref()
            .is_some_and(|id| *id != event.handoff_id)
        {
            return Ok(false);
        }
        let Some(parent) = &self.filter.parent else {
            return Ok(true);
        };
        if let Some(&known) = self.parents.get(&event.handoff_id) {
            return Ok(known);
        }
        let ours = self
            .store
            .get_interactive_handoff(&event.handoff_id)
            .await?
            .is_some_and(|handoff| handoff.parent == *parent);
        if self.parents.len() >= PARENT_CACHE {
            self.parents.clear();
        }
        self.parents.insert(event.handoff_id.clone(), ours);
        Ok(ours)
    }
}

#[async_trait]
impl Waiting for Local {
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend()))]
    async fn watch(&self, from: WatchFrom, filter: WatchFilter) -> StoreResult<Watcher> {
        let log = self.events.clone();
        let position = match from {
            WatchFrom::After(position) => position,
            WatchFrom::Now => {
                crate::retry::retry(self.retry_window(), "reading the last position", || {
                    log.last_position()
                })
                .await?
            }
        };
        Ok(Watcher::new(Box::new(LogWatcher {
            store: self.clone(),
            log,
            changes: None,
            filter,
            position,
            ready: VecDeque::new(),
            parents: HashMap::new(),
        })))
    }

    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend(), handoff = %id))]
    async fn wait(
        &self,
        id: &InteractiveHandoffId,
        timeout: Option<Duration>,
    ) -> StoreResult<Waited> {
        let log = self.events.clone();
        let until = timeout.map(|timeout| Instant::now() + timeout);
        let mut changes = log.changes().await?;
        loop {
            let read = match self.get_interactive_handoff(id).await {
                Ok(Some(handoff)) if handoff.is_due(self.now()) => self.expire_if_due(id).await,
                Ok(Some(handoff)) => Ok(handoff),
                Ok(None) => Err(StoreError::NotFound(format!("handoff {id} does not exist"))),
                Err(error) => Err(error),
            };
            let handoff = match read {
                Ok(handoff) => handoff,
                // The server is down for longer than the retry window, or
                // another process holds the store: a wait rides it out up
                // to its own timeout.
                Err(error)
                    if rides_out(&error) && until.is_none_or(|until| Instant::now() < until) =>
                {
                    tracing::info!("waiting on: {error}");
                    changes.changed(UNREACHABLE_PAUSE).await?;
                    continue;
                }
                Err(error) => return Err(error),
            };
            if !handoff.is_active() {
                return Ok(Waited::Ended(handoff));
            }
            let mut nap = SAFETY_RECHECK;
            if let Some(at) = handoff.expires_at {
                // A moment after the deadline, so the handoff is due then.
                let left = Duration::try_from(at - self.now()).unwrap_or(Duration::ZERO);
                nap = nap.min(left + Duration::from_millis(1));
            }
            if let Some(until) = until {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Waited::TimedOut(handoff));
                }
                nap = nap.min(left);
            }
            changes.changed(nap).await?;
        }
    }
}
