//! C17 across backends: a varied registry exported from a store of one
//! backend, imported into a store of another and exported again is the
//! same bytes, for all six ordered pairs of SQLite, sled and PostgreSQL
//! (see `round_trip_between`). The pairs with PostgreSQL skip, saying
//! why, without `LF_HANDOFF_TEST_POSTGRES_URL`.

use lf_handoff_conformance::archive::round_trip_between;
use lf_handoff_conformance::backends::{postgres, sled, sqlite};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c17_sqlite_to_sled_round_trips_byte_for_byte() {
    round_trip_between(sqlite(), sled()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c17_sqlite_to_postgres_round_trips_byte_for_byte() {
    round_trip_between(sqlite(), postgres()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c17_sled_to_sqlite_round_trips_byte_for_byte() {
    round_trip_between(sled(), sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c17_sled_to_postgres_round_trips_byte_for_byte() {
    round_trip_between(sled(), postgres()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c17_postgres_to_sqlite_round_trips_byte_for_byte() {
    round_trip_between(postgres(), sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c17_postgres_to_sled_round_trips_byte_for_byte() {
    round_trip_between(postgres(), sled()).await;
}
