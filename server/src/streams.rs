//! The routes that hold a connection open or move a whole registry: the
//! long poll (`wait`), the event stream (`events`), `export` and
//! `import`.
//!
//! Neither the long poll nor the event stream polls the store: they are
//! `Waiting::wait` and `Waiting::watch`, which sleep on the backend's change
//! signal (C16). Each holds one of the service's stream places while it
//! is open (503 with `Retry-After` when none is free), and each ends when
//! the service shuts down: a long poll answers with what it has (`ended`
//! is the handoff's state), an event stream ends and the client resumes
//! with `Last-Event-ID`.
//!
//! Export and import move JSON lines between the HTTP body and the
//! store's `export` / `import`, which write to and read from blocking
//! `Write` / `BufRead` values: each runs on a blocking thread, fed through
//! a bounded channel, so a slow client slows the export down instead of
//! filling memory.

use std::convert::Infallible;
use std::io::{self, BufReader, Read, Write};
use std::sync::{mpsc as std_mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::{stream, StreamExt as _};
use http_body_util::BodyExt as _;
use lf_handoff_adapters::{
    archive, ConflictKind, Store, StoreError, Waited, WatchFilter, WatchFrom,
};
use lf_handoff_api::requests::{last_event_id, EventParams, WaitParams};
use lf_handoff_api::routes::content_type;
use lf_handoff_api::{Category, Counts, WaitJson};
use lf_handoff_domain::id::InteractiveHandoffId;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::extract::{check_length, media_type, stalled, too_large, IdParam, Who};
use crate::metrics::Gauge;
use crate::state::{shutting_down, AppState, Holder};

/// How often an idle event stream sends a comment, so proxies keep it
/// open and a vanished client is noticed: half the idle timeout common
/// to proxies and load balancers (60 s), and the only thing an idle
/// stream costs the server (1,000 streams: 33 comments a second, about
/// half a millisecond of CPU).
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// How many bytes an export sends at a time.
const CHUNK: usize = 64 * 1024;

/// How many chunks wait between the store and the client.
const CHANNEL: usize = 8;

type Answer = Result<Response, ApiError>;

/// What resolves when a stream's token is revoked.
type Gone = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The answer (or last event) of a request held open whose token was
/// revoked meanwhile.
pub(crate) fn revoked() -> ApiError {
    ApiError::plain(
        Category::Unauthorized,
        "the token this request was made with was revoked; nothing more is sent with it",
    )
}

/// `GET /v1/handoffs/{id}/wait?timeout=30s`: the long poll.
pub async fn wait(
    State(state): State<AppState>,
    Who(caller): Who,
    Extension(holder): Extension<Holder>,
    id: IdParam,
    RawQuery(query): RawQuery,
) -> Answer {
    let handoff_id = InteractiveHandoffId::parse(&id.0).map_err(StoreError::from)?;
    let params = WaitParams::parse(query.as_deref().unwrap_or_default())?;
    let _slot = state.stream_slot(Gauge::LongPolls)?;
    // A wait that finds the handoff due expires it: that change is the
    // caller's.
    let store = state.store_as(&caller.name);
    let mut shutdown = state.shutdown_signal();
    let waited = tokio::select! {
        waited = store.wait(&handoff_id, Some(params.timeout)) => Some(waited?),
        () = shutting_down(&mut shutdown) => None,
        () = state.gone(holder) => return Err(revoked()),
    };
    let (ended, handoff) = match waited {
        Some(Waited::Ended(handoff)) => (true, handoff),
        Some(Waited::TimedOut(handoff)) => (false, handoff),
        None => {
            let handoff = store
                .get_interactive_handoff(&handoff_id)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("handoff {} does not exist", id.0)))?;
            (!handoff.is_active(), handoff)
        }
    };
    Ok(Json(WaitJson {
        ended,
        handoff: state.handoff_json(&caller, handoff),
    })
    .into_response())
}

/// `GET /v1/events?from=POS&parent=REF`: the history as server-sent
/// events, resumed after `Last-Event-ID` when the client sends one.
pub async fn events(
    State(state): State<AppState>,
    Extension(holder): Extension<Holder>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Answer {
    let params = EventParams::parse(query.as_deref().unwrap_or_default())?;
    let from = match headers.get("last-event-id") {
        Some(value) => Some(last_event_id(value.to_str().map_err(|_| {
            ApiError::invalid("Last-Event-ID is not an event position")
        })?)?),
        None => params.from,
    };
    let slot = state.stream_slot(Gauge::EventStreams)?;
    let filter = WatchFilter {
        parent: params.parent,
        ..WatchFilter::default()
    };
    let watcher = state
        .store()
        .watch(from.map_or(WatchFrom::Now, WatchFrom::After), filter)
        .await?;
    let shutdown = state.shutdown_signal();
    // First, an event with only an id: where the stream starts. It
    // dispatches nothing (it has no data), but a client (and a browser's
    // EventSource) that reconnects with it as `Last-Event-ID` misses
    // nothing even when no event came before the connection broke.
    let start = Event::default().id(watcher.position().to_string());
    // Resolves only when the stream's token is revoked, which ends it.
    let gone: Gone = Box::pin({
        let state = state.clone();
        async move { state.gone(holder).await }
    });
    let events = stream::unfold(
        Some((watcher, shutdown, slot, gone)),
        |running| async move {
            let (mut watcher, mut shutdown, slot, mut gone) = running?;
            let next = tokio::select! {
                next = watcher.next() => next,
                () = shutting_down(&mut shutdown) => return None,
                () = &mut gone => {
                    let data = serde_json::to_string(&revoked().0).unwrap_or_default();
                    return Some((Ok(Event::default().event("error").data(data)), None));
                }
            };
            match next {
                Ok(event) => {
                    let data = match serde_json::to_string(&event) {
                        Ok(data) => data,
                        Err(error) => {
                            tracing::warn!("an event could not be encoded: {error}");
                            return None;
                        }
                    };
                    let sent = Event::default().id(event.position.to_string()).data(data);
                    Some((
                        Ok::<_, Infallible>(sent),
                        Some((watcher, shutdown, slot, gone)),
                    ))
                }
                Err(error) => {
                    // The store failed: say so in the stream, then end it;
                    // the client resumes from the last id it saw.
                    tracing::warn!("an event stream ends: {error}");
                    let object = crate::error::withheld(&error);
                    let data = serde_json::to_string(&object).unwrap_or_default();
                    Some((Ok(Event::default().event("error").data(data)), None))
                }
            }
        },
    );
    let events = stream::once(async move { Ok::<_, Infallible>(start) }).chain(events);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// What the export thread sends: a chunk of JSON lines, or the failure
/// that cut the export short.
type Chunk = Result<Bytes, StoreError>;

/// A `Write` that sends what is written, in chunks, over a bounded
/// channel; it blocks while the channel is full (it runs on a blocking
/// thread) and fails once the client is gone.
struct ChannelWriter {
    sender: std_mpsc::SyncSender<Chunk>,
    buffer: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.sender
            .send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= CHUNK {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// Runs `work` with the store on a blocking thread (where a blocking
/// channel may wait), driving its futures with the runtime's handle. A
/// current-thread runtime cannot drive them from another thread, so it
/// refuses. Inside `work`, the runtime counts as entered: it talks to the
/// async side through std channels, bridged by [`forward`] and
/// [`backward`].
async fn on_blocking_thread<T: Send + 'static>(
    work: impl FnOnce(&Handle) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let handle = Handle::current();
    if handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
        return Err(ApiError::plain(
            Category::Internal,
            "export and import need the multi-threaded runtime `lf-handoff serve` runs on",
        ));
    }
    tokio::task::spawn_blocking(move || work(&handle))
        .await
        .map_err(|_| ApiError::plain(Category::Internal, "the export or import thread failed"))
}

/// Passes what arrives on a std channel on to a tokio channel, on a
/// blocking thread of its own, until either side is gone.
fn forward<T: Send + 'static>(from: std_mpsc::Receiver<T>, to: mpsc::Sender<T>) {
    tokio::task::spawn_blocking(move || {
        for item in from {
            if to.blocking_send(item).is_err() {
                return;
            }
        }
    });
}

/// Passes what arrives on a tokio channel on to a std channel, on a
/// blocking thread of its own, until either side is gone.
fn backward<T: Send + 'static>(mut from: mpsc::Receiver<T>, to: std_mpsc::SyncSender<T>) {
    tokio::task::spawn_blocking(move || {
        while let Some(item) = from.blocking_recv() {
            if to.send(item).is_err() {
                return;
            }
        }
    });
}

/// `GET /v1/export`: the registry as versioned JSON lines, streamed. A
/// failure before the first line is an error answer; one after it cuts
/// the body short (no end line, which an import refuses).
pub async fn export(State(state): State<AppState>) -> Answer {
    let store: Store = state.store().clone();
    let (sender, bridge) = std_mpsc::sync_channel::<Chunk>(CHANNEL);
    let (forwarded, mut receiver) = mpsc::channel::<Chunk>(CHANNEL);
    forward(bridge, forwarded);
    let failures = sender.clone();
    let running = on_blocking_thread(move |handle| {
        let mut writer = ChannelWriter {
            sender,
            buffer: Vec::with_capacity(CHUNK),
        };
        let result = handle
            .block_on(store.export(&mut writer, None))
            .and_then(|_| {
                writer.flush().map_err(|e| {
                    StoreError::unavailable(
                        lf_handoff_adapters::UnavailableKind::Io,
                        format!("the export could not be sent: {e}"),
                    )
                })
            });
        if let Err(error) = result {
            tracing::warn!("an export failed: {error}");
            let _ = failures.send(Err(error));
        }
    });
    tokio::spawn(running);
    let first = match receiver.recv().await {
        Some(Ok(first)) => first,
        Some(Err(error)) => return Err(error.into()),
        None => Bytes::new(),
    };
    let rest = stream::unfold(receiver, |mut receiver| async move {
        let chunk = receiver.recv().await?;
        Some((chunk.map_err(|e| io::Error::other(e.to_string())), receiver))
    });
    let body = stream::iter([Ok::<_, io::Error>(first)]).chain(rest);
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type::LINES),
        )],
        Body::from_stream(body),
    )
        .into_response())
}

/// Why an import's body stopped arriving.
#[derive(Debug, Clone, Copy)]
enum Fed {
    TooLarge(u64),
    Stalled(Duration),
    Broken,
}

/// A `Read` over the body's chunks, received from a bounded channel (it
/// runs on a blocking thread).
struct ChannelReader {
    receiver: std_mpsc::Receiver<Result<Bytes, Fed>>,
    current: Bytes,
    failed: Arc<Mutex<Option<Fed>>>,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.receiver.recv() {
                Err(_) => return Ok(0),
                Ok(Ok(bytes)) => self.current = bytes,
                Ok(Err(why)) => {
                    *self.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
                    return Err(io::Error::other("the request body stopped"));
                }
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// `POST /v1/import`: loads an export (JSON lines) into the empty store,
/// all of it or nothing.
pub async fn import(State(state): State<AppState>, Who(caller): Who, request: Request) -> Answer {
    let (parts, mut body) = request.into_parts();
    match media_type(&parts.headers).as_deref() {
        Some(content_type::LINES | content_type::JSONL) => {}
        other => {
            return Err(ApiError::plain(
                Category::UnsupportedMediaType,
                format!(
                    "an import is sent as {} (an export's JSON lines), not {}",
                    content_type::LINES,
                    other.map_or("a body without a Content-Type".to_string(), |m| format!(
                        "{m:?}"
                    ))
                ),
            ))
        }
    }
    let limits = *state.limits();
    check_length(&parts.headers, limits.max_import_body)?;
    let (sender, fed) = mpsc::channel::<Result<Bytes, Fed>>(CHANNEL);
    let (bridge, receiver) = std_mpsc::sync_channel::<Result<Bytes, Fed>>(CHANNEL);
    backward(fed, bridge);
    tokio::spawn(async move {
        let mut received = 0_u64;
        let mut forwarding = true;
        loop {
            let fed = match tokio::time::timeout(limits.body_timeout, body.frame()).await {
                Err(_) => Err(Fed::Stalled(limits.body_timeout)),
                Ok(None) => return,
                Ok(Some(Err(_))) => Err(Fed::Broken),
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        received += data.len() as u64;
                        if received > limits.max_import_body {
                            Err(Fed::TooLarge(limits.max_import_body))
                        } else {
                            Ok(data)
                        }
                    }
                    Err(_) => continue,
                },
            };
            if fed.is_err() {
                if forwarding {
                    let _ = sender.send(fed).await;
                }
                return;
            }
            // Once the import stops reading (it refused the input: a
            // damaged line, a store that is not empty), the rest of the
            // body is read and dropped, within the same limits, so the
            // client can finish sending it and read the answer instead of
            // a connection closed under its body.
            if forwarding && sender.send(fed).await.is_err() {
                forwarding = false;
            }
        }
    });
    let failed = Arc::new(Mutex::new(None));
    let reader = ChannelReader {
        receiver,
        current: Bytes::new(),
        failed: failed.clone(),
    };
    let store = state.store_as(&caller.name);
    let result = on_blocking_thread(move |handle| {
        let mut input = BufReader::with_capacity(CHUNK, reader);
        handle.block_on(store.import(&mut input, None))
    })
    .await?;
    let fed = *failed.lock().unwrap_or_else(PoisonError::into_inner);
    match (result, fed) {
        (Ok(summary), _) => Ok(Json(Counts::from(&summary)).into_response()),
        (Err(_), Some(Fed::TooLarge(limit))) => Err(too_large(limit)),
        (Err(_), Some(Fed::Stalled(timeout))) => Err(stalled(timeout)),
        (Err(_), Some(Fed::Broken)) => Err(ApiError::invalid(
            "the request body could not be read; nothing was imported",
        )),
        // The store names itself by its path or URL, which is the
        // server's business: the client hears of "the service's store".
        (Err(error), None) if error.conflict_kind() == Some(ConflictKind::NotEmpty) => {
            Err(archive::not_empty(&"the service's store").into())
        }
        (Err(error), None) => Err(error.into()),
    }
}
