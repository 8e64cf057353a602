//! The error answer: the error object (C18, C19) with the status of its
//! category, and `Retry-After` when a later attempt may succeed.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use lf_handoff_adapters::StoreError;
use lf_handoff_api::{Category, ErrorResponse};
use ring::rand::{SecureRandom as _, SystemRandom};

/// How long a client should wait before trying again after a transient
/// error, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// An error a handler answers with.
#[derive(Debug)]
pub struct ApiError(pub ErrorResponse);

impl ApiError {
    /// An error whose kind is its category's name.
    pub fn plain(category: Category, message: impl AsRef<str>) -> Self {
        Self(ErrorResponse::plain(category, message))
    }

    /// Invalid input.
    pub fn invalid(message: impl AsRef<str>) -> Self {
        Self::plain(Category::InvalidInput, message)
    }

    /// The service at one of its limits.
    pub fn busy(message: impl AsRef<str>) -> Self {
        Self(ErrorResponse::busy(message))
    }
}

impl From<StoreError> for ApiError {
    /// A store that cannot be used is answered with its kind and a plain
    /// message: its own message names files, hosts and engines, which a
    /// client (one without a token, on `/readyz`) must not learn. The
    /// details go to the log under an id the answer carries.
    fn from(error: StoreError) -> Self {
        Self(withheld(&error))
    }
}

/// The error object of `error` for a client, its details logged under a
/// new id when they are withheld ([`ErrorResponse::withheld`]).
pub fn withheld(error: &StoreError) -> ErrorResponse {
    if error.unavailable_kind().is_none() {
        return ErrorResponse::from_store(error);
    }
    let id = error_id();
    // Anyone can ask `/readyz` while the store is down: one WARN line a
    // second at most, the others at DEBUG, so the log stays readable.
    if first_this_second() {
        tracing::warn!(error.id = %id, "store failure: {error}");
    } else {
        tracing::debug!(error.id = %id, "store failure: {error}");
    }
    ErrorResponse::withheld(error, &id)
}

/// Whether no store failure was logged at WARN in the current second yet
/// (and marks this second as logged).
fn first_this_second() -> bool {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_secs())
        .unwrap_or_default();
    LAST.swap(now, Ordering::Relaxed) != now
}

/// A new id for a logged failure: `e-` and 12 random hex digits, enough
/// to find one line in a log.
fn error_id() -> String {
    let mut bytes = [0_u8; 6];
    // Without randomness, the time still tells lines apart.
    if SystemRandom::new().fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.subsec_nanos())
            .unwrap_or_default();
        bytes[..4].copy_from_slice(&nanos.to_be_bytes());
    }
    format!("e-{}", crate::hex::encode(&bytes))
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error_response(&self.0)
    }
}

/// The response carrying `error`.
pub fn error_response(error: &ErrorResponse) -> Response {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(error).unwrap_or_else(|_| {
        br#"{"error":{"kind":"internal","category":"internal","code":5,"message":"unprintable"}}"#
            .to_vec()
    });
    let mut response = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response();
    if error.is_transient() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    response
}
