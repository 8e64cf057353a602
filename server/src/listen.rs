//! Binding and the connection loop: what `lf-handoff serve` runs
//! (`crate::serve`, which adds the start line and the signals), in two
//! steps a test can drive ([`bind`], then [`Server::run`] until a future
//! of its own ends).
//!
//! - **Refusals** (C20): a non-loopback address is refused without a
//!   tokens file, and without TLS unless the service sits behind a proxy
//!   that terminates it (`behind_proxy`).
//! - **Connections**: HTTP/1.1 (hyper), TLS with rustls when configured;
//!   at most `max_connections` at once, and at most a share of them per
//!   peer address (`Limits::connections_per_peer`; beyond either: a 503
//!   with the error object, then the connection is closed), so one
//!   address that holds all it may leaves the rest to the others. The
//!   peer is the TCP peer: behind a proxy, the proxy (forwarded-address
//!   headers are not trusted for this). A request's head within
//!   `header_read_timeout` of the connection's start or of the previous
//!   answer, which also closes an idle keep-alive connection; its body
//!   within a total time (`extract`); TCP keepalive finds peers that
//!   vanished (half-open); a TLS handshake has the same time as the head.
//!   Under TLS every answer carries `Strict-Transport-Security`
//!   ([`HSTS`]), so a browser that saw the service once never reaches it
//!   in clear text again.
//! - **SIGTERM** (and SIGINT): stop accepting, end event streams and long
//!   polls (they answer with what they have), let requests in flight
//!   finish within `drain`, then stop. **SIGHUP**: read the tokens file
//!   again; a file that cannot be read keeps the tokens in use, and the
//!   log says why.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use lf_handoff_adapters::Gated;
use lf_handoff_adapters::{Store, StoreError, StoreResult, UnavailableKind};
use lf_handoff_api::{ErrorResponse, Scope};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use crate::handlers::app;
use crate::links::LinkSecret;
use crate::metrics::Gauge;
use crate::notify::{self, NotifyConfig};
use crate::peers::Peers;
use crate::state::{AppState, Limits, PersonSide};
use crate::tokens::{self, TokenTable};

/// The name the links in notifications are made for when the endpoint's
/// URL names none (`#for=NAME`): what is done through them is recorded as
/// `link:notification`.
pub const NOTIFICATION_LINK_HOLDER: &str = notify::DEFAULT_LINK_HOLDER;

/// The `Strict-Transport-Security` value of every answer under TLS: a
/// year, the usual span. It names no subdomains, since the service does
/// not know what else its domain serves.
pub const HSTS: &str = "max-age=31536000";

/// Where `serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7381";

/// How many refusals (at the connection limit) are written at once;
/// beyond that a connection is closed without one.
const REFUSALS: usize = 64;

/// The certificate and key files of TLS (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first.
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The tokens file; without one, a token of every scope is made for
    /// this run only (loopback addresses only).
    pub tokens: Option<PathBuf>,
    /// TLS; required on a non-loopback address unless `behind_proxy`.
    pub tls: Option<TlsFiles>,
    /// A proxy in front terminates TLS, so plain HTTP may listen on a
    /// non-loopback address.
    pub behind_proxy: bool,
    /// The limits.
    pub limits: Limits,
    /// The file holding the secret that signs links (created, mode 0600,
    /// when missing). Without one: `link-secret` beside the tokens file,
    /// or, without a tokens file either, a secret of this run only.
    pub link_secret: Option<PathBuf>,
    /// The URL people reach the service at, which links start with
    /// (e.g. the proxy's `https://handoffs.example`); without one, the
    /// address it listens on.
    pub public_url: Option<String>,
    /// Where to post notifications (C23), if anywhere.
    pub notify: Option<NotifyConfig>,
    /// The store as the start line names it: its URL without secrets
    /// (`StorageConfig`'s `Display`). Without one, only its backend.
    pub store_label: Option<String>,
}

impl ServeConfig {
    /// Serving on `listen` with the defaults: no tokens file, no TLS.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            tokens: None,
            tls: None,
            behind_proxy: false,
            limits: Limits::default(),
            link_secret: None,
            public_url: None,
            notify: None,
            store_label: None,
        }
    }

    /// The link secret's file: `link_secret`, else `link-secret` beside
    /// the tokens file, else none (a secret of this run only).
    pub fn link_secret_file(&self) -> Option<PathBuf> {
        self.link_secret.clone().or_else(|| {
            self.tokens
                .as_ref()
                .map(|tokens| tokens.with_file_name("link-secret"))
        })
    }

    /// Refuses what C20 forbids: a non-loopback address without a tokens
    /// file, or without TLS unless behind a proxy; and a public URL that
    /// is not `http://` or `https://`.
    ///
    /// # Errors
    /// `InvalidInput` saying what to add.
    pub fn check(&self) -> StoreResult<()> {
        if let Some(url) = &self.public_url {
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.contains(['?', '#'])
            {
                return Err(StoreError::InvalidInput(format!(
                    "--public-url {url:?} is not an http:// or https:// URL without a query"
                )));
            }
        }
        if let Some(notify) = &self.notify {
            notify.check()?;
        }
        if self.listen.ip().is_loopback() {
            return Ok(());
        }
        if self.tokens.is_none() {
            return Err(StoreError::InvalidInput(format!(
                "refusing to listen on {} without a tokens file: anyone who reaches it could act \
                 on the registry; make tokens with `lf-handoff token create NAME --scope ... \
                 --tokens FILE` and pass --tokens FILE",
                self.listen
            )));
        }
        if self.tls.is_none() && !self.behind_proxy {
            return Err(StoreError::InvalidInput(format!(
                "refusing to listen on {} without TLS: tokens would cross the network in clear \
                 text; pass --tls-cert FILE --tls-key FILE, or --behind-proxy when a proxy in \
                 front terminates TLS",
                self.listen
            )));
        }
        Ok(())
    }
}

/// A token made for one run (no tokens file): shown at start, gone when
/// the process ends. Its `Debug` hides the token.
#[derive(Clone)]
pub struct RunToken {
    /// Its scope.
    pub scope: Scope,
    /// Its name (the actor of what it changes).
    pub name: String,
    /// The token.
    pub token: String,
}

impl std::fmt::Debug for RunToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunToken")
            .field("scope", &self.scope)
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// A bound service, ready to [`run`](Self::run).
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    state: AppState,
    tls: Option<TlsAcceptor>,
    tokens_file: Option<PathBuf>,
    link_file: Option<PathBuf>,
    run_tokens: Vec<RunToken>,
    notify: Option<NotifyConfig>,
}

/// How many connections may wait to be accepted.
const BACKLOG: i32 = 1024;

/// A socket listening on `address` (address reuse, a backlog of 1024), not
/// yet accepting: what [`bind_to`] serves on. A caller that binds first
/// learns that the address cannot be used (in use, not this machine's,
/// not permitted) from the system's own error, before anything else is
/// opened.
///
/// # Errors
/// The system's error.
pub fn listen(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// Checks `config`, reads its tokens (or makes this run's), loads TLS and
/// binds the address: everything that can fail before serving.
///
/// # Errors
/// `InvalidInput` for a refused configuration; `NotFound` or
/// `Unavailable` for a tokens file, certificate or key that cannot be
/// read; `Unavailable` when the address cannot be bound.
pub async fn bind(config: ServeConfig, store: Store) -> StoreResult<Server> {
    bind_with(config, store, None).await
}

/// [`bind`] on `listener`, a socket already listening on `config.listen`
/// ([`listen`]).
///
/// # Errors
/// As [`bind`], but for binding.
pub async fn bind_to(
    config: ServeConfig,
    store: Store,
    listener: std::net::TcpListener,
) -> StoreResult<Server> {
    bind_with(config, store, Some(listener)).await
}

pub(crate) async fn bind_with(
    config: ServeConfig,
    store: Store,
    listener: Option<std::net::TcpListener>,
) -> StoreResult<Server> {
    config.check()?;
    let (table, run_tokens) = match &config.tokens {
        Some(path) => (TokenTable::new(tokens::read_file(path)?)?, Vec::new()),
        None => run_tokens(store.now())?,
    };
    let tls = config.tls.as_ref().map(tls_acceptor).transpose()?;
    let link_file = config.link_secret_file();
    let links = match &link_file {
        Some(path) => LinkSecret::load_or_create(path)?,
        None => LinkSecret::random()?,
    };
    let person = PersonSide {
        links,
        secure_cookies: tls.is_some() || config.behind_proxy,
    };
    let listener = match listener {
        Some(listener) => Ok(listener),
        None => listen(config.listen),
    }
    .and_then(TcpListener::from_std)
    .map_err(|error| {
        StoreError::unavailable(
            UnavailableKind::of_io_error(&error),
            format!("cannot listen on {}: {error}", config.listen),
        )
    })?;
    let local_addr = listener.local_addr().map_err(|error| {
        StoreError::unavailable(
            UnavailableKind::Io,
            format!("cannot read the bound address: {error}"),
        )
    })?;
    let state = AppState::new(store, table, config.limits, person);
    let scheme = if tls.is_some() { "https" } else { "http" };
    state.set_public_url(
        config
            .public_url
            .unwrap_or_else(|| format!("{scheme}://{local_addr}")),
    );
    Ok(Server {
        listener,
        local_addr,
        state,
        tls,
        tokens_file: config.tokens,
        link_file,
        run_tokens,
        notify: config.notify,
    })
}

/// A token of every scope, for this run only.
fn run_tokens(now: time::OffsetDateTime) -> StoreResult<(TokenTable, Vec<RunToken>)> {
    let mut entries = Vec::new();
    let mut shown = Vec::new();
    for scope in Scope::ALL {
        let name = format!("serve-{scope}");
        let made = tokens::make_token(&name, &[scope], now)?;
        shown.push(RunToken {
            scope,
            name,
            token: made.token,
        });
        entries.push(made.entry);
    }
    Ok((TokenTable::new(entries)?, shown))
}

fn tls_acceptor(files: &TlsFiles) -> StoreResult<TlsAcceptor> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let unreadable = |path: &Path, what: &str, error: &dyn std::fmt::Display| {
        StoreError::InvalidInput(format!("--tls-{what} {}: {error}", path.display()))
    };
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| unreadable(&files.cert, "cert", &e))?;
    if certs.is_empty() {
        return Err(unreadable(&files.cert, "cert", &"no certificate in it"));
    }
    let key =
        PrivateKeyDer::from_pem_file(&files.key).map_err(|e| unreadable(&files.key, "key", &e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| StoreError::InvalidInput(format!("TLS: {e}")))?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| StoreError::InvalidInput(format!("--tls-cert and --tls-key do not fit: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("tls", &self.tls.is_some())
            .field("tokens_file", &self.tokens_file)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The address it listens on (the port chosen, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The base URL: `http://ADDR` or `https://ADDR`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.local_addr)
    }

    /// The shared state (the store, the tokens, the metrics).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The tokens made for this run (none with a tokens file).
    pub fn run_tokens(&self) -> &[RunToken] {
        &self.run_tokens
    }

    /// The sign-in URL (the base URL with the `person` token of this run),
    /// when the run made tokens.
    pub fn sign_in_url(&self) -> Option<String> {
        self.run_tokens
            .iter()
            .find(|token| token.scope == Scope::Person)
            .map(|token| format!("{}/?token={}", self.url(), token.token))
    }

    /// What re-reads the tokens file, for a SIGHUP handler.
    pub fn reloader(&self) -> Reloader {
        Reloader {
            path: self.tokens_file.clone(),
            link_file: self.link_file.clone(),
            state: self.state.clone(),
        }
    }

    /// Serves until `shutdown` ends, then drains: stops accepting, ends
    /// event streams and long polls, and gives requests in flight
    /// `limits.drain` to finish.
    ///
    /// # Errors
    /// None today; the result leaves room for failures of the loop.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> StoreResult<()> {
        let router = app(self.state.clone());
        self.run_router(router, shutdown).await
    }

    /// [`run`](Self::run) with `router` in place of the service's routes:
    /// the same connection loop (limits, timeouts, TLS, drain) around
    /// other handlers. The benchmark serves a bare handler with it, the
    /// baseline of the service's request rate.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub async fn run_router(
        self,
        router: axum::Router,
        shutdown: impl Future<Output = ()> + Send,
    ) -> StoreResult<()> {
        let limits = *self.state.limits();
        let router = if self.tls.is_some() {
            router.layer(axum::middleware::map_response(strict_transport))
        } else {
            router
        };
        let graceful = GracefulShutdown::new();
        let connections = Arc::new(Semaphore::new(limits.max_connections));
        let peers = Peers::new(limits.connections_per_peer());
        let refusals = Arc::new(Semaphore::new(REFUSALS));
        let deliveries = self.start_deliveries();
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors, most likely: pause
                        // rather than spin.
                        tracing::warn!("accepting a connection failed: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            configure(&stream, &limits);
            // The peer's share first: an address at its share is refused
            // without taking a place of the others.
            let held = peers.take(peer.ip());
            let over_share = held.is_none();
            let permit = held
                .as_ref()
                .and_then(|_| connections.clone().try_acquire_owned().ok());
            let (Some(held), Some(permit)) = (held, permit) else {
                self.state.metrics().refused_connection();
                if let Ok(place) = refusals.clone().try_acquire_owned() {
                    let tls = self.tls.clone();
                    tokio::spawn(async move {
                        refuse(stream, tls, &limits, over_share).await;
                        drop(place);
                    });
                }
                continue;
            };
            let service = TowerToHyperService::new(router.clone());
            let watcher = graceful.watcher();
            let (tls, state) = (self.tls.clone(), self.state.clone());
            tokio::spawn(async move {
                state.metrics().gauge(Gauge::Connections, 1);
                accepted(stream, tls, service, watcher, &limits).await;
                state.metrics().gauge(Gauge::Connections, -1);
                drop(permit);
                drop(held);
            });
        }
        drop(self.listener);
        tracing::info!("shutting down: no new connections; ending event streams and long polls");
        self.state.begin_shutdown();
        if tokio::time::timeout(limits.drain, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                "requests still in flight after {} s were cut",
                limits.drain.as_secs()
            );
        }
        // Each delivery gives its lease up, with the position it reached,
        // so the next server goes on at once and repeats nothing.
        let stopped = futures_util::future::join_all(deliveries);
        if tokio::time::timeout(limits.drain, stopped).await.is_err() {
            tracing::warn!(
                "notifications still stopping after {} s were cut",
                limits.drain.as_secs()
            );
        }
        tracing::info!("stopped");
        Ok(())
    }

    /// Starts a delivery task per notification endpoint (none without
    /// `--notify`).
    fn start_deliveries(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let Some(mut notify) = self.notify.clone() else {
            return Vec::new();
        };
        // Every message carries the handoff's signed link (C21), for
        // whoever follows it from the chat, acting as the name the
        // endpoint is configured with (`link:NAME`).
        if notify.links.is_none() {
            let state = self.state.clone();
            notify.links = Some(Arc::new(move |holder, handoff, choice| {
                state.notification_link(holder, handoff, choice)
            }));
        }
        notify::start(notify, &self.state)
    }
}

/// Adds `Strict-Transport-Security` to an answer under TLS.
async fn strict_transport(mut response: axum::response::Response) -> axum::response::Response {
    response.headers_mut().insert(
        axum::http::header::STRICT_TRANSPORT_SECURITY,
        axum::http::HeaderValue::from_static(HSTS),
    );
    response
}

/// Serves one accepted connection: its TLS handshake first (bounded by the
/// header read timeout) when the server has TLS.
async fn accepted(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    service: TowerToHyperService<axum::Router>,
    watcher: Watcher,
    limits: &Limits,
) {
    let Some(acceptor) = tls else {
        serve_connection(TokioIo::new(stream), service, watcher, limits).await;
        return;
    };
    match tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => serve_connection(TokioIo::new(stream), service, watcher, limits).await,
        Ok(Err(error)) => tracing::debug!("a TLS handshake failed: {error}"),
        Err(_) => tracing::debug!("a TLS handshake timed out"),
    }
}

/// Re-reads the tokens file (SIGHUP).
#[derive(Debug, Clone)]
pub struct Reloader {
    path: Option<PathBuf>,
    link_file: Option<PathBuf>,
    state: AppState,
}

impl Reloader {
    /// Reads the tokens file again and accepts its tokens from now on,
    /// and reads the link secret's file again (a rotated secret makes
    /// every older link and form stop working). Returns how many tokens
    /// it holds; with no tokens file, the run's tokens stay.
    ///
    /// # Errors
    /// As reading either file; what cannot be read stays as it was.
    pub fn reload(&self) -> StoreResult<usize> {
        if let Some(path) = &self.link_file {
            self.state
                .replace_link_secret(LinkSecret::load_or_create(path)?);
        }
        let Some(path) = &self.path else {
            return Ok(self.state.tokens().len());
        };
        let table = TokenTable::new(tokens::read_file(path)?)?;
        let count = table.len();
        self.state.replace_tokens(table);
        Ok(count)
    }
}

/// TCP settings of every accepted connection: no Nagle delay (answers are
/// small), keepalive probes after `tcp_keepalive` idle.
fn configure(stream: &TcpStream, limits: &Limits) {
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(limits.tcp_keepalive)
        .with_interval(Duration::from_secs(10))
        .with_retries(3);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive);
}

async fn serve_connection<I>(
    io: TokioIo<I>,
    service: TowerToHyperService<axum::Router>,
    watcher: Watcher,
    limits: &Limits,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let connection = builder.serve_connection(io, service);
    // The handler reads the request's body from the connection it runs
    // in: gated, their wake-ups of each other stay in this task's poll
    // instead of waking another worker thread each time.
    if let Err(error) = Gated::new(watcher.watch(connection)).await {
        tracing::debug!("a connection ended: {error}");
    }
}

/// Answers a connection over the limit (the service's, or its peer's
/// share of it when `over_share`) with a 503 (the error object,
/// `Retry-After`) and closes it.
async fn refuse(stream: TcpStream, tls: Option<TlsAcceptor>, limits: &Limits, over_share: bool) {
    let error = ErrorResponse::busy(if over_share {
        format!(
            "this address holds its share of {} connections of the service; close one, or try \
             again shortly",
            limits.connections_per_peer()
        )
    } else {
        format!(
            "the service holds its limit of {} connections; try again shortly",
            limits.max_connections
        )
    });
    let body = serde_json::to_string(&error).unwrap_or_default();
    let hsts = if tls.is_some() {
        format!("strict-transport-security: {HSTS}\r\n")
    } else {
        String::new()
    };
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\n\
         {hsts}connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        crate::error::RETRY_AFTER_SECS,
        body.len()
    );
    let wait = Duration::from_millis(500).min(limits.header_read_timeout);
    match tls {
        None => answer_and_close(stream, response.as_bytes(), wait).await,
        Some(acceptor) => {
            if let Ok(Ok(stream)) = tokio::time::timeout(wait, acceptor.accept(stream)).await {
                answer_and_close(stream, response.as_bytes(), wait).await;
            }
        }
    }
}

async fn answer_and_close<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    response: &[u8],
    wait: Duration,
) {
    // Read what the client sent first, so closing does not reset the
    // connection under the answer.
    let mut request = [0_u8; 4096];
    let _ = tokio::time::timeout(wait, stream.read(&mut request)).await;
    let _ = tokio::time::timeout(wait, async {
        stream.write_all(response).await?;
        stream.shutdown().await
    })
    .await;
}
