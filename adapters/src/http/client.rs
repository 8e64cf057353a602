//! The transport of the service's client: one `reqwest` client per
//! store (and, for an `http://` service, the connections of
//! [`super::plain`] for calls that answer one JSON body), requests with
//! the token, the retry window (C18) and the way an answer becomes a
//! value or the `StoreError` of the same kind.

use std::fmt;
use std::future::Future;
use std::io::{self, BufRead};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use lf_handoff_api::routes::content_type;
use lf_handoff_api::ErrorResponse;
use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::mpsc;

use super::config::{HttpConfig, Token};
use super::plain::{Failure, Plain};

/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("lf-handoff/", env!("CARGO_PKG_VERSION"));

/// How long a connection to the service may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an ordinary call (not a stream or a long poll) may take.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest error body read: an error object is a few hundred bytes.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The largest answer read whole (a JSON answer): a page of a list (at
/// most 1000 whole records) or an expiry sweep's records fit many times
/// over, and a service (or whatever answers in its place) that sends more
/// cannot make the client hold it. Streams (events, an export) are read
/// piece by piece and not bounded by it.
pub(super) const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// The largest piece a body read from a reader is sent in, and how many
/// pieces may wait to be sent: what such a body holds in memory.
const READER_CHUNK: usize = 64 * 1024;
const READER_CHUNKS: usize = 4;

/// The longest pause between two attempts of a call.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// The environment variables by which reqwest sends `http://` requests
/// through a proxy: with any of them set, every call goes through reqwest.
const PROXY_VARIABLES: [&str; 4] = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"];

/// What every request of one store shares.
pub(super) struct Client {
    http: reqwest::Client,
    /// For an `http://` service reached without a proxy: the connections
    /// of the calls that answer one JSON body, and what their requests
    /// carry (the `Host` header, the base URL's path).
    plain: Option<PlainRoute>,
    base: String,
    token: Token,
}

/// Where a plain connection's requests go.
struct PlainRoute {
    connections: Plain,
    host: String,
    prefix: String,
}

/// Why an attempt of a call failed, and whether the call may be sent
/// again.
struct Attempt {
    error: StoreError,
    again: bool,
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
    /// Shared, so a call sent again does not copy it.
    body: Option<(Bytes, &'static str)>,
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
        self.body = Some((Bytes::from(bytes), media_type));
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
        config.check_clear_text()?;
        let token = config.resolve_token()?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(USER_AGENT)
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
            plain: plain_route(&config.base),
            base: config.base.clone(),
            token,
        })
    }

    /// The service's base URL, for messages.
    pub(super) fn base(&self) -> &str {
        &self.base
    }

    /// Sends `call` and returns a successful answer (through reqwest: a
    /// stream, or an answer read piece by piece). A call that cannot
    /// reach the service, or that the service answers with a transient
    /// error (`Retry-After`), is sent again until `window` has passed; as
    /// with a local store, a write whose answer was lost after it
    /// committed replays its committed result (C18).
    ///
    /// # Errors
    /// The error object's `StoreError`; `Unreachable` when the service
    /// could not be reached within the window.
    pub(super) async fn send(&self, call: &Call<'_>, window: Duration) -> StoreResult<Response> {
        retrying(window, || async {
            match self.request(call).send().await {
                Ok(response) if response.status().is_success() => Ok(response),
                Ok(response) => Err(refused(error_object(response).await)),
                Err(error) => {
                    let error = self.unreachable(call, &error);
                    // A certificate that is not trusted stays so.
                    let again = error.unavailable_kind() == Some(UnavailableKind::Unreachable);
                    Err(Attempt { error, again })
                }
            }
        })
        .await
    }

    /// Sends `call` and reads its answer as `T`, retried as
    /// [`send`](Self::send) is; on an `http://` service without a proxy,
    /// over a connection this task drives ([`super::plain`]).
    ///
    /// # Errors
    /// As [`send`](Self::send); `Unavailable` of kind `Other` when the
    /// answer is not a `T`.
    pub(super) async fn json<T: DeserializeOwned>(
        &self,
        call: &Call<'_>,
        window: Duration,
    ) -> StoreResult<T> {
        let bytes = match &self.plain {
            Some(route) => retrying(window, || self.plain_attempt(route, call)).await?,
            None => {
                let response = self.send(call, window).await?;
                Bytes::from(self.whole(call, response).await?)
            }
        };
        self.decode(call, &bytes)
    }

    /// The body of `response` to `call`, read whole up to [`MAX_ANSWER`].
    ///
    /// # Errors
    /// `Unavailable` of kind `Other` for an answer over the limit;
    /// `Unreachable` when the connection fails while it comes.
    async fn whole(&self, call: &Call<'_>, response: Response) -> StoreResult<Vec<u8>> {
        let mut response = response;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.unreachable(call, &e))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(self.too_large(call));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The error of an answer to `call` longer than [`MAX_ANSWER`].
    fn too_large(&self, call: &Call<'_>) -> StoreError {
        StoreError::unavailable(
            UnavailableKind::Other,
            format!(
                "the service at {} answered {} {} with more than {} MiB, the most this client \
                 reads of an answer; is the URL that of `lf-handoff serve`?",
                self.base,
                call.method,
                call.path,
                MAX_ANSWER / (1024 * 1024)
            ),
        )
    }

    /// The answer `bytes` to `call` as `T`.
    fn decode<T: DeserializeOwned>(&self, call: &Call<'_>, bytes: &[u8]) -> StoreResult<T> {
        serde_json::from_slice(bytes).map_err(|e| {
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

    /// Sends a `POST` of `path` whose body, of `media_type`, is `head`
    /// then `input`, read as it goes out (never held whole), and reads
    /// the answer as `T`. Sent once: a body read from `input` cannot be
    /// sent again. Through reqwest, as a chunked body.
    ///
    /// # Errors
    /// `Unavailable` of the input's error kind when `input` fails (the
    /// service then gets a body cut short, which changes nothing); as
    /// [`json`](Self::json) otherwise.
    pub(super) async fn post_reader<T: DeserializeOwned>(
        &self,
        path: &str,
        media_type: &'static str,
        head: Vec<u8>,
        input: &mut (dyn BufRead + Send),
    ) -> StoreResult<T> {
        let call = Call::post(path).timeout(None);
        let (sender, receiver) = mpsc::channel::<Result<Bytes, io::Error>>(READER_CHUNKS);
        // The channel is empty: the head goes first, whole.
        let _ = sender.try_send(Ok(Bytes::from(head)));
        let chunks = futures_util::stream::unfold(receiver, |mut receiver| async move {
            let chunk = receiver.recv().await?;
            Some((chunk, receiver))
        });
        let sending = self
            .request(&call)
            .header(reqwest::header::CONTENT_TYPE, media_type)
            .body(reqwest::Body::wrap_stream(chunks))
            .send();
        // Until the answer comes: a service that answers early (a refusal)
        // is not kept waiting for the rest of the input.
        let feeding = feed(input, sender);
        tokio::pin!(sending, feeding);
        let mut fed = None;
        let sent = loop {
            tokio::select! {
                sent = &mut sending => break sent,
                result = &mut feeding, if fed.is_none() => fed = Some(result),
            }
        };
        // An input that failed before the answer came is the cause of
        // whatever the answer says; an answer that came first stands.
        let response = match (sent, fed) {
            (Ok(response), _) if response.status().is_success() => response,
            (_, Some(Err(e))) => {
                return Err(StoreError::unavailable(
                    UnavailableKind::of_io_error(&e),
                    format!("cannot read the input of {} {path}: {e}", call.method),
                ))
            }
            (Ok(response), _) => return Err(error_object(response).await.into_store_error()),
            // Cut short, the body can have changed nothing.
            (Err(error), None | Some(Ok(false))) if !error.is_connect() => {
                let lost = self.unreachable(&call, &error);
                return Err(self.hidden_refusal(&call, media_type, lost).await);
            }
            (Err(error), _) => return Err(self.unreachable(&call, &error)),
        };
        let bytes = self.whole(&call, response).await?;
        self.decode(&call, &bytes)
    }

    /// What a connection lost while `call`'s body was being sent may
    /// hide: a service that refuses a request before reading its body (a
    /// token's scope, the store's state) answers and closes, and the
    /// sender may see only the closed connection. The same call with an
    /// empty body (which changes nothing: no body is a change) says
    /// whether it is refused, and that refusal is the answer; otherwise
    /// `lost` stands, naming the other refusal that closes a connection
    /// early, a body over the service's limit.
    async fn hidden_refusal(
        &self,
        call: &Call<'_>,
        media_type: &'static str,
        lost: StoreError,
    ) -> StoreError {
        let probe = Call::post(call.path).body(Vec::new(), media_type);
        match self.json::<serde_json::Value>(&probe, Duration::ZERO).await {
            Err(refused @ StoreError::Conflict { .. }) => refused,
            Err(refused @ StoreError::Denied { .. }) => refused,
            _ => match lost {
                StoreError::Unavailable { kind, message, .. } => StoreError::unavailable(
                    kind,
                    format!(
                        "{message} (a service also closes the connection of a body over its \
                         size limit; `serve --max-import-body` sets an import's)"
                    ),
                ),
                other => other,
            },
        }
    }

    /// One attempt of `call` on a plain connection: the successful
    /// answer's body.
    async fn plain_attempt(&self, route: &PlainRoute, call: &Call<'_>) -> Result<Bytes, Attempt> {
        let request = self.plain_request(route, call).map_err(|error| Attempt {
            error,
            again: false,
        })?;
        let exchange = route
            .connections
            .exchange(request, MAX_ANSWER, MAX_ERROR_BODY);
        let answer = match call.timeout {
            Some(limit) => match tokio::time::timeout(limit, exchange).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(Attempt {
                        error: self.unreachable_because(call, "timed out", "no answer in time"),
                        again: true,
                    })
                }
            },
            None => exchange.await,
        };
        match answer {
            Ok(answer) if answer.status.is_success() && !answer.whole => Err(Attempt {
                error: self.too_large(call),
                again: false,
            }),
            Ok(answer) if answer.status.is_success() => Ok(answer.body),
            Ok(answer) => Err(refused(error_from_body(answer.status, &answer.body))),
            Err(failure) => {
                let what = match failure {
                    Failure::Connect(_) => "could not connect",
                    Failure::Lost(_) => "lost the connection",
                };
                Err(Attempt {
                    error: self.unreachable_because(call, what, &error_chain(&failure)),
                    again: true,
                })
            }
        }
    }

    /// `call` as a request of a plain connection.
    fn plain_request(
        &self,
        route: &PlainRoute,
        call: &Call<'_>,
    ) -> StoreResult<hyper::Request<Full<Bytes>>> {
        let mut target = format!("{}{}", route.prefix, call.path);
        if !call.query.is_empty() {
            target.push('?');
            target.push_str(&call.query);
        }
        let mut authorization =
            hyper::header::HeaderValue::try_from(format!("Bearer {}", self.token.secret()))
                .map_err(|_| {
                    StoreError::InvalidInput("the token cannot travel in a header".into())
                })?;
        authorization.set_sensitive(true);
        let mut request = hyper::Request::builder()
            .method(call.method.clone())
            .uri(target)
            .header(hyper::header::HOST, route.host.as_str())
            .header(hyper::header::USER_AGENT, USER_AGENT)
            .header(hyper::header::AUTHORIZATION, authorization);
        if let Some(position) = call.last_event_id {
            request = request.header("Last-Event-ID", position);
        }
        let body = match &call.body {
            Some((bytes, media_type)) => {
                request = request.header(hyper::header::CONTENT_TYPE, *media_type);
                Full::new(bytes.clone())
            }
            None => Full::new(Bytes::new()),
        };
        request.body(body).map_err(|e| {
            StoreError::InvalidInput(format!("{} {} cannot be sent: {e}", call.method, call.path))
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
    /// A certificate this machine does not trust is `Refused` instead,
    /// naming the option that sets the service's authority.
    pub(super) fn unreachable(&self, call: &Call<'_>, error: &reqwest::Error) -> StoreError {
        // reqwest's message names the URL, which holds no secret: the
        // token travels in a header.
        if certificate_refused(error) {
            return StoreError::unavailable(
                UnavailableKind::Refused,
                format!(
                    "the service at {} presented a certificate this machine does not trust \
                     ({}); if a private authority signed it, add ?ca=/abs/path/authority.pem \
                     (that authority's certificate, PEM) to the store URL",
                    self.base,
                    error_chain(error)
                ),
            );
        }
        let what = if error.is_timeout() {
            "timed out"
        } else if error.is_connect() {
            "could not connect"
        } else {
            "lost the connection"
        };
        self.unreachable_because(call, what, &error_chain(error))
    }

    /// `Unreachable`: the service at the base URL `what` (could not
    /// connect, timed out, lost the connection) during `call`, for
    /// `detail`.
    fn unreachable_because(&self, call: &Call<'_>, what: &str, detail: &str) -> StoreError {
        StoreError::unavailable(
            UnavailableKind::Unreachable,
            format!(
                "the service at {} {what} ({} {}): {detail}",
                self.base, call.method, call.path
            ),
        )
    }
}

/// Passes `input` to `sender` piece by piece (each what one read gave, at
/// most [`READER_CHUNK`] bytes), until its end (`true`) or until nobody
/// takes them, the request having ended (`false`), yielding after each
/// piece so the connection sends it at once even on a current-thread
/// runtime. A read error is passed on, so the body ends cut short rather
/// than looking whole, and returned.
async fn feed(
    input: &mut (dyn BufRead + Send),
    sender: mpsc::Sender<Result<Bytes, io::Error>>,
) -> io::Result<bool> {
    loop {
        let read = match input.fill_buf() {
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                let cut = io::Error::new(error.kind(), "the input failed");
                let _ = sender.send(Err(cut)).await;
                return Err(error);
            }
        };
        if read.is_empty() {
            return Ok(true);
        }
        let piece = Bytes::copy_from_slice(&read[..read.len().min(READER_CHUNK)]);
        input.consume(piece.len());
        if sender.send(Ok(piece)).await.is_err() {
            return Ok(false);
        }
        tokio::task::yield_now().await;
    }
}

/// Runs `attempt` until it succeeds, fails for good, or `window` has
/// passed, pausing between attempts (50 ms, doubling up to a second).
async fn retrying<S, F, Fut>(window: Duration, mut attempt: F) -> StoreResult<S>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<S, Attempt>>,
{
    let started = Instant::now();
    let mut pause = Duration::from_millis(50);
    loop {
        let error = match attempt().await {
            Ok(success) => return Ok(success),
            Err(Attempt {
                error,
                again: false,
            }) => return Err(error),
            Err(Attempt { error, .. }) => error,
        };
        if started.elapsed() + pause > window {
            return Err(error);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// The attempt a refusal (an error object) ends: sent again only when
/// the service says the error is transient.
fn refused(object: ErrorResponse) -> Attempt {
    let again = object.is_transient();
    Attempt {
        error: object.into_store_error(),
        again,
    }
}

/// The plain route to the service at `base`, when it is an `http://` URL
/// and no proxy variable tells reqwest to go through a proxy.
fn plain_route(base: &str) -> Option<PlainRoute> {
    if PROXY_VARIABLES
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
    {
        return None;
    }
    let url = reqwest::Url::parse(base).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?.to_string();
    let port = url.port_or_known_default()?;
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    Some(PlainRoute {
        connections: Plain::new(host, port, CONNECT_TIMEOUT),
        host: authority,
        prefix: url.path().trim_end_matches('/').to_string(),
    })
}

/// Whether `error` (or a cause of it) is the TLS library refusing the
/// service's certificate. The TLS error travels inside an I/O error, whose
/// own `source` skips it, so each I/O error is looked into.
fn certificate_refused(error: &(dyn std::error::Error + 'static)) -> bool {
    let refused = |cause: &(dyn std::error::Error + 'static)| {
        matches!(
            cause.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(_))
        )
    };
    let mut cause = Some(error);
    while let Some(error) = cause {
        let inner = error
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| refused(inner));
        if refused(error) || inner {
            return true;
        }
        cause = error.source();
    }
    error_chain(error).contains("invalid peer certificate")
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
    error_from_body(status, &body)
}

/// The error object in `body`, answered with `status`, or one that says
/// what came instead of it.
fn error_from_body(status: StatusCode, body: &[u8]) -> ErrorResponse {
    serde_json::from_slice::<ErrorResponse>(body).unwrap_or_else(|_| not_an_error_object(status))
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
