//! Every SQLite error of this backend is mapped here, in one place: the
//! primary result codes this backend tells apart are the rows of
//! [`RESULT_CODES`], each with the kind a program branches on and what
//! the message says.

use std::path::Path;

use lf_handoff_application::{StoreError, UnavailableKind};

use super::SqliteFile;
use crate::sql::engine::ErrorRow;
use crate::sql::{Dialect as _, EngineError};

/// The result codes this backend tells apart, by primary result code (the
/// low byte of SQLite's extended code); any other is
/// `UnavailableKind::Other`.
const RESULT_CODES: &[ErrorRow<&[i32], SqliteFile>] = &[
    // SQLITE_BUSY, SQLITE_LOCKED.
    ErrorRow {
        codes: &[5, 6],
        kind: UnavailableKind::Locked,
        says: |file, _| {
            format!(
                "{} is busy: another process held its write lock longer than the busy \
                 timeout ({} ms)",
                file.path.display(),
                file.busy_timeout.as_millis()
            )
        },
    },
    // SQLITE_READONLY.
    ErrorRow {
        codes: &[8],
        kind: UnavailableKind::PermissionDenied,
        says: |file, message| format!("{} is read-only: {message}", file.path.display()),
    },
    // SQLITE_IOERR.
    ErrorRow {
        codes: &[10],
        kind: UnavailableKind::Io,
        says: |file, message| format!("{}: {message}", file.path.display()),
    },
    // SQLITE_CORRUPT, SQLITE_NOTADB.
    ErrorRow {
        codes: &[11, 26],
        kind: UnavailableKind::Damaged,
        says: |file, message| {
            format!(
                "{} is damaged or not an lf-handoff store ({message}); it was left unchanged",
                file.path.display()
            )
        },
    },
    // SQLITE_FULL.
    ErrorRow {
        codes: &[13],
        kind: UnavailableKind::DiskFull,
        says: |file, _| format!("{}: the disk is full", file.path.display()),
    },
    // SQLITE_CANTOPEN.
    ErrorRow {
        codes: &[14],
        kind: UnavailableKind::Io,
        says: |file, message| format!("cannot open {}: {message}", file.path.display()),
    },
    // SQLITE_AUTH.
    ErrorRow {
        codes: &[23],
        kind: UnavailableKind::PermissionDenied,
        says: sqlite_error,
    },
];

/// `SQLITE_CONSTRAINT_UNIQUE`: a unique index (not the primary key,
/// `SQLITE_CONSTRAINT_PRIMARYKEY`) refused a row.
const CONSTRAINT_UNIQUE: &str = "2067";

/// The message of a code the table gives no words of its own.
fn sqlite_error(file: &SqliteFile, message: &str) -> String {
    format!("{}: SQLite error: {message}", file.path.display())
}

/// The row of [`RESULT_CODES`] of a database error; `None` for another
/// error or a code not in the table.
fn result_code(error: &sqlx::Error) -> Option<&'static ErrorRow<&'static [i32], SqliteFile>> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    let code = db.code()?.parse::<i32>().ok()? & 0xff;
    RESULT_CODES.iter().find(|row| row.codes.contains(&code))
}

impl SqliteFile {
    /// Maps one sqlx error: a unique violation (which index, SQLite's
    /// code does not say; see `dialect.rs`), or an actionable
    /// `Unavailable` naming the file.
    pub(super) fn engine_error(&self, error: sqlx::Error) -> EngineError {
        let path = self.path.display();
        let kind = error_kind(&error);
        let message = match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                return EngineError::Unique {
                    index: None,
                    detail: db.message().to_string(),
                };
            }
            sqlx::Error::Database(db) => {
                let says =
                    result_code(&error).map_or(sqlite_error as fn(&_, &_) -> _, |row| row.says);
                says(self, db.message())
            }
            sqlx::Error::PoolTimedOut => {
                format!("{path}: timed out waiting for a database connection")
            }
            sqlx::Error::Io(io) => format!("{path}: {io}"),
            other if kind == UnavailableKind::Damaged => format!(
                "{path}: a stored value is unreadable ({other}); the store may be damaged or \
                 changed by another program"
            ),
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

/// The kind of every SQLite error: a database error's from
/// [`RESULT_CODES`]; waiting too long for a connection is `Locked`; a
/// stored value that does not decode (say, TEXT in a column of integers,
/// which SQLite's type affinity lets another program write) is `Damaged`,
/// as on PostgreSQL.
pub(super) fn error_kind(error: &sqlx::Error) -> UnavailableKind {
    match error {
        sqlx::Error::Database(_) => {
            result_code(error).map_or(UnavailableKind::Other, |row| row.kind)
        }
        sqlx::Error::PoolTimedOut => UnavailableKind::Locked,
        sqlx::Error::Io(io) => UnavailableKind::of_io_error(io),
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::ColumnIndexOutOfBounds { .. }
        | sqlx::Error::Decode(_) => UnavailableKind::Damaged,
        _ => UnavailableKind::Other,
    }
}

/// Whether another connection held the lock `error` waited for.
pub(super) fn is_busy(error: &sqlx::Error) -> bool {
    result_code(error).is_some_and(|row| row.kind == UnavailableKind::Locked)
}

/// Whether one of the schema's unique indexes refused a row (which one,
/// the code does not say).
pub(super) fn is_unique_index_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some(CONSTRAINT_UNIQUE))
}

pub(super) fn open_error(path: &Path, error: sqlx::Error) -> StoreError {
    StoreError::unavailable_because(
        error_kind(&error),
        format!("cannot open SQLite store {}: {error}", path.display()),
        error,
    )
}
