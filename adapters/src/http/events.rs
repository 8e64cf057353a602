//! The client's side of `GET /v1/events`: a server-sent-event stream read
//! as an [`EventStream`], resumed with `Last-Event-ID` when the connection
//! breaks, so a watcher over the service misses and repeats nothing, as a
//! local one (C16).
//!
//! The service starts each stream with an event that has only an id (its
//! position when the stream starts), then sends each event as `id:
//! POSITION` and `data:` its JSON, a comment every 30 s while idle, and
//! `event: error` with the error object when the store fails.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt as _;
use lf_handoff_api::requests::EventParams;
use lf_handoff_api::ErrorResponse;
use lf_handoff_application::{EventStream, StoreError, StoreResult, UnavailableKind, WatchFilter};
use lf_handoff_domain::interactive_handoff::HandoffEvent;
use tokio::time::Instant;

use super::client::{Call, Shared};

/// How long a stream may stay silent before it is taken for dead: the
/// service sends a comment every 30 s (every 15 s up to release 0.3).
const SILENCE: Duration = Duration::from_secs(90);

/// The longest line read, and the most an event's data lines hold
/// together: an event is at most a few kilobytes.
const MAX_LINE: usize = 1024 * 1024;

/// An event stream of the service.
pub(super) struct ServiceEvents {
    client: Shared,
    window: Duration,
    filter: WatchFilter,
    /// The position to resume after; `None` until the first stream of a
    /// watcher from now says where it starts.
    position: Option<u64>,
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    buffer: Vec<u8>,
    event: Fields,
    heard: Instant,
}

impl std::fmt::Debug for ServiceEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceEvents")
            .field("filter", &self.filter)
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

/// The fields of the event being read.
#[derive(Debug, Default)]
struct Fields {
    id: Option<u64>,
    kind: Option<String>,
    data: Option<String>,
}

/// What one dispatched event is.
enum Dispatched {
    /// Nothing to pass on (an id alone, or an event left out).
    Nothing,
    /// A history event that passes the filter.
    Event(Box<HandoffEvent>),
}

impl ServiceEvents {
    /// A stream after `position` (`None`: from now), connected: for a
    /// stream from now, its start position is read before this returns.
    ///
    /// # Errors
    /// As a call of the service.
    pub(super) async fn open(
        client: Shared,
        window: Duration,
        position: Option<u64>,
        filter: WatchFilter,
    ) -> StoreResult<Self> {
        let mut events = Self {
            client,
            window,
            filter,
            position,
            body: None,
            buffer: Vec::new(),
            event: Fields::default(),
            heard: Instant::now(),
        };
        events.connect().await?;
        if events.position.is_none() {
            // The stream's first event, an id alone, says where it starts.
            let limit = Instant::now() + super::client::CALL_TIMEOUT;
            events.read_until(limit, true).await?;
            if events.position.is_none() {
                return Err(StoreError::unavailable(
                    UnavailableKind::Unreachable,
                    format!(
                        "the service at {} did not start the event stream in time",
                        events.client.base()
                    ),
                ));
            }
        }
        Ok(events)
    }

    async fn connect(&mut self) -> StoreResult<()> {
        let params = EventParams {
            from: None,
            parent: self.filter.parent.clone(),
        };
        let mut call = Call::get("/v1/events")
            .query(params.to_query())
            .timeout(None);
        if let Some(position) = self.position {
            call = call.after_event(position);
        }
        let response = self.client.send(&call, self.window).await?;
        self.body = Some(response.bytes_stream().boxed());
        self.buffer.clear();
        self.event = Fields::default();
        self.heard = Instant::now();
        Ok(())
    }

    /// The next event that passes the filter, or `None` at `limit`; with
    /// `start`, `None` as soon as the stream's start position is known (an
    /// event before it, which this service never sends, is not passed on).
    async fn read_until(
        &mut self,
        limit: Instant,
        start: bool,
    ) -> StoreResult<Option<HandoffEvent>> {
        loop {
            while let Some(line) = self.take_line()? {
                let dispatched = self.line(&line)?;
                if start && self.position.is_some() {
                    return Ok(None);
                }
                if let Dispatched::Event(event) = dispatched {
                    return Ok(Some(*event));
                }
            }
            if self.body.is_none() {
                self.connect().await?;
            }
            let Some(body) = self.body.as_mut() else {
                continue;
            };
            let silent_until = self.heard + SILENCE;
            let next = tokio::time::timeout_at(limit.min(silent_until), body.next()).await;
            match next {
                Ok(Some(Ok(bytes))) => {
                    self.heard = Instant::now();
                    self.buffer.extend_from_slice(&bytes);
                }
                // The connection ended or broke: resume after the last id.
                Ok(Some(Err(_)) | None) => self.body = None,
                Err(_) if Instant::now() >= limit => return Ok(None),
                // Silent for too long: take the connection for dead.
                Err(_) => self.body = None,
            }
        }
    }

    /// The next whole line of the buffer, without its end.
    fn take_line(&mut self) -> StoreResult<Option<String>> {
        let Some(end) = self.buffer.iter().position(|&b| b == b'\n') else {
            if self.buffer.len() > MAX_LINE {
                self.body = None;
                self.buffer.clear();
                return Err(protocol("an event stream line longer than 1 MiB"));
            }
            return Ok(None);
        };
        let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        String::from_utf8(line)
            .map(Some)
            .map_err(|_| protocol("an event stream line that is not UTF-8"))
    }

    /// Takes one line of the stream.
    fn line(&mut self, line: &str) -> StoreResult<Dispatched> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return Ok(Dispatched::Nothing);
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => {
                self.event.id = Some(value.parse().map_err(|_| {
                    protocol(&format!("an event id {value:?} that is not a position"))
                })?);
            }
            "event" => self.event.kind = Some(value.to_string()),
            "data" => {
                let held = self.event.data.as_ref().map_or(0, String::len);
                if held + value.len() > MAX_LINE {
                    self.body = None;
                    self.event = Fields::default();
                    return Err(protocol("an event whose data is longer than 1 MiB"));
                }
                match &mut self.event.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.event.data = Some(value.to_string()),
                }
            }
            _ => {}
        }
        Ok(Dispatched::Nothing)
    }

    /// Ends the event being read.
    fn dispatch(&mut self) -> StoreResult<Dispatched> {
        let fields = std::mem::take(&mut self.event);
        if fields.kind.as_deref() == Some("error") {
            self.body = None;
            let data = fields.data.unwrap_or_default();
            return Err(match serde_json::from_str::<ErrorResponse>(&data) {
                Ok(object) => object.into_store_error(),
                Err(_) => protocol("an error event without the error object"),
            });
        }
        if let Some(id) = fields.id {
            self.position = Some(id);
        }
        let Some(data) = fields.data else {
            return Ok(Dispatched::Nothing);
        };
        let event: HandoffEvent = serde_json::from_str(&data)
            .map_err(|e| protocol(&format!("an event that is not a history event: {e}")))?;
        // The service filters by parent; by handoff is left to here.
        let wanted = self
            .filter
            .handoff
            .as_ref()
            .is_none_or(|id| &event.handoff_id == id);
        Ok(if wanted {
            Dispatched::Event(Box::new(event))
        } else {
            Dispatched::Nothing
        })
    }
}

/// The error of a stream that does not follow the protocol.
fn protocol(what: &str) -> StoreError {
    StoreError::unavailable(
        UnavailableKind::Other,
        format!("the service's event stream sent {what}"),
    )
}

#[async_trait]
impl EventStream for ServiceEvents {
    fn position(&self) -> u64 {
        self.position.unwrap_or(0)
    }

    async fn next_within(&mut self, within: Duration) -> StoreResult<Option<HandoffEvent>> {
        let limit = Instant::now() + within;
        self.read_until(limit, false).await
    }
}
