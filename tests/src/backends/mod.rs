//! The backends the suite runs against. Each factory returns the backend, or
//! the reason it cannot run here (the test then prints that it skipped).

pub mod postgres;
pub mod served;
pub mod sled;
pub mod sqlite;

pub use postgres::{postgres, PostgresBackend};
pub use served::{served_postgres, served_sled, served_sqlite, ServedBackend};
pub use sled::{sled, sled_during_calls, SledBackend};
pub use sqlite::{sqlite, SqliteBackend};
