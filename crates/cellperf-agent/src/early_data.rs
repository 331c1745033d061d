//! TCP data connections opened beside the request (protocol version 4).
//!
//! A TCP test's data connections used to open after `accepted` had named their port: a
//! connect, then the cookie and the server's `ready`, two round trips (0.4-0.5 s on UMTS)
//! between the request and the first data. A probe resuming with a ticket knows the cookie
//! of its first test already ([`crate::ticket::reserved_cookie`]), so it opens its data
//! connections to the server's control port at the same moment as its control connection;
//! each sends one frame, `data_connection` (that cookie, and which end sends), and waits. The
//! server holds them here until the resumed session's test takes them, and the data start as
//! soon as the request is read: the test pays the connect and the first flight, as a UDP test
//! does.
//!
//! The data connection's socket options are the same as on the old path where they bear on
//! the measurement: [`crate::tcp::opens_beside_request`] says when that is.
//!
//! Bounded for strangers: until its frame a data connection is one of the handshakes in
//! [`crate::admission`] (the hello's 2 s, 8 per source); after it, it is held only if its
//! cookie is one an outstanding or just-redeemed ticket reserved
//! ([`crate::ticket::TicketStore::expects_data`]: a stranger off the path does not know one),
//! for at most [`EARLY_DATA_HOLD`], [`PER_SOURCE`] per source address and [`MAX_HELD`] in all
//! (the oldest closed first). A test takes only connections from its control connection's
//! address; others with its cookie are closed unread.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::admission::source_of;
use crate::wire::Cookie;

pub use crate::ticket::EARLY_DATA_HOLD;

/// Most data connections held in all (one descriptor each).
pub const MAX_HELD: usize = 64;
/// Most held for one source (an IPv4 address, an IPv6 /64).
pub const PER_SOURCE: usize = 8;
/// Most data connections a test may open beside its request (streams × directions); a test
/// with more opens them after `accepted`, as before.
pub const MAX_PER_TEST: u32 = 4;

struct Held {
    cookie: Cookie,
    probe_sends: bool,
    stream: TcpStream,
    from: SocketAddr,
    arrived: Instant,
}

/// The server's held data connections.
#[derive(Default)]
pub struct EarlyData {
    held: Mutex<Vec<Held>>,
    arrived: Condvar,
}

/// What a test took: its connections the probe sends on, and those the server sends on.
#[derive(Default)]
pub struct Taken {
    pub ups: Vec<TcpStream>,
    pub downs: Vec<TcpStream>,
}

impl EarlyData {
    /// Keeps a data connection for its test; the error says why it is not kept.
    pub fn hold(
        &self,
        cookie: Cookie,
        probe_sends: bool,
        stream: TcpStream,
        from: SocketAddr,
    ) -> Result<(), String> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|h| h.arrived.elapsed() <= EARLY_DATA_HOLD);
        let source = source_of(from.ip());
        if held
            .iter()
            .filter(|h| source_of(h.from.ip()) == source)
            .count()
            >= PER_SOURCE
        {
            return Err(format!(
                "{PER_SOURCE} data connections from {source} wait for their tests already"
            ));
        }
        if held.len() >= MAX_HELD {
            held.remove(0);
        }
        held.push(Held {
            cookie,
            probe_sends,
            stream,
            from,
            arrived: Instant::now(),
        });
        self.arrived.notify_all();
        Ok(())
    }

    /// Waits until `deadline` for the test of `cookie` asked from `peer`: `want_up`
    /// connections the probe sends on and `want_down` the server sends on. `None` if they did
    /// not all come (those that did are closed; the test opens its connections after
    /// `accepted` instead); beside it, the addresses of connections with the cookie that came
    /// from elsewhere (closed unread).
    pub fn take(
        &self,
        cookie: &Cookie,
        peer: IpAddr,
        want_up: usize,
        want_down: usize,
        deadline: Instant,
    ) -> (Option<Taken>, Vec<SocketAddr>) {
        let mut t = Taken::default();
        let mut strangers = Vec::new();
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let mut i = 0;
            while i < held.len() {
                if held[i].cookie != *cookie {
                    i += 1;
                    continue;
                }
                let h = held.remove(i);
                if h.from.ip().to_canonical() != peer.to_canonical() {
                    strangers.push(h.from);
                } else if h.probe_sends && t.ups.len() < want_up {
                    t.ups.push(h.stream);
                } else if !h.probe_sends && t.downs.len() < want_down {
                    t.downs.push(h.stream);
                }
            }
            if t.ups.len() == want_up && t.downs.len() == want_down {
                return (Some(t), strangers);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (None, strangers);
            }
            held = self
                .arrived
                .wait_timeout(held, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Connections held now (for the tests and the stats).
    pub fn len(&self) -> usize {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|h| h.arrived.elapsed() <= EARLY_DATA_HOLD);
        held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    fn conn(l: &TcpListener) -> TcpStream {
        TcpStream::connect(l.local_addr().unwrap()).unwrap()
    }

    /// A test takes its own connections from its peer's address only; a source holds at most
    /// [`PER_SOURCE`]; the whole set at most [`MAX_HELD`], the oldest closed first.
    #[test]
    fn a_test_takes_its_own_and_strangers_are_bounded() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let early = EarlyData::default();
        let (mine, other) = (Cookie([1; 16]), Cookie([2; 16]));
        let at = |a: &str| -> SocketAddr { a.parse().unwrap() };
        early
            .hold(mine, false, conn(&l), at("10.0.0.1:1000"))
            .unwrap();
        early
            .hold(mine, false, conn(&l), at("10.0.0.9:1000"))
            .unwrap();
        early
            .hold(other, true, conn(&l), at("10.0.0.1:1001"))
            .unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        let (taken, strangers) = early.take(&mine, "10.0.0.1".parse().unwrap(), 0, 1, soon);
        let taken = taken.expect("its one download connection");
        assert_eq!((taken.ups.len(), taken.downs.len()), (0, 1));
        assert_eq!(strangers, [at("10.0.0.9:1000")]);
        assert_eq!(early.len(), 1, "the other test's stays");
        // Wanting more than came: nothing, after the deadline.
        let waited = Instant::now();
        let (none, _) = early.take(&other, "10.0.0.1".parse().unwrap(), 2, 0, soon);
        assert!(none.is_none() && waited.elapsed() < Duration::from_secs(1));
        assert!(early.is_empty());

        for i in 0..PER_SOURCE {
            early
                .hold(mine, true, conn(&l), at(&format!("10.0.1.1:{}", 2000 + i)))
                .unwrap();
        }
        let refused = early.hold(mine, true, conn(&l), at("10.0.1.1:3000"));
        assert!(refused
            .unwrap_err()
            .contains("8 data connections from 10.0.1.1"));
        for i in 0..MAX_HELD {
            let from = at(&format!("10.1.{}.{}:4000", i / 200, i % 200 + 1));
            early.hold(other, true, conn(&l), from).unwrap();
        }
        assert_eq!(early.len(), MAX_HELD);
    }
}
