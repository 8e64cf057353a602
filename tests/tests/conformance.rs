//! The conformance suite run against every backend. Each module opts its
//! backend in with one macro call; test names carry the backend
//! (`sqlite::c6_racing_finishers_on_8_handles`).

mod sqlite {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sqlite);
    lf_handoff_conformance::multi_process_tests!(lf_handoff_conformance::backends::sqlite);
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
