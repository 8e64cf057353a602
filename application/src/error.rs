//! The one error enum every store operation returns.

use std::fmt;

use lf_handoff_domain::{ConflictKind, DomainError};
use thiserror::Error;

/// A boxed cause, kept for diagnostics without leaking engine types.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the storage backend could not be used (contract C18): what a
/// program needs to decide whether to retry.
///
/// New kinds may be added, so match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnavailableKind {
    /// Another process holds the store (sled's lock, a SQLite write lock
    /// held past the busy timeout). Retry soon.
    Locked,
    /// The server cannot be reached, refused the connection, or no pooled
    /// connection came free in time. Retry later.
    Unreachable,
    /// The store is damaged or is not an lf-handoff store: a corrupt file,
    /// a record that fails its invariants. Do not retry; restore it.
    Damaged,
    /// The store was written by a newer release. Upgrade lf-handoff.
    NewerSchema,
    /// The disk or the database is full. Free space, then retry.
    DiskFull,
    /// The operating system reported an I/O error reading or writing the
    /// store.
    Io,
    /// The store's files, directory or server refuse this user.
    PermissionDenied,
    /// The server refused this client as configured: a wrong user or
    /// password, a database that does not exist, TLS settings it cannot
    /// meet, or something that is not a PostgreSQL server. Fix the store
    /// URL.
    Refused,
    /// A write lost its compare-and-swap race too many times in a row:
    /// something else keeps changing the record. Retry later.
    Contended,
    /// Any other engine failure; the message says what happened.
    Other,
}

impl UnavailableKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 10] = [
        Self::Locked,
        Self::Unreachable,
        Self::Damaged,
        Self::NewerSchema,
        Self::DiskFull,
        Self::Io,
        Self::PermissionDenied,
        Self::Refused,
        Self::Contended,
        Self::Other,
    ];

    /// The kind's stable snake_case name, as the command line prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Locked => "locked",
            Self::Unreachable => "unreachable",
            Self::Damaged => "damaged",
            Self::NewerSchema => "newer_schema",
            Self::DiskFull => "disk_full",
            Self::Io => "io",
            Self::PermissionDenied => "permission_denied",
            Self::Refused => "refused",
            Self::Contended => "contended",
            Self::Other => "other",
        }
    }

    /// The kind of an operating-system I/O error: a full disk or quota, a
    /// permission refused, or any other I/O failure.
    pub fn of_io_error(error: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        // ENOSPC and EDQUOT on Linux, for toolchains whose ErrorKind does
        // not name them.
        const NO_SPACE: i32 = 28;
        const QUOTA: i32 = 122;
        match error.kind() {
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => Self::PermissionDenied,
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded => Self::DiskFull,
            _ if matches!(error.raw_os_error(), Some(NO_SPACE | QUOTA)) => Self::DiskFull,
            _ => Self::Io,
        }
    }

    /// True for the kinds that a later attempt may get past without anyone
    /// changing anything: a lock, an unreachable server, a contended record.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Locked | Self::Unreachable | Self::Contended)
    }
}

impl fmt::Display for UnavailableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a service refused its caller (contract C18, C20): what the caller
/// must change, its credential or its scope. Only a store reached over
/// HTTP (`http://`, `https://`) gives it; a local store has no callers to
/// refuse.
///
/// New kinds may be added, so match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeniedKind {
    /// No token was given, or the service does not accept the one given
    /// (revoked, made for another tokens file, a sign-in that expired).
    /// Give a token the service knows.
    Unauthorized,
    /// The token is known, but its scope does not allow what was asked
    /// (a person's action with an agent's token, a link for another name).
    /// Use a token of the scope the message names.
    Forbidden,
}

impl DeniedKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 2] = [Self::Unauthorized, Self::Forbidden];

    /// The kind's stable snake_case name, as the command line prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
        }
    }
}

impl fmt::Display for DeniedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a store operation failed, named by what the caller can do.
///
/// `Conflict` and `Unavailable` carry a kind a program branches on; every
/// message is for people and may change between releases. Adapters map
/// their engine's errors into this enum in exactly one place; no sqlx or
/// sled type ever crosses it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The request is malformed. Fix the input; retrying as-is cannot help.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The id (or parent) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The request is valid but the current state refuses it.
    #[error("conflict: {message}")]
    Conflict {
        /// Which rule refused it (stale generation, other outcome, ...).
        kind: ConflictKind,
        /// The rule and the values involved, for people.
        message: String,
    },
    /// The storage backend could not be used. Nothing was changed by this
    /// call, except that an `Unreachable` write may have committed before
    /// its reply was lost: the same request again replays it (C18,
    /// transient faults).
    #[error("storage unavailable: {message}")]
    Unavailable {
        /// Why, in a form a program can branch on.
        kind: UnavailableKind,
        /// What happened and, where possible, what to do.
        message: String,
        /// The engine's own error, for diagnostics.
        #[source]
        source: Option<BoxError>,
    },
    /// The service behind an `http://` or `https://` store refused the
    /// caller: no token or an unknown one ([`DeniedKind::Unauthorized`]),
    /// or a token whose scope does not allow the call
    /// ([`DeniedKind::Forbidden`]). Nothing was changed. Retrying with the
    /// same token cannot help; the message names what would.
    #[error("not allowed: {message}")]
    Denied {
        /// Which refusal, in a form a program can branch on.
        kind: DeniedKind,
        /// What was refused and what to do, for people.
        message: String,
    },
}

impl StoreError {
    /// A [`StoreError::Conflict`] of `kind`.
    pub fn conflict(kind: ConflictKind, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind,
            message: message.into(),
        }
    }

    /// A [`StoreError::Unavailable`] of `kind`, without a cause.
    pub fn unavailable(kind: UnavailableKind, message: impl Into<String>) -> Self {
        Self::Unavailable {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A [`StoreError::Unavailable`] of `kind`, keeping `source` as its
    /// cause.
    pub fn unavailable_because(
        kind: UnavailableKind,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Unavailable {
            kind,
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A [`StoreError::Unavailable`] for a stored record or file that is
    /// not what lf-handoff wrote.
    pub fn damaged(message: impl Into<String>) -> Self {
        Self::unavailable(UnavailableKind::Damaged, message)
    }

    /// A [`StoreError::Denied`] of `kind`.
    pub fn denied(kind: DeniedKind, message: impl Into<String>) -> Self {
        Self::Denied {
            kind,
            message: message.into(),
        }
    }

    /// The refusal's kind, if this is a [`StoreError::Denied`].
    pub fn denied_kind(&self) -> Option<DeniedKind> {
        match self {
            Self::Denied { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// The conflict's kind, if this is a [`StoreError::Conflict`].
    pub fn conflict_kind(&self) -> Option<ConflictKind> {
        match self {
            Self::Conflict { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// The unavailable kind, if this is a [`StoreError::Unavailable`].
    pub fn unavailable_kind(&self) -> Option<UnavailableKind> {
        match self {
            Self::Unavailable { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// The most specific kind's stable snake_case name: `invalid_input`,
    /// `not_found`, or the conflict's, unavailable or denied kind's name.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::InvalidInput(_) => "invalid_input",
            Self::NotFound(_) => "not_found",
            Self::Conflict { kind, .. } => kind.as_str(),
            Self::Unavailable { kind, .. } => kind.as_str(),
            Self::Denied { kind, .. } => kind.as_str(),
        }
    }

    /// The message for people, without the category prefix of `Display`.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidInput(message)
            | Self::NotFound(message)
            | Self::Conflict { message, .. }
            | Self::Unavailable { message, .. }
            | Self::Denied { message, .. } => message,
        }
    }

    /// Returns true if and only if this is [`StoreError::InvalidInput`].
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Self::InvalidInput(_))
    }

    /// Returns true if and only if this is [`StoreError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound(_))
    }

    /// Returns true if and only if this is [`StoreError::Conflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// Returns true if and only if this is [`StoreError::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }

    /// Returns true if and only if this is [`StoreError::Denied`].
    pub fn is_denied(&self) -> bool {
        matches!(self, Self::Denied { .. })
    }
}

impl From<DomainError> for StoreError {
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::InvalidInput(message) => Self::InvalidInput(message),
            DomainError::Conflict { kind, message } => Self::Conflict { kind, message },
            // DomainError is non_exhaustive; a future variant is reported as
            // an engine-independent failure with its message rather than lost.
            #[allow(unreachable_patterns)]
            other => Self::unavailable(UnavailableKind::Other, other.to_string()),
        }
    }
}

/// Shorthand for results whose error is a [`StoreError`].
pub type StoreResult<T> = Result<T, StoreError>;
