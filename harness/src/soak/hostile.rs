//! The hostile peers of the soak, from addresses of their own in
//! `127.0.0.0/8` (all of which reach the loopback listener).
//!
//! - The **trickling peer** holds `connections` connections, each sending
//!   a request head and then its body a byte every `every`: half to the
//!   sign-in form (no token needed; the public limits, 10 s in whole),
//!   half to `POST /v1/handoffs` with a stolen agent token (the body
//!   deadline). When the server answers or closes one, it is counted and
//!   opened again at once.
//! - The **flooding peer** keeps `flood_at_once` connections opening at
//!   once, more than its share: each connects, sends nothing, and reads
//!   until the server closes it (at once with a 503 beyond its share, or
//!   after the header timeout), then connects again.
//!
//! What each saw is counted by how the connection ended. Nothing the
//! hostile peers see is an error of the run: they are there to be refused
//! and cut.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lf_handoff_conformance::peers::connect_from;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::{FLOOD_ADDR, TRICKLE_ADDR};

/// The bodies the trickling peer announces (and never sends whole): under
/// the public limit of 16 KiB for the sign-in form, so it is read, not
/// refused before.
const SIGN_IN_LENGTH: usize = 16_000;
const OPEN_LENGTH: usize = 100_000;

/// How long a connection's end is read once the server answered.
const READ_END: Duration = Duration::from_secs(2);

/// What the hostile peers do.
#[derive(Debug, Clone, Copy)]
pub struct HostileOptions {
    /// Trickling connections held at once (the share of one address, or
    /// more).
    pub trickle_connections: usize,
    /// The pause between two bytes of a trickled body.
    pub trickle_every: Duration,
    /// Idle connections the flooding peer has opening at once.
    pub flood_at_once: usize,
}

/// How one peer's connections ended.
#[derive(Debug, Clone, Default)]
pub struct PeerFigures {
    /// Connections made.
    pub connections: u64,
    /// Refused at once with a 503 (beyond the address's share).
    pub refused: u64,
    /// Cut by the server with a 400 (a body that did not arrive whole in
    /// time).
    pub cut: u64,
    /// Closed by the server without an answer (an idle connection at the
    /// header timeout).
    pub closed: u64,
    /// Answered otherwise, by the answer's status line.
    pub other: BTreeMap<String, u64>,
    /// Connections that could not be made (the machine's ports, or the
    /// listen queue).
    pub connect_failures: u64,
    /// Held by the peer when the run ended.
    pub held_at_end: u64,
}

/// Both peers' figures.
#[derive(Debug, Clone, Default)]
pub struct HostileFigures {
    /// The trickling peer's.
    pub trickle: PeerFigures,
    /// The flooding peer's.
    pub flood: PeerFigures,
}

/// How a connection ended.
enum End {
    Answered(String),
    Closed,
    Held,
}

impl PeerFigures {
    fn count(&mut self, end: End) {
        match end {
            End::Answered(line) if line.starts_with("HTTP/1.1 503") => self.refused += 1,
            End::Answered(line) if line.starts_with("HTTP/1.1 400") => self.cut += 1,
            End::Answered(line) => *self.other.entry(line).or_default() += 1,
            End::Closed => self.closed += 1,
            End::Held => self.held_at_end += 1,
        }
    }
}

/// The hostile peers, running.
#[derive(Debug)]
pub struct Hostile {
    tasks: JoinSet<()>,
    figures: Arc<Mutex<HostileFigures>>,
}

impl Hostile {
    /// Starts both peers against `server` until `deadline`; `token` is the
    /// stolen agent token.
    pub fn start(
        server: SocketAddr,
        token: &str,
        options: &HostileOptions,
        deadline: Instant,
    ) -> Self {
        let figures = Arc::new(Mutex::new(HostileFigures::default()));
        let mut tasks = JoinSet::new();
        for n in 0..options.trickle_connections {
            let head = if n % 2 == 0 {
                format!(
                    "POST /sign-in HTTP/1.1\r\nHost: {server}\r\n\
                     Content-Type: application/x-www-form-urlencoded\r\n\
                     Content-Length: {SIGN_IN_LENGTH}\r\n\r\ntoken="
                )
            } else {
                format!(
                    "POST /v1/handoffs HTTP/1.1\r\nHost: {server}\r\n\
                     Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
                     Content-Length: {OPEN_LENGTH}\r\n\r\n{{"
                )
            };
            let (figures, every) = (figures.clone(), options.trickle_every);
            tasks.spawn(async move {
                while Instant::now() < deadline {
                    let end = match connect_from(TRICKLE_ADDR, server).await {
                        Some(stream) => {
                            lock(&figures).trickle.connections += 1;
                            trickle(stream, &head, every, deadline).await
                        }
                        None => {
                            lock(&figures).trickle.connect_failures += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    lock(&figures).trickle.count(end);
                }
            });
        }
        for _ in 0..options.flood_at_once {
            let figures = figures.clone();
            tasks.spawn(async move {
                while Instant::now() < deadline {
                    let end = match connect_from(FLOOD_ADDR, server).await {
                        Some(mut stream) => {
                            lock(&figures).flood.connections += 1;
                            read_end(&mut stream, deadline).await
                        }
                        None => {
                            lock(&figures).flood.connect_failures += 1;
                            // The ports of the address are spent for now
                            // (closed connections linger): wait a little
                            // rather than spin.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    lock(&figures).flood.count(end);
                }
            });
        }
        Self { tasks, figures }
    }

    /// Waits for both peers to stop at the deadline; returns what they saw.
    pub async fn finish(mut self) -> HostileFigures {
        while self.tasks.join_next().await.is_some() {}
        lock(&self.figures).clone()
    }
}

fn lock(figures: &Mutex<HostileFigures>) -> std::sync::MutexGuard<'_, HostileFigures> {
    figures.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends `head`, then a byte every `every` until the server answers or
/// closes, or the run ends.
async fn trickle(mut stream: TcpStream, head: &str, every: Duration, deadline: Instant) -> End {
    if stream.write_all(head.as_bytes()).await.is_err() {
        return read_end(&mut stream, Instant::now() + READ_END).await;
    }
    let mut buffer = [0_u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return End::Held;
        }
        match tokio::time::timeout(every.min(left), stream.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return End::Closed,
            Ok(Ok(n)) => return End::Answered(status_line(&buffer[..n])),
            Err(_) => {
                if stream.write_all(b"a").await.is_err() {
                    return read_end(&mut stream, Instant::now() + READ_END).await;
                }
            }
        }
    }
}

/// Reads until the server answers or closes, at most until `until`.
async fn read_end(stream: &mut TcpStream, until: Instant) -> End {
    let mut buffer = [0_u8; 1024];
    let left = until.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, stream.read(&mut buffer)).await {
        Err(_) => End::Held,
        Ok(Ok(0) | Err(_)) => End::Closed,
        Ok(Ok(n)) => End::Answered(status_line(&buffer[..n])),
    }
}

/// The first line of an answer, at most 40 characters.
fn status_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(40)
        .collect()
}
