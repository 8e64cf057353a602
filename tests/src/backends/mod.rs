//! The backends the suite runs against. Each factory returns the backend, or
//! the reason it cannot run here (the test then prints that it skipped).

pub mod postgres;
mod sqlite;

pub use postgres::{postgres, PostgresBackend};
pub use sqlite::{sqlite, SqliteBackend};
