//! Watching the history and waiting for a handoff without polling (C16).
//!
//! This module owns the [`EventLog`] port (what a backend offers to read
//! its history in position order and to signal that it may have grown),
//! the [`Watcher`] that [`Store::watch`](crate::Store::watch) returns, and [`Store::wait`](crate::Store::wait).
//!
//! A watcher keeps a position: the last event it has passed on (or skipped
//! because the filter left it out). It reads the events after it in
//! position order, in batches, and when there are none it sleeps on the
//! backend's change signal ([`Changes`]), which wakes it when a write may
//! have added events: PostgreSQL `LISTEN/NOTIFY`, SQLite `PRAGMA
//! data_version`, sled's subscription. A signal may wake it for nothing.
//! A signal can also be missed (a dropped connection, a lost file
//! notification): the backend covers that itself, once per store, not
//! once per watcher, by checking every few seconds whether the store
//! changed and waking its subscribers when it did (the adapters' change
//! feed: within 5 s). A watcher or a waiter still reads again after
//! [`SAFETY_RECHECK`] (5 min) without a wake, a last resort, so a lost
//! wake costs seconds, never an event, and an idle one costs no reads.
//!
//! The backend's [`EventLog::events_after`] returns only *final* events:
//! those no event of a lower position can commit after (on PostgreSQL,
//! where concurrent writers commit out of order, it holds back events
//! above the oldest transaction still writing one). So a watcher that
//! resumes from any position it was given never misses or repeats an
//! event.

use std::collections::{HashMap, VecDeque};
use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
};

use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::local::Local;
use crate::registry::Registry;

/// How long a watcher or a waiter sleeps at most without a change signal
/// before it reads again. A last resort: a backend's signal catches what
/// it missed itself, once per store, within seconds (see the module
/// docs), so this re-read, once per watcher, costs 2,000 idle ones of a
/// server 7 reads a second, not 400.
pub const SAFETY_RECHECK: Duration = Duration::from_secs(5 * 60);

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

/// A backend's history as a log to follow (C16).
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait EventLog: Debug + Send + Sync + 'static {
    /// The position of the last final event now: a watcher that starts
    /// from it sees the events committed from now on (and possibly a few
    /// committed a moment before, on PostgreSQL), never one twice.
    ///
    /// # Errors
    /// `Unavailable` on engine failure.
    async fn last_position(&self) -> StoreResult<u64>;

    /// At most `limit` events after position `after`, in position order,
    /// each final: no event of a lower position can still commit. An event
    /// whose handoff was pruned is gone with it.
    ///
    /// # Errors
    /// `Unavailable` on engine failure or an unreadable event.
    async fn events_after(&self, after: u64, limit: usize) -> StoreResult<EventBatch>;

    /// A new subscription to the backend's change signal, live from this
    /// call on: a write that commits after it wakes it.
    ///
    /// # Errors
    /// `Unavailable` when the signal cannot be set up.
    async fn changes(&self) -> StoreResult<Box<dyn Changes>>;
}

/// What [`EventLog::events_after`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventBatch {
    /// The final events, in position order.
    pub events: Vec<HandoffEvent>,
    /// Whether more events may become readable soon without a change
    /// signal: events are stored after the batch that are not final yet,
    /// because a write still in progress may commit an event before them
    /// (or end without signalling). A watcher that read none reads again
    /// shortly rather than sleeping on the signal.
    pub pending: bool,
}

/// One subscription to a backend's change signal.
#[async_trait]
pub trait Changes: Send {
    /// Waits until a write may have changed the store since the previous
    /// call returned (or since the subscription), at most `within`:
    /// `Ok(true)` when signalled (possibly for nothing), `Ok(false)` when
    /// `within` passed first. A change the backend's signal missed must
    /// still wake it within seconds: the readers read again on their own
    /// only every [`SAFETY_RECHECK`].
    ///
    /// # Errors
    /// `Unavailable` when the store went away (its file deleted, its
    /// server unreachable for longer than the backend tolerates).
    async fn changed(&mut self, within: Duration) -> StoreResult<bool>;
}

/// Which events a [`Watcher`] passes on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchFilter {
    /// Only the events of this parent's handoffs.
    pub parent: Option<InteractiveHandoffParent>,
    /// Only the events of this handoff.
    pub handoff: Option<InteractiveHandoffId>,
}

/// Where a [`Watcher`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// After this position: 0 for the whole history, a
    /// [`Watcher::position`] to resume where a watcher stopped.
    After(u64),
    /// After the last event committed now: only what comes from now on.
    Now,
}

/// How [`Store::wait`](crate::Store::wait) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The handoff is terminal (finished, or expired by this wait or
    /// another process).
    Ended(InteractiveHandoff),
    /// The timeout passed first; the handoff as last read.
    TimedOut(InteractiveHandoff),
}

/// A stream of history events in position order, then live (C16), from
/// [`Store::watch`](crate::Store::watch). Call [`next`](Self::next) for
/// each event.
#[derive(Debug)]
pub struct Watcher {
    stream: Box<dyn EventStream>,
}

/// What a [`Watcher`] reads from: a registry's events in position order,
/// then live. A registry implements it for [`Registry::watch`].
#[async_trait]
pub trait EventStream: Debug + Send {
    /// The position to resume from: the last event passed on or left out.
    fn position(&self) -> u64;

    /// The next event that passes the stream's filter, or `None` when
    /// `within` passes first.
    ///
    /// # Errors
    /// `Unavailable` when the registry fails or goes away; a new stream
    /// can start from [`position`](Self::position).
    async fn next_within(&mut self, within: Duration) -> StoreResult<Option<HandoffEvent>>;
}

impl Watcher {
    /// A watcher reading `stream`.
    pub fn new(stream: Box<dyn EventStream>) -> Self {
        Self { stream }
    }

    /// The position to resume from: the last event this watcher passed on
    /// or left out.
    pub fn position(&self) -> u64 {
        self.stream.position()
    }

    /// The next event that passes the filter, waiting as long as it takes.
    ///
    /// # Errors
    /// `Unavailable` when the store fails or goes away; the watcher can be
    /// started again from [`position`](Self::position).
    pub async fn next(&mut self) -> StoreResult<HandoffEvent> {
        loop {
            if let Some(event) = self.stream.next_within(SAFETY_RECHECK).await? {
                return Ok(event);
            }
        }
    }

    /// The next event that passes the filter, or `None` when `within`
    /// passes first.
    ///
    /// # Errors
    /// As [`next`](Self::next).
    pub async fn next_within(&mut self, within: Duration) -> StoreResult<Option<HandoffEvent>> {
        self.stream.next_within(within).await
    }
}

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

impl Local {
    /// Every event that passes `filter` from `from` on, in position order,
    /// then each new one as it commits (C16).
    ///
    /// # Errors
    /// `Unavailable` when the store cannot be read (for [`WatchFrom::Now`],
    /// which reads the last position).
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend()))]
    pub async fn watch(&self, from: WatchFrom, filter: WatchFilter) -> StoreResult<Watcher> {
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

    /// Waits until handoff `id` is terminal, at most `timeout` when given,
    /// and returns it (C16). A handoff whose deadline passes meanwhile is
    /// expired then (C14) and returned. It sleeps on the backend's change
    /// signal between reads, never busy polling.
    ///
    /// # Errors
    /// `NotFound` for an unknown id (or one pruned while waiting);
    /// `Unavailable` when the store fails or goes away.
    #[tracing::instrument(level = "info", skip_all, fields(backend = self.backend(), handoff = %id))]
    pub async fn wait(
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
