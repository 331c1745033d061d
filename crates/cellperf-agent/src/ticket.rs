//! Resumption tickets: authentication in the client's first flight (protocol version 3).
//!
//! After a client of version 3 has authenticated, the server gives it a ticket: 32 random
//! bytes it remembers for [`TICKET_LIFETIME`]. The client's next connection opens with
//! `resume` (the ticket, a fresh nonce, a MAC over both with the token, and its first request)
//! instead of `hello`, and the server answers `auth_ok` and that request at once: one round
//! trip less than `hello` / `challenge` / `auth`. As in TLS 1.3's single-use tickets (RFC 8446
//! §8.1), the server keeps every outstanding ticket and deletes it when it is presented, so a
//! recorded first flight replayed later finds its ticket gone; an unknown, used, expired or
//! foreign ticket, or a MAC made with another token, gets the full `challenge` (never an
//! error, which would tell a guesser something). A ticket is not a secret (it crosses the
//! network in the clear, like a server nonce given in advance): what proves the client is the
//! MAC, which only a holder of the token can make. So a ticket is bound to neither end's
//! address: a mobile node's address changes (each emulated run's link has its own), and
//! a ticket shown to another server only gets the challenge a `hello` would have.
//!
//! [`TicketStore`] is the server's set (bounded: the oldest ticket goes when it is full, so
//! memory does not grow with clients); [`TicketFile`] is the client's one ticket on disk,
//! taken (renamed away) before use, so two probes sharing a file never present the same one.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::wire::{Bytes32, Cookie};

/// How long a ticket is accepted after it was issued.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(600);
/// Most tickets a server remembers; issuing one more forgets the oldest.
pub const MAX_TICKETS: usize = 4096;
/// Most tickets that hold a reserved UDP data socket at once (one descriptor each).
pub const MAX_RESERVED: usize = 64;
/// Receive buffer of a reserved socket until its test starts: room for the hello, not for
/// what a stranger may send to an idle port (64 of them hold at most 1 MiB of the kernel's).
const RESERVED_RCVBUF: usize = 16 * 1024;
/// How long the server holds a TCP data connection that came before its test's request
/// ([`crate::early_data`]).
pub const EARLY_DATA_HOLD: Duration = Duration::from_secs(5);

/// The cookie of a UDP test started with a ticket's reserved data socket: both ends know it
/// from the ticket, so the probe's UDP hello can go before the server's `accepted` names it.
/// (A cookie is no secret either: `accepted` carries it in clear.)
pub fn reserved_cookie(ticket: &Bytes32) -> Cookie {
    let mut c = [0u8; 16];
    c.copy_from_slice(&ticket.0[16..]);
    Cookie(c)
}

/// The server's outstanding tickets: each accepted once, within its lifetime.
#[derive(Debug, Default)]
pub struct TicketStore {
    inner: Mutex<Outstanding>,
}

#[derive(Debug)]
struct Entry {
    expires: Instant,
    /// A UDP socket bound for the ticket's next test, so that a download's hello can be sent
    /// beside the first flight ([`reserved_cookie`]).
    udp: Option<UdpSocket>,
}

#[derive(Debug, Default)]
struct Outstanding {
    by_ticket: HashMap<[u8; 32], Entry>,
    /// Issue order, for forgetting the oldest; may name tickets already used.
    order: VecDeque<[u8; 32]>,
    /// Reserved cookies of tickets redeemed within [`EARLY_DATA_HOLD`], oldest first: a TCP
    /// data connection opened beside a `resume` may arrive just after it.
    redeemed: VecDeque<(Cookie, Instant)>,
}

impl Outstanding {
    fn reserved(&self) -> usize {
        self.by_ticket.values().filter(|e| e.udp.is_some()).count()
    }
}

/// What a redeemed ticket brings: its reserved UDP data socket, if it had one.
#[derive(Debug)]
pub struct Redeemed {
    pub udp: Option<UdpSocket>,
}

impl TicketStore {
    /// A fresh ticket for a client that has authenticated over `family` (an address of the
    /// control connection's family), with a UDP data socket reserved for its next test while
    /// fewer than [`MAX_RESERVED`] are: the ticket and that socket's port.
    pub fn issue(&self, family: IpAddr) -> std::io::Result<(Bytes32, Option<u16>)> {
        let ticket = Bytes32::random()?;
        let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Expired and used tickets at the front go first, then the oldest while full.
        while let Some(front) = o.order.front().copied() {
            let stale = o.by_ticket.get(&front).is_none_or(|e| e.expires <= now);
            if !stale && o.by_ticket.len() < MAX_TICKETS {
                break;
            }
            o.by_ticket.remove(&front);
            o.order.pop_front();
        }
        // Used tickets elsewhere in `order` are dropped once it is twice the cap.
        if o.order.len() >= 2 * MAX_TICKETS {
            let Outstanding {
                by_ticket, order, ..
            } = &mut *o;
            order.retain(|t| by_ticket.contains_key(t));
        }
        let udp = if o.reserved() < MAX_RESERVED {
            let any: IpAddr = match family {
                IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
                IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
            };
            UdpSocket::bind(SocketAddr::new(any, 0)).ok().inspect(|s| {
                let _ = socket2::SockRef::from(s).set_recv_buffer_size(RESERVED_RCVBUF);
            })
        } else {
            None
        };
        let port = udp
            .as_ref()
            .and_then(|s| s.local_addr().ok())
            .map(|a| a.port());
        o.by_ticket.insert(
            ticket.0,
            Entry {
                expires: now + TICKET_LIFETIME,
                udp,
            },
        );
        o.order.push_back(ticket.0);
        Ok((ticket, port))
    }

    /// `Some` when `ticket` is outstanding; it is forgotten either way (single use).
    pub fn redeem(&self, ticket: &Bytes32) -> Option<Redeemed> {
        let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let entry = o.by_ticket.remove(&ticket.0).filter(|e| now < e.expires)?;
        while o
            .redeemed
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) > EARLY_DATA_HOLD)
            || o.redeemed.len() >= MAX_TICKETS
        {
            o.redeemed.pop_front();
        }
        o.redeemed.push_back((reserved_cookie(ticket), now));
        Some(Redeemed { udp: entry.udp })
    }

    /// Whether a TCP data connection presenting `cookie` before its test may be held
    /// ([`crate::early_data`]): the cookie is the reserved one of an outstanding ticket, or
    /// of one redeemed within [`EARLY_DATA_HOLD`]. Nobody else's connection is kept.
    pub fn expects_data(&self, cookie: &Cookie) -> bool {
        let o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        o.redeemed
            .iter()
            .any(|(c, at)| c == cookie && now.duration_since(*at) <= EARLY_DATA_HOLD)
            || o.by_ticket
                .iter()
                .any(|(t, e)| now < e.expires && reserved_cookie(&Bytes32(*t)) == *cookie)
    }

    /// Tickets outstanding (for the tests and the stats).
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_ticket
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The client's ticket, kept in a file between runs (`--ticket-file`): JSON with the ticket,
/// when it expires (Unix seconds) and the server's UDP port reserved for it.
#[derive(Debug, Clone)]
pub struct TicketFile {
    pub path: PathBuf,
}

/// A ticket as the client keeps it: the ticket, and the UDP data port the server reserved
/// for the ticket's next test, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumption {
    pub ticket: Bytes32,
    pub udp_port: Option<u16>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    ticket: Bytes32,
    udp_port: Option<u16>,
    expires_unix_s: i64,
}

fn unix_s() -> i64 {
    crate::clock::realtime_ns() / 1_000_000_000
}

impl TicketFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TicketFile { path: path.into() }
    }

    /// Takes the ticket out of the file (renamed away first, so that of two probes only one
    /// gets it): `None` without a file, or with one that is unreadable or expired. Never an
    /// error: no ticket means a full handshake.
    pub fn take(&self) -> Option<Resumption> {
        let taken = self
            .path
            .with_extension(format!("taken-{}", std::process::id()));
        std::fs::rename(&self.path, &taken).ok()?;
        let text = std::fs::read(&taken);
        let _ = std::fs::remove_file(&taken);
        let s: Stored = serde_json::from_slice(&text.ok()?).ok()?;
        // A second's margin for the trip to the server.
        (unix_s() + 1 < s.expires_unix_s).then_some(Resumption {
            ticket: s.ticket,
            udp_port: s.udp_port,
        })
    }

    /// Keeps a ticket the server issued (written beside and renamed over: never half a file).
    /// A ticket that cannot be kept only costs the next run a round trip, so failures are
    /// ignored.
    pub fn keep(&self, resumption: Resumption, lifetime_s: u32) {
        let s = Stored {
            ticket: resumption.ticket,
            udp_port: resumption.udp_port,
            expires_unix_s: unix_s() + lifetime_s as i64,
        };
        let part = self
            .path
            .with_extension(format!("part-{}", std::process::id()));
        let Ok(text) = serde_json::to_vec(&s) else {
            return;
        };
        if std::fs::write(&part, text).is_err() || std::fs::rename(&part, &self.path).is_err() {
            let _ = std::fs::remove_file(&part);
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4() -> IpAddr {
        Ipv4Addr::LOCALHOST.into()
    }

    #[test]
    fn a_ticket_is_redeemed_once() {
        let store = TicketStore::default();
        let t = store.issue(v4()).unwrap().0;
        assert!(store.redeem(&Bytes32([0; 32])).is_none(), "forged");
        assert!(store.redeem(&t).is_some());
        assert!(store.redeem(&t).is_none(), "replayed");
        assert!(store.is_empty());
    }

    /// The first tickets hold a UDP socket each for their next test, up to the cap; a
    /// redeemed ticket hands its socket over, and the socket's place is free again.
    #[test]
    fn the_first_tickets_reserve_a_udp_socket_up_to_the_cap() {
        let store = TicketStore::default();
        let issued: Vec<_> = (0..MAX_RESERVED + 1)
            .map(|_| store.issue(v4()).unwrap())
            .collect();
        assert!(issued[..MAX_RESERVED].iter().all(|(_, p)| p.is_some()));
        assert_eq!(issued[MAX_RESERVED].1, None);
        let (first, port) = issued[0];
        let sock = store.redeem(&first).unwrap().udp.unwrap();
        assert_eq!(Some(sock.local_addr().unwrap().port()), port);
        assert!(store.issue(v4()).unwrap().1.is_some());
    }

    #[test]
    fn the_store_forgets_the_oldest_when_full() {
        let store = TicketStore::default();
        let first = store.issue(v4()).unwrap().0;
        let second = store.issue(v4()).unwrap().0;
        for _ in 0..MAX_TICKETS - 1 {
            store.issue(v4()).unwrap();
        }
        assert_eq!(store.len(), MAX_TICKETS);
        assert!(store.redeem(&first).is_none());
        assert!(store.redeem(&second).is_some());
        // Used tickets do not pile up in the issue order either.
        for _ in 0..3 * MAX_TICKETS {
            let t = store.issue(v4()).unwrap().0;
            store.redeem(&t);
        }
        assert!(store.inner.lock().unwrap().order.len() <= 2 * MAX_TICKETS);
    }

    #[test]
    fn the_file_gives_its_ticket_once() {
        let dir = std::env::temp_dir().join(format!("cellperf-ticket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = TicketFile::new(dir.join("probe.ticket"));
        assert_eq!(f.take(), None, "no file");
        let r = Resumption {
            ticket: Bytes32([3; 32]),
            udp_port: Some(40000),
        };
        f.keep(r, 600);
        assert_eq!(f.take(), Some(r));
        assert_eq!(f.take(), None, "taken");
        f.keep(r, 0);
        assert_eq!(f.take(), None, "expired");
        std::fs::write(f.path(), b"{not json").unwrap();
        assert_eq!(f.take(), None, "unreadable");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "nothing left behind"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
