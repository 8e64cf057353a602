//! The `Store`: the use cases an orchestrator and the command line call.
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
//! The operations live in one file per group: [`parents`] (C10),
//! [`handoffs`] (C1-C7, C9, C12-C15), [`upkeep`] (expiry sweeps, prune,
//! export and import: C14, C17); watching and waiting (C16) in
//! [`crate::watch`].

mod handoffs;
mod parents;
mod upkeep;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, InteractiveHandoff, InteractiveHandoffParent};

use time::OffsetDateTime;

use crate::archive::Archive;
use crate::error::{StoreError, StoreResult, UnavailableKind};
use crate::ports::{
    Clock, Decision, HandoffRepository, IdSource, ParentRegistry, TransitionOutcome,
};
use crate::retry::{retry, DEFAULT_RETRY_WINDOW};
use crate::system::{SystemClock, UuidV7Ids};
use crate::watch::EventLog;

pub use upkeep::{PruneOptions, PRUNE_BATCH};

/// How many lost races in a row one call tolerates before giving up.
///
/// A handoff changes at most three times (attach, finish, claim), so a call
/// that keeps losing means something other than this protocol is writing.
pub const MAX_RACE_ATTEMPTS: usize = 32;

/// Everything a [`Store`] is built from: a backend's storage ports, the
/// clock and the id source. Every part is required, so a store can do
/// everything its type promises.
///
/// An adapter builds this with [`StorePorts::of`]; a test may replace a
/// part (a mock, a port wrapped to inject faults, a fixed clock) before
/// building the store with [`Store::new`].
#[derive(Clone, Debug)]
pub struct StorePorts {
    /// The storage engine's name in diagnostics (`sqlite`, `sled`,
    /// `postgres`, ...).
    pub backend: &'static str,
    /// Handoffs and their history (C1-C9, C12-C15, C17's prune).
    pub handoffs: Arc<dyn HandoffRepository>,
    /// Parents and task PRs (C10).
    pub parents: Arc<dyn ParentRegistry>,
    /// The event log that watchers and waiters read (C16).
    pub events: Arc<dyn EventLog>,
    /// Export and import (C17).
    pub archive: Arc<dyn Archive>,
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
        S: HandoffRepository + ParentRegistry + EventLog + Archive,
    {
        Self {
            backend,
            handoffs: storage.clone(),
            parents: storage.clone(),
            events: storage.clone(),
            archive: storage,
            clock: Arc::new(SystemClock),
            ids: Arc::new(UuidV7Ids),
        }
    }
}

/// The handoff registry: the public API an orchestrator links against.
///
/// Each operation has one method:
///
/// | what | method | contract |
/// | --- | --- | --- |
/// | parents | [`create_wave`](Self::create_wave), [`create_project_session`](Self::create_project_session), [`create_task_session`](Self::create_task_session), [`record_body`](Self::record_body), [`get_parent`](Self::get_parent), [`get_task_pr`](Self::get_task_pr) | C10 |
/// | open | [`open_interactive_handoff`](Self::open_interactive_handoff) (a request, or a request [`with_options`](lf_handoff_domain::interactive_handoff::OpenInteractiveHandoff::with_options): step, deadline) | C1-C3, C12, C14 |
/// | read | [`get_interactive_handoff`](Self::get_interactive_handoff), [`list_interactive_handoffs`](Self::list_interactive_handoffs) (a parent, or a [`ListQuery`](crate::ListQuery)), [`history`](Self::history) | C4, C15, C17 |
/// | act | [`attach_interactive_handoff`](Self::attach_interactive_handoff), [`finish_interactive_handoff`](Self::finish_interactive_handoff), [`extend_interactive_handoff`](Self::extend_interactive_handoff), [`claim_interactive_handoff_wake`](Self::claim_interactive_handoff_wake) | C5-C7, C13, C14 |
/// | wait | [`watch`](Self::watch), [`wait`](Self::wait) | C16 |
/// | upkeep | [`expire_due`](Self::expire_due), [`prune`](Self::prune), [`export`](Self::export), [`import`](Self::import) | C14, C17 |
///
/// A handle names an actor in the history of each change it makes
/// ([`with_actor`](Self::with_actor)) and rides out an unreachable server
/// for a retry window ([`with_retry_window`](Self::with_retry_window)).
///
/// Cheap to clone; clones share the same storage.
#[derive(Clone)]
pub struct Store {
    handoffs: Arc<dyn HandoffRepository>,
    parents: Arc<dyn ParentRegistry>,
    pub(crate) events: Arc<dyn EventLog>,
    archive: Arc<dyn Archive>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdSource>,
    backend: &'static str,
    actor: Actor,
    retry_window: Duration,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .field("actor", &self.actor)
            .field("retry_window", &self.retry_window)
            .field("handoffs", &self.handoffs)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Builds a store from its ports. Its history names this process as
    /// the actor ([`this_process_actor`](crate::this_process_actor)) until
    /// [`with_actor`](Self::with_actor) says otherwise, and it retries a
    /// call that finds the server unreachable for
    /// [`DEFAULT_RETRY_WINDOW`](crate::DEFAULT_RETRY_WINDOW).
    pub fn new(ports: StorePorts) -> Self {
        Self {
            handoffs: ports.handoffs,
            parents: ports.parents,
            events: ports.events,
            archive: ports.archive,
            clock: ports.clock,
            ids: ports.ids,
            backend: ports.backend,
            actor: crate::system::this_process_actor(),
            retry_window: DEFAULT_RETRY_WINDOW,
        }
    }

    /// This handle, naming `actor` in the history of every change it makes
    /// (C15). Other clones keep their own actor.
    #[must_use]
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// This handle, retrying a call that finds the server unreachable for
    /// at most `window` after the first failure (C18, transient faults).
    /// `Duration::ZERO` fails at once. Other clones keep their own window.
    #[must_use]
    pub fn with_retry_window(mut self, window: Duration) -> Self {
        self.retry_window = window;
        self
    }

    /// The actor this handle names in the history.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// How long this handle retries a call that finds the server
    /// unreachable.
    pub fn retry_window(&self) -> Duration {
        self.retry_window
    }

    /// The storage engine's name.
    pub fn backend(&self) -> &'static str {
        self.backend
    }

    /// The store's clock reading, as used for `list_row(now)`.
    pub fn now(&self) -> OffsetDateTime {
        self.clock.now()
    }

    /// Runs one port call, again while it finds the server unreachable and
    /// the retry window lasts ([`crate::retry`]). Every port call but
    /// `open`'s insert (which decides again instead) goes through it.
    async fn retry<T, Fut>(&self, what: &str, call: impl FnMut() -> Fut) -> StoreResult<T>
    where
        Fut: Future<Output = StoreResult<T>>,
    {
        retry(self.retry_window, what, call).await
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
                    self.handoffs.transition(id, decide.clone(), &self.actor)
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
