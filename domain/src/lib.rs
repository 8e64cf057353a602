//! # lf-handoff domain
//!
//! The pure core of lf-handoff: the types an orchestrator talks about
//! (waves, project and task sessions, their body processes), the interactive
//! handoff, its state machine and the invariants every stored handoff keeps.
//!
//! ## Design decisions
//!
//! - **No IO, no async, no clock reads.** Every transition takes `now` as an
//!   argument and returns a new value; nothing here touches a file, a socket
//!   or the system clock. Id generation (which reads the clock and a random
//!   source) lives in the application layer. This keeps every rule
//!   unit-testable and deterministic.
//! - **The state machine lives once, here.** Storage adapters never decide a
//!   transition: they load a record, call a function of
//!   [`interactive_handoff`], and store the result with a compare-and-swap.
//! - **Replays are explicit.** A transition that changes nothing returns
//!   [`Transition::Unchanged`](interactive_handoff::Transition::Unchanged),
//!   so callers know not to write (contract C9).
//! - **Time is monotonic per record.** Transitions truncate `now` to whole
//!   UTC microseconds and never let it fall behind the record's last change.
//! - **Validated values.** Ids, homes and parent references are parsed into
//!   newtypes that only hold valid values and print back as they parse.
//!
//! Module names follow the orchestrator the store grew from, so its code
//! ports by changing only the crate name in its imports.

#![deny(missing_docs)]

pub mod child_session;
pub mod error;
pub mod id;
pub mod interactive_handoff;
pub mod parent;
pub mod project_session;
pub mod session_context;
pub mod task;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod text;
pub mod timestamp;
pub mod wave;
pub mod wave_home;

pub use error::{ConflictKind, DomainError, DomainResult};
