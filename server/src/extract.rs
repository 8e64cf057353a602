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
        let bytes = whole_body(request, state).await?;
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
        let bytes = whole_body(request, state).await?;
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

/// The 400 of a body that stalled.
pub fn stalled(timeout: Duration) -> ApiError {
    ApiError::invalid(format!(
        "the request body stopped arriving for {} s; send it whole",
        timeout.as_secs()
    ))
}

/// The whole body of `request`, within the JSON body limits of `state`.
pub(crate) async fn whole_body(request: Request, state: &AppState) -> Result<Bytes, ApiError> {
    let (parts, body) = request.into_parts();
    let limits = state.limits();
    read_body(
        &parts.headers,
        body,
        limits.max_body,
        limits.body_read_timeout,
    )
    .await
}

/// Reads the whole body, at most `limit` bytes (413 beyond), each piece
/// within `timeout` of the previous one (400 when it stalls).
async fn read_body(
    headers: &HeaderMap,
    mut body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    check_length(headers, limit as u64)?;
    let mut out = Vec::new();
    loop {
        let frame = match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => return Err(stalled(timeout)),
            Ok(None) => return Ok(Bytes::from(out)),
            Ok(Some(Err(error))) => {
                return Err(ApiError::invalid(format!(
                    "the request body could not be read: {error}"
                )))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(too_large(limit as u64));
            }
            out.extend_from_slice(&data);
        }
    }
}
