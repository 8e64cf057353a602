//! C17 across backends: a varied registry exported from a store of one
//! backend, imported into a store of another and exported again is the
//! same bytes, for all six ordered pairs of SQLite, sled and PostgreSQL.
//! The pairs with PostgreSQL skip, saying why, without
//! `LF_HANDOFF_TEST_POSTGRES_URL`.

use lf_handoff_conformance::archive::round_trip_between;
use lf_handoff_conformance::backends::{postgres, sled, sqlite};

macro_rules! pairs {
    ($($name:ident: $from:ident -> $to:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            round_trip_between($from(), $to()).await;
        }
    )*};
}

pairs!(
    c17_sqlite_to_sled_round_trips_byte_for_byte: sqlite -> sled,
    c17_sqlite_to_postgres_round_trips_byte_for_byte: sqlite -> postgres,
    c17_sled_to_sqlite_round_trips_byte_for_byte: sled -> sqlite,
    c17_sled_to_postgres_round_trips_byte_for_byte: sled -> postgres,
    c17_postgres_to_sqlite_round_trips_byte_for_byte: postgres -> sqlite,
    c17_postgres_to_sled_round_trips_byte_for_byte: postgres -> sled,
);
