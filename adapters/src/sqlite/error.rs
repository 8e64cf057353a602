//! Every SQLite error of this backend is mapped here, in one place.

use std::path::Path;

use lf_handoff_application::{StoreError, UnavailableKind};

use super::SqliteFile;
use crate::sql::schema::UniqueIndex;
use crate::sql::{Dialect as _, EngineError};

impl SqliteFile {
    /// Maps one sqlx error: a unique violation, or an actionable
    /// `Unavailable` naming the file.
    pub(super) fn engine_error(&self, error: sqlx::Error) -> EngineError {
        let path = self.path.display();
        if let sqlx::Error::Database(db) = &error {
            if db.is_unique_violation() {
                // SQLite names the index's columns, not the index.
                return EngineError::Unique {
                    index: UniqueIndex::in_sqlite_message(db.message()),
                    detail: db.message().to_string(),
                };
            }
            let kind = error_kind(&error);
            let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0);
            let message = match code & 0xff {
                5 | 6 => format!(
                    "{path} is busy: another process held its write lock longer than the busy \
                     timeout ({} ms)",
                    self.busy_timeout.as_millis()
                ),
                11 | 26 => format!(
                    "{path} is damaged or not an lf-handoff store ({}); it was left unchanged",
                    db.message()
                ),
                8 => format!("{path} is read-only: {}", db.message()),
                13 => format!("{path}: the disk is full"),
                14 => format!("cannot open {path}: {}", db.message()),
                10 => format!("{path}: {}", db.message()),
                _ => format!("{path}: SQLite error: {}", db.message()),
            };
            return EngineError::Failed(StoreError::unavailable_because(kind, message, error));
        }
        let kind = error_kind(&error);
        let message = match &error {
            sqlx::Error::PoolTimedOut => {
                format!("{path}: timed out waiting for a database connection")
            }
            sqlx::Error::Io(io) => format!("{path}: {io}"),
            other => format!("{path}: {other}"),
        };
        EngineError::Failed(StoreError::unavailable_because(kind, message, error))
    }

    pub(super) fn unavailable(&self, error: sqlx::Error) -> StoreError {
        match self.map_error(error) {
            EngineError::Failed(error) => error,
            EngineError::Unique { detail, .. } => StoreError::damaged(format!(
                "{}: unexpected unique constraint violation: {detail}",
                self.path.display()
            )),
        }
    }
}

/// The kind of every SQLite error, in one place: busy or locked, damaged
/// or not a database, read-only, full, I/O.
pub(super) fn error_kind(error: &sqlx::Error) -> UnavailableKind {
    match error {
        sqlx::Error::Database(db) => {
            match db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0) & 0xff {
                5 | 6 => UnavailableKind::Locked,
                11 | 26 => UnavailableKind::Damaged,
                8 | 23 => UnavailableKind::PermissionDenied,
                13 => UnavailableKind::DiskFull,
                10 | 14 => UnavailableKind::Io,
                _ => UnavailableKind::Other,
            }
        }
        sqlx::Error::PoolTimedOut => UnavailableKind::Locked,
        sqlx::Error::Io(io) => UnavailableKind::of_io_error(io),
        _ => UnavailableKind::Other,
    }
}

pub(super) fn is_busy(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db)
        if matches!(db.code().and_then(|c| c.parse::<i32>().ok()).map(|c| c & 0xff), Some(5 | 6)))
}

pub(super) fn open_error(path: &Path, error: sqlx::Error) -> StoreError {
    StoreError::unavailable_because(
        error_kind(&error),
        format!("cannot open SQLite store {}: {error}", path.display()),
        error,
    )
}
