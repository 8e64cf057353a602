//! The backends the suite runs against. Each factory returns the backend, or
//! the reason it cannot run here (the test then prints that it skipped).

mod sqlite;

pub use sqlite::{sqlite, SqliteBackend};
