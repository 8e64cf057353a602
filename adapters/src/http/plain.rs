//! Calls to a service at an `http://` URL that answer one JSON body, on
//! keep-alive connections that the calling task drives itself.
//!
//! reqwest (which carries everything else: `https://`, proxies, event
//! streams and export) runs each connection on a task of its own,
//! so a call crosses from the caller's task to the connection's and back.
//! On a service of the same machine that hand-over was a large part of a
//! call's cost (`docs/history/BENCHMARKS-2026-12.md`, "The service's
//! client"). Here the
//! caller polls hyper's HTTP/1.1 connection and its answer together,
//! through the connection's [`Gate`] (their wakes of each other stay in
//! the caller's poll), and the connection waits between calls in a short
//! list of idle ones.
//!
//! A connection the service may have closed is never trusted: one idle
//! longer than [`IDLE_LIMIT`] (well under the service's 10 s default for
//! idle connections) is dropped, one whose connection reports an end when
//! polled is dropped, and a request that an idle connection refused
//! before writing it goes out on a new connection. A request that was
//! written and got no answer is the caller's to retry (the retry window,
//! as for any lost answer).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt as _;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::gate::Gate;

/// How long a connection may stay idle and still be used again.
const IDLE_LIMIT: Duration = Duration::from_secs(2);

/// The most idle connections kept.
const MAX_IDLE: usize = 8;

type Io = TokioIo<TcpStream>;

/// One keep-alive connection: its sender, its connection future, and the
/// gate it is polled through.
struct Open {
    send: SendRequest<Full<Bytes>>,
    conn: Connection<Io, Full<Bytes>>,
    gate: Gate,
    since: Instant,
}

/// The idle connections to one `host:port`.
pub(super) struct Plain {
    host: String,
    port: u16,
    connect_timeout: Duration,
    idle: Mutex<Vec<Open>>,
}

/// An answer: its status and its body, cut after the limit
/// [`Plain::exchange`] was given for its status.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Bytes,
    /// Whether `body` is the whole body (not cut at the limit).
    pub(super) whole: bool,
}

/// Why a call got no answer.
#[derive(Debug)]
pub(super) enum Failure {
    /// No connection could be made.
    Connect(std::io::Error),
    /// The connection failed or closed before the answer was whole.
    Lost(hyper::Error),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(_) => f.write_str("cannot open a connection"),
            Self::Lost(_) => f.write_str("the connection failed"),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Connect(e) => Some(e),
            Self::Lost(e) => Some(e),
        }
    }
}

impl std::fmt::Debug for Plain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plain")
            .field("host", &self.host)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Plain {
    /// Connections to `host` (a name, an IPv4 address or a bracketed IPv6
    /// one) on `port`, each given `connect_timeout` to open.
    pub(super) fn new(host: String, port: u16, connect_timeout: Duration) -> Self {
        Self {
            host,
            port,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Sends `request` and reads its answer: at most `limit` bytes of a
    /// successful one, at most `error_limit` bytes of another (the rest is
    /// left unread, and the connection closed).
    ///
    /// # Errors
    /// [`Failure`] when no answer came.
    pub(super) async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
        limit: usize,
        error_limit: usize,
    ) -> Result<Answer, Failure> {
        let mut request = request;
        let (mut open, response) = loop {
            let (mut open, reused) = match self.take_idle() {
                Some(open) => (open, true),
                None => (self.connect().await?, false),
            };
            match send(&mut open, request).await {
                Ok(response) => break (open, response),
                // An idle connection that closed before the request was
                // written: the request is whole, send it on a new one.
                Err(mut error) => match error.take_message() {
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(Failure::Lost(error.into_error())),
                },
            }
        };
        let status = response.status();
        let limit = if status.is_success() {
            limit
        } else {
            error_limit
        };
        let keep = !closes(&response);
        let (body, whole) = read_body(&mut open, response.into_body(), limit).await?;
        if keep && whole {
            self.give_back(open);
        }
        Ok(Answer {
            status,
            body,
            whole,
        })
    }

    /// The most recently used idle connection that is still open.
    fn take_idle(&self) -> Option<Open> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(mut open) = idle.pop() {
            if open.since.elapsed() >= IDLE_LIMIT || open.send.is_closed() {
                continue;
            }
            // Polled once: a connection the service closed ends here.
            if (&mut open.conn).now_or_never().is_some() {
                continue;
            }
            return Some(open);
        }
        None
    }

    fn give_back(&self, mut open: Open) {
        if open.send.is_closed() || (&mut open.conn).now_or_never().is_some() {
            return;
        }
        open.since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(open);
        }
    }

    async fn connect(&self) -> Result<Open, Failure> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let stream =
            tokio::time::timeout(self.connect_timeout, TcpStream::connect((host, self.port)))
                .await
                .map_err(|_| {
                    Failure::Connect(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no connection within {:?}", self.connect_timeout),
                    ))
                })?
                .map_err(Failure::Connect)?;
        // A request and its answer are single small writes; nothing to
        // gain from waiting to fill a segment.
        stream.set_nodelay(true).map_err(Failure::Connect)?;
        let (send, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(Failure::Lost)?;
        Ok(Open {
            send,
            conn,
            gate: Gate::default(),
            since: Instant::now(),
        })
    }
}

/// Sends `request` on `open`, polling its connection while the answer's
/// head comes.
async fn send(
    open: &mut Open,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, hyper::client::conn::TrySendError<Request<Full<Bytes>>>> {
    // Handing the request over wakes the connection, which is this task:
    // a wake inside the gate.
    open.gate.hold();
    let answer = open.send.try_send_request(request);
    let mut answer = std::pin::pin!(answer);
    let mut ended = false;
    let (gate, conn) = (&open.gate, &mut open.conn);
    gate.drive(|cx| {
        if let Poll::Ready(result) = answer.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        if !ended && Pin::new(&mut *conn).poll(cx).is_ready() {
            ended = true;
        }
        // The connection may have handed the answer over (or, ended,
        // answered the request with its error).
        answer.as_mut().poll(cx)
    })
    .await
}

/// `body`, polling the connection while it comes, and whether it is
/// whole: it stops once more than `limit` bytes came.
async fn read_body(
    open: &mut Open,
    body: Incoming,
    limit: usize,
) -> Result<(Bytes, bool), Failure> {
    let mut body = body;
    let mut bytes = Vec::new();
    let mut ended = false;
    let (gate, conn) = (&open.gate, &mut open.conn);
    loop {
        let frame = gate
            .drive(|cx| {
                if let Poll::Ready(frame) = Pin::new(&mut body).poll_frame(cx) {
                    return Poll::Ready(frame);
                }
                if !ended && Pin::new(&mut *conn).poll(cx).is_ready() {
                    ended = true;
                }
                Pin::new(&mut body).poll_frame(cx)
            })
            .await;
        match frame {
            None => return Ok((Bytes::from(bytes), true)),
            Some(Err(error)) => return Err(Failure::Lost(error)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                    if bytes.len() > limit {
                        return Ok((Bytes::from(bytes), false));
                    }
                }
            }
        }
    }
}

/// Does `response` close its connection?
fn closes(response: &Response<Incoming>) -> bool {
    response
        .headers()
        .get(hyper::header::CONNECTION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("close"))
}
