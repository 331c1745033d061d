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
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::wire::Bytes32;

/// How long a ticket is accepted after it was issued.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(600);
/// Most tickets a server remembers; issuing one more forgets the oldest.
pub const MAX_TICKETS: usize = 4096;

/// The server's outstanding tickets: each accepted once, within its lifetime.
#[derive(Debug, Default)]
pub struct TicketStore {
    inner: Mutex<Outstanding>,
}

#[derive(Debug, Default)]
struct Outstanding {
    /// Each ticket's expiry.
    by_ticket: HashMap<[u8; 32], Instant>,
    /// Issue order, for forgetting the oldest; may name tickets already used.
    order: VecDeque<[u8; 32]>,
}

impl TicketStore {
    /// A fresh ticket for a client that has authenticated.
    pub fn issue(&self) -> std::io::Result<Bytes32> {
        let ticket = Bytes32::random()?;
        let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        while o.by_ticket.len() >= MAX_TICKETS {
            match o.order.pop_front() {
                Some(old) => {
                    o.by_ticket.remove(&old);
                }
                None => break,
            }
        }
        // Used tickets leave `order` behind them; drop those so it stays bounded too.
        if o.order.len() >= 2 * MAX_TICKETS {
            let Outstanding { by_ticket, order } = &mut *o;
            order.retain(|t| by_ticket.contains_key(t));
        }
        o.by_ticket
            .insert(ticket.0, Instant::now() + TICKET_LIFETIME);
        o.order.push_back(ticket.0);
        Ok(ticket)
    }

    /// Whether `ticket` is outstanding; it is forgotten either way (single use).
    pub fn redeem(&self, ticket: &Bytes32) -> bool {
        let mut o = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        o.by_ticket
            .remove(&ticket.0)
            .is_some_and(|expires| Instant::now() < expires)
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

/// The client's ticket, kept in a file between runs (`--ticket-file`): JSON with the ticket
/// and when it expires (Unix seconds).
#[derive(Debug, Clone)]
pub struct TicketFile {
    pub path: PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    ticket: Bytes32,
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
    pub fn take(&self) -> Option<Bytes32> {
        let taken = self
            .path
            .with_extension(format!("taken-{}", std::process::id()));
        std::fs::rename(&self.path, &taken).ok()?;
        let text = std::fs::read(&taken);
        let _ = std::fs::remove_file(&taken);
        let s: Stored = serde_json::from_slice(&text.ok()?).ok()?;
        // A second's margin for the trip to the server.
        (unix_s() + 1 < s.expires_unix_s).then_some(s.ticket)
    }

    /// Keeps a ticket the server issued (written beside and renamed over: never half a file).
    /// A ticket that cannot be kept only costs the next run a round trip, so failures are
    /// ignored.
    pub fn keep(&self, ticket: Bytes32, lifetime_s: u32) {
        let s = Stored {
            ticket,
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

    #[test]
    fn a_ticket_is_redeemed_once() {
        let store = TicketStore::default();
        let t = store.issue().unwrap();
        assert!(!store.redeem(&Bytes32([0; 32])), "forged");
        assert!(store.redeem(&t));
        assert!(!store.redeem(&t), "replayed");
        assert!(store.is_empty());
    }

    #[test]
    fn the_store_forgets_the_oldest_when_full() {
        let store = TicketStore::default();
        let first = store.issue().unwrap();
        let second = store.issue().unwrap();
        for _ in 0..MAX_TICKETS - 1 {
            store.issue().unwrap();
        }
        assert_eq!(store.len(), MAX_TICKETS);
        assert!(!store.redeem(&first));
        assert!(store.redeem(&second));
        // Used tickets do not pile up in the issue order either.
        for _ in 0..3 * MAX_TICKETS {
            let t = store.issue().unwrap();
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
        f.keep(Bytes32([3; 32]), 600);
        assert_eq!(f.take(), Some(Bytes32([3; 32])));
        assert_eq!(f.take(), None, "taken");
        f.keep(Bytes32([5; 32]), 0);
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
