//! The conformance suite run against every backend. Each module opts its
//! backend in with one macro call; test names carry the backend
//! (`sqlite::c6_racing_finishers_on_8_handles`).

mod sqlite {
    lf_handoff_conformance::conformance_tests!(lf_handoff_conformance::backends::sqlite);
    lf_handoff_conformance::multi_process_tests!(lf_handoff_conformance::backends::sqlite);
}
