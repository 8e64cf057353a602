//! What every request shares: the store, the token table, the limits,
//! the metrics and the shutdown signal. Nothing else: the service holds no
//! state of its own beyond the store (C19), so several servers on one
//! PostgreSQL store are one service.

use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use lf_handoff_adapters::{Store, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, InteractiveHandoff};
use time::OffsetDateTime;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;
use crate::links::{link_expiry, LinkSecret, SignedLink};
use crate::metrics::{Gauge, Metrics};
use crate::tokens::{Caller, TokenTable};
use lf_handoff_api::{HandoffJson, Scope};

/// Who holds a request open: the stored hash of the token it was made
/// with (its bearer token's, or the token its sign-in names), its caller
/// as it was then, and, for a sign-in, the key of its sign-out. The
/// authorization layer hands it to the handlers that hold a request open,
/// which end when [`AppState::gone`] says so.
#[derive(Debug, Clone)]
pub struct Holder {
    /// The token's stored hash.
    pub hash: Arc<[u8]>,
    /// Its name and scopes when the request came.
    pub caller: Caller,
    /// The sign-in's revocation key, when a cookie made the request.
    pub sign_in: Option<String>,
}

/// How often a request held open by a sign-in looks in the store for its
/// sign-out through another server (one through this server wakes it at
/// once).
const SIGN_OUT_RECHECK: Duration = Duration::from_secs(1);

/// The limits that hold under abuse (C20), each with a clear error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest JSON request body, in bytes (413 beyond it).
    pub max_body: usize,
    /// The largest import body, in bytes (413 beyond it).
    pub max_import_body: u64,
    /// How long a client has to send a request's whole head, counted from
    /// the connection's start or from the end of the previous answer on a
    /// keep-alive connection: an idle connection is closed after it.
    pub header_read_timeout: Duration,
    /// How long a request's whole body may take to arrive, however it is
    /// cut into pieces (400 beyond it): a client that trickles a byte at a
    /// time holds its connection no longer than this. An import, which
    /// may be large, is bounded per piece by it instead.
    pub body_timeout: Duration,
    /// The largest body of what any client reaches without a token (the
    /// sign-in form, a link's form), in bytes (413 beyond it).
    pub max_public_body: usize,
    /// How long such a body may take to arrive, in whole (400 beyond it).
    pub public_body_timeout: Duration,
    /// How many connections are served at once (beyond: 503 and close).
    pub max_connections: usize,
    /// How many of them one peer address may hold (beyond: 503 and close
    /// for that address only), event streams and long polls included;
    /// `None` is an eighth of `max_connections`, at least 4. IPv6 peers
    /// are counted by their /64 network, which one host usually holds.
    pub max_connections_per_peer: Option<usize>,
    /// How many event streams and long polls are open at once (beyond:
    /// 503 with `Retry-After`).
    pub max_streams: usize,
    /// How long requests in flight have to finish after SIGTERM.
    pub drain: Duration,
    /// How long an idle TCP connection waits before keepalive probes, so a
    /// peer that vanished (half-open) is found.
    pub tcp_keepalive: Duration,
    /// How long a tool call of `/mcp` (`ask_person`, `await_answer`)
    /// waits for a person's answer before it answers that the question
    /// still waits (C28).
    pub mcp_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body: 1024 * 1024,
            max_import_body: 1024 * 1024 * 1024,
            header_read_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            max_public_body: 16 * 1024,
            public_body_timeout: Duration::from_secs(10),
            max_connections: 512,
            max_connections_per_peer: None,
            max_streams: 1024,
            drain: Duration::from_secs(10),
            tcp_keepalive: Duration::from_secs(60),
            mcp_wait: lf_handoff_mcp::DEFAULT_WAIT,
        }
    }
}

impl Limits {
    /// How many connections one peer address may hold:
    /// `max_connections_per_peer`, else an eighth of `max_connections`, at
    /// least 4 (and never more than `max_connections`).
    pub fn connections_per_peer(&self) -> usize {
        self.max_connections_per_peer
            .unwrap_or((self.max_connections / 8).max(4))
            .min(self.max_connections)
            .max(1)
    }
}

/// The state every handler gets. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    store: Store,
    tokens: RwLock<Arc<TokenTable>>,
    /// Counts the token tables accepted, so what a token holds open can
    /// end when its token is gone.
    tokens_read: watch::Sender<u64>,
    /// Counts the sign-outs through this server, so what a sign-in holds
    /// open can end at once.
    signed_out: watch::Sender<u64>,
    limits: Limits,
    metrics: Metrics,
    streams: Arc<Semaphore>,
    shutdown: watch::Sender<bool>,
    links: RwLock<Arc<LinkSecret>>,
    public_url: OnceLock<String>,
    secure_cookies: bool,
}

/// What the person's pages and links need (C21, C22).
#[derive(Debug)]
pub struct PersonSide {
    /// The secret that signs links and anti-forgery tokens.
    pub links: LinkSecret,
    /// Whether the sign-in cookie is `Secure` (the browser reaches the
    /// service over TLS, its own or a proxy's).
    pub secure_cookies: bool,
}

impl AppState {
    /// The state of a service over `store`, accepting the tokens of
    /// `tokens`, within `limits`, signing links with `person.links`.
    pub fn new(store: Store, tokens: TokenTable, limits: Limits, person: PersonSide) -> Self {
        let (shutdown, _) = watch::channel(false);
        let (tokens_read, _) = watch::channel(0);
        let (signed_out, _) = watch::channel(0);
        Self {
            inner: Arc::new(Shared {
                store,
                tokens: RwLock::new(Arc::new(tokens)),
                tokens_read,
                signed_out,
                streams: Arc::new(Semaphore::new(limits.max_streams)),
                limits,
                metrics: Metrics::default(),
                shutdown,
                links: RwLock::new(Arc::new(person.links)),
                public_url: OnceLock::new(),
                secure_cookies: person.secure_cookies,
            }),
        }
    }

    /// The store, naming `actor` in the history of what it changes.
    pub fn store_as(&self, actor: &Actor) -> Store {
        self.inner.store.clone().with_actor(actor.clone())
    }

    /// The store, for reads.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The tokens accepted now.
    pub fn tokens(&self) -> Arc<TokenTable> {
        self.inner
            .tokens
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Accepts the tokens of `table` from now on (SIGHUP); the event
    /// streams and long polls of a token it no longer holds end
    /// ([`token_gone`](Self::token_gone)).
    pub fn replace_tokens(&self, table: TokenTable) {
        *self
            .inner
            .tokens
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
        self.inner.tokens_read.send_modify(|read| *read += 1);
    }

    /// Tells what sign-ins hold open that one was signed out here.
    pub fn signed_out(&self) {
        self.inner.signed_out.send_modify(|count| *count += 1);
    }

    /// Resolves once what `holder` holds open may not go on: the tokens
    /// accepted no longer hold its token with the name and scopes it had
    /// (revoked, or changed, and the tokens file read again), or its
    /// sign-in was signed out, through this server (at once) or another
    /// of the store (within [`SIGN_OUT_RECHECK`]).
    pub async fn gone(&self, holder: Holder) {
        let mut read = self.inner.tokens_read.subscribe();
        let mut signed_out = self.inner.signed_out.subscribe();
        loop {
            let held = self
                .tokens()
                .find(|entry| entry.hash() == &*holder.hash && entry.caller == holder.caller)
                .is_some();
            if !held {
                return;
            }
            match &holder.sign_in {
                None => {
                    if read.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                Some(key) => {
                    // A store that cannot say now is asked again later:
                    // the request's own reads report the store's failure.
                    if let Ok(true) = self.store().is_revoked(key).await {
                        return;
                    }
                    tokio::select! {
                        _ = read.changed() => {}
                        _ = signed_out.changed() => {}
                        () = tokio::time::sleep(SIGN_OUT_RECHECK) => {}
                    }
                }
            }
        }
    }

    /// The secret that signs links and anti-forgery tokens now.
    pub fn link_secret(&self) -> Arc<LinkSecret> {
        self.inner
            .links
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Signs with `secret` from now on (SIGHUP after a rotation): every
    /// link and form made with the old one stops working.
    pub fn replace_link_secret(&self, secret: LinkSecret) {
        *self
            .inner
            .links
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(secret);
    }

    /// The URL links start with (`--public-url`, else the address the
    /// service listens on), once it is known.
    pub fn public_url(&self) -> Option<&str> {
        self.inner.public_url.get().map(String::as_str)
    }

    /// Sets the URL links start with (once; later calls change nothing).
    pub fn set_public_url(&self, url: String) {
        let _ = self
            .inner
            .public_url
            .set(url.trim_end_matches('/').to_string());
    }

    /// A signed link to `handoff` made by `caller`, acting as
    /// `link:NAME` with the token's own name, when the token may make
    /// links that act (scope `person`): valid until the handoff's
    /// deadline, else for a day, at most [`MAX_VALIDITY`](crate::links::MAX_VALIDITY). `None` for
    /// other tokens, and for a name too long to make that actor. The link
    /// is logged as made (C29).
    pub fn link_for(&self, caller: &Caller, handoff: &InteractiveHandoff) -> Option<String> {
        let link = self.answer_link(caller, handoff)?;
        log_link(caller.name.as_str(), &link, "answer");
        Some(link.url(self.public_url().unwrap_or_default()))
    }

    /// A signed link to `handoff` for `holder` (acting as `link:HOLDER`),
    /// valid until the handoff's deadline, else for a day, at most
    /// [`MAX_VALIDITY`](crate::links::MAX_VALIDITY): the link of a notification, made for the name
    /// its endpoint is configured with, picking `choice` when given (a
    /// one-tap link, C26). Logged as made by `notify`. `None` for a name
    /// too long to make that actor, or a choice that is no choice value.
    pub fn notification_link(
        &self,
        holder: &str,
        handoff: &InteractiveHandoff,
        choice: Option<&str>,
    ) -> Option<String> {
        let now = self.store().now();
        let expires = link_expiry(handoff.expires_at, now, None).ok()?;
        let maker = self.token_hash_of(holder);
        let link = self
            .link_secret()
            .sign_choice(&handoff.id, holder, expires, maker.as_deref(), choice)
            .ok()?;
        log_link(holder, &link, "notification");
        Some(link.url(self.public_url().unwrap_or_default()))
    }

    /// A signed link to handoff `id` for `maker`, until `expires`, logged
    /// (maker, handoff, expiry and `via`, what asked for it; never the
    /// signature).
    ///
    /// # Errors
    /// `InvalidInput` when `link:MAKER` is not a valid actor.
    pub fn make_link(
        &self,
        maker: &str,
        id: &InteractiveHandoffId,
        expires: OffsetDateTime,
        via: &'static str,
    ) -> StoreResult<SignedLink> {
        let link =
            self.link_secret()
                .sign_by(id, maker, expires, self.token_hash_of(maker).as_deref())?;
        log_link(maker, &link, via);
        Ok(link)
    }

    /// The stored hash of the person's token named `name`, which the links
    /// it makes are bound to (C29: they stop when it is revoked); `None`
    /// for a name no person's token has (a notification endpoint's).
    fn token_hash_of(&self, name: &str) -> Option<Vec<u8>> {
        self.tokens()
            .find(|entry| {
                entry.caller.name.as_str() == name && entry.caller.scopes.contains(&Scope::Person)
            })
            .map(|entry| entry.hash().to_vec())
    }

    /// Whether a link with `grant` may still act: one a token made works
    /// while a person's token of that name and mark is accepted.
    pub fn maker_holds(&self, grant: &crate::links::LinkGrant) -> bool {
        let Some(by) = &grant.by else {
            return true;
        };
        self.tokens()
            .find(|entry| {
                entry.caller.name.as_str() == grant.holder
                    && entry.caller.scopes.contains(&Scope::Person)
                    && crate::links::maker_mark(entry.hash()) == *by
            })
            .is_some()
    }

    /// `handoff` as the service answers `caller` with it: with a link
    /// when `caller` may have one.
    pub fn handoff_json(&self, caller: &Caller, handoff: InteractiveHandoff) -> HandoffJson {
        let link = self.link_for(caller, &handoff);
        HandoffJson::new(handoff, self.store().now()).with_link(link)
    }

    /// `handoffs` as the service answers `caller` with them, each with a
    /// link when `caller` may have one. The links of one answer are
    /// logged as one line (a page of a list holds up to 1000 handoffs).
    pub fn handoff_jsons(
        &self,
        caller: &Caller,
        handoffs: Vec<InteractiveHandoff>,
    ) -> Vec<HandoffJson> {
        let now = self.store().now();
        let mut made = 0_usize;
        let mut latest: Option<i64> = None;
        let answers = handoffs
            .into_iter()
            .map(|handoff| {
                let link = self.answer_link(caller, &handoff).map(|link| {
                    made += 1;
                    latest = latest.max(Some(link.expires));
                    link.url(self.public_url().unwrap_or_default())
                });
                HandoffJson::new(handoff, now).with_link(link)
            })
            .collect();
        if let Some(latest) = latest {
            tracing::info!(
                maker = caller.name.as_str(),
                links = made,
                latest_expiry = %unix_rfc3339(latest),
                via = "answer",
                "links made, one per handoff of the answer"
            );
        }
        answers
    }

    /// The link a handoff answer to `caller` carries, not logged; `None`
    /// when the token has no scope `person`.
    fn answer_link(&self, caller: &Caller, handoff: &InteractiveHandoff) -> Option<SignedLink> {
        if !caller.scopes.contains(&Scope::Person) {
            return None;
        }
        let now = self.store().now();
        let expires = link_expiry(handoff.expires_at, now, None).ok()?;
        let maker = self.token_hash_of(caller.name.as_str());
        self.link_secret()
            .sign_by(&handoff.id, caller.name.as_str(), expires, maker.as_deref())
            .ok()
    }

    /// Whether the sign-in cookie is `Secure`.
    pub fn secure_cookies(&self) -> bool {
        self.inner.secure_cookies
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// A place among the event streams and long polls, counted in `gauge`
    /// while it is held.
    ///
    /// # Errors
    /// 503 (`busy`, with `Retry-After`) when every place is taken.
    pub fn stream_slot(&self, gauge: Gauge) -> Result<StreamSlot, ApiError> {
        match self.inner.streams.clone().try_acquire_owned() {
            Ok(permit) => {
                self.metrics().gauge(gauge, 1);
                Ok(StreamSlot {
                    _permit: permit,
                    state: self.clone(),
                    gauge,
                })
            }
            Err(_) => Err(ApiError::busy(format!(
                "the service holds its limit of {} event streams and long polls open; try again \
                 shortly",
                self.limits().max_streams
            ))),
        }
    }

    /// A receiver that sees `true` once the service is shutting down.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    /// Tells event streams and long polls that the service is shutting
    /// down: streams end (clients resume with `Last-Event-ID`), long
    /// polls answer with what they have.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }
}

/// Logs that `maker` made `link` (C29): who, for which handoff, until
/// when, and what asked for it. Never the signature, which is the link.
fn log_link(maker: &str, link: &SignedLink, via: &'static str) {
    tracing::info!(
        maker,
        handoff = %link.id,
        expires = %unix_rfc3339(link.expires),
        via,
        "link made"
    );
}

/// Unix seconds as RFC 3339 (the seconds themselves if out of range).
fn unix_rfc3339(seconds: i64) -> String {
    OffsetDateTime::from_unix_timestamp(seconds)
        .map_or_else(|_| seconds.to_string(), crate::links::rfc3339)
}

/// A held place among the event streams and long polls.
#[derive(Debug)]
pub struct StreamSlot {
    _permit: OwnedSemaphorePermit,
    state: AppState,
    gauge: Gauge,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.state.metrics().gauge(self.gauge, -1);
    }
}

/// Waits until `signal` says the service is shutting down (for ever when
/// its sender is gone, which happens only once the service is gone).
pub async fn shutting_down(signal: &mut watch::Receiver<bool>) {
    if signal.wait_for(|down| *down).await.is_err() {
        std::future::pending::<()>().await;
    }
}
