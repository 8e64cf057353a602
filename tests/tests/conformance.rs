//! The conformance suite run against every backend. Each module opts its
//! backend in with one macro call; test names carry the backend
//! (`sqlite::c6_racing_finishers_on_8_handles`). Each backend is a feature
//! of this crate (all on by default), so one runs alone:
//! `cargo test -p lf-handoff-conformance --no-default-features --features
//! sqlite --test conformance` (or `sled`, `postgres`; `http,sqlite` adds
//! the served SQLite store).

#[cfg(feature = "sqlite")]
mod sqlite {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sqlite);

    // A store whose creation a real kill cut short.
    lf_handoff_conformance::scenario_tests!(
        lf_handoff_conformance::backends::sqlite(), [backends::sqlite];
        AnyBackend: [a_store_whose_creation_was_killed_opens_and_works],
    );
}

#[cfg(feature = "postgres")]
mod postgres {
    use lf_handoff_conformance::backends::postgres::PostgresBackend;

    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::postgres);

    // The scenarios only PostgreSQL has.
    lf_handoff_conformance::scenario_tests!(
        PostgresBackend::connect(), [backends::postgres::scenarios];
        AnyBackend: [
            newer_schema_is_left_untouched,
            foreign_schema_is_left_untouched,
            each_schema_is_a_separate_store,
            an_upgrade_blocked_by_another_session_is_locked_and_changes_nothing,
            terminated_sessions_are_ridden_out_by_the_next_call,
            events_held_back_by_a_running_writer_come_once_it_ends,
            a_write_without_a_notification_wakes_a_waiter_within_the_recheck,
            a_listening_connection_gone_silent_is_made_again,
            a_server_gone_silent_fails_calls_in_time_and_the_store_recovers,
            a_url_whose_first_host_is_down_uses_the_next,
        ],
    );

    // TLS to the test server; skipped, saying why, without
    // LF_HANDOFF_TEST_POSTGRES_TLS_CA.
    lf_handoff_conformance::scenario_tests!(
        PostgresBackend::connect_tls(), [backends::postgres::scenarios];
        AnyBackend: [
            tls_require_encrypts_every_connection,
            tls_verify_full_connects_by_the_certificates_name,
            tls_verify_full_refuses_a_host_the_certificate_does_not_name,
        ],
    );
}

// The PostgreSQL backend behind PgBouncer (C25), in session and in
// transaction pooling mode; skipped, saying why, without PgBouncer, unless
// LF_HANDOFF_TEST_REQUIRE_PGBOUNCER=1 (CI).
#[cfg(feature = "postgres")]
mod postgres_pgbouncer_session {
    lf_handoff_conformance::conformance_tests!(
        lf_handoff_conformance::backends::postgres::pgbouncer_session
    );
}

#[cfg(feature = "postgres")]
mod postgres_pgbouncer_transaction {
    lf_handoff_conformance::conformance_tests!(
        lf_handoff_conformance::backends::postgres::pgbouncer_transaction
    );
}

#[cfg(feature = "sled")]
mod sled {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sled);

    // sled allows one process per store, so it skips the scenarios that
    // need several and checks the clear error a second process gets.
    lf_handoff_conformance::sled_scenarios!(lf_handoff_conformance::backends::sled());
}

// sled as the command line opens it: each store held only while calls
// run (`SledHold::DuringCalls`).
#[cfg(feature = "sled")]
mod sled_during_calls {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sled_during_calls);
}

// The Store-level scenarios through `lf-handoff serve` (C24), on each
// backend: a server per store, reached with the http backend.
#[cfg(all(feature = "http", feature = "sqlite"))]
mod served_sqlite {
    lf_handoff_conformance::served_conformance_tests!(
        lf_handoff_conformance::backends::served_sqlite
    );
}

#[cfg(all(feature = "http", feature = "sled"))]
mod served_sled {
    lf_handoff_conformance::served_conformance_tests!(
        lf_handoff_conformance::backends::served_sled
    );
}

#[cfg(all(feature = "http", feature = "postgres"))]
mod served_postgres {
    lf_handoff_conformance::served_conformance_tests!(
        lf_handoff_conformance::backends::served_postgres
    );
}
