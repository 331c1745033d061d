//! The UDP data path: a paced sender and a logging receiver (optionally echoing), one thread
//! each, on a connected socket so datagrams go to, and are accepted from, one peer only.
//!
//! Every datagram starts with the cellperf probe header (`CPF1`, sequence number, realtime
//! send time; `cellperf_capture::probe_header`), so a capture of agent traffic can be
//! analysed by `cellperf analyze` as well as the agents' own logs.

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cellperf_capture::probe_header::{parse_cellperf, write_cellperf, CELLPERF_HEADER_LEN};

use crate::clock::{mono_ns, realtime_ns, tighten_timer_slack, try_realtime_priority, wait_until};
use crate::wire::{Cookie, Record, UdpSpec};

/// First bytes of the datagrams a probe sends to open the server's data socket.
pub const HELLO_MAGIC: [u8; 4] = *b"CPH1";
/// Largest UDP payload accepted in a spec (IPv4 limit).
pub const MAX_PAYLOAD: u32 = 65_507;
/// Kernel buffer asked for on data sockets, so bursts at high rates are not dropped locally.
const SOCKET_BUFFER: usize = 8 * 1024 * 1024;
/// Senders at most this fast (10 000 packets/s) ask for real-time scheduling: they sleep
/// most of each interval, so the priority costs other work little and removes wake-up lag.
const REALTIME_MIN_INTERVAL_NS: u64 = 100_000;
/// How far past its planned end a sender that fell behind may go on sending.
const OVERRUN_GRACE_NS: i64 = 200_000_000;

pub fn hello_datagram(cookie: &Cookie) -> [u8; 20] {
    let mut d = [0u8; 20];
    d[..4].copy_from_slice(&HELLO_MAGIC);
    d[4..].copy_from_slice(&cookie.0);
    d
}

pub fn is_hello(d: &[u8], cookie: &Cookie) -> bool {
    d.len() == 20 && d[..4] == HELLO_MAGIC && d[4..] == cookie.0
}

/// Enlarges both kernel buffers of a data socket (best effort: the kernel caps them).
pub fn enlarge_buffers(sock: &UdpSocket) {
    let s = socket2::SockRef::from(sock);
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
}

/// What a sender did: one record per datagram sent, and how late each left.
#[derive(Debug, Default)]
pub struct SendOutcome {
    pub records: Vec<Record>,
    /// Lateness of each send against its absolute deadline (ns).
    pub lateness_ns: Vec<i64>,
    /// Why the sender stopped early, if it did.
    pub error: Option<String>,
}

/// Sends `spec.count` datagrams paced at `spec.interval_ns` from `start_mono_ns`, until done
/// or `stop` is set. Runs in its own thread.
pub fn spawn_sender(sock: UdpSocket, spec: UdpSpec, start_mono_ns: i64, stop: Arc<AtomicBool>) -> JoinHandle<SendOutcome> {
    std::thread::spawn(move || {
        tighten_timer_slack();
        if spec.interval_ns >= REALTIME_MIN_INTERVAL_NS {
            try_realtime_priority();
        }
        let mut out = SendOutcome {
            records: Vec::with_capacity(spec.count.min(1 << 20) as usize),
            lateness_ns: Vec::with_capacity(spec.count.min(1 << 20) as usize),
            error: None,
        };
        // A rate above what the host can send must not stretch the test: stop at the
        // planned end (plus a little for a sender that is only momentarily late).
        let planned_end = start_mono_ns.saturating_add((spec.count as i64).saturating_mul(spec.interval_ns as i64));
        let give_up = planned_end.saturating_add(OVERRUN_GRACE_NS);
        let mut buf = vec![0u8; spec.payload_bytes as usize];
        let mut refused = 0u32;
        for seq in 0..spec.count {
            if stop.load(Ordering::Relaxed) {
                out.error = Some("stopped before the end".into());
                break;
            }
            if seq % 64 == 0 && mono_ns() > give_up {
                break;
            }
            let deadline = start_mono_ns.saturating_add((seq as i64).saturating_mul(spec.interval_ns as i64));
            out.lateness_ns.push(wait_until(deadline));
            let send_ns = realtime_ns();
            write_cellperf(&mut buf, seq, send_ns);
            match send_retrying(&sock, &buf) {
                Ok(()) => {
                    refused = 0;
                    out.records.push(Record { seq, send_ns: Some(send_ns), recv_ns: None, bytes: buf.len() as u32 });
                }
                // The peer's port answered ICMP unreachable: it closed, or is not there yet.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    refused += 1;
                    if refused >= 50 {
                        out.error = Some("peer's data port unreachable (ICMP port unreachable)".into());
                        break;
                    }
                }
                Err(e) => {
                    out.error = Some(format!("sending datagram {seq}: {e}"));
                    break;
                }
            }
        }
        out
    })
}

fn send_retrying(sock: &UdpSocket, buf: &[u8]) -> io::Result<()> {
    loop {
        match sock.send(buf) {
            Ok(_) => return Ok(()),
            // A full device queue: wait a moment rather than drop locally.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) || e.kind() == io::ErrorKind::Interrupted => {
                std::thread::sleep(Duration::from_micros(50))
            }
            Err(e) => return Err(e),
        }
    }
}

/// Shared between a receiver thread and the control thread that tells it when to stop.
#[derive(Debug)]
pub struct ReceiveControl {
    pub stop: AtomicBool,
    /// How many packets the peer says it sent (u64::MAX until known).
    pub peer_sent: AtomicU64,
    /// Monotonic time after which the receiver gives up on stragglers (i64::MAX until set).
    pub drain_deadline_mono: AtomicI64,
    pub packets_received: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Sequence number and receive time of the latest arrival, for live RTT estimates.
    pub last_seq: AtomicU64,
    pub last_recv_ns: AtomicI64,
}

impl ReceiveControl {
    pub fn new() -> Arc<Self> {
        Arc::new(ReceiveControl {
            stop: AtomicBool::new(false),
            peer_sent: AtomicU64::new(u64::MAX),
            drain_deadline_mono: AtomicI64::new(i64::MAX),
            packets_received: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            last_seq: AtomicU64::new(0),
            last_recv_ns: AtomicI64::new(0),
        })
    }

    /// The peer finished sending `n` packets: wait at most `drain_ms` more for them.
    pub fn peer_done(&self, n: u64, drain_ms: u64) {
        self.peer_sent.store(n, Ordering::Relaxed);
        self.drain_deadline_mono.store(mono_ns().saturating_add(drain_ms as i64 * 1_000_000), Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
pub struct ReceiveOutcome {
    /// One record per distinct packet received, in sequence order; `send_ns` is the
    /// sender's header timestamp, `recv_ns` this host's receive time.
    pub received: Vec<Record>,
    /// Echoes sent back (echo mode only).
    pub echoed: Vec<Record>,
    pub duplicates: u64,
    /// Datagrams that were not probe packets of this test (wrong magic, sequence out of range).
    pub foreign: u64,
}

/// Receives probe packets with sequence numbers below `max_count` until `ctl` says to stop,
/// all the peer's packets are in, or the drain deadline passes. With `echo`, returns each
/// first copy to the sender at once, its header send time replaced by this host's.
pub fn spawn_receiver(sock: UdpSocket, max_count: u64, echo: bool, ctl: Arc<ReceiveControl>) -> JoinHandle<ReceiveOutcome> {
    std::thread::spawn(move || {
        let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
        let mut recv_ns: Vec<i64> = Vec::new();
        let mut hdr_send_ns: Vec<i64> = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        let mut out = ReceiveOutcome::default();
        let mut unique = 0u64;
        let mut buf = vec![0u8; 65_536];
        loop {
            if ctl.stop.load(Ordering::Relaxed) {
                break;
            }
            let peer_sent = ctl.peer_sent.load(Ordering::Relaxed);
            if peer_sent != u64::MAX && (unique >= peer_sent || mono_ns() > ctl.drain_deadline_mono.load(Ordering::Relaxed)) {
                break;
            }
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => continue,
                // ICMP errors from our own earlier sends surface here; they are not data.
                Err(_) => continue,
            };
            let now = realtime_ns();
            let Some(h) = parse_cellperf(&buf[..n]) else {
                out.foreign += 1;
                continue;
            };
            if h.seq >= max_count {
                out.foreign += 1;
                continue;
            }
            let i = h.seq as usize;
            if i >= recv_ns.len() {
                recv_ns.resize(i + 1, i64::MIN);
                hdr_send_ns.resize(i + 1, i64::MIN);
                sizes.resize(i + 1, 0);
            }
            if recv_ns[i] != i64::MIN {
                out.duplicates += 1;
                continue;
            }
            recv_ns[i] = now;
            hdr_send_ns[i] = h.send_ns;
            sizes[i] = n as u32;
            unique += 1;
            ctl.packets_received.fetch_add(1, Ordering::Relaxed);
            ctl.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
            ctl.last_seq.store(h.seq, Ordering::Relaxed);
            ctl.last_recv_ns.store(now, Ordering::Relaxed);
            if echo && n >= CELLPERF_HEADER_LEN {
                let send_ns = realtime_ns();
                write_cellperf(&mut buf[..n], h.seq, send_ns);
                if send_retrying(&sock, &buf[..n]).is_ok() {
                    out.echoed.push(Record { seq: h.seq, send_ns: Some(send_ns), recv_ns: None, bytes: n as u32 });
                }
            }
        }
        out.received = (0..recv_ns.len())
            .filter(|&i| recv_ns[i] != i64::MIN)
            .map(|i| Record { seq: i as u64, send_ns: Some(hdr_send_ns[i]), recv_ns: Some(recv_ns[i]), bytes: sizes[i] })
            .collect();
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Direction;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        enlarge_buffers(&a);
        enlarge_buffers(&b);
        (a, b)
    }

    #[test]
    fn sender_and_echoing_receiver_exchange_every_packet_once() {
        let (a, b) = pair();
        let spec = UdpSpec { direction: Direction::Echo, payload_bytes: 40, interval_ns: 200_000, count: 200, drain_ms: 500 };
        let back = ReceiveControl::new();
        let back_rx = spawn_receiver(a.try_clone().unwrap(), spec.count, false, back.clone());
        let fwd = ReceiveControl::new();
        let echo = spawn_receiver(b, spec.count, true, fwd.clone());
        let sent = spawn_sender(a, spec.clone(), mono_ns(), Arc::new(AtomicBool::new(false))).join().unwrap();
        assert_eq!(sent.records.len(), 200);
        assert!(sent.error.is_none());
        fwd.peer_done(200, 1000);
        back.peer_done(200, 1000);
        let at_echo = echo.join().unwrap();
        let returned = back_rx.join().unwrap();
        assert_eq!((at_echo.received.len(), at_echo.echoed.len(), at_echo.duplicates), (200, 200, 0));
        assert_eq!(returned.received.len(), 200);
        // Each returned header carries the echo's send time, not the original one.
        for (r, e) in returned.received.iter().zip(&at_echo.echoed) {
            assert_eq!((r.seq, r.send_ns), (e.seq, e.send_ns));
            assert!(r.recv_ns.unwrap() >= e.send_ns.unwrap());
        }
        // Sequence numbers and send times survive the trip.
        assert_eq!(at_echo.received[17].send_ns, sent.records[17].send_ns);
    }

    #[test]
    fn foreign_out_of_range_and_duplicate_datagrams_are_counted_not_logged() {
        let (a, b) = pair();
        let ctl = ReceiveControl::new();
        let rx = spawn_receiver(b, 10, false, ctl.clone());
        let mut p = [0u8; 30];
        for seq in [3u64, 3, 11, 4] {
            write_cellperf(&mut p, seq, 1_000);
            a.send(&p).unwrap();
        }
        a.send(b"not a probe packet").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        ctl.peer_done(2, 0);
        let out = rx.join().unwrap();
        assert_eq!(out.received.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
        assert_eq!((out.duplicates, out.foreign), (1, 2));
    }
}
