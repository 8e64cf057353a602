//! Every sled error of this backend is mapped here, in one place, into a
//! [`StoreError`] that names the store and says what to do. No sled type
//! leaves this module's parent.

use std::path::Path;

use ::sled::transaction::{ConflictableTransactionError, TransactionError};
use lf_handoff_application::{BoxError, StoreError, UnavailableKind};

/// Why a transaction stopped without writing. The port methods turn the
/// expected ones into their outcomes (`ParentBusy`, `Lost`, ...).
#[derive(Debug)]
pub(super) enum Abort {
    /// The parent's active slot is taken.
    ParentBusy,
    /// The parent has a handoff for the step (C12).
    StepTaken,
    /// The parent is gone or at another version.
    ParentChanged,
    /// The record is gone or at another version.
    Lost,
    /// A parent with this id exists.
    Exists,
    /// The task PR id is taken.
    PrTaken,
    /// A stored record is unreadable, or the write would break an invariant.
    Failed(StoreError),
}

/// Aborts a transaction with `abort`.
pub(super) fn abort<T>(abort: Abort) -> Result<T, ConflictableTransactionError<Abort>> {
    Err(ConflictableTransactionError::Abort(abort))
}

/// Aborts a transaction because of `error`, which the call returns.
pub(super) fn failed(error: StoreError) -> ConflictableTransactionError<Abort> {
    ConflictableTransactionError::Abort(Abort::Failed(error))
}

/// The outcome of a transaction: `Ok(Ok(value))` when it committed,
/// `Ok(Err(abort))` when it stopped on purpose (except `Failed`, which is
/// an error), `Err` on an engine failure.
pub(super) fn settle<T>(
    dir: &Path,
    result: Result<T, TransactionError<Abort>>,
) -> Result<Result<T, Abort>, StoreError> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(TransactionError::Abort(Abort::Failed(error))) => Err(error),
        Err(TransactionError::Abort(abort)) => Ok(Err(abort)),
        Err(TransactionError::Storage(error)) => Err(engine(dir, error)),
    }
}

/// Returns true if and only if `error` is sled refusing the store's file
/// lock (another process, or a handle of this process still closing).
pub(super) fn is_locked(error: &::sled::Error) -> bool {
    // sled 0.34 reports its failed `flock` only as this message.
    matches!(error, ::sled::Error::Io(io) if io.to_string().contains("could not acquire lock"))
}

/// The error for a store another process holds; `error` is the failed
/// lock (sled's, or the one taken before sled opens, see `recovery`).
pub(super) fn locked(dir: &Path, error: impl Into<BoxError>) -> StoreError {
    StoreError::unavailable_because(
        UnavailableKind::Locked,
        format!(
            "{} is locked by another process: sled allows only one process to open a store at \
             a time. Stop the other process, or use the SQLite or PostgreSQL backend to share \
             one store between several processes",
            dir.display()
        ),
        error,
    )
}

/// Maps any other sled error.
pub(super) fn engine(dir: &Path, error: ::sled::Error) -> StoreError {
    let shown = dir.display();
    let (kind, message) = match &error {
        ::sled::Error::Io(io) => match UnavailableKind::of_io_error(io) {
            UnavailableKind::DiskFull => (
                UnavailableKind::DiskFull,
                format!("{shown}: the disk is full; free space and retry"),
            ),
            kind => (kind, format!("{shown}: I/O error: {io}")),
        },
        ::sled::Error::Corruption { at, .. } => (
            UnavailableKind::Damaged,
            match at {
                Some(at) => format!(
                    "{shown} is damaged: sled read corrupted data at {at}; restore it from a \
                     backup"
                ),
                None => format!(
                    "{shown} is damaged: sled read corrupted data; restore it from a backup"
                ),
            },
        ),
        ::sled::Error::Unsupported(what) => (
            UnavailableKind::Other,
            format!("{shown}: sled refused the store: {what}"),
        ),
        ::sled::Error::ReportableBug(what) => (
            UnavailableKind::Other,
            format!("{shown}: sled hit an internal error: {what}"),
        ),
        ::sled::Error::CollectionNotFound(name) => (
            UnavailableKind::Damaged,
            format!(
                "{shown}: sled lost the tree {}; the store may be damaged",
                String::from_utf8_lossy(name)
            ),
        ),
    };
    if is_locked(&error) {
        return locked(dir, error);
    }
    StoreError::unavailable_because(kind, message, error)
}

/// Maps an I/O error of this backend's own file calls.
pub(super) fn io(dir: &Path, what: &str, error: std::io::Error) -> StoreError {
    StoreError::unavailable_because(
        UnavailableKind::of_io_error(&error),
        format!("{}: {what}: {error}", dir.display()),
        error,
    )
}
