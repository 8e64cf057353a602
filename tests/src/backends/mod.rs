//! The backends the suite runs against. Each factory returns the backend, or
//! the reason it cannot run here (the test then prints that it skipped).

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "http")]
pub mod served;
#[cfg(feature = "sled")]
pub mod sled;
#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::{postgres, PostgresBackend};
#[cfg(all(feature = "http", feature = "postgres"))]
pub use served::served_postgres;
#[cfg(all(feature = "http", feature = "sled"))]
pub use served::served_sled;
#[cfg(all(feature = "http", feature = "sqlite"))]
pub use served::served_sqlite;
#[cfg(feature = "http")]
pub use served::ServedBackend;
#[cfg(feature = "sled")]
pub use sled::{sled, sled_during_calls, SledBackend};
#[cfg(feature = "sqlite")]
pub use sqlite::{sqlite, SqliteBackend};
