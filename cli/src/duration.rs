//! Durations people type for deadlines and cut-offs (`90s`, `15m`, `2h`,
//! `1d`, `2w`, `1h30m`): the grammar lives in the API crate, so the
//! service reads `expires_in` and `by` as the command line reads
//! `--expires-in` and `--by`.

pub use lf_handoff_api::duration::*;
