//! The one error enum every store operation returns.

use lf_handoff_domain::DomainError;
use thiserror::Error;

/// A boxed cause, kept for diagnostics without leaking engine types.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store operation failed, named by what the caller can do.
///
/// Adapters map their engine's errors into this enum in exactly one place;
/// no sqlx or sled type ever crosses it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The request is malformed. Fix the input; retrying as-is cannot help.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The id (or parent) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The request is valid but the current state refuses it; the message
    /// names the rule (stale generation, terminal handoff, other outcome...).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The storage backend could not be used: unreachable, locked, corrupt,
    /// or written by a newer version. Nothing was changed by this call.
    #[error("storage unavailable: {message}")]
    Unavailable {
        /// What happened and, where possible, what to do.
        message: String,
        /// The engine's own error, for diagnostics.
        #[source]
        source: Option<BoxError>,
    },
}

impl StoreError {
    /// An [`StoreError::Unavailable`] without a cause.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    /// An [`StoreError::Unavailable`] keeping `source` as its cause.
    pub fn unavailable_because(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(source.into()),
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
        matches!(self, Self::Conflict(_))
    }

    /// Returns true if and only if this is [`StoreError::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

impl From<DomainError> for StoreError {
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::InvalidInput(message) => Self::InvalidInput(message),
            DomainError::Conflict(message) => Self::Conflict(message),
            // DomainError is non_exhaustive; a future variant is reported as
            // a conflict rather than lost.
            #[allow(unreachable_patterns)]
            other => Self::Conflict(other.to_string()),
        }
    }
}

/// Shorthand for results whose error is a [`StoreError`].
pub type StoreResult<T> = Result<T, StoreError>;
