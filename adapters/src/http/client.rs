//! The transport of the service's client: one `reqwest` client per
//! store, requests with the token, the retry window (C18) and the way an
//! answer becomes a value or the `StoreError` of the same kind.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_api::routes::content_type;
use lf_handoff_api::ErrorResponse;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::config::{HttpConfig, Token};

/// How long a connection to the service may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an ordinary call (not a stream or a long poll) may take.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest error body read: an error object is a few hundred bytes.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The longest pause between two attempts of a call.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// What every request of one store shares.
pub(super) struct Client {
    http: reqwest::Client,
    base: String,
    token: Token,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// A request to send: what [`Client::send`] may send again.
pub(super) struct Call<'a> {
    method: Method,
    path: &'a str,
    query: String,
    body: Option<(Vec<u8>, &'static str)>,
    timeout: Option<Duration>,
    last_event_id: Option<u64>,
}

impl<'a> Call<'a> {
    /// A `GET` of `path` (which starts with `/`).
    pub(super) fn get(path: &'a str) -> Self {
        Self {
            method: Method::GET,
            path,
            query: String::new(),
            body: None,
            timeout: Some(CALL_TIMEOUT),
            last_event_id: None,
        }
    }

    /// A `POST` of `path` without a body.
    pub(super) fn post(path: &'a str) -> Self {
        Self {
            method: Method::POST,
            ..Self::get(path)
        }
    }

    /// A `POST` of `path` with `body` as JSON.
    pub(super) fn post_json(path: &'a str, body: &impl Serialize) -> StoreResult<Self> {
        let bytes = serde_json::to_vec(body).map_err(|e| {
            StoreError::InvalidInput(format!("the request cannot be encoded as JSON: {e}"))
        })?;
        Ok(Self::post(path).body(bytes, content_type::JSON))
    }

    /// This call with `bytes` as its body, of `media_type`.
    pub(super) fn body(mut self, bytes: Vec<u8>, media_type: &'static str) -> Self {
        self.body = Some((bytes, media_type));
        self
    }

    /// This call with the query `query` (already encoded; empty for none).
    pub(super) fn query(mut self, query: String) -> Self {
        self.query = query;
        self
    }

    /// This call with no time limit of its own (a stream), or `limit`.
    pub(super) fn timeout(mut self, limit: Option<Duration>) -> Self {
        self.timeout = limit;
        self
    }

    /// This call resuming an event stream after `position`.
    pub(super) fn after_event(mut self, position: u64) -> Self {
        self.last_event_id = Some(position);
        self
    }
}

impl Client {
    /// The client of the service `config` names.
    ///
    /// # Errors
    /// As [`HttpConfig::resolve_token`]; `Refused` when the `ca` file is
    /// not PEM certificates; `Io` when it cannot be read.
    pub(super) fn new(config: &HttpConfig) -> StoreResult<Self> {
        let token = config.resolve_token()?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("lf-handoff/", env!("CARGO_PKG_VERSION")))
            // A redirect would carry the token to wherever it points.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(ca) = &config.ca {
            let pem = std::fs::read(ca).map_err(|e| {
                StoreError::unavailable(
                    UnavailableKind::of_io_error(&e),
                    format!(
                        "cannot read the service's authority file {}: {e}",
                        ca.display()
                    ),
                )
            })?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .ok()
                .filter(|certificates| !certificates.is_empty())
                .ok_or_else(|| {
                    StoreError::unavailable(
                        UnavailableKind::Refused,
                        format!("{} holds no PEM certificate", ca.display()),
                    )
                })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| {
            StoreError::unavailable(
                UnavailableKind::Other,
                format!("cannot set up the HTTP client: {e}"),
            )
        })?;
        Ok(Self {
            http,
            base: config.base.clone(),
            token,
        })
    }

    /// The service's base URL, for messages.
    pub(super) fn base(&self) -> &str {
        &self.base
    }

    /// Sends `call` and returns a successful answer. A call that cannot
    /// reach the service, or that the service answers with a transient
    /// error (`Retry-After`), is sent again until `window` has passed; as
    /// with a local store, a write whose answer was lost after it
    /// committed replays its committed result (C18).
    ///
    /// # Errors
    /// The error object's `StoreError`; `Unreachable` when the service
    /// could not be reached within the window.
    pub(super) async fn send(&self, call: &Call<'_>, window: Duration) -> StoreResult<Response> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            let error = match self.request(call).send().await {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let object = error_object(response).await;
                    if !object.is_transient() {
                        return Err(object.into_store_error());
                    }
                    object.into_store_error()
                }
                Err(error) => self.unreachable(call, &error),
            };
            if started.elapsed() + pause > window {
                return Err(error);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Sends `call` and reads its answer as `T`.
    ///
    /// # Errors
    /// As [`send`](Self::send); `Unavailable` of kind `Other` when the
    /// answer is not a `T`.
    pub(super) async fn json<T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
        window: Duration,
    ) -> StoreResult<T> {
        let response = self.send(call, window).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.unreachable(call, &e))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::unavailable(
                UnavailableKind::Other,
                format!(
                    "the service at {} answered {} {} with something that is not what it \
                     documents: {e}",
                    self.base, call.method, call.path
                ),
            )
        })
    }

    fn request(&self, call: &Call<'_>) -> RequestBuilder {
        let mut url = format!("{}{}", self.base, call.path);
        if !call.query.is_empty() {
            url.push('?');
            url.push_str(&call.query);
        }
        let mut request = self
            .http
            .request(call.method.clone(), url)
            .bearer_auth(self.token.secret());
        if let Some(limit) = call.timeout {
            request = request.timeout(limit);
        }
        if let Some(position) = call.last_event_id {
            request = request.header("Last-Event-ID", position.to_string());
        }
        match &call.body {
            Some((bytes, media_type)) => request
                .header(reqwest::header::CONTENT_TYPE, *media_type)
                .body(bytes.clone()),
            None => request,
        }
    }

    /// The error of a call whose request or answer failed on the way.
    pub(super) fn unreachable(&self, call: &Call<'_>, error: &reqwest::Error) -> StoreError {
        // reqwest's message names the URL, which holds no secret: the
        // token travels in a header.
        let what = if error.is_timeout() {
            "timed out"
        } else if error.is_connect() {
            "could not connect"
        } else {
            "lost the connection"
        };
        StoreError::unavailable(
            UnavailableKind::Unreachable,
            format!(
                "the service at {} {what} ({} {}): {}",
                self.base,
                call.method,
                call.path,
                error_chain(error)
            ),
        )
    }
}

/// `error` and its causes on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

/// The error object of an unsuccessful answer, or one that says what came
/// instead of it.
async fn error_object(response: Response) -> ErrorResponse {
    let status = response.status();
    let mut body = Vec::new();
    let mut response = response;
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ERROR_BODY {
            break;
        }
    }
    serde_json::from_slice::<ErrorResponse>(&body).unwrap_or_else(|_| not_an_error_object(status))
}

/// What an answer without the error object stands for.
fn not_an_error_object(status: StatusCode) -> ErrorResponse {
    use lf_handoff_api::Category;
    let category = match status.as_u16() {
        401 => Category::Unauthorized,
        403 => Category::Forbidden,
        404 => Category::NotFound,
        502..=504 => Category::Unavailable,
        _ => Category::Other,
    };
    let message = format!(
        "the service answered {status} without an lf-handoff error object: is the URL that of \
         `lf-handoff serve`?"
    );
    if category == Category::Unavailable {
        // A proxy in front of a service that is down: worth retrying.
        ErrorResponse::new(category, UnavailableKind::Unreachable.as_str(), message)
    } else {
        ErrorResponse::plain(category, message)
    }
}

/// A shared client.
pub(super) type Shared = Arc<Client>;
