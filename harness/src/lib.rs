//! # lf-handoff reliability harnesses
//!
//! Programs that try hard to break the registry's two promises, *nothing
//! acknowledged is lost* and *no parent wakes twice*, against every storage
//! backend, and print what they tried:
//!
//! - `lf-handoff-crash` ([`crash`]): a child process runs handoff
//!   lifecycles and prints each transition once the store acknowledged it;
//!   the harness kills it with SIGKILL at random moments, reopens the store
//!   and checks that every acknowledged transition is there, every record
//!   keeps its invariants, and every change has its history event and no
//!   event is without its change (C15).
//! - `lf-handoff-race` ([`race`]): P processes race `open`, `finish` and
//!   `claim_wake` over M handoffs; every race must have exactly one winner,
//!   and the stored result must be the winner's.
//! - `lf-handoff-soak` ([`soak`]): `lf-handoff serve` under a mixed
//!   legitimate load while hostile peers trickle and flood; the
//!   legitimate client must see no error, the store must keep its
//!   invariants and everything acknowledged, and the server's memory
//!   must stop growing after a warm-up.
//!
//! Both take the backends, the number of trials (or racers and handoffs) and
//! a seed as arguments, stop at a time limit, and exit non-zero on any loss,
//! violation or double winner. `docs/RELIABILITY.md` gives the commands and
//! the figures of a long run.
//!
//! ## Design decisions
//!
//! - **Backend-generic.** A run names backends (`sqlite`, ...); each gets a
//!   fresh store ([`target`]) opened through `StorageConfig` and
//!   `open_store`, exactly as an orchestrator opens one. Child processes get
//!   the store's URL.
//! - **One binary per harness, its own child.** The harness re-executes its
//!   own binary with a private first argument to act as the child or race
//!   worker, so nothing else has to be built or found.
//! - **Judged by the contract, not by timing.** The checks compare records,
//!   never durations; delays only spread the kills and releases around.

#![deny(missing_docs)]

pub mod check;
pub mod crash;
pub mod crash_child;
pub mod kills;
pub mod problems;
pub mod program;
pub mod race;
pub mod requests;
pub mod soak;
pub mod target;
pub mod upgrade;

/// The seeded random source, shared with the conformance suite.
pub use lf_handoff_conformance::rng;
