//! A TCP relay of a test's own in front of a server: it passes bytes both
//! ways and, when told, stops passing those of every connection that has
//! sent a `LISTEN` by then while keeping it open, as a firewall that
//! forgot an idle connection would leave it; or stops passing anything
//! on any connection, new ones too, as a server powered off or cut off by
//! the network would, until told to pass again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

/// A relay on `127.0.0.1:PORT`; it and its connections end when it is
/// dropped.
#[derive(Debug)]
pub struct Relay {
    port: u16,
    shared: Arc<Shared>,
    accepting: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Shared {
    /// How many connections sent a `LISTEN`.
    listens: AtomicUsize,
    /// Each such connection's switch: set, it passes nothing.
    listeners: Mutex<Vec<Arc<AtomicBool>>>,
    /// Set: no connection passes anything.
    all_silenced: AtomicBool,
    /// How many pieces sent to the server held `marker`.
    marked: AtomicUsize,
    marker: Vec<u8>,
    /// The connections' tasks.
    connections: Mutex<Vec<AbortHandle>>,
}

impl Relay {
    /// Relays `127.0.0.1:PORT` to `target` (`host:port`), counting the
    /// pieces sent to the server that hold `marker`.
    ///
    /// # Panics
    /// When it cannot listen.
    pub async fn start(target: &str, marker: &[u8]) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a relay");
        let port = listener.local_addr().expect("the relay's address").port();
        let shared = Arc::new(Shared {
            marker: marker.to_vec(),
            ..Shared::default()
        });
        let target = target.to_string();
        let accepting = {
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&target).await else {
                        continue;
                    };
                    let task = tokio::spawn(relay(client, server, shared.clone()));
                    if let Ok(mut connections) = shared.connections.lock() {
                        connections.push(task.abort_handle());
                    }
                }
            })
        };
        Self {
            port,
            shared,
            accepting,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// From now on, the connections that have sent a `LISTEN` pass
    /// nothing; those that send one later are not silenced.
    pub fn silence_listeners(&self) {
        let listeners = self.shared.listeners.lock().expect("the relay's listeners");
        for silenced in listeners.iter() {
            silenced.store(true, Ordering::SeqCst);
        }
    }

    /// From now on, until [`Relay::pass_again`], no connection passes
    /// anything: each holds what it reads, open connections and new ones
    /// alike.
    pub fn silence_all(&self) {
        self.shared.all_silenced.store(true, Ordering::SeqCst);
    }

    /// New connections pass again (those that went silent stay so).
    pub fn pass_again(&self) {
        self.shared.all_silenced.store(false, Ordering::SeqCst);
    }

    /// Whether `count` connections have sent a `LISTEN` within `patience`.
    pub async fn listens_within(&self, count: usize, patience: Duration) -> bool {
        within(&self.shared.listens, count, patience).await
    }

    /// How many pieces sent to the server so far held the marker.
    pub fn marked(&self) -> usize {
        self.shared.marked.load(Ordering::SeqCst)
    }

    /// Whether `count` pieces holding the marker were sent within
    /// `patience`.
    pub async fn marked_within(&self, count: usize, patience: Duration) -> bool {
        within(&self.shared.marked, count, patience).await
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accepting.abort();
        if let Ok(connections) = self.shared.connections.lock() {
            for connection in connections.iter() {
                connection.abort();
            }
        }
    }
}

/// Whether `counter` reaches `count` within `patience`.
async fn within(counter: &AtomicUsize, count: usize, patience: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        if counter.load(Ordering::SeqCst) >= count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    counter.load(Ordering::SeqCst) >= count
}

/// Passes bytes both ways until either side closes, or holds the
/// connection open passing nothing once it is a silenced listener.
async fn relay(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let listener = Arc::new(Listener::default());
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        client_read,
        server_write,
        listener.clone(),
        shared.clone(),
        true,
    );
    let down = pump(server_read, client_write, listener, shared, false);
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// One connection's state.
#[derive(Debug, Default)]
struct Listener {
    /// Whether it sent a `LISTEN`.
    listened: AtomicBool,
    /// Whether it is silenced.
    silenced: Arc<AtomicBool>,
}

fn holds(chunk: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && chunk.windows(needle.len()).any(|window| window == needle)
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    listener: Arc<Listener>,
    shared: Arc<Shared>,
    from_client: bool,
) {
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        let chunk = &buffer[..read];
        if from_client && holds(chunk, &shared.marker) {
            shared.marked.fetch_add(1, Ordering::SeqCst);
        }
        if from_client && holds(chunk, b"LISTEN") && !listener.listened.swap(true, Ordering::SeqCst)
        {
            shared.listens.fetch_add(1, Ordering::SeqCst);
            shared
                .listeners
                .lock()
                .expect("the relay's listeners")
                .push(listener.silenced.clone());
        }
        if listener.silenced.load(Ordering::SeqCst) || shared.all_silenced.load(Ordering::SeqCst) {
            // Gone silent: hold both sockets, pass nothing.
            std::future::pending::<()>().await;
        }
        if to.write_all(chunk).await.is_err() {
            return;
        }
    }
}
