//! The registry over a backend's storage ports: what a `Store` of a local
//! backend runs on.
//!
//! Every write follows one loop: load the record with its version, ask the
//! domain what the transition yields, and store a changed record with a
//! compare-and-swap. A lost swap means another writer got there first; the
//! loop reloads and asks the domain again, which resolves the race as a
//! replay (same request) or a conflict (different request). A replay writes
//! nothing (contract C9). For a handoff's transitions the repository runs
//! one round of that loop in one call (`HandoffRepository::transition`),
//! with the domain's decision passed in; the service retries lost rounds.
//!
//! Every public call runs in a `tracing` span at level INFO named after it,
//! with the backend and the handoff or parent it concerns; a lost race is a
//! DEBUG event inside it, and the call's end an INFO event with its
//! duration (`duration_us`), also inside it.
//!
//! Every port call rides out a transient fault ([`crate::retry`]): one that
//! finds the server unreachable is tried again, for at most the handle's
//! retry window, an INFO event for each retry.
//!
//! The operations live in one file per group of the registry's traits:
//! [`parents`] (C10), [`handoffs`] (C1-C7, C9, C12-C15), [`waiting`]
//! (C16), [`upkeep`] (expiry sweeps, prune, export and import: C14, C17).

mod handoffs;
mod parents;
mod upkeep;
mod waiting;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{InteractiveHandoff, InteractiveHandoffParent};
use time::OffsetDateTime;

use crate::archive::Archive;
use crate::delivery::{check_endpoint_key, Deliveries, DeliveryCursor};
use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::ports::{
    Clock, Decision, HandoffRepository, IdSource, ParentRegistry, TransitionOutcome,
};
use crate::registry::{HandleSettings, Registry};
use crate::retry::retry;
use crate::revocation::{check_revocation_key, Revocations};
use crate::system::{SystemClock, UuidV7Ids};
use crate::watch::EventLog;

/// How many lost races in a row one call tolerates before giving up.
///
/// A handoff changes at most three times (attach, finish, claim), so a call
/// that keeps losing means something other than this protocol is writing.
pub const MAX_RACE_ATTEMPTS: usize = 32;

/// Everything a [`Store`](crate::Store) is built from: a backend's storage ports, the
/// clock and the id source. Every part is required, so a store can do
/// everything its type promises.
///
/// An adapter builds this with [`StorePorts::of`]; a test may replace a
/// part (a mock, a port wrapped to inject faults, a fixed clock) before
/// building the store with [`Store::new`](crate::Store::new).
#[derive(Clone, Debug)]
pub struct StorePorts {
    /// The storage engine's name in diagnostics (`sqlite`, `sled`,
    /// `postgres`, ...).
    pub backend: &'static str,
    /// Handoffs and their history.
    pub handoffs: Arc<dyn HandoffRepository>,
    /// Parents and task PRs.
    pub parents: Arc<dyn ParentRegistry>,
    /// The event log that watchers and waiters read.
    pub events: Arc<dyn EventLog>,
    /// Export and import.
    pub archive: Arc<dyn Archive>,
    /// The service's delivery cursors.
    pub deliveries: Arc<dyn Deliveries>,
    /// The service's revoked sign-ins.
    pub revocations: Arc<dyn Revocations>,
    /// The time source.
    pub clock: Arc<dyn Clock>,
    /// The handoff id source.
    pub ids: Arc<dyn IdSource>,
}

impl StorePorts {
    /// The ports of `storage`, a backend that implements every storage
    /// port, with the system clock and UUID v7 ids.
    pub fn of<S>(backend: &'static str, storage: Arc<S>) -> Self
    where
        S: HandoffRepository + ParentRegistry + EventLog + Archive + Deliveries + Revocations,
    {
        Self {
            backend,
            handoffs: storage.clone(),
            parents: storage.clone(),
            events: storage.clone(),
            archive: storage.clone(),
            deliveries: storage.clone(),
            revocations: storage,
            clock: Arc::new(SystemClock),
            ids: Arc::new(UuidV7Ids),
        }
    }
}

/// The registry over storage ports: the [`Registry`](crate::Registry) a
/// [`Store`](crate::Store) of a local backend runs on. Every operation
/// loads, asks the domain and stores with a compare-and-swap (see the
/// module's docs).
#[derive(Clone)]
pub(crate) struct Local {
    handoffs: Arc<dyn HandoffRepository>,
    parents: Arc<dyn ParentRegistry>,
    pub(crate) events: Arc<dyn EventLog>,
    archive: Arc<dyn Archive>,
    deliveries: Arc<dyn Deliveries>,
    revocations: Arc<dyn Revocations>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdSource>,
    backend: &'static str,
    settings: HandleSettings,
}

impl fmt::Debug for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local")
            .field("backend", &self.backend)
            .field("actor", &self.settings.actor)
            .field("retry_window", &self.settings.retry_window)
            .field("handoffs", &self.handoffs)
            .finish_non_exhaustive()
    }
}

impl Local {
    /// Builds the registry from its ports, naming this process as the actor
    /// and retrying for [`DEFAULT_RETRY_WINDOW`](crate::DEFAULT_RETRY_WINDOW).
    pub fn new(ports: StorePorts) -> Self {
        Self {
            handoffs: ports.handoffs,
            parents: ports.parents,
            events: ports.events,
            archive: ports.archive,
            deliveries: ports.deliveries,
            revocations: ports.revocations,
            clock: ports.clock,
            ids: ports.ids,
            backend: ports.backend,
            settings: HandleSettings::default(),
        }
    }

    /// Runs one port call, again while it finds the server unreachable and
    /// the retry window lasts ([`crate::retry`]). Every port call but
    /// `open`'s insert (which decides again instead) goes through it.
    async fn retry<T, Fut>(&self, what: &str, call: impl FnMut() -> Fut) -> StoreResult<T>
    where
        Fut: Future<Output = StoreResult<T>>,
    {
        retry(self.settings.retry_window, what, call).await
    }

    /// The load / decide / compare-and-swap loop shared by every transition
    /// on an existing handoff: one round per repository call, retried while
    /// another writer wins the compare-and-swap.
    async fn apply(
        &self,
        id: &InteractiveHandoffId,
        decide: Decision,
    ) -> StoreResult<(InteractiveHandoff, bool)> {
        for _ in 0..MAX_RACE_ATTEMPTS {
            match self
                .retry("changing the handoff", || {
                    self.handoffs
                        .transition(id, decide.clone(), &self.settings.actor)
                })
                .await?
            {
                None => return Err(StoreError::NotFound(format!("handoff {id} does not exist"))),
                Some(TransitionOutcome::Applied { handoff, answer }) => {
                    return Ok((*handoff, answer?))
                }
                Some(TransitionOutcome::Lost) => lost_a_race("the handoff"),
            }
        }
        Err(lost_too_often(id))
    }
}

#[async_trait]
impl Registry for Local {
    fn backend(&self) -> &'static str {
        self.backend
    }

    fn settings(&self) -> &HandleSettings {
        &self.settings
    }

    fn with_settings(&self, settings: HandleSettings) -> Arc<dyn Registry> {
        Arc::new(Self {
            settings,
            ..self.clone()
        })
    }

    fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }
}

/// The delivery cursors of the notification service, checked and retried
/// as every other call.
#[async_trait]
impl Deliveries for Local {
    async fn delivery_cursor(&self, endpoint: &str) -> StoreResult<Option<DeliveryCursor>> {
        check_endpoint_key(endpoint)?;
        self.retry("reading a delivery cursor", || {
            self.deliveries.delivery_cursor(endpoint)
        })
        .await
    }

    async fn swap_delivery_cursor(
        &self,
        endpoint: &str,
        expected: Option<u64>,
        cursor: &DeliveryCursor,
    ) -> StoreResult<bool> {
        check_endpoint_key(endpoint)?;
        // A swap whose reply was lost and that is tried again finds the
        // version it made and reports a lost swap: the service then reads
        // the cursor again and finds its own lease.
        self.retry("storing a delivery cursor", || {
            self.deliveries
                .swap_delivery_cursor(endpoint, expected, cursor)
        })
        .await
    }
}

/// The service's revoked sign-ins, checked and retried as every other
/// call (a revocation stored twice is the same revocation).
#[async_trait]
impl Revocations for Local {
    async fn revoke(
        &self,
        key: &str,
        until: OffsetDateTime,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        check_revocation_key(key)?;
        self.retry("storing a revocation", || {
            self.revocations.revoke(key, until, now)
        })
        .await
    }

    async fn is_revoked(&self, key: &str, now: OffsetDateTime) -> StoreResult<bool> {
        check_revocation_key(key)?;
        self.retry("reading a revocation", || {
            self.revocations.is_revoked(key, now)
        })
        .await
    }
}

/// Logs, when a call ends (and only then), how long it took, inside the
/// call's span. A span's own close event cannot say it: the engine may hold
/// the span a little longer (sqlx's SQLite worker keeps it with each
/// statement it runs), so the close can come late, or never before the
/// process exits.
struct CallTimer(std::time::Instant);

impl CallTimer {
    fn start() -> Self {
        Self(std::time::Instant::now())
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        let micros = u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX);
        tracing::info!(
            duration_us = micros,
            "done in {:.3} ms",
            micros as f64 / 1000.0
        );
    }
}

/// Notes a lost compare-and-swap race (another writer changed `what`
/// first) before the loop decides again on the new record.
fn lost_a_race(what: &str) {
    tracing::debug!("another writer changed {what} first; deciding again on what it stored");
}

fn not_found(reference: &InteractiveHandoffParent) -> StoreError {
    StoreError::NotFound(format!("parent {reference} does not exist"))
}

fn lost_too_often(what: &dyn fmt::Display) -> StoreError {
    StoreError::unavailable(
        UnavailableKind::Contended,
        format!(
            "gave up on {what} after losing {MAX_RACE_ATTEMPTS} compare-and-swap races in a row; \
         something outside lf-handoff may be writing to the store"
        ),
    )
}

#[cfg(test)]
pub(crate) mod tests;
