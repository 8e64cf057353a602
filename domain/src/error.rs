//! The one error type the domain returns when it refuses a request.

use thiserror::Error;

/// Why the domain refused a request or a transition.
///
/// The variants are named by what the caller can do about it, and map one to
/// one onto the application's `InvalidInput` and `Conflict` errors.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DomainError {
    /// The request itself is malformed: fix the input and try again.
    #[error("{0}")]
    InvalidInput(String),
    /// The request is well formed but the current state refuses it (a stale
    /// body generation, a terminal handoff, a different outcome already
    /// recorded, ...). The message names the rule.
    #[error("{0}")]
    Conflict(String),
}

impl DomainError {
    /// Builds an [`DomainError::InvalidInput`] from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }

    /// Builds a [`DomainError::Conflict`] from anything printable.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict(message.into())
    }
}

/// Shorthand for results whose error is a [`DomainError`].
pub type DomainResult<T> = Result<T, DomainError>;
