//! Watching the history and waiting for a handoff without polling (C16).
//!
//! This module owns the [`EventLog`] port (what a backend offers to read
//! its history in position order and to signal that it may have grown),
//! and the [`Watcher`] that [`Waiting::watch`](crate::Waiting::watch) returns;
//! the local registry's watcher and waiter are in `local/waiting.rs`.
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

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    HandoffEvent, InteractiveHandoff, InteractiveHandoffParent,
};

use crate::error::StoreResult;

/// How long a watcher or a waiter sleeps at most without a change signal
/// before it reads again. A last resort: a backend's signal catches what
/// it missed itself, once per store, within seconds (see the module
/// docs), so this re-read, once per watcher, costs 2,000 idle ones of a
/// server 7 reads a second, not 400.
pub const SAFETY_RECHECK: Duration = Duration::from_secs(5 * 60);

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

/// How [`Waiting::wait`](crate::Waiting::wait) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The handoff is terminal (finished, or expired by this wait or
    /// another process).
    Ended(InteractiveHandoff),
    /// The timeout passed first; the handoff as last read.
    TimedOut(InteractiveHandoff),
}

/// A stream of history events in position order, then live (C16), from
/// [`Waiting::watch`](crate::Waiting::watch). Call [`next`](Self::next) for
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
