//! The error object (contract C18, C19): what the command line prints with
//! `--json` and what the service answers, `{"error": {"kind", "category",
//! "code", "message"}}`, and the one table that gives each category its
//! HTTP status and exit code.
//!
//! | category | HTTP status | exit code | kinds |
//! | --- | --- | --- | --- |
//! | `usage` | 400 | 2 | `usage` (the command line only) |
//! | `invalid_input` | 400 | 2 | `invalid_input` |
//! | `unauthorized` | 401 | 6 | `unauthorized` (no token, or one the service does not know) |
//! | `forbidden` | 403 | 7 | `forbidden` (the token's scopes do not allow the route), `link_for_another_name` (a link asked for a name not the token's) |
//! | `not_found` | 404 | 3 | `not_found` |
//! | `method_not_allowed` | 405 | 2 | `method_not_allowed` |
//! | `conflict` | 409 | 4 | the conflict kinds (`parent_busy`, `expired`, ...) |
//! | `timeout` | 409 | 4 | `timeout` (the command line's `wait` only) |
//! | `payload_too_large` | 413 | 2 | `payload_too_large` |
//! | `unsupported_media_type` | 415 | 2 | `unsupported_media_type` |
//! | `internal` | 500 | 5 | `internal` (a bug: a handler that panicked) |
//! | `unavailable` | 503 | 5 | the unavailable kinds (`locked`, `unreachable`, ...; `busy` when the service is at a limit) |
//! | `attach` | 500 | 126, 127 | `cannot_execute`, `program_not_allowed`, `command_not_found` (the command line only) |
//!
//! An error object converts back into a [`StoreError`] of the same kind
//! ([`ErrorResponse::into_store_error`]), so a client of the service
//! branches on the kinds a local store gives; `unauthorized` and
//! `forbidden` come back as [`StoreError::Denied`], not as a store that
//! cannot be used.

use std::fmt;

use lf_handoff_application::{ConflictKind, DeniedKind, StoreError, UnavailableKind};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The exit code of invalid input or usage.
pub const USAGE: u8 = 2;
/// The exit code of an id or parent that does not exist.
pub const NOT_FOUND: u8 = 3;
/// The exit code of a conflict (and of `wait` timing out).
pub const CONFLICT: u8 = 4;
/// The exit code of a store (or service) that cannot be used.
pub const UNAVAILABLE: u8 = 5;
/// The exit code of a service that refused the credential: no token, or
/// one it does not accept.
pub const UNAUTHORIZED: u8 = 6;
/// The exit code of a service that refused the token's scope.
pub const FORBIDDEN: u8 = 7;
/// The exit code of an attach command found but not runnable.
pub const CANNOT_EXECUTE: u8 = 126;
/// The exit code of an attach command not found.
pub const COMMAND_NOT_FOUND: u8 = 127;

/// The kind of a service at one of its limits (connections, event
/// streams and long polls): category `unavailable`, transient.
pub const BUSY: &str = "busy";

/// The kind of a request for a link (C21) for a name other than the
/// token's: category `forbidden`, as no token acts under another name.
pub const LINK_FOR_ANOTHER_NAME: &str = "link_for_another_name";

/// What the message of a store that cannot be used starts with.
const UNAVAILABLE_PREFIX: &str = "storage unavailable: ";

/// The error object: `{"error": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorBody,
}

/// The body of the error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The specific reason, snake_case; programs branch on it (or, for a
    /// kind they do not know, on the category).
    pub kind: String,
    /// The group of kinds, which gives the HTTP status and the exit code.
    pub category: Category,
    /// The command line's exit code for this error.
    pub code: u8,
    /// For people, on one line; its wording may change.
    pub message: String,
    /// Where the service's log holds the details of a store failure that
    /// the message leaves out (paths, hosts, the engine's own words):
    /// `{"error": {..., "id": "e-..."}}`, only on such failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// The group of an error's kind: it gives the HTTP status
/// ([`status`](Self::status)) and the exit code ([`code`](Self::code)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The command line's own usage (flags, settings).
    Usage,
    /// The request is malformed.
    InvalidInput,
    /// No token, or one the service does not know.
    Unauthorized,
    /// The token's scopes do not allow the route.
    Forbidden,
    /// The id, parent or route does not exist.
    NotFound,
    /// The route exists, with another method.
    MethodNotAllowed,
    /// The current state refuses the request.
    Conflict,
    /// The command line's `wait` timed out.
    Timeout,
    /// The request body is larger than the service takes.
    PayloadTooLarge,
    /// The request body is not of the content type the route takes.
    UnsupportedMediaType,
    /// A bug in the service.
    Internal,
    /// The store, or the service at one of its limits, cannot serve now.
    Unavailable,
    /// The command line's `attach` could not run its command.
    Attach,
    /// A category this build does not know (a newer service's).
    #[serde(other)]
    Other,
}

impl Category {
    /// Every category but [`Other`](Self::Other).
    pub const ALL: [Self; 13] = [
        Self::Usage,
        Self::InvalidInput,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::Conflict,
        Self::Timeout,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::Internal,
        Self::Unavailable,
        Self::Attach,
    ];

    /// The category's snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Usage => "usage",
            Self::InvalidInput => "invalid_input",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::Timeout => "timeout",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Internal => "internal",
            Self::Unavailable => "unavailable",
            Self::Attach => "attach",
            Self::Other => "other",
        }
    }

    /// The HTTP status the service answers an error of this category with.
    pub fn status(self) -> u16 {
        match self {
            Self::Usage | Self::InvalidInput => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::Conflict | Self::Timeout => 409,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::Unavailable => 503,
            Self::Internal | Self::Attach | Self::Other => 500,
        }
    }

    /// The command line's exit code for an error of this category (an
    /// `attach` error's code depends on its kind: 126 or 127).
    pub fn code(self) -> u8 {
        match self {
            Self::Usage
            | Self::InvalidInput
            | Self::MethodNotAllowed
            | Self::PayloadTooLarge
            | Self::UnsupportedMediaType => USAGE,
            Self::NotFound => NOT_FOUND,
            Self::Conflict | Self::Timeout => CONFLICT,
            Self::Attach => CANNOT_EXECUTE,
            Self::Unauthorized => UNAUTHORIZED,
            Self::Forbidden => FORBIDDEN,
            Self::Internal | Self::Unavailable | Self::Other => UNAVAILABLE,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ErrorResponse {
    /// An error of `category` with its own exit code, the kind `kind` and
    /// `message` folded onto one line.
    pub fn new(category: Category, kind: impl Into<String>, message: impl AsRef<str>) -> Self {
        Self::with_code(category, kind, category.code(), message)
    }

    /// An error of `category` with exit code `code` (an attach error's).
    pub fn with_code(
        category: Category,
        kind: impl Into<String>,
        code: u8,
        message: impl AsRef<str>,
    ) -> Self {
        Self {
            error: ErrorBody {
                kind: kind.into(),
                category,
                code,
                message: one_line(message.as_ref()),
                id: None,
            },
        }
    }

    /// A store failure as a service answers it to a client: the error's
    /// kind and a plain message for it, with the `id` under which the
    /// service logged the details, and none of the store's own words
    /// (which name files, hosts and engines). Errors that are about the
    /// request (invalid input, not found, conflicts) say what they say.
    pub fn withheld(error: &StoreError, id: &str) -> Self {
        let StoreError::Unavailable { kind, .. } = error else {
            return Self::from_store(error);
        };
        let plain = match kind {
            UnavailableKind::Locked => "the store is busy with another writer; try again shortly",
            UnavailableKind::Unreachable => "the store cannot be reached; try again shortly",
            UnavailableKind::Damaged => "the store holds data it cannot read",
            UnavailableKind::NewerSchema => "the store was written by a newer release",
            UnavailableKind::DiskFull => "the store's disk is full",
            UnavailableKind::Io => "the store could not be read or written",
            UnavailableKind::PermissionDenied => "the store refused the service access",
            UnavailableKind::Refused => "the store refused the service",
            UnavailableKind::Contended => {
                "the handoff was changed by many writers at once; try again"
            }
            _ => "the store failed",
        };
        let mut object = Self::new(
            Category::Unavailable,
            error.kind_name(),
            format!(
                "{UNAVAILABLE_PREFIX}{plain} (the service's log has the details under error id \
                 {id})"
            ),
        );
        object.error.id = Some(id.to_string());
        object
    }

    /// An error whose kind is its category's name (`invalid_input`,
    /// `unauthorized`, `payload_too_large`, ...).
    pub fn plain(category: Category, message: impl AsRef<str>) -> Self {
        Self::new(category, category.as_str(), message)
    }

    /// The service at one of its limits: `unavailable`, kind
    /// [`BUSY`], transient.
    pub fn busy(message: impl AsRef<str>) -> Self {
        Self::new(Category::Unavailable, BUSY, message)
    }

    /// The error object of a store error: its kind, its category and a
    /// message (a store that cannot be used says so first).
    pub fn from_store(error: &StoreError) -> Self {
        let (category, message) = match error {
            StoreError::InvalidInput(message) => (Category::InvalidInput, message.clone()),
            StoreError::NotFound(message) => (Category::NotFound, message.clone()),
            StoreError::Conflict { message, .. } => (Category::Conflict, message.clone()),
            StoreError::Unavailable { message, .. } => (
                Category::Unavailable,
                format!("{UNAVAILABLE_PREFIX}{message}"),
            ),
            StoreError::Denied { kind, message } => (
                match kind {
                    DeniedKind::Unauthorized => Category::Unauthorized,
                    _ => Category::Forbidden,
                },
                message.clone(),
            ),
            // StoreError is non_exhaustive; a future kind is reported as a
            // storage failure rather than lost.
            #[allow(unreachable_patterns)]
            other => (Category::Unavailable, other.to_string()),
        };
        Self::new(category, error.kind_name(), message)
    }

    /// The HTTP status of this error ([`Category::status`]).
    pub fn status(&self) -> u16 {
        self.error.category.status()
    }

    /// Whether a later attempt may succeed without anyone changing
    /// anything: a transient unavailable kind (a lock, an unreachable
    /// server, a contended record) or a service at a limit. The service
    /// answers these with `Retry-After`.
    pub fn is_transient(&self) -> bool {
        self.error.category == Category::Unavailable
            && (self.error.kind == BUSY
                || unavailable_kind(&self.error.kind).is_some_and(UnavailableKind::is_transient))
    }

    /// The store error this object stands for, with the same kind: what a
    /// client of the service returns to its caller. Errors of the service
    /// itself map to the nearest store error: `unauthorized` and
    /// `forbidden` to [`StoreError::Denied`] of that kind, a service at a limit to `Locked` (transient), a malformed request
    /// (`method_not_allowed`, `payload_too_large`, `unsupported_media_type`)
    /// to `InvalidInput`, anything else to `Unavailable` of kind `Other`.
    pub fn into_store_error(self) -> StoreError {
        let ErrorBody {
            kind,
            category,
            message,
            ..
        } = self.error;
        match category {
            Category::Usage
            | Category::InvalidInput
            | Category::MethodNotAllowed
            | Category::PayloadTooLarge
            | Category::UnsupportedMediaType => StoreError::InvalidInput(message),
            Category::NotFound => StoreError::NotFound(message),
            Category::Conflict => match conflict_kind(&kind) {
                Some(kind) => StoreError::conflict(kind, message),
                None => StoreError::unavailable(
                    UnavailableKind::Other,
                    format!("the service reported a conflict of unknown kind {kind:?}: {message}"),
                ),
            },
            Category::Unavailable => {
                let message = message
                    .strip_prefix(UNAVAILABLE_PREFIX)
                    .map_or(message.clone(), str::to_string);
                let kind = if kind == BUSY {
                    UnavailableKind::Locked
                } else {
                    unavailable_kind(&kind).unwrap_or(UnavailableKind::Other)
                };
                StoreError::unavailable(kind, message)
            }
            Category::Unauthorized => StoreError::denied(DeniedKind::Unauthorized, message),
            Category::Forbidden => StoreError::denied(DeniedKind::Forbidden, message),
            Category::Timeout | Category::Internal | Category::Attach | Category::Other => {
                StoreError::unavailable(UnavailableKind::Other, message)
            }
        }
    }
}

impl From<&StoreError> for ErrorResponse {
    fn from(error: &StoreError) -> Self {
        Self::from_store(error)
    }
}

impl fmt::Display for ErrorResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.error.message)
    }
}

/// The conflict kind named `name`.
pub fn conflict_kind(name: &str) -> Option<ConflictKind> {
    ConflictKind::ALL
        .into_iter()
        .find(|kind| kind.as_str() == name)
}

/// The unavailable kind named `name`.
pub fn unavailable_kind(name: &str) -> Option<UnavailableKind> {
    UnavailableKind::ALL
        .into_iter()
        .find(|kind| kind.as_str() == name)
}

/// Folds `text` onto one line: newlines and other control characters
/// become spaces, runs of whitespace one space.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| !word.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn every_store_error() -> Vec<StoreError> {
        let mut errors = vec![
            StoreError::InvalidInput("bad".into()),
            StoreError::NotFound("gone".into()),
        ];
        errors.extend(
            ConflictKind::ALL
                .into_iter()
                .map(|kind| StoreError::conflict(kind, format!("refused: {kind}"))),
        );
        errors.extend(
            UnavailableKind::ALL
                .into_iter()
                .map(|kind| StoreError::unavailable(kind, format!("down: {kind}"))),
        );
        errors.extend(
            DeniedKind::ALL
                .into_iter()
                .map(|kind| StoreError::denied(kind, format!("refused: {kind}"))),
        );
        errors
    }

    #[test]
    fn every_store_error_comes_back_with_its_kind_and_message() {
        for error in every_store_error() {
            let object = ErrorResponse::from_store(&error);
            let text = serde_json::to_string(&object).unwrap();
            let back: ErrorResponse = serde_json::from_str(&text).unwrap();
            assert_eq!(back, object);
            let again = back.into_store_error();
            assert_eq!(again.kind_name(), error.kind_name(), "{error}");
            assert_eq!(again.message(), error.message(), "{error}");
            assert_eq!(again.to_string(), error.to_string());
        }
    }

    #[test]
    fn statuses_and_codes_follow_the_category() {
        let cases = [
            (StoreError::InvalidInput("x".into()), 400, USAGE),
            (StoreError::NotFound("x".into()), 404, NOT_FOUND),
            (
                StoreError::conflict(ConflictKind::Expired, "x"),
                409,
                CONFLICT,
            ),
            (
                StoreError::unavailable(UnavailableKind::Damaged, "x"),
                503,
                UNAVAILABLE,
            ),
            (
                StoreError::denied(DeniedKind::Unauthorized, "x"),
                401,
                UNAUTHORIZED,
            ),
            (
                StoreError::denied(DeniedKind::Forbidden, "x"),
                403,
                FORBIDDEN,
            ),
        ];
        for (error, status, code) in cases {
            let object = ErrorResponse::from_store(&error);
            assert_eq!((object.status(), object.error.code), (status, code));
        }
        assert_eq!(
            ErrorResponse::plain(Category::Unauthorized, "x").status(),
            401
        );
        assert_eq!(ErrorResponse::plain(Category::Forbidden, "x").status(), 403);
        assert_eq!(
            ErrorResponse::plain(Category::PayloadTooLarge, "x").status(),
            413
        );
        assert_eq!(
            ErrorResponse::plain(Category::UnsupportedMediaType, "x").status(),
            415
        );
        for category in Category::ALL {
            let name = serde_json::to_value(category).unwrap();
            assert_eq!(name, category.as_str());
        }
    }

    #[test]
    fn only_transient_kinds_and_a_busy_service_are_transient() {
        for kind in UnavailableKind::ALL {
            let object = ErrorResponse::from_store(&StoreError::unavailable(kind, "x"));
            assert_eq!(object.is_transient(), kind.is_transient(), "{kind}");
        }
        assert!(ErrorResponse::busy("at the limit").is_transient());
        assert!(!ErrorResponse::plain(Category::InvalidInput, "x").is_transient());
        let busy = ErrorResponse::busy("x").into_store_error();
        assert_eq!(busy.unavailable_kind(), Some(UnavailableKind::Locked));
    }

    #[test]
    fn service_errors_map_to_the_nearest_store_error() {
        let refused = ErrorResponse::plain(Category::Unauthorized, "who?").into_store_error();
        assert_eq!(refused.denied_kind(), Some(DeniedKind::Unauthorized));
        let denied = ErrorResponse::plain(Category::Forbidden, "no").into_store_error();
        assert_eq!(denied.denied_kind(), Some(DeniedKind::Forbidden));
        let link = ErrorResponse::new(Category::Forbidden, LINK_FOR_ANOTHER_NAME, "not yours")
            .into_store_error();
        assert_eq!(link.denied_kind(), Some(DeniedKind::Forbidden));
        // No exit code is shared by two categories but usage's and
        // conflict's groups: a script tells a refused credential from a
        // refused scope from a store that cannot be used.
        let codes: Vec<u8> = [
            Category::Unauthorized,
            Category::Forbidden,
            Category::Unavailable,
        ]
        .iter()
        .map(|category| category.code())
        .collect();
        assert_eq!(codes, [UNAUTHORIZED, FORBIDDEN, UNAVAILABLE]);
        let large = ErrorResponse::plain(Category::PayloadTooLarge, "big").into_store_error();
        assert!(large.is_invalid_input());
        let unknown: ErrorResponse = serde_json::from_str(
            r#"{"error":{"kind":"new_thing","category":"brand_new","code":9,"message":"m"}}"#,
        )
        .unwrap();
        assert_eq!(unknown.error.category, Category::Other);
        assert_eq!(
            unknown.into_store_error().unavailable_kind(),
            Some(UnavailableKind::Other)
        );
    }

    #[test]
    fn messages_are_folded_onto_one_line() {
        assert_eq!(one_line("a\nb\t c\r\n\x1b[31md"), "a b c [31md");
        assert_eq!(one_line("  lead  "), "lead");
        let object = ErrorResponse::plain(Category::InvalidInput, "two\nlines");
        assert_eq!(object.error.message, "two lines");
    }
}
