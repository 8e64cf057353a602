//! `GET /v1/handoffs/{id}` while hostile peers hold what they may (C29).
//!
//! One store of the backend holds one handoff; one server of this process
//! serves it with `serve`'s default limits (512 connections, a share of 64
//! per peer address, a 5 s header timeout, a 30 s body deadline, 10 s for
//! the public forms). Three addresses of `127.0.0.0/8`, all reaching the
//! loopback listener:
//!
//! - `127.0.0.2` **trickles**: it holds as many connections as its share,
//!   each sending a request head and then its body a byte every 10 s
//!   (half to the sign-in form, which takes no token, half to `POST
//!   /v1/handoffs` with the run's token), opening another whenever the
//!   server cuts one;
//! - `127.0.0.3` **floods**: twice its share of tasks, each opening an
//!   idle connection as fast as it can and waiting for the server to close
//!   it (a 503 beyond the share, else the header timeout);
//! - `127.0.0.1`, the legitimate client, sends `GET /v1/handoffs/{id}`
//!   from a few keep-alive connections, one request after another on
//!   each, for a fixed time, recording each request's time.
//!
//! Each round runs the legitimate client once with the hostile peers and
//! once without, taking turns; the figures are its p50, p99 and
//! throughput on each side and the throughput ratio (attacked / quiet).
//! The goal (C29): with the peers, p99 within 50 ms and the throughput at
//! least 0.8 of the same run's without them.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_conformance::peers::connect_from;
use lf_handoff_server::Limits;
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::load::{self, Connection, Load};
use super::{Access, Service};
use crate::backends::BenchBackend;
use crate::error::{fail, BenchResult};
use crate::stats::{ratio, Summary};

/// The trickling peer's address.
const TRICKLE_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The flooding peer's address.
const FLOOD_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
/// The pause between two bytes of a trickled body.
const TRICKLE_EVERY: Duration = Duration::from_secs(10);
/// How long the untimed warm-up lasts.
const WARM_UP: Duration = Duration::from_millis(300);
/// How long the peers have to take their places before a timed run.
const SETTLE: Duration = Duration::from_secs(1);

/// The figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct HostileGetFigures {
    /// The legitimate client's keep-alive connections.
    pub connections: usize,
    /// Rounds; each runs the client once with the peers and once without.
    pub rounds: usize,
    /// Seconds of each run.
    pub seconds: f64,
    /// One address's share of the connections.
    pub share: usize,
    /// Without the hostile peers.
    pub quiet: Side,
    /// With them.
    pub attacked: Side,
    /// attacked / quiet requests per second.
    pub throughput_ratio: f64,
    /// The trickling peer's connections open when each attacked run
    /// ended, the fewest of the rounds (its share when it held it all).
    pub trickle_held: u64,
    /// Connections the flooding peer made, over every attacked run.
    pub flood_connections: u64,
    /// Of them, refused with a 503.
    pub flood_refused: u64,
}

/// The legitimate client's figures on one side.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Requests answered.
    pub requests: u64,
    /// Requests per second.
    pub per_sec: f64,
    /// Each request's time.
    pub latency: Summary,
}

impl Side {
    fn of(loads: &[Load]) -> Self {
        let times: Vec<Duration> = loads.iter().flat_map(|l| l.times.iter().copied()).collect();
        let requests: u64 = loads.iter().map(|l| l.requests).sum();
        let seconds: f64 = loads.iter().map(|l| l.elapsed.as_secs_f64()).sum();
        Self {
            requests,
            per_sec: ratio(requests as f64, seconds),
            latency: Summary::of(&times),
        }
    }
}

/// Measures `rounds` rounds of `seconds` with `connections` legitimate
/// connections.
///
/// # Errors
/// When the server cannot start, or a legitimate request fails or is
/// answered otherwise than with the handoff.
pub async fn measure(
    backend: &dyn BenchBackend,
    access: &Access,
    connections: usize,
    seconds: f64,
    rounds: usize,
) -> BenchResult<HostileGetFigures> {
    let (config, store, handoff) = super::get::one_handoff(backend, "serve-hostile").await?;
    let path = format!("/v1/handoffs/{}", handoff.id.as_str());
    let expect = handoff.id.as_str().as_bytes().to_vec();
    let service = Service::start(store, access, None).await?;
    let addr = service.addr();
    let (status, _) = Connection::open(addr, access.token())
        .await?
        .get_body(&path)
        .await?;
    if status != 200 {
        return fail(format!("GET {path} answered {status}"));
    }
    let share = Limits::default().connections_per_peer();
    let duration = Duration::from_secs_f64(seconds);
    let run = |time| load::run(addr, access.token(), &path, &expect, connections, time);
    run(WARM_UP).await?;
    let (mut quiet, mut attacked) = (Vec::new(), Vec::new());
    let (mut trickle_held, mut flood_connections, mut flood_refused) = (u64::MAX, 0, 0);
    for round in 0..rounds {
        if round % 2 == 0 {
            quiet.push(run(duration).await?);
        }
        let peers = Peers::start(addr, access.token(), share);
        tokio::time::sleep(SETTLE).await;
        let load = run(duration).await;
        trickle_held = trickle_held.min(peers.trickle_open.load(Ordering::SeqCst));
        flood_connections += peers.flood_connections.load(Ordering::SeqCst);
        flood_refused += peers.flood_refused.load(Ordering::SeqCst);
        peers.stop().await;
        attacked.push(load?);
        if round % 2 == 1 {
            quiet.push(run(duration).await?);
        }
    }
    service.stop().await;
    backend.remove(&config).await;
    let (quiet, attacked) = (Side::of(&quiet), Side::of(&attacked));
    Ok(HostileGetFigures {
        connections,
        rounds,
        seconds,
        share,
        throughput_ratio: ratio(attacked.per_sec, quiet.per_sec),
        quiet,
        attacked,
        trickle_held: if trickle_held == u64::MAX {
            0
        } else {
            trickle_held
        },
        flood_connections,
        flood_refused,
    })
}

/// The trickling and the flooding peer, running until stopped.
struct Peers {
    tasks: JoinSet<()>,
    trickle_open: Arc<AtomicU64>,
    flood_connections: Arc<AtomicU64>,
    flood_refused: Arc<AtomicU64>,
}

impl Peers {
    fn start(server: SocketAddr, token: &str, share: usize) -> Self {
        let trickle_open = Arc::new(AtomicU64::new(0));
        let flood_connections = Arc::new(AtomicU64::new(0));
        let flood_refused = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        for n in 0..share {
            let head = if n % 2 == 0 {
                format!(
                    "POST /sign-in HTTP/1.1\r\nHost: {server}\r\n\
                     Content-Type: application/x-www-form-urlencoded\r\n\
                     Content-Length: 16000\r\n\r\ntoken="
                )
            } else {
                format!(
                    "POST /v1/handoffs HTTP/1.1\r\nHost: {server}\r\n\
                     Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
                     Content-Length: 100000\r\n\r\n{{"
                )
            };
            let open = trickle_open.clone();
            tasks.spawn(async move {
                loop {
                    let Some(mut stream) = connect_from(TRICKLE_ADDR, server).await else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    open.fetch_add(1, Ordering::SeqCst);
                    trickle(&mut stream, &head).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
        for _ in 0..2 * share {
            let (made, refused) = (flood_connections.clone(), flood_refused.clone());
            tasks.spawn(async move {
                loop {
                    let Some(mut stream) = connect_from(FLOOD_ADDR, server).await else {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    made.fetch_add(1, Ordering::SeqCst);
                    let mut buffer = [0_u8; 512];
                    if let Ok(n) = stream.read(&mut buffer).await {
                        if buffer[..n].starts_with(b"HTTP/1.1 503") {
                            refused.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            });
        }
        Self {
            tasks,
            trickle_open,
            flood_connections,
            flood_refused,
        }
    }

    /// Stops both peers, closing their connections, and gives the server
    /// a moment to see them close.
    async fn stop(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Sends `head`, then a byte every [`TRICKLE_EVERY`] until the server
/// answers or closes.
async fn trickle(stream: &mut TcpStream, head: &str) {
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let mut buffer = [0_u8; 512];
    loop {
        match tokio::time::timeout(TRICKLE_EVERY, stream.read(&mut buffer)).await {
            Ok(_) => return,
            Err(_) => {
                if stream.write_all(b"a").await.is_err() {
                    return;
                }
            }
        }
    }
}
