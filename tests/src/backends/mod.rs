//! The backends the suite runs against. Each factory returns the backend, or
//! the reason it cannot run here (the test then prints that it skipped).

pub mod postgres;
pub mod sled;
pub mod sqlite;

pub use postgres::{postgres, PostgresBackend};
pub use sled::{sled, SledBackend};
pub use sqlite::{sqlite, SqliteBackend};
