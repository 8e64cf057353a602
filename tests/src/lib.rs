//! # lf-handoff conformance suite
//!
//! One set of scenarios, written once as `async fn`s over a [`Backend`], run
//! against every storage adapter. An adapter opts in with one line in
//! `tests/conformance.rs`:
//!
//! ```text
//! mod sqlite {
//!     lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sqlite);
//! }
//! ```
//!
//! which expands to one `#[tokio::test]` per scenario, so every test name
//! carries its backend (`sqlite::c6_racing_finishers_on_8_handles`) and
//! `cargo test sled::` runs one backend's. Each scenario module lists its
//! scenarios once, in a `*_scenarios!` table beside them
//! (`contract_scenarios!`, ...), grouped by what they [`Needs`] of a
//! backend; [`conformance_tests!`] names the modules and
//! [`scenario_tests!`] turns a table into tests.
//!
//! - [`seed`] holds the four tests the product grew from, ported with only
//!   import paths and constructor spellings changed.
//! - [`contract`] holds at least one scenario per store clause C1-C11,
//!   named after its clause; [`steps`], [`deadlines`], [`history`],
//!   [`watch`] and [`prune`] those of C12-C17.
//! - [`faults`] holds the transient faults (C18): a write whose reply is
//!   lost after it committed is retried and returns its committed result.
//! - [`own_postgres`] starts, restarts and stops a PostgreSQL server of a
//!   test's own (`tests/own_postgres.rs`), and makes, kills and promotes
//!   standbys; [`failover`] kills a primary under clients and checks the
//!   promoted standby (C25, `tests/failover.rs` and the
//!   `lf-handoff-failover` program).
//! - [`pgbouncer`] starts a PgBouncer of the tests' own, through which the
//!   conformance suite runs in session and in transaction pooling mode
//!   (`backends::postgres::{pgbouncer_session, pgbouncer_transaction}`).
//! - [`answers`] holds the questions with a shape (C26): specs, answers,
//!   refusals, `on_expiry`, and their export and import.
//! - [`archive`] holds export and import (C17): per backend through the
//!   macro, and across every pair of backends in `tests/round_trip.rs`.
//! - [`hostile`] holds hostile strings (stored exactly or refused),
//!   randomly damaged store files (refused unchanged or read cleanly) and
//!   the store files' permissions.
//! - A backend that cannot serve several processes (sled) skips the
//!   scenarios that need several, saying why, and runs scenarios of its
//!   own (`sled_scenarios!`) that check the clear error a second process
//!   gets instead.
//!
//! - [`serve_child`] and [`peers`] are what the soak and the benchmark
//!   share: `serve` in a child process found by its start line, and
//!   clients of other loopback addresses.
//!
//! Backends that need a server return `Err(reason)` from their factory when
//! the server is not configured or not reachable, and the test prints that
//! it skipped and why.
// A test-support crate: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod answers;
pub mod archive;
pub mod backends;
pub mod contract;
pub mod deadlines;
pub mod deliveries;
#[cfg(feature = "postgres")]
pub mod failover;
pub mod faults;
pub mod fixtures;
pub mod history;
pub mod hostile;
#[cfg(feature = "postgres")]
pub mod own_postgres;
pub mod parents;
pub mod peers;
#[cfg(feature = "postgres")]
pub mod pgbouncer;
pub mod prune;
#[cfg(feature = "postgres")]
pub mod relay;
pub mod revocations;
pub mod rng;
pub mod seed;
pub mod serve_child;
pub mod steps;
pub mod upgrade;
pub mod watch;
pub mod worker;

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use lf_handoff_adapters::{StorageConfig, UnavailableKind};

use crate::upgrade::Release;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store configuration that `open_store` must refuse with `Unavailable`
/// (contract C11), prepared by a backend for the test.
#[derive(Debug)]
pub struct Unusable {
    /// What is wrong, for the failure message.
    pub what: String,
    /// The configuration to open.
    pub config: StorageConfig,
    /// The kind of `Unavailable` the open must return.
    pub kind: UnavailableKind,
    /// What the error message must name (the file, the address, the
    /// schema), so a person can tell which store is meant.
    pub message_names: String,
    /// Files that must be byte-for-byte unchanged after the refused open.
    pub guarded: Vec<PathBuf>,
}

/// One storage backend under test.
pub trait Backend: Send + Sync + 'static {
    /// `sqlite`, `sled` or `postgres`.
    fn name(&self) -> &'static str;

    /// The configuration of a store at `location`, a path inside the test's
    /// temporary directory. Server backends ignore it and use the test's own
    /// schema, so every call in one test names the same store.
    fn config(&self, location: PathBuf) -> StorageConfig;

    /// Whether separate OS processes may use one store at once.
    fn shares_across_processes(&self) -> bool;

    /// Whether the scenario reaches the store through `lf-handoff serve`
    /// (the `http` backend) rather than the store itself.
    fn is_served(&self) -> bool {
        false
    }

    /// The configuration of a store other than [`config`](Self::config)'s,
    /// named `name` (a short lowercase word): at `location` (a path inside
    /// the test's temporary directory) for a file backend, in a schema of
    /// its own, dropped in cleanup, for a server backend.
    fn other_config(&self, name: &str, location: PathBuf) -> StorageConfig {
        let _ = name;
        self.config(location)
    }

    /// Prepares, in `dir`, stores that `open_store` must refuse (C11).
    fn unusable_stores<'a>(&'a self, dir: &'a Path) -> BoxFuture<'a, Vec<Unusable>>;

    /// A copy of this backend's store written by `release`
    /// ([`upgrade::fixtures`], whose manifests
    /// are named after [`name`](Self::name)), placed in `dir` or the test's
    /// schema and not opened yet.
    fn release_store<'a>(&'a self, release: Release, dir: &'a Path)
        -> BoxFuture<'a, StorageConfig>;

    /// Cuts every connection the server has open to watch this test's
    /// store (C16) and returns how many it cut; 0 for a backend without
    /// such connections.
    fn cut_watch_connections(&self) -> BoxFuture<'_, usize> {
        Box::pin(async { 0 })
    }

    /// Deletes the store at `location` (file backends: the file or
    /// directory; server backends: the test's schema) while it may be open.
    fn delete_store<'a>(&'a self, location: &'a Path) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if location.is_dir() {
                std::fs::remove_dir_all(location).unwrap();
            } else {
                std::fs::remove_file(location).unwrap();
                for suffix in ["-wal", "-shm"] {
                    let mut side = location.as_os_str().to_owned();
                    side.push(suffix);
                    let _ = std::fs::remove_file(side);
                }
            }
        })
    }

    /// Removes what the backend created outside the temporary directory.
    fn cleanup(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// What a scenario needs of a backend beyond the [`Backend`] trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing more: it runs on every backend.
    AnyBackend,
    /// Several OS processes on one store at once
    /// ([`Backend::shares_across_processes`]); a backend that serves one
    /// process (sled) skips it, saying why, and checks the clear error a
    /// second process gets in scenarios of its own instead.
    SeveralProcesses,
    /// The store itself: its files, its storage ports, its engine, or
    /// actors of the caller's choosing. A served store
    /// ([`Backend::is_served`]) skips it, saying why: through a service
    /// those are the service's, and the actor is the token's name (C20).
    OwnStorage,
    /// Both: several processes on the store itself (a first open's
    /// migration).
    SeveralProcessesOwnStorage,
}

impl Needs {
    /// Whether `backend` gives what is needed; when it does not, says
    /// that the running test skipped and why.
    pub fn met_by<B: Backend + ?Sized>(self, backend: &B) -> bool {
        match self {
            Self::AnyBackend => true,
            Self::SeveralProcesses if backend.shares_across_processes() => true,
            Self::SeveralProcesses => {
                skipped(&format!("{} serves one process at a time", backend.name()));
                false
            }
            Self::SeveralProcessesOwnStorage => {
                Self::SeveralProcesses.met_by(backend) && Self::OwnStorage.met_by(backend)
            }
            Self::OwnStorage if !backend.is_served() => true,
            Self::OwnStorage => {
                skipped(&format!(
                    "{} is reached through the service: the store's files, ports, engine and \
                     actors are the service's",
                    backend.name()
                ));
                false
            }
        }
    }
}

/// Says that the running test skipped and why: on stderr directly, past
/// the test harness's capture, so a plain `cargo test` shows it.
fn skipped(reason: &str) {
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let _ = writeln!(std::io::stderr(), "skipped {test}: {reason}");
    println!("skipped: {reason}");
}

/// Runs `scenario` against the backend `make` builds, then cleans up even
/// when the scenario panics (and re-raises the panic). A backend that cannot
/// run here, or does not give what the scenario `needs`, is skipped with its
/// reason written straight to stderr, past the test harness's output
/// capture, so `cargo test` shows it.
pub async fn run<B, M, S>(needs: Needs, make: M, scenario: S)
where
    B: Backend + ?Sized,
    M: Future<Output = Result<Box<B>, String>>,
    S: FnOnce(Arc<B>) -> BoxFuture<'static, ()>,
{
    let backend: Arc<B> = match make.await {
        Ok(backend) => Arc::from(backend),
        Err(reason) => {
            skipped(&reason);
            return;
        }
    };
    if !needs.met_by(&*backend) {
        backend.cleanup().await;
        return;
    }
    let outcome = tokio::spawn(scenario(backend.clone())).await;
    backend.cleanup().await;
    if let Err(error) = outcome {
        if error.is_panic() {
            std::panic::resume_unwind(error.into_panic());
        }
        panic!("scenario did not finish: {error}");
    }
}

/// Expands to one `#[tokio::test]` per conformance scenario, run against the
/// backend built by `$backend` (an `async fn() -> Result<Box<dyn Backend>,
/// String>`; `Err` skips with its reason). Each scenario module lists its
/// scenarios once, in its `*_scenarios!` table next to them; this names the
/// modules, not the scenarios.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:path) => {
        $crate::seed_scenarios!($backend());
        $crate::contract_scenarios!($backend());
        $crate::parents_scenarios!($backend());
        $crate::steps_scenarios!($backend());
        $crate::deadlines_scenarios!($backend());
        $crate::history_scenarios!($backend());
        $crate::watch_scenarios!($backend());
        $crate::prune_scenarios!($backend());
        $crate::upgrade_scenarios!($backend());
        $crate::archive_scenarios!($backend());
        $crate::faults_scenarios!($backend());
        $crate::hostile_scenarios!($backend());
        $crate::deliveries_scenarios!($backend());
        $crate::revocations_scenarios!($backend());
        $crate::answers_scenarios!($backend());
    };
}

/// The Store-level scenarios through a served store (C24): every module
/// whose scenarios a network can carry, each scenario reaching the store's
/// own files, ports or engine skipping ([`Needs::OwnStorage`]). Upgrades,
/// transient port faults and damaged files are the store's own, so their
/// modules are left out.
#[macro_export]
macro_rules! served_conformance_tests {
    ($backend:path) => {
        $crate::seed_scenarios!($backend());
        $crate::contract_scenarios!($backend());
        $crate::parents_scenarios!($backend());
        $crate::steps_scenarios!($backend());
        $crate::deadlines_scenarios!($backend());
        $crate::history_scenarios!($backend());
        $crate::watch_scenarios!($backend());
        $crate::prune_scenarios!($backend());
        $crate::archive_scenarios!($backend());
        $crate::answers_scenarios!($backend());
    };
}

/// Expands to one `#[tokio::test]` per scenario named, each running
/// `$crate::<module>::<scenario>(&backend)` on the backend the expression
/// `$make` builds (through [`run`]) when the backend gives what its group
/// [`Needs`]:
///
/// ```text
/// scenario_tests!(make_backend(), [module::path];
///     AnyBackend: [scenario_a, scenario_b],
///     SeveralProcesses: [scenario_c],
/// );
/// ```
///
/// The test is named after the scenario, so within a backend's module of
/// the test file its name carries the backend
/// (`sqlite::c6_racing_finishers_on_8_handles`).
#[macro_export]
macro_rules! scenario_tests {
    ($make:expr, $module:tt; $($needs:ident: [$($name:ident),* $(,)?]),* $(,)?) => {
        $($(
            $crate::scenario_tests!(@one $make, $module, $needs, $name);
        )*)*
    };
    (@one $make:expr, [$($module:ident)::+], $needs:ident, $name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($crate::Needs::$needs, $make, |backend| {
                Box::pin(async move { $crate::$($module)::+::$name(&*backend).await })
            })
            .await;
        }
    };
}
