//! # lf-handoff conformance suite
//!
//! One set of scenarios, written once as `async fn`s over a [`Backend`], run
//! against every storage adapter. An adapter opts in with a few lines in
//! `tests/conformance.rs`:
//!
//! ```text
//! mod sqlite {
//!     lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sqlite);
//! }
//! ```
//!
//! which expands to one `#[tokio::test]` per scenario, so every test name
//! carries its backend (`sqlite::c6_racing_finishers_on_8_handles`).
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
//! - [`archive`] holds export and import (C17): per backend through the
//!   macro, and across every pair of backends in `tests/round_trip.rs`.
//! - [`hostile`] holds hostile strings (stored exactly or refused),
//!   randomly damaged store files (refused unchanged or read cleanly) and
//!   the store files' permissions.
//! - A backend that cannot serve several processes (sled) lists its
//!   cross-process scenarios in its own test file with the clear-error
//!   replacement instead.
//!
//! Backends that need a server return `Err(reason)` from their factory when
//! the server is not configured or not reachable, and the test prints that
//! it skipped and why.
// A test-support crate: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod archive;
pub mod backends;
pub mod contract;
pub mod deadlines;
pub mod failover;
pub mod faults;
pub mod fixtures;
pub mod history;
pub mod hostile;
pub mod own_postgres;
pub mod pgbouncer;
pub mod prune;
pub mod rng;
pub mod seed;
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
    /// ([`upgrade::fixtures`](crate::upgrade::fixtures), whose manifests
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

/// Runs `scenario` against the backend `make` builds, then cleans up even
/// when the scenario panics (and re-raises the panic). A backend that cannot
/// run here is skipped with its reason written straight to stderr, past the
/// test harness's output capture, so `cargo test` shows it.
pub async fn run<B, M, S>(make: M, scenario: S)
where
    B: Backend + ?Sized,
    M: Future<Output = Result<Box<B>, String>>,
    S: FnOnce(Arc<B>) -> BoxFuture<'static, ()>,
{
    let backend: Arc<B> = match make.await {
        Ok(backend) => Arc::from(backend),
        Err(reason) => {
            // Written to stderr directly, past the test harness's capture,
            // so a plain `cargo test` shows which tests skipped and why.
            let test = std::thread::current().name().unwrap_or("test").to_string();
            let _ = writeln!(std::io::stderr(), "skipped {test}: {reason}");
            println!("skipped: {reason}");
            return;
        }
    };
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
/// String>`; `Err` skips with its reason).
#[macro_export]
macro_rules! conformance_tests {
    ($backend:path) => {
        $crate::conformance_tests!(@seed $backend;
            interactive_handoff_survives_repeated_attach_restart_and_parent_replacement,
            concurrent_terminal_outcomes_preserve_the_first_result,
            failed_interactive_body_is_terminal_and_wakes_once,
            list_row_maps_census_fields_and_active_filter_drops_terminal,
        );
        $crate::conformance_tests!(@contract $backend;
            c1_open_validates_its_request,
            c2_open_validates_the_parent,
            c2_c7_a_stale_generation_is_refused,
            c3_open_is_idempotent_per_parent,
            c3_racing_opens_for_one_parent_create_exactly_one,
            c4_get_returns_none_for_an_unknown_id,
            c4_list_orders_by_creation_and_filters_by_parent_and_activity,
            c5_attach_is_recorded_once,
            c5_attach_refuses_terminal_and_unknown_handoffs,
            c6_finish_records_the_first_outcome,
            c6_racing_finishers_on_2_handles,
            c6_racing_finishers_on_8_handles,
            c6_a_handle_never_decides_on_a_record_another_changed,
            c7_claim_wake_rules,
            c7_same_generation_claim_retry,
            c7_racing_claims_have_one_winner,
            c8_reopen_after_drop,
            c8_kill_9_loses_nothing_acknowledged,
            c9_replays_write_nothing,
            c10_parents_persist_exactly,
            c10_body_generations_only_increase,
            c11_unusable_stores_are_refused_unchanged,
        );
        $crate::conformance_tests!(@steps $backend;
            c12_a_step_is_opened_once_for_ever,
            c12_another_step_waits_for_the_active_handoff,
            c12_racing_opens_of_one_step_create_one,
            c13_a_replaced_body_resumes_from_the_finished_step,
            c13_only_the_current_generation_takes_the_wake_over,
            c13_racing_take_overs_have_one_winner,
        );
        $crate::conformance_tests!(@deadlines $backend;
            c14_a_handoff_expires_only_when_due,
            c14_writes_on_a_due_handoff_expire_it,
            c14_extend_moves_the_deadline,
            c14_racing_sweepers_expire_each_handoff_once,
            c14_expire_complete_and_extend_race_on_handles,
        );
        $crate::conformance_tests!(@history $backend;
            c15_every_change_appends_one_event_with_its_actor,
            c15_positions_are_store_wide_and_increasing,
            c15_racing_writers_append_one_event_per_change,
            c15_history_refuses_unknown_handoffs_and_bad_actors,
        );
        $crate::conformance_tests!(@watch $backend;
            c16_watch_yields_the_history_then_each_new_event,
            c16_a_filtered_watch_sees_only_its_parent,
            c16_wait_returns_when_the_handoff_ends,
            c16_resumed_watchers_miss_and_repeat_nothing_under_8_writers,
            c16_a_watch_rides_out_a_dropped_connection,
            c16_a_deleted_store_ends_the_watch,
        );
        $crate::conformance_tests!(@prune $backend;
            c17_list_filters_alone_and_combined,
            c17_paging_yields_each_handoff_once_in_order,
            c17_prune_removes_only_claimed_finished_old_handoffs,
            c17_prune_removes_batch_after_batch,
            c17_prune_races_claims_and_lists_on_handles,
        );
        $crate::conformance_tests!(@upgrade $backend;
            upgrades_a_store_of_release_1_keeping_every_record,
            upgrades_a_store_of_release_2_keeping_every_record,
            an_upgraded_store_of_release_1_runs_a_full_lifecycle_and_reopens,
            an_upgraded_store_of_release_2_runs_a_full_lifecycle_and_reopens,
            a_kill_9_during_the_upgrade_of_release_1_leaves_an_upgradable_store,
            a_kill_9_during_the_upgrade_of_release_2_leaves_an_upgradable_store,
        );
        $crate::conformance_tests!(@archive $backend;
            c17_an_imported_store_reads_and_works_like_the_original,
            c17_import_refuses_a_non_empty_store_and_leaves_it_unchanged,
            c17_a_damaged_or_newer_file_is_refused_and_changes_nothing,
            c17_an_export_during_writes_is_one_consistent_snapshot,
            c17_upgraded_stores_of_earlier_releases_export_and_import_whole,
            c17_an_import_of_far_positions_keeps_later_events_after_them,
        );
        $crate::conformance_tests!(@faults $backend;
            transient_a_write_whose_reply_was_lost_returns_its_committed_result,
            transient_without_a_retry_window_a_lost_reply_is_unreachable,
        );
        $crate::conformance_tests!(@hostile $backend;
            hostile_strings_are_stored_exactly_or_refused,
            c11_damaged_store_files_are_refused_unchanged_or_read_cleanly,
            store_files_are_private_to_their_owner,
        );
    };
    (@seed $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::seed::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@steps $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::steps::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@watch $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::watch::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@deadlines $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::deadlines::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@history $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::history::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@prune $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::prune::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@upgrade $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::upgrade::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@archive $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::archive::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@faults $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::faults::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@hostile $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::hostile::$name(&*backend).await })
            })
            .await;
        }
    )*};
    (@contract $backend:path; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            $crate::worker::set_worker(env!("CARGO_BIN_EXE_lf-handoff-conformance-worker"));
            $crate::run($backend(), |backend| {
                Box::pin(async move { $crate::contract::$name(&*backend).await })
            })
            .await;
        }
    )*};
}

/// Expands to the scenarios that need several OS processes on one store.
/// Only backends whose [`Backend::shares_across_processes`] is true list them.
#[macro_export]
macro_rules! multi_process_tests {
    ($backend:path) => {
        $crate::conformance_tests!(@contract $backend;
            c3_racing_opens_from_separate_processes_create_exactly_one,
            c6_racing_finishers_in_separate_processes,
            c6_racing_finishers_in_8_processes_over_many_handoffs,
            first_opens_from_8_processes_migrate_once,
        );
        $crate::conformance_tests!(@steps $backend;
            c12_racing_opens_of_one_step_from_separate_processes_create_one,
        );
        $crate::conformance_tests!(@deadlines $backend;
            c14_expire_complete_and_extend_race_across_processes,
        );
        $crate::conformance_tests!(@prune $backend;
            c17_prune_races_claims_across_processes,
        );
    };
}
