//! Telling people (contract C23): `serve --notify URL` posts a JSON message
//! to each endpoint for every `opened` event, every finish (and expiry),
//! and every handoff whose deadline comes within a lead time.
//!
//! - **Deliveries follow the event log** from a position kept in the store
//!   (a [`DeliveryCursor`] per endpoint, keyed by a hash of its URL, so
//!   the URL, which for a Slack webhook is a secret, is never stored). A
//!   restart resumes after the last delivered event: at least once, with
//!   the event's position in the message and its `Idempotency-Key` header
//!   so a receiver can drop a repeat.
//! - **One deliverer per endpoint**, however many servers share a
//!   PostgreSQL store: the cursor carries a lease (holder, until when); a
//!   server delivers only while it holds it, renews it with every swap,
//!   and every swap checks the version it read, so a server that lost the
//!   lease finds out at its next swap and stops. A server killed while
//!   holding it is replaced when the lease runs out; a server that stops
//!   gracefully gives it up at once.
//! - **A dead endpoint never slows the API**: each endpoint has a task of
//!   its own; a post has a timeout, failures back off (doubling, capped)
//!   and are retried a bounded number of times, then the message is
//!   dropped, logged and counted (`lf_handoff_notifications_total`), and
//!   delivery goes on. Redirects are not followed (a redirect is a
//!   failure).
//! - **Deadline reminders** come from the handoffs due by now plus the
//!   lead time (a range of the index of due handoffs), read every tick:
//!   each handoff whose reminder time (deadline minus lead time, or
//!   its opening when that is later) falls after the cursor's
//!   `reminded_until` and at or before now is reminded of, then
//!   `reminded_until` moves to now. A deadline moved later gets a
//!   reminder of its own.
//! - **The text** is for a Slack or Mattermost incoming webhook, which
//!   show `text` as it is: what an agent typed is cut to a length, its
//!   control characters dropped, `&`, `<`, `>` escaped as Slack asks (so
//!   a reason cannot mention `<!channel>`), and mentions (`@channel`) and
//!   Markdown links (`[label](url)`) broken with a zero-width space.

use std::sync::Arc;
use std::time::Duration;

use lf_handoff_adapters::{
    DeliveryCursor, ListQuery, Store, StoreError, StoreResult, WatchFilter, WatchFrom,
};
use lf_handoff_api::HandoffJson;
use lf_handoff_domain::interactive_handoff::{HandoffEvent, HandoffEventKind, InteractiveHandoff};
use ring::hmac;
use serde::Serialize;
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::hex;
use crate::state::AppState;

mod text;

use text::{text, ChoiceLink};

/// The header carrying the body's HMAC-SHA256 under the shared secret:
/// `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-lf-handoff-signature";

/// Makes the signed link of a handoff (C21) for a name (acting as
/// `link:NAME`), picking a choice when one is given (C26's one-tap
/// links); `None` when it has none.
pub type LinkMaker =
    Arc<dyn Fn(&str, &InteractiveHandoff, Option<&str>) -> Option<String> + Send + Sync>;

/// The name an endpoint's links are made for when its URL names none
/// (`#for=NAME`): what is done through them is recorded as
/// `link:notification`.
pub const DEFAULT_LINK_HOLDER: &str = "notification";

/// One `--notify` endpoint: the URL posted to, and the name the links of
/// its messages act as.
///
/// The name rides in the URL's fragment, `https://host/hook#for=oncall`:
/// a fragment is never sent in an HTTP request, so the receiver sees the
/// URL it gave out, and each endpoint carries its own name.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL posted to: the configured one without its fragment.
    pub url: String,
    /// The name the links of its messages are made for (`link:NAME`).
    pub link_for: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL's path may be its secret (a Slack webhook's).
        f.debug_struct("Endpoint")
            .field("url", &label(&self.url))
            .field("link_for", &self.link_for)
            .finish()
    }
}

impl Endpoint {
    /// Reads a `--notify` value: an `http://` or `https://` URL with a
    /// host, and an optional fragment `for=NAME` naming who its links act
    /// as (default [`DEFAULT_LINK_HOLDER`]).
    ///
    /// # Errors
    /// `InvalidInput` naming the endpoint by its host: not such a URL, a
    /// fragment other than `for=NAME`, or a name that makes no actor.
    pub fn parse(spec: &str) -> StoreResult<Self> {
        let (url, fragment) = spec.split_once('#').unwrap_or((spec, ""));
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            StoreError::InvalidInput(format!("--notify {}: not a URL ({e})", label(url)))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(StoreError::InvalidInput(format!(
                "--notify {}: an endpoint is an http:// or https:// URL with a host",
                label(url)
            )));
        }
        let mut link_for = None;
        for (key, value) in form_urlencoded::parse(fragment.as_bytes()) {
            if key != "for" || link_for.is_some() {
                return Err(StoreError::InvalidInput(format!(
                    "--notify {}: the URL's fragment may only be #for=NAME, the name the \
                     links of its messages act as (link:NAME)",
                    label(url)
                )));
            }
            link_for = Some(value.into_owned());
        }
        let link_for = link_for.unwrap_or_else(|| DEFAULT_LINK_HOLDER.to_string());
        crate::links::link_actor(&link_for).map_err(|e| {
            StoreError::InvalidInput(format!("--notify {} #for=: {}", label(url), e.message()))
        })?;
        Ok(Self {
            url: url.to_string(),
            link_for,
        })
    }
}

/// Where and how the service posts its messages.
#[derive(Clone)]
pub struct NotifyConfig {
    /// The endpoints (`http://` or `https://` URLs, each with an optional
    /// `#for=NAME`: see [`Endpoint::parse`]).
    pub endpoints: Vec<String>,
    /// The shared secret the messages are signed with, if any.
    pub secret: Option<Vec<u8>>,
    /// How long before a deadline its reminder goes out.
    pub before: Duration,
    /// How long a server's hold on an endpoint's deliveries lasts without
    /// being renewed.
    pub lease: Duration,
    /// How many times a message is posted before it is dropped.
    pub attempts: u32,
    /// The pause after the first failed post; it doubles up to
    /// `max_backoff`.
    pub first_backoff: Duration,
    /// The longest pause between two posts of a message.
    pub max_backoff: Duration,
    /// How long one post may take.
    pub timeout: Duration,
    /// Makes the signed link of a handoff (C21) for an endpoint's name,
    /// when links are served.
    pub links: Option<LinkMaker>,
}

impl std::fmt::Debug for NotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Endpoint URLs and the secret are secrets: only the hosts show.
        let hosts: Vec<String> = self.endpoints.iter().map(|url| label(url)).collect();
        f.debug_struct("NotifyConfig")
            .field("endpoints", &hosts)
            .field("secret", &self.secret.as_ref().map(|_| "<set>"))
            .field("before", &self.before)
            .field("lease", &self.lease)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl NotifyConfig {
    /// Posting to `endpoints` with the defaults: reminders 15 minutes
    /// before a deadline, a 30 s lease, 8 attempts from 1 s to 60 s apart,
    /// 10 s per post, unsigned.
    pub fn new(endpoints: Vec<String>) -> Self {
        Self {
            endpoints,
            secret: None,
            before: Duration::from_secs(15 * 60),
            lease: Duration::from_secs(30),
            attempts: 8,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            links: None,
        }
    }

    /// Refuses endpoints that are not `http://` or `https://` URLs with a
    /// host or whose fragment is not `#for=NAME` with a valid name, and a
    /// lease under a second.
    ///
    /// # Errors
    /// `InvalidInput` naming the endpoint by its host.
    pub fn check(&self) -> StoreResult<()> {
        for spec in &self.endpoints {
            Endpoint::parse(spec)?;
        }
        if self.lease < Duration::from_secs(1) {
            return Err(StoreError::InvalidInput(
                "--notify-lease must be at least 1s".to_string(),
            ));
        }
        if self.attempts == 0 {
            return Err(StoreError::InvalidInput(
                "--notify-attempts must be at least 1".to_string(),
            ));
        }
        Ok(())
    }
}

/// An endpoint as logs and metrics name it: scheme, host and port, never
/// its path or query (a Slack webhook's path is its secret).
pub fn label(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", parsed.scheme()),
            (Some(host), None) => format!("{}://{host}", parsed.scheme()),
            _ => "<no host>".to_string(),
        },
        Err(_) => "<not a URL>".to_string(),
    }
}

/// The key of an endpoint's cursor: the SHA-256 of its URL, in hex.
fn cursor_key(url: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, url.as_bytes());
    hex::encode(digest.as_ref())
}

/// This process's name in the leases it holds: host, process id and a
/// random part (a restarted process is another holder).
fn holder_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|_| "host".to_string());
    let mut random = [0_u8; 4];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random);
    format!(
        "{host}/{}/{:08x}",
        std::process::id(),
        u32::from_be_bytes(random)
    )
}

/// Starts one delivery task per endpoint; each ends when `shutdown`
/// turns true (giving up its lease).
pub fn start(config: NotifyConfig, state: &AppState) -> Vec<tokio::task::JoinHandle<()>> {
    let holder = holder_name();
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(config.timeout)
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            tracing::error!("notifications are off: no HTTP client ({error})");
            return Vec::new();
        }
    };
    let config = Arc::new(config);
    config
        .endpoints
        .iter()
        .filter_map(|spec| match Endpoint::parse(spec) {
            Ok(endpoint) => Some(endpoint),
            Err(error) => {
                tracing::error!("notifications: {error}; this endpoint is skipped");
                None
            }
        })
        .map(|endpoint| {
            let delivery = Delivery {
                label: label(&endpoint.url),
                // The URL without its fragment, so naming the links of an
                // endpoint keeps its cursor.
                key: cursor_key(&endpoint.url),
                url: endpoint.url,
                link_for: endpoint.link_for,
                holder: holder.clone(),
                config: config.clone(),
                client: client.clone(),
                state: state.clone(),
                shutdown: state.shutdown_signal(),
            };
            tokio::spawn(delivery.run())
        })
        .collect()
}

/// One endpoint's deliveries in this process.
struct Delivery {
    url: String,
    /// The name its links act as (`link:NAME`).
    link_for: String,
    label: String,
    key: String,
    holder: String,
    config: Arc<NotifyConfig>,
    client: reqwest::Client,
    state: AppState,
    shutdown: watch::Receiver<bool>,
}

/// Why holding a lease ended.
enum Ended {
    /// Another server holds the cursor now.
    Lost,
    /// The service is stopping.
    Stopping,
}

/// The message posted for an event or a reminder. It has no `Debug`: its
/// link is a credential.
#[derive(Serialize)]
struct Message<'a> {
    /// What Slack and Mattermost show.
    text: String,
    /// `opened`, `finished`, `expired` or `deadline_near`.
    kind: &'static str,
    /// The event's position (none for a reminder).
    #[serde(skip_serializing_if = "Option::is_none")]
    position: Option<u64>,
    /// The same as the `Idempotency-Key` header.
    idempotency_key: String,
    /// The event, as `watch --json` prints it (none for a reminder).
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<&'a HandoffEvent>,
    /// The handoff as it is now, as `status --json` prints it (none when
    /// it was pruned since).
    handoff: Option<HandoffJson>,
    /// The signed link to the handoff's page (C21), when links are served.
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<String>,
    /// One signed link per choice of an active handoff that asks with
    /// choices (C26): each opens a page to confirm that choice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    choices: Vec<ChoiceLink>,
}

impl Delivery {
    fn store(&self) -> &Store {
        self.state.store()
    }

    async fn run(mut self) {
        tracing::info!(
            endpoint = %self.label,
            link_for = %self.link_for,
            "notifications: delivering"
        );
        while !*self.shutdown.borrow() {
            match self.take_lease().await {
                Ok(Some(cursor)) => match self.deliver(cursor).await {
                    Ok(Ended::Stopping) => break,
                    Ok(Ended::Lost) => {
                        tracing::info!(endpoint = %self.label, "notifications: another server delivers now");
                    }
                    Err(error) => {
                        tracing::warn!(endpoint = %self.label, "notifications: {error}; trying again");
                        self.pause(Duration::from_secs(1)).await;
                    }
                },
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(endpoint = %self.label, "notifications: cannot read the delivery cursor ({error}); trying again");
                    self.pause(Duration::from_secs(1)).await;
                }
            }
        }
        tracing::info!(endpoint = %self.label, "notifications: stopped");
    }

    /// Sleeps `pause`, or less when the service stops.
    async fn pause(&mut self, pause: Duration) {
        let _ = tokio::time::timeout(pause, self.shutdown.wait_for(|stop| *stop)).await;
    }

    /// The cursor with this process's lease on it, or `None` after waiting
    /// for another server's lease to run out.
    async fn take_lease(&mut self) -> StoreResult<Option<DeliveryCursor>> {
        let now = self.store().now();
        let lease_until = now + self.config.lease;
        let (expected, mut cursor) = match self.store().delivery_cursor(&self.key).await? {
            None => {
                // A new endpoint starts from now, not from the whole log.
                let start = self
                    .store()
                    .watch(WatchFrom::Now, WatchFilter::default())
                    .await?
                    .position();
                let cursor = DeliveryCursor {
                    position: start,
                    reminded_until: now,
                    holder: self.holder.clone(),
                    lease_until,
                    version: 0,
                };
                (None, cursor)
            }
            Some(cursor) if cursor.holder == self.holder || cursor.lease_until <= now => {
                (Some(cursor.version), cursor)
            }
            Some(cursor) => {
                let left = Duration::try_from(cursor.lease_until - now).unwrap_or(Duration::ZERO);
                let wait = left.min(self.config.lease) + Duration::from_millis(50);
                self.pause(wait).await;
                return Ok(None);
            }
        };
        cursor.holder.clone_from(&self.holder);
        cursor.lease_until = lease_until;
        Ok(self
            .store_over(expected, &mut cursor)
            .await?
            .then_some(cursor))
    }

    /// Stores `cursor` over the version `expected` (`None`: none stored
    /// yet); on success `cursor.version` is the version stored. `false`
    /// when another server swapped first.
    async fn store_over(
        &self,
        expected: Option<u64>,
        cursor: &mut DeliveryCursor,
    ) -> StoreResult<bool> {
        let won = self
            .store()
            .swap_delivery_cursor(&self.key, expected, cursor)
            .await?;
        if won {
            cursor.version = expected.map_or(1, |version| version + 1);
        }
        Ok(won)
    }

    /// Stores `cursor` with its lease renewed; `false` when another server
    /// swapped first.
    async fn swap(&self, cursor: &mut DeliveryCursor) -> StoreResult<bool> {
        cursor.lease_until = self.store().now() + self.config.lease;
        self.store_over(Some(cursor.version), cursor).await
    }

    /// Delivers while this process holds the lease.
    async fn deliver(&mut self, mut cursor: DeliveryCursor) -> StoreResult<Ended> {
        let mut watcher = self
            .store()
            .watch(WatchFrom::After(cursor.position), WatchFilter::default())
            .await?;
        // Renew well before the lease runs out; look for deadlines as often.
        let tick = (self.config.lease / 3).max(Duration::from_millis(300));
        let mut next_check = self.store().now();
        loop {
            if *self.shutdown.borrow() {
                return self.give_up(cursor).await;
            }
            let now = self.store().now();
            if now >= next_check {
                next_check = now + tick;
                if let Some(ended) = self.remind(&mut cursor).await? {
                    return Ok(ended);
                }
                if !self.swap(&mut cursor).await? {
                    return Ok(Ended::Lost);
                }
            } else if cursor.lease_until - now < self.config.lease / 2
                && !self.swap(&mut cursor).await?
            {
                return Ok(Ended::Lost);
            }
            let next = tokio::select! {
                next = watcher.next_within(tick) => Some(next?),
                _ = self.shutdown.wait_for(|stop| *stop) => None,
            };
            let Some(next) = next else {
                return self.give_up(cursor).await;
            };
            if let Some(event) = next {
                let Some(kind) = notified(event.kind) else {
                    // Passed over; stored with the next swap.
                    cursor.position = event.position;
                    continue;
                };
                let handoff = self
                    .store()
                    .get_interactive_handoff(&event.handoff_id)
                    .await?;
                let message = self.message(kind, Some(&event), handoff);
                match self.post(&message, &mut cursor).await? {
                    None => {}
                    Some(Ended::Stopping) => return self.give_up(cursor).await,
                    Some(Ended::Lost) => return Ok(Ended::Lost),
                }
                cursor.position = event.position;
                if !self.swap(&mut cursor).await? {
                    return Ok(Ended::Lost);
                }
            }
        }
    }

    /// Posts the reminders that fell due since the cursor's
    /// `reminded_until`, then moves it to now (stored by the caller's
    /// swap). `Some` when delivery must end.
    async fn remind(&mut self, cursor: &mut DeliveryCursor) -> StoreResult<Option<Ended>> {
        let now = self.store().now();
        let lead = self.config.before;
        // A reminder goes out at most `lead` before the deadline, so only
        // handoffs due by now plus the lead can have one due: the index of
        // due handoffs serves them, not a read of every active handoff.
        let horizon = time::Duration::try_from(lead).unwrap_or(time::Duration::MAX);
        let near = self
            .store()
            .list_interactive_handoffs(ListQuery {
                due_by: Some(now.saturating_add(horizon)),
                ..ListQuery::default()
            })
            .await?;
        let mut due: Vec<InteractiveHandoff> = near
            .into_iter()
            .filter(|handoff| {
                handoff.expires_at.is_some_and(|deadline| {
                    // A handoff opened with its deadline already within the
                    // lead time is reminded of at once.
                    let remind_at = (deadline - lead).max(handoff.created_at);
                    remind_at > cursor.reminded_until && remind_at <= now
                })
            })
            .collect();
        due.sort_by_key(|handoff| handoff.expires_at);
        for handoff in due {
            let message = self.message("deadline_near", None, Some(handoff));
            match self.post(&message, cursor).await? {
                None => {}
                Some(Ended::Stopping) => return Ok(Some(self.give_up(cursor.clone()).await?)),
                Some(Ended::Lost) => return Ok(Some(Ended::Lost)),
            }
        }
        cursor.reminded_until = now;
        Ok(None)
    }

    /// Gives the lease up (the service is stopping), keeping the position
    /// reached, so another server or the next start goes on at once.
    async fn give_up(&self, mut cursor: DeliveryCursor) -> StoreResult<Ended> {
        cursor.lease_until = OffsetDateTime::UNIX_EPOCH;
        self.store_over(Some(cursor.version), &mut cursor).await?;
        Ok(Ended::Stopping)
    }

    fn message<'e>(
        &self,
        kind: &'static str,
        event: Option<&'e HandoffEvent>,
        handoff: Option<InteractiveHandoff>,
    ) -> Message<'e> {
        let now = self.store().now();
        let links = self.config.links.as_ref();
        let link = handoff
            .as_ref()
            .and_then(|handoff| links?(&self.link_for, handoff, None));
        let choices: Vec<ChoiceLink> = match (links, &handoff) {
            (Some(links), Some(handoff)) if handoff.is_active() => (handoff.choices.iter())
                .flatten()
                .filter_map(|choice| {
                    let link = links(&self.link_for, handoff, Some(&choice.value))?;
                    let (value, label) = (choice.value.clone(), choice.label.clone());
                    Some(ChoiceLink { value, label, link })
                })
                .collect(),
            _ => Vec::new(),
        };
        let idempotency_key = match (event, &handoff) {
            (Some(event), _) => format!("event-{}", event.position),
            (None, Some(handoff)) => format!(
                "deadline-{}-{}",
                handoff.id,
                handoff
                    .expires_at
                    .map_or(0, |at| at.unix_timestamp_nanos() / 1_000)
            ),
            (None, None) => "deadline".to_string(),
        };
        Message {
            text: text(
                kind,
                event,
                handoff.as_ref(),
                link.as_deref(),
                &choices,
                now,
            ),
            kind,
            position: event.map(|event| event.position),
            idempotency_key,
            event,
            handoff: handoff.map(|handoff| HandoffJson::new(handoff, now)),
            link,
            choices,
        }
    }

    /// Posts `message` until it is taken or the attempts run out
    /// (`Ok(None)`: go on), keeping the lease while it tries: the lease is
    /// renewed before a post that could outlast it and between the pauses
    /// of a backoff. `Some` when delivery must end: the service stops
    /// before the message is taken (it is then left to the next server,
    /// and no retry waits), or another server took the cursor over.
    async fn post(
        &mut self,
        message: &Message<'_>,
        cursor: &mut DeliveryCursor,
    ) -> StoreResult<Option<Ended>> {
        let body = match serde_json::to_vec(message) {
            Ok(body) => body,
            Err(error) => {
                tracing::error!(endpoint = %self.label, "notifications: cannot write a message ({error})");
                return Ok(None);
            }
        };
        let signature = self.config.secret.as_ref().map(|secret| {
            let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
            let tag = hmac::sign(&key, &body);
            format!("sha256={}", hex::encode(tag.as_ref()))
        });
        let mut backoff = self.config.first_backoff;
        for attempt in 1..=self.config.attempts {
            if !self.hold(cursor, self.config.timeout).await? {
                return Ok(Some(Ended::Lost));
            }
            let mut request = self
                .client
                .post(&self.url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header("idempotency-key", &message.idempotency_key)
                .body(body.clone());
            if let Some(signature) = &signature {
                request = request.header(SIGNATURE_HEADER, signature);
            }
            // A post in flight when the service stops is let finish (within
            // its timeout, inside the drain): cutting it could leave the
            // receiver with a message the cursor does not count, which the
            // next server would post again.
            let outcome = request.send().await;
            let failure = match outcome {
                Ok(response) if response.status().is_success() => {
                    self.state.metrics().notification(&self.label, "delivered");
                    return Ok(None);
                }
                Ok(response) => format!("answered {}", response.status()),
                // The error's text may carry the URL: name the kind only.
                Err(error) if error.is_timeout() => "did not answer in time".to_string(),
                Err(error) if error.is_connect() => "refused the connection".to_string(),
                Err(_) => "failed".to_string(),
            };
            if attempt == self.config.attempts {
                self.state.metrics().notification(&self.label, "dropped");
                tracing::warn!(
                    endpoint = %self.label,
                    key = %message.idempotency_key,
                    "notifications: the endpoint {failure}; message dropped after {attempt} attempts"
                );
                return Ok(None);
            }
            self.state.metrics().notification(&self.label, "retried");
            tracing::info!(
                endpoint = %self.label,
                key = %message.idempotency_key,
                "notifications: the endpoint {failure}; again in {backoff:?}"
            );
            // Pause in steps, renewing the lease between them.
            let until = tokio::time::Instant::now() + backoff;
            loop {
                let left = until.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                self.pause(left.min(self.config.lease / 3)).await;
                if *self.shutdown.borrow() {
                    return Ok(Some(Ended::Stopping));
                }
                if !self.hold(cursor, self.config.lease / 3).await? {
                    return Ok(Some(Ended::Lost));
                }
            }
            backoff = (backoff * 2).min(self.config.max_backoff);
        }
        Ok(None)
    }

    /// Renews the lease unless it still runs for `needed` and a third of
    /// a lease more; `false` when another server took the cursor over.
    async fn hold(&self, cursor: &mut DeliveryCursor, needed: Duration) -> StoreResult<bool> {
        let left = cursor.lease_until - self.store().now();
        if left > needed + self.config.lease / 3 {
            return Ok(true);
        }
        self.swap(cursor).await
    }
}

/// The message kind of an event of `kind`, if it is one that is told.
fn notified(kind: HandoffEventKind) -> Option<&'static str> {
    match kind {
        HandoffEventKind::Opened => Some("opened"),
        HandoffEventKind::Finished => Some("finished"),
        HandoffEventKind::Expired => Some("expired"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_named_by_its_host_only() {
        assert_eq!(
            label("https://hooks.slack.com/services/T000/B000/SECRET"),
            "https://hooks.slack.com"
        );
        assert_eq!(
            label("http://127.0.0.1:9000/hook?token=s"),
            "http://127.0.0.1:9000"
        );
        assert_eq!(label("not a url"), "<not a URL>");
        let config = NotifyConfig::new(vec!["https://hooks.slack.com/services/SECRET".into()]);
        assert!(!format!("{config:?}").contains("SECRET"));
    }

    #[test]
    fn endpoints_must_be_http_urls_with_hosts() {
        for bad in ["ftp://x/y", "file:///etc/passwd", "no scheme", "http://"] {
            let config = NotifyConfig::new(vec![bad.into()]);
            assert!(config.check().is_err(), "{bad}");
        }
        assert!(NotifyConfig::new(vec!["http://127.0.0.1:1/x".into()])
            .check()
            .is_ok());
    }

    #[test]
    fn cursor_keys_are_hashes_of_the_url() {
        let key = cursor_key("https://hooks.slack.com/services/SECRET");
        assert_eq!(key.len(), 64);
        assert!(!key.contains("SECRET"));
        assert_ne!(key, cursor_key("https://hooks.slack.com/services/OTHER"));
    }
}
