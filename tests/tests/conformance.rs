//! The conformance suite run against every backend. Each module opts its
//! backend in with one macro call; test names carry the backend
//! (`sqlite::c6_racing_finishers_on_8_handles`).

mod sqlite {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sqlite);
    lf_handoff_conformance::multi_process_tests!(lf_handoff_conformance::backends::sqlite);
}

mod postgres {
    use lf_handoff_conformance::backends::postgres::{scenarios, PostgresBackend};

    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::postgres);
    lf_handoff_conformance::multi_process_tests!(lf_handoff_conformance::backends::postgres);

    /// The scenarios only PostgreSQL has, run like the shared ones on the
    /// backend `$connect` builds.
    macro_rules! postgres_tests {
        ($connect:expr; $($name:ident),* $(,)?) => {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                lf_handoff_conformance::run($connect, |backend| {
                    Box::pin(async move { scenarios::$name(&backend).await })
                })
                .await;
            }
        )*};
    }

    postgres_tests!(
        PostgresBackend::connect();
        newer_schema_is_left_untouched,
        foreign_schema_is_left_untouched,
        each_schema_is_a_separate_store,
        an_upgrade_blocked_by_another_session_is_locked_and_changes_nothing,
        terminated_sessions_are_ridden_out_by_the_next_call,
        events_held_back_by_a_running_writer_come_once_it_ends,
        a_url_whose_first_host_is_down_uses_the_next,
    );

    // TLS to the test server; skipped, saying why, without
    // LF_HANDOFF_TEST_POSTGRES_TLS_CA.
    postgres_tests!(
        PostgresBackend::connect_tls();
        tls_require_encrypts_every_connection,
        tls_verify_full_connects_by_the_certificates_name,
        tls_verify_full_refuses_a_host_the_certificate_does_not_name,
    );
}

// The PostgreSQL backend behind PgBouncer (C25), in session and in
// transaction pooling mode; skipped, saying why, without PgBouncer, unless
// LF_HANDOFF_TEST_REQUIRE_PGBOUNCER=1 (CI).
mod postgres_pgbouncer_session {
    lf_handoff_conformance::conformance_tests!(
        lf_handoff_conformance::backends::postgres::pgbouncer_session
    );
    lf_handoff_conformance::multi_process_tests!(
        lf_handoff_conformance::backends::postgres::pgbouncer_session
    );
}

mod postgres_pgbouncer_transaction {
    lf_handoff_conformance::conformance_tests!(
        lf_handoff_conformance::backends::postgres::pgbouncer_transaction
    );
    lf_handoff_conformance::multi_process_tests!(
        lf_handoff_conformance::backends::postgres::pgbouncer_transaction
    );
}

mod sled {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sled);

    // sled allows one process per store, so instead of the multi-process
    // scenarios these assert the clear error a second process gets.
    lf_handoff_conformance::sled_tests!(
        a_second_process_is_refused_while_the_store_is_open,
        open_store_is_refused_while_another_process_holds_it,
        handles_in_one_process_share_the_store,
        reopening_right_after_the_last_handle_drops_works,
        a_new_store_directory_is_private,
    );
}
