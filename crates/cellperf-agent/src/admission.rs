//! Who may hold a control connection that has not authenticated yet.
//!
//! Idle connections must never keep an authenticated client out (issue 18: 64 idle
//! connections from one address, reopened 15 times a second, locked every probe out). As
//! sshd does with `MaxStartups` and `PerSourceMaxStartups`, and TWAMP servers with their
//! per-client connection limits, only connections still in the handshake are limited here:
//!
//! - each source (an IPv4 address, an IPv6 /64: one host's share) may hold
//!   [`PER_SOURCE`] of them; more from it are refused at once;
//! - when [`MAX_PENDING`] are held in all, one is closed to make room for the new one: the
//!   oldest of the source holding the most (a client that authenticates takes a few round
//!   trips and holds one; a flood holds many and its oldest are idle), so a flood from many
//!   addresses churns through its own connections, not a real client's;
//! - each must send its hello within [`crate::handshake::HELLO_TIMEOUT`] and authenticate
//!   within [`crate::handshake::HANDSHAKE_TIMEOUT`] (the session enforces both).
//!
//! An authenticated connection leaves this pool, and counts against the server's own cap.
//! [`Gate`] is a listener whose connections go through the pool (`cellperf server` and the
//! stream server both accept through one).

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::wire::{send_message, Message, SERVER_BUSY};

/// How long a refused connection stays open for its client to read why.
const REFUSED_LINGER: Duration = Duration::from_secs(1);
/// Most refused connections kept open at once (each holds a descriptor).
const MAX_REFUSED_LINGERING: usize = 256;

/// Handshakes in progress from one source.
pub const PER_SOURCE: usize = 8;
/// Handshakes in progress in all; the oldest gives way to a new one beyond this.
pub const MAX_PENDING: usize = 32;

/// The part of an address one host is assumed to control.
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

struct Pending {
    id: u64,
    source: IpAddr,
    /// A handle on the connection, to close it when evicted.
    stream: TcpStream,
}

#[derive(Default)]
struct Pool {
    next_id: u64,
    /// Oldest first.
    pending: Vec<Pending>,
}

/// The pool of connections still in their handshake.
#[derive(Clone, Default)]
pub struct Admission(Arc<Mutex<Pool>>);

/// What [`Admission::admit`] did.
pub struct Admitted {
    pub ticket: Ticket,
    /// Whether the oldest handshake in progress was closed to make room.
    pub evicted: bool,
}

/// A place in the pool; dropping it (authenticated, or the connection ended) frees it.
pub struct Ticket {
    id: u64,
    pool: Admission,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut pool = self.pool.0.lock().unwrap_or_else(|e| e.into_inner());
        pool.pending.retain(|p| p.id != self.id);
    }
}

impl Admission {
    /// Admits a new connection from `peer`, closing the oldest handshake if the pool is
    /// full; refuses it (with the reason) if its source already holds [`PER_SOURCE`].
    pub fn admit(&self, stream: &TcpStream, peer: IpAddr) -> Result<Admitted, String> {
        let handle = stream
            .try_clone()
            .map_err(|e| format!("cannot keep the connection ({e})"))?;
        let source = source_of(peer);
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if pool.pending.iter().filter(|p| p.source == source).count() >= PER_SOURCE {
            return Err(format!(
                "{SERVER_BUSY}: {PER_SOURCE} connections from {source} have not authenticated yet"
            ));
        }
        let evicted = pool.pending.len() >= MAX_PENDING;
        if evicted {
            let held_by = |src: IpAddr| pool.pending.iter().filter(|p| p.source == src).count();
            // The first (oldest) connection of a source with the most: `max_by_key` keeps the
            // last of equals, so walk newest to oldest.
            let at = (0..pool.pending.len())
                .rev()
                .max_by_key(|&i| held_by(pool.pending[i].source))
                .unwrap_or(0);
            let victim = pool.pending.remove(at);
            // Its session's next read ends.
            let _ = victim.stream.shutdown(Shutdown::Both);
        }
        let id = pool.next_id;
        pool.next_id += 1;
        pool.pending.push(Pending {
            id,
            source,
            stream: handle,
        });
        Ok(Admitted {
            ticket: Ticket {
                id,
                pool: self.clone(),
            },
            evicted,
        })
    }

    /// Handshakes in progress.
    pub fn pending(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pending
            .len()
    }
}

/// What [`Gate::accept`] found.
pub enum Arrival {
    /// No connection waiting (or the accept failed and was logged).
    Nothing,
    /// Refused for its source's handshakes in progress; told why and closed soon.
    Refused,
    Admitted(TcpStream, SocketAddr, Admitted),
}

/// A non-blocking listener whose connections are admitted through a pool.
pub struct Gate {
    listener: TcpListener,
    pool: Admission,
    /// Refused connections, kept open (their write side shut) for a moment so the client
    /// reads the reason before the close: closing with its hello unread would reset the
    /// connection, and the reset can discard the reason at the client.
    refused: Mutex<VecDeque<(Instant, TcpStream)>>,
    /// Prefix of the accept errors it logs (`cellperf server`).
    name: &'static str,
}

impl Gate {
    pub fn new(listener: TcpListener, name: &'static str) -> io::Result<Gate> {
        listener.set_nonblocking(true)?;
        Ok(Gate {
            listener,
            pool: Admission::default(),
            refused: Mutex::default(),
            name,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn listener(&self) -> &TcpListener {
        &self.listener
    }

    /// Takes the next connection, if any; the admitted ones are blocking.
    pub fn accept(&self) -> Arrival {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        while refused
            .front()
            .is_some_and(|(t, _)| t.elapsed() > REFUSED_LINGER)
            || refused.len() > MAX_REFUSED_LINGERING
        {
            refused.pop_front();
        }
        match self.listener.accept() {
            Ok((stream, peer)) => {
                let _ = stream.set_nonblocking(false);
                match self.pool.admit(&stream, peer.ip()) {
                    Ok(a) => Arrival::Admitted(stream, peer, a),
                    Err(reason) => {
                        let mut s = stream;
                        // A fresh socket's buffer takes this small frame without blocking.
                        let _ = send_message(&mut s, &Message::Error { reason });
                        let _ = s.shutdown(Shutdown::Write);
                        refused.push_back((Instant::now(), s));
                        Arrival::Refused
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Arrival::Nothing,
            // Out of descriptors and the like: back off, keep serving.
            Err(e) => {
                eprintln!("{}: accept: {e}", self.name);
                std::thread::sleep(Duration::from_millis(100));
                Arrival::Nothing
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    #[test]
    fn one_source_is_capped_and_the_busiest_sources_oldest_gives_way_when_full() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let pool = Admission::default();
        let mut held = Vec::new();
        for i in 0..PER_SOURCE {
            let (c, s) = pair(&l);
            let a = pool.admit(&s, "10.0.0.1".parse().unwrap()).unwrap();
            assert!(!a.evicted, "{i}");
            held.push((c, s, a.ticket));
        }
        let (_c, s) = pair(&l);
        let e = pool.admit(&s, "10.0.0.1".parse().unwrap()).err().unwrap();
        assert!(e.contains("8 connections from 10.0.0.1"), "{e}");
        // An IPv6 /64 is one source.
        for i in 0..PER_SOURCE {
            let (_c, s) = pair(&l);
            held.push((
                _c,
                s.try_clone().unwrap(),
                pool.admit(&s, format!("2001:db8::{i}").parse().unwrap())
                    .unwrap()
                    .ticket,
            ));
        }
        assert!(pool.admit(&s, "2001:db8::ffff".parse().unwrap()).is_err());
        // Fill the pool from sources holding one each: the next admission closes the oldest
        // connection of a source holding eight (10.0.0.1's first), not a lone one.
        for i in 0..(MAX_PENDING - 2 * PER_SOURCE) {
            let (_c, s) = pair(&l);
            held.push((
                _c,
                s.try_clone().unwrap(),
                pool.admit(&s, format!("10.0.1.{i}").parse().unwrap())
                    .unwrap()
                    .ticket,
            ));
        }
        assert_eq!(pool.pending(), MAX_PENDING);
        let (_c, s) = pair(&l);
        let a = pool.admit(&s, "10.0.2.1".parse().unwrap()).unwrap();
        assert!(a.evicted);
        assert_eq!(pool.pending(), MAX_PENDING);
        let mut b = [0u8; 1];
        assert_eq!(
            held[0].0.read(&mut b).unwrap(),
            0,
            "the busiest source's oldest connection was closed"
        );
        // The next one goes from the other busy source (the /64), its oldest.
        let (_c2, s2) = pair(&l);
        let a2 = pool.admit(&s2, "10.0.2.2".parse().unwrap()).unwrap();
        assert!(a.evicted && a2.evicted);
        assert_eq!(held[PER_SOURCE].0.read(&mut b).unwrap(), 0);
        // The evicted source has room again; a dropped ticket frees its place.
        drop(held.remove(1));
        assert_eq!(pool.pending(), MAX_PENDING - 1);
        assert!(pool.admit(&s, "10.0.0.1".parse().unwrap()).is_ok());
    }
}
