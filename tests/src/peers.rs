//! Several peers on one machine: a connection from any address of
//! 127.0.0.0/8 reaches a loopback listener, so the soak, the benchmark and
//! the service's tests play clients of distinct addresses (C29's share per
//! peer address) from one host.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};

/// How long a connection may take to be made.
const CONNECT_WITHIN: Duration = Duration::from_secs(5);

/// A connection from `source` (an address of this machine) to `server`,
/// or `None` when none can be made within 5 s.
pub async fn connect_from(source: Ipv4Addr, server: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((source, 0))).ok()?;
    tokio::time::timeout(CONNECT_WITHIN, socket.connect(server))
        .await
        .ok()?
        .ok()
}
