//! The one error type the domain returns when it refuses a request, and the
//! kinds of conflict a program can branch on (contract C18).

use std::fmt;

use thiserror::Error;

/// Why the current state refused a well-formed request (contract C18).
///
/// A program branches on the kind; the message is for people. New kinds
/// may be added, so match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConflictKind {
    /// The parent already has an active handoff, so this write cannot take
    /// its place.
    ParentBusy,
    /// The request's body generation is older than the parent's current one,
    /// or older than the generation that opened the handoff.
    StaleGeneration,
    /// The request's body generation is newer than the one the parent has
    /// recorded: record the new body first.
    GenerationNotRecorded,
    /// A new body's generation is not higher than the parent's current one.
    GenerationNotNewer,
    /// The parent is terminal; it takes no new handoff or body.
    ParentFinished,
    /// The request names another provider than the parent's.
    ProviderMismatch,
    /// The request would drop or replace the provider session the parent
    /// continues.
    HistoryMismatch,
    /// A task's handoff must run in the task's worktree.
    WorktreeMismatch,
    /// A task names a wave its project does not belong to.
    WaveMismatch,
    /// The handoff is already finished, so it cannot be attached or
    /// replayed.
    AlreadyFinished,
    /// The handoff is already finished with a different outcome; the first
    /// one stays.
    OtherOutcome,
    /// The handoff is not finished yet, so its wake cannot be claimed.
    NotFinished,
    /// A record with this id already exists with different fields.
    AlreadyExists,
    /// The handoff's deadline passed (C14): it is expired, or was due and
    /// has just been expired by this very request, which therefore did not
    /// happen.
    Expired,
    /// The store already holds records, so an import (C17), which loads a
    /// whole registry, cannot go into it.
    NotEmpty,
}

impl ConflictKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 15] = [
        Self::ParentBusy,
        Self::StaleGeneration,
        Self::GenerationNotRecorded,
        Self::GenerationNotNewer,
        Self::ParentFinished,
        Self::ProviderMismatch,
        Self::HistoryMismatch,
        Self::WorktreeMismatch,
        Self::WaveMismatch,
        Self::AlreadyFinished,
        Self::OtherOutcome,
        Self::NotFinished,
        Self::AlreadyExists,
        Self::Expired,
        Self::NotEmpty,
    ];

    /// The kind's stable snake_case name, as the command line prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ParentBusy => "parent_busy",
            Self::StaleGeneration => "stale_generation",
            Self::GenerationNotRecorded => "generation_not_recorded",
            Self::GenerationNotNewer => "generation_not_newer",
            Self::ParentFinished => "parent_finished",
            Self::ProviderMismatch => "provider_mismatch",
            Self::HistoryMismatch => "history_mismatch",
            Self::WorktreeMismatch => "worktree_mismatch",
            Self::WaveMismatch => "wave_mismatch",
            Self::AlreadyFinished => "already_finished",
            Self::OtherOutcome => "other_outcome",
            Self::NotFinished => "not_finished",
            Self::AlreadyExists => "already_exists",
            Self::Expired => "expired",
            Self::NotEmpty => "not_empty",
        }
    }
}

impl fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// The request is well formed but the current state refuses it; the
    /// kind says which rule, the message says it to a person.
    #[error("{message}")]
    Conflict {
        /// Which rule refused the request.
        kind: ConflictKind,
        /// The rule and the values involved, for people.
        message: String,
    },
}

impl DomainError {
    /// Builds an [`DomainError::InvalidInput`] from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }

    /// Builds a [`DomainError::Conflict`] of `kind`.
    pub fn conflict(kind: ConflictKind, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind,
            message: message.into(),
        }
    }

    /// The conflict's kind, or `None` for invalid input.
    pub fn conflict_kind(&self) -> Option<ConflictKind> {
        match self {
            Self::Conflict { kind, .. } => Some(*kind),
            Self::InvalidInput(_) => None,
        }
    }
}

/// Shorthand for results whose error is a [`DomainError`].
pub type DomainResult<T> = Result<T, DomainError>;
