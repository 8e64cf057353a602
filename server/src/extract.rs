//! What handlers take from a request: the id in the path, the JSON body
//! (content type, size, time and strict parsing checked in that order,
//! before anything is read from the store), the caller.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use http_body_util::BodyExt as _;
use lf_handoff_api::routes::content_type;
use lf_handoff_api::{strict, Category};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::state::AppState;
use crate::tokens::Caller;

/// The `{id}` of the path, as sent (each handler parses it into its id
/// type, so a malformed id is a 400 naming the kind expected).
#[derive(Debug)]
pub struct IdParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| Self(id))
            .map_err(|e| ApiError::invalid(format!("the id in the path: {e}")))
    }
}

/// Who called: the token's name and scopes (set by the authorization
/// layer on every route that needs a token).
#[derive(Debug)]
pub struct Who(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Who {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .map(Self)
            .ok_or_else(|| ApiError::plain(Category::Unauthorized, "this route needs a token"))
    }
}

/// A JSON body read strictly into a `T`.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T> FromRequest<AppState> for JsonBody<T>
where
    T: DeserializeOwned + Serialize,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        require_json(request.headers())?;
        let bytes = whole_body(request, state, Sender::Known).await?;
        strict::from_slice(&bytes).map(Self).map_err(ApiError::from)
    }
}

/// No body, or an empty JSON object (`{}`): what `attach` and `expire`
/// take.
#[derive(Debug)]
pub struct NoBody;

/// The one body `NoBody` takes besides none.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

impl FromRequest<AppState> for NoBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let declared_json = require_json(request.headers());
        let bytes = whole_body(request, state, Sender::Known).await?;
        if bytes.is_empty() {
            return Ok(Self);
        }
        declared_json?;
        strict::from_slice::<Empty>(&bytes)
            .map(|_| Self)
            .map_err(|_| {
                ApiError::invalid("this route takes no body (or an empty JSON object, {})")
            })
    }
}

/// The media type of `headers`' `Content-Type`, lowercased, without its
/// parameters.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = value.split(';').next().unwrap_or_default().trim();
    Some(media.to_ascii_lowercase())
}

/// Refuses a body that is not declared as JSON (415).
fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    match media_type(headers) {
        Some(media) if media == content_type::JSON => Ok(()),
        Some(media) => Err(ApiError::plain(
            Category::UnsupportedMediaType,
            format!(
                "the body is declared as {media:?}; send it as {}",
                content_type::JSON
            ),
        )),
        None => Err(ApiError::plain(
            Category::UnsupportedMediaType,
            format!(
                "the body has no Content-Type; send it as {}",
                content_type::JSON
            ),
        )),
    }
}

/// Refuses a body that declares more than `limit` bytes (413), before
/// reading any of it.
pub fn check_length(headers: &HeaderMap, limit: u64) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > limit => Err(too_large(limit)),
        _ => Ok(()),
    }
}

/// The 413 of a body over `limit` bytes.
pub fn too_large(limit: u64) -> ApiError {
    ApiError::plain(
        Category::PayloadTooLarge,
        format!("the request body is larger than the {limit} bytes this route takes"),
    )
}

/// The 400 of an import body that stalled between two pieces.
pub fn stalled(timeout: Duration) -> ApiError {
    ApiError::invalid(format!(
        "the request body stopped arriving for {} s; send it whole",
        timeout.as_secs()
    ))
}

/// The 400 of a body that did not arrive whole within `timeout`.
pub fn late(timeout: Duration) -> ApiError {
    ApiError::invalid(format!(
        "the request body did not arrive whole within {:.1} s; send it at once",
        timeout.as_secs_f64()
    ))
}

/// Who may send a body: a caller that showed a token (or a signed-in
/// session), or anyone (the sign-in form, a link's form), whose body is
/// held to the smaller public limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sender {
    /// Checked before the body is read.
    Known,
    /// Not checked yet: what is read is bounded by the public limits.
    Anyone,
}

/// The whole body of `request`, within the body limits of `state` for
/// `sender`.
pub(crate) async fn whole_body(
    request: Request,
    state: &AppState,
    sender: Sender,
) -> Result<Bytes, ApiError> {
    let (parts, body) = request.into_parts();
    let limits = state.limits();
    let (limit, total) = match sender {
        Sender::Known => (limits.max_body, limits.body_timeout),
        Sender::Anyone => (limits.max_public_body, limits.public_body_timeout),
    };
    check_length(&parts.headers, limit as u64)?;
    tokio::time::timeout(total, read_body(body, limit))
        .await
        .unwrap_or_else(|_| Err(late(total)))
}

/// Reads the whole body, at most `limit` bytes (413 beyond); its caller
/// bounds the time it takes.
async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::invalid(format!("the request body could not be read: {error}"))
        })?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(too_large(limit as u64));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}
