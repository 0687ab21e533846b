//! Limits on open Realtime sockets: in all, and per client address. A socket takes a
//! [`SocketSlot`] before its upgrade and gives it back when dropped (the socket closed, or the
//! upgrade never completed).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};

use crate::error::ApiError;

/// Why a socket was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketRefusal {
    /// The server has `max` sockets open.
    Total { max: usize },
    /// This client has `max` sockets open.
    PerClient { max: usize },
}

impl From<SocketRefusal> for ApiError {
    fn from(r: SocketRefusal) -> ApiError {
        match r {
            SocketRefusal::Total { max } => ApiError::busy(format!(
                "{max} realtime sockets are open, the server's limit (--max-sockets)"
            )),
            SocketRefusal::PerClient { max } => ApiError {
                status: StatusCode::TOO_MANY_REQUESTS,
                kind: "rate_limit_error",
                message: format!(
                    "this client has {max} realtime sockets open, the limit per client \
                     (--max-sockets-per-client)"
                ),
            },
        }
    }
}

#[derive(Default)]
struct Open {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// The open sockets, counted against `--max-sockets` and `--max-sockets-per-client`.
pub struct SocketLimits {
    max_total: usize,
    max_per_client: usize,
    open: Mutex<Open>,
}

/// One open socket's place; dropping it frees the place.
pub struct SocketSlot {
    limits: Arc<SocketLimits>,
    client: IpAddr,
}

impl SocketLimits {
    /// Limits of `max_total` sockets and `max_per_client` per address (0: no limit).
    pub fn new(max_total: usize, max_per_client: usize) -> Arc<SocketLimits> {
        Arc::new(SocketLimits {
            max_total,
            max_per_client,
            open: Mutex::new(Open::default()),
        })
    }

    /// A place for one more socket of `client`, or why not.
    pub fn acquire(self: &Arc<Self>, client: IpAddr) -> Result<SocketSlot, SocketRefusal> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if self.max_total > 0 && open.total >= self.max_total {
            return Err(SocketRefusal::Total {
                max: self.max_total,
            });
        }
        let mine = open.per_client.get(&client).copied().unwrap_or(0);
        if self.max_per_client > 0 && mine >= self.max_per_client {
            return Err(SocketRefusal::PerClient {
                max: self.max_per_client,
            });
        }
        open.total += 1;
        open.per_client.insert(client, mine + 1);
        Ok(SocketSlot {
            limits: self.clone(),
            client,
        })
    }

    /// Sockets open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                // why: an address that comes once must not stay in the map forever.
                open.per_client.remove(&self.client);
            }
        }
    }
}

/// The client address a socket counts against: the peer, or with `trust_forwarded` the last
/// `X-Forwarded-For` entry (the address the proxy in front saw; earlier entries are whatever
/// the client wrote, so they are not trusted). `None` when neither is known.
pub fn client_address(
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    trust_forwarded: bool,
) -> Option<IpAddr> {
    if trust_forwarded {
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|a| a.trim().parse::<IpAddr>().ok())
            .next_back();
        if forwarded.is_some() {
            return forwarded;
        }
    }
    peer
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn per_client_then_total_limits_hold_and_slots_come_back() {
        let l = SocketLimits::new(3, 2);
        let a1 = l.acquire(A).unwrap();
        let _a2 = l.acquire(A).unwrap();
        assert_eq!(
            l.acquire(A).err(),
            Some(SocketRefusal::PerClient { max: 2 })
        );
        let _b1 = l.acquire(B).unwrap();
        assert_eq!(l.acquire(B).err(), Some(SocketRefusal::Total { max: 3 }));
        assert_eq!(l.open(), 3);
        drop(a1);
        assert_eq!(l.open(), 2);
        let _a3 = l.acquire(A).unwrap();
    }

    #[test]
    fn zero_is_no_limit() {
        let l = SocketLimits::new(0, 0);
        let slots: Vec<_> = (0..100).map(|_| l.acquire(A).unwrap()).collect();
        assert_eq!(l.open(), 100);
        drop(slots);
        assert_eq!(l.open(), 0);
    }

    #[test]
    fn forwarded_is_read_only_when_trusted_and_its_last_entry() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "1.2.3.4, 10.0.0.2".parse().unwrap());
        assert_eq!(client_address(Some(A), &h, false), Some(A));
        assert_eq!(client_address(Some(A), &h, true), Some(B));
        assert_eq!(client_address(Some(A), &HeaderMap::new(), true), Some(A));
    }
}
