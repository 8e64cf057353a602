//! The load generator: HTTP/1.1 clients on loopback, one keep-alive
//! connection each (hyper's `conn::http1::handshake`, so the connection
//! count is exact), each sending `GET`s one after another for a fixed time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, HOST};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::error::{fail, BenchResult, Context};

/// One client connection to a server.
pub struct Connection {
    sender: SendRequest<Empty<Bytes>>,
    host: String,
    bearer: String,
}

impl Connection {
    /// Opens a connection to `addr`, sending `token` with every request.
    ///
    /// # Errors
    /// When the connection cannot be made.
    pub async fn open(addr: SocketAddr, token: &str) -> BenchResult<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .context(format!("connect to {addr}"))?;
        stream.set_nodelay(true).context("TCP_NODELAY")?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP handshake")?;
        tokio::spawn(connection);
        Ok(Self {
            sender,
            host: addr.to_string(),
            bearer: format!("Bearer {token}"),
        })
    }

    /// Sends `GET path` and returns the answer's head and body (the body
    /// not read yet).
    ///
    /// # Errors
    /// When the connection fails.
    pub async fn get(&mut self, path: &str) -> BenchResult<Response<Incoming>> {
        let request = Request::get(path)
            .header(HOST, &self.host)
            .header(AUTHORIZATION, &self.bearer)
            .body(Empty::new())
            .context("build a request")?;
        self.sender.ready().await.context("connection")?;
        self.sender
            .send_request(request)
            .await
            .context(format!("GET {path}"))
    }

    /// `GET path`, its status and whole body.
    ///
    /// # Errors
    /// When the connection fails.
    pub async fn get_body(&mut self, path: &str) -> BenchResult<(u16, Bytes)> {
        let response = self.get(path).await?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .context(format!("read the answer to GET {path}"))?
            .to_bytes();
        Ok((status, body))
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// What `clients` connections got from sending `GET path` back to back
/// for `duration`.
#[derive(Debug, Clone)]
pub struct Load {
    /// Requests answered.
    pub requests: u64,
    /// From the moment every connection was open to the last answer.
    pub elapsed: Duration,
    /// Each request's time, from sending it to its whole answer.
    pub times: Vec<Duration>,
}

/// Opens `clients` connections to `addr`, then has each send `GET path`
/// one request after another for `duration`. Every answer must be a 200
/// whose body holds `expect`.
///
/// # Errors
/// When a connection fails, or an answer is not what it should be.
pub async fn run(
    addr: SocketAddr,
    token: &str,
    path: &str,
    expect: &[u8],
    clients: usize,
    duration: Duration,
) -> BenchResult<Load> {
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        connections.push(Connection::open(addr, token).await?);
    }
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = JoinSet::new();
    for mut connection in connections {
        let (path, expect) = (path.to_string(), expect.to_vec());
        tasks.spawn(async move {
            let mut times = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                let (status, body) = connection.get_body(&path).await?;
                times.push(sent.elapsed());
                if status != 200 || !contains(&body, &expect) {
                    return fail(format!(
                        "GET {path} answered {status} with {} bytes, not the handoff",
                        body.len()
                    ));
                }
            }
            Ok(times)
        });
    }
    let mut times = Vec::new();
    while let Some(done) = tasks.join_next().await {
        times.extend(done.context("a client task")??);
    }
    Ok(Load {
        requests: times.len() as u64,
        elapsed: started.elapsed(),
        times,
    })
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}
