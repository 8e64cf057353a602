//! # lf-handoff application
//!
//! The storage ports an adapter implements and the [`Store`] service that
//! applies the domain's transitions through them.
//!
//! ## Design decisions
//!
//! - **Ports are minimal and object-safe.** [`HandoffRepository`] and
//!   [`ParentRegistry`] are `async_trait` traits with `Debug + Send + Sync +
//!   'static` bounds; each method documents its contract with MUST wording,
//!   and every MUST has a conformance test. Adapters never decide a
//!   transition; they store what the domain decided.
//! - **Time and ids are ports too** ([`Clock`], [`IdSource`]), so service
//!   tests are deterministic.
//! - **One error enum** ([`StoreError`]) with variants named by what the
//!   caller can do: `InvalidInput`, `NotFound`, `Conflict`, `Unavailable`.
//! - **Export and import are a port of their own** ([`Archive`], in
//!   [`archive`]), beside the two storage ports, with the file format and
//!   its checks written once here; a backend adds the snapshot read and
//!   the atomic load.
//! - **Races are retried, then resolved by the domain.** A lost
//!   compare-and-swap reloads the record and asks the domain again, which
//!   turns the race into a replay or a conflict.
//! - **Transient faults are ridden out** ([`retry`]): a port call that
//!   finds the server unreachable is tried again for a bounded time, which
//!   is safe because the domain replays every write.

#![deny(missing_docs)]

pub mod archive;
pub mod delivery;
mod error;
mod local;
pub mod ports;
mod registry;
pub mod retry;
pub mod revocation;
mod store;
mod system;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod watch;

pub use archive::{
    Archive, ArchiveItem, ArchiveReader, ArchiveRecord, ArchiveSink, ArchiveSource, ArchiveSummary,
    ArchiveWriter,
};
pub use delivery::{Deliveries, DeliveryCursor};
pub use error::{BoxError, DeniedKind, StoreError, StoreResult, UnavailableKind};
pub use lf_handoff_domain::ConflictKind;
pub use local::{StorePorts, MAX_RACE_ATTEMPTS};
pub use ports::{
    recorded_change, Clock, Decided, Decision, HandoffRepository, IdSource, InsertOutcome,
    ListQuery, ParentInsert, ParentQuery, ParentRegistry, ParentWithActive, PruneCount,
    SwapOutcome, TransitionOutcome, Versioned,
};
pub use registry::{
    ClaimedWake, HandleSettings, Handoffs, Parents, PruneOptions, Registry, Upkeep, Waiting,
    PRUNE_BATCH,
};
pub use retry::{retries_total, retry, DEFAULT_RETRY_WINDOW};
pub use revocation::Revocations;
pub use store::Store;
pub use system::{this_process_actor, GenerateId, SystemClock, UuidV7Ids};
pub use watch::{
    Changes, EventBatch, EventLog, EventStream, Waited, WatchFilter, WatchFrom, Watcher,
    SAFETY_RECHECK,
};
