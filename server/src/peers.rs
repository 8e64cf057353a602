//! Each peer address's share of the service's connections (contract
//! C29): how many connections each peer holds, and the place a connection
//! takes in its peer's share, given back when the connection ends. A peer
//! is its IPv4 address, or its IPv6 /64 network.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// How many connections each peer holds, by [`peer_key`]; a peer may hold
/// at most `share`.
#[derive(Debug)]
pub(crate) struct Peers {
    share: usize,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// A connection's place in its peer's share, given back when dropped.
#[derive(Debug)]
pub(crate) struct PeerPlace {
    key: IpAddr,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Peers {
    /// No connection held yet; each peer may hold `share`.
    pub(crate) fn new(share: usize) -> Self {
        Self {
            share,
            held: Arc::default(),
        }
    }

    /// A place for a connection of `ip`, or `None` when its share is held.
    pub(crate) fn take(&self, ip: IpAddr) -> Option<PeerPlace> {
        let key = peer_key(ip);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let count = held.entry(key).or_insert(0);
        if *count >= self.share {
            return None;
        }
        *count += 1;
        Some(PeerPlace {
            key,
            held: self.held.clone(),
        })
    }
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// What a peer is counted as: its IPv4 address (also when it reaches an
/// IPv6 socket as `::ffff:a.b.c.d`), or its IPv6 /64 network, which one
/// host usually holds whole.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !((1_u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(network))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_its_ipv4_address_or_its_ipv6_network() {
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(peer_key(v4), v4);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(peer_key(mapped), v4, "an IPv4 peer on an IPv6 socket");
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let same: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(peer_key(one), peer_key(same), "one /64");
        assert_ne!(peer_key(one), peer_key(other), "another /64");
        assert_eq!(peer_key(one), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn a_peer_holds_its_share_and_gets_places_back() {
        let peers = Peers::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = peers.take(a).unwrap();
        let _second = peers.take(a).unwrap();
        assert!(peers.take(a).is_none(), "a third place of a");
        assert!(peers.take(b).is_some(), "b has a share of its own");
        drop(first);
        assert!(peers.take(a).is_some(), "a place given back");
    }
}
