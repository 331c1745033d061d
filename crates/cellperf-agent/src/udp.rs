//! The UDP data path: a paced sender and a logging receiver (optionally echoing), one thread
//! each, on a connected socket so datagrams go to, and are accepted from, one peer only.
//!
//! Every datagram starts with the cellperf probe header (`CPF1`, sequence number, realtime
//! send time; `cellperf_capture::probe_header`), so a capture of agent traffic can be
//! analysed by `cellperf analyze` as well as the agents' own logs. Where the payload has
//! room (28 bytes or more), the 8 bytes after the header are the test's [`DataToken`]; a
//! receiver drops and counts datagrams without it (spoofed, or another test's).

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cellperf_capture::probe_header::{parse_cellperf, write_cellperf, CELLPERF_HEADER_LEN};

use crate::clock::{mono_ns, realtime_ns, tighten_timer_slack, try_realtime_priority, wait_until};
use crate::sockopt;
use crate::wake::{spawn_waking, Wake, Waking};
use crate::wire::{Cookie, NoPath, Record, UdpSpec};

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
/// Failures closer than this (or two intervals) to the end of the last gap continue it.
const GAP_MERGE_NS: i64 = 50_000_000;
/// Longest a sender waits for a full device queue before it takes the datagram as unsendable.
const FULL_QUEUE_WAIT: Duration = Duration::from_millis(20);
/// Time from spawning a sender to its first deadline: a new thread's first run (late on a
/// busy host), real-time priority and buffers are set up before it, not counted as send-time
/// error. Callers start the schedule this far ahead.
pub const START_LEAD_NS: i64 = 10_000_000;
/// `UDP_SEGMENT` and `UDP_GRO` (linux/udp.h; the libc crate lacks them).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Most datagrams one GSO send may carry (the kernel's UDP_MAX_SEGMENTS).
const MAX_SEGMENTS: usize = 64;
/// Largest UDP payload of one datagram, and so of one GSO send (IPv4's 16-bit length).
const MAX_DATAGRAM: usize = 65_507;

/// Where a data packet carries its test's token: right after the probe header.
const TOKEN_AT: usize = CELLPERF_HEADER_LEN;
/// Smallest payload that carries a token; smaller ones (G.729's 20 bytes) go without.
pub const TOKEN_MIN_PAYLOAD: u32 = (TOKEN_AT + 8) as u32;

/// 8 bytes of a test's cookie that its data packets carry, so that a receiver can tell them
/// from datagrams forged with the peer's address and port by someone off the path (who never
/// saw the cookie). Someone on the path sees it, in the hello and in every packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataToken([u8; 8]);

impl DataToken {
    /// The token of a test with `payload_bytes`-byte packets, if they have room for it.
    pub fn for_test(cookie: &Cookie, payload_bytes: u32) -> Option<DataToken> {
        let mut t = [0u8; 8];
        t.copy_from_slice(&cookie.0[8..]);
        (payload_bytes >= TOKEN_MIN_PAYLOAD).then_some(DataToken(t))
    }

    fn stamp(&self, datagram: &mut [u8]) {
        if let Some(at) = datagram.get_mut(TOKEN_AT..TOKEN_AT + 8) {
            at.copy_from_slice(&self.0);
        }
    }

    pub fn carried_by(&self, datagram: &[u8]) -> bool {
        datagram.get(TOKEN_AT..TOKEN_AT + 8) == Some(&self.0[..])
    }
}

pub fn hello_datagram(cookie: &Cookie) -> [u8; 20] {
    let mut d = [0u8; 20];
    d[..4].copy_from_slice(&HELLO_MAGIC);
    d[4..].copy_from_slice(&cookie.0);
    d
}

pub fn is_hello(d: &[u8], cookie: &Cookie) -> bool {
    hello_cookie(d).is_some_and(|c| c == *cookie)
}

/// The cookie a hello carries; None for anything else.
pub fn hello_cookie(d: &[u8]) -> Option<Cookie> {
    let (magic, cookie) = d.split_first_chunk::<4>()?;
    (*magic == HELLO_MAGIC).then_some(Cookie(cookie.try_into().ok()?))
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
    /// Where it found no path to its peer (each unsent datagram is in `records`, lost).
    pub no_path: Vec<NoPath>,
}

/// Send errors that mean "no path now", not "stop": the interface is down, there is no route,
/// a firewall refuses (EPERM), the peer's host or port answered ICMP unreachable
/// (ECONNREFUSED on a connected UDP socket), or the device queue stays full.
pub fn is_no_path(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENETUNREACH
                | libc::EHOSTUNREACH
                | libc::ENETDOWN
                | libc::ENOBUFS
                | libc::EPERM
                | libc::ECONNREFUSED
        )
    )
}

/// Sends `spec.count` datagrams on the spec's schedule (every `spec.interval_ns`, or in
/// trains) from `start_mono_ns`, until done or `stop` is set. Runs in its own thread.
///
/// A packet leaves at its deadline, alone. When the sender is behind (a rate above what one
/// datagram per system call can reach), all packets already due leave in one system call
/// as one UDP GSO send (`UDP_SEGMENT`: the kernel cuts it into equal datagrams, each with
/// its own probe header), the way fast tools reach line rate; where GSO is unavailable
/// (old kernel, a payload above the path MTU) they leave one by one.
pub fn spawn_sender(
    wake: &Arc<Wake>,
    sock: UdpSocket,
    spec: UdpSpec,
    token: Option<DataToken>,
    start_mono_ns: i64,
    stop: Arc<AtomicBool>,
) -> Waking<SendOutcome> {
    spawn_waking(wake, move || {
        tighten_timer_slack();
        // On average: a train's packets go back to back, then the sender sleeps.
        if spec.duration_ns() / spec.count.max(1) >= REALTIME_MIN_INTERVAL_NS {
            try_realtime_priority();
        }
        let mut out = SendOutcome {
            records: Vec::with_capacity(spec.count.min(1 << 20) as usize),
            lateness_ns: Vec::with_capacity(spec.count.min(1 << 20) as usize),
            error: None,
            no_path: Vec::new(),
        };
        // A rate above what the host can send must not stretch the test: stop at the
        // planned end (plus a little for a sender that is only momentarily late).
        let interval = spec.interval_ns as i64;
        let deadline_of = |seq: u64| {
            start_mono_ns.saturating_add(spec.send_offset_ns(seq).min(i64::MAX as u64) as i64)
        };
        let planned_end =
            start_mono_ns.saturating_add(spec.duration_ns().min(i64::MAX as u64) as i64);
        let give_up = planned_end.saturating_add(OVERRUN_GRACE_NS);
        // The largest payload bounds a batch (trains may cycle sizes: `UdpSpec::payload_of`).
        let max_batch = MAX_SEGMENTS
            .min(MAX_DATAGRAM / spec.payload_bytes as usize)
            .max(1);
        let mut gso = max_batch > 1;
        let mut buf = vec![0u8; spec.payload_bytes as usize * max_batch];
        let mut last_failed_ns = 0i64;
        let mut seq = 0u64;
        while seq < spec.count {
            if stop.load(Ordering::Relaxed) {
                out.error = Some("stopped before the end".into());
                break;
            }
            let lateness = wait_until(deadline_of(seq));
            let now = deadline_of(seq) + lateness;
            if now > give_up {
                break;
            }
            // Every packet whose deadline has passed goes now (a train's packets, or an even
            // stream's when the sender is behind), as long as they have one size (GSO cuts a
            // send into equal datagrams).
            let payload = spec.payload_of(seq) as usize;
            let batch = if gso { max_batch as u64 } else { 1 };
            let last = spec.count.min(seq.saturating_add(batch));
            let n = (seq + 1..last)
                .take_while(|&s| deadline_of(s) <= now && spec.payload_of(s) as usize == payload)
                .count()
                + 1;
            let send_ns = realtime_ns();
            for (i, segment) in buf.chunks_exact_mut(payload).take(n).enumerate() {
                write_cellperf(segment, seq + i as u64, send_ns, false);
                if let Some(t) = token {
                    t.stamp(segment);
                }
            }
            let sent = if n > 1 {
                send_segments(&sock, &buf[..n * payload], payload)
            } else {
                send_retrying(&sock, &buf[..payload])
            };
            match sent {
                Ok(()) => {
                    if let Some(gap) = out.no_path.last_mut().filter(|g| g.end_ns == 0) {
                        gap.end_ns = send_ns;
                    }
                    for i in 0..n as u64 {
                        out.lateness_ns.push(now - deadline_of(seq + i));
                        out.records.push(Record {
                            seq: seq + i,
                            send_ns: Some(send_ns),
                            recv_ns: None,
                            bytes: payload as u32,
                        });
                    }
                    seq += n as u64;
                }
                // No GSO on this kernel or path: the same packets again, one by one.
                Err(e)
                    if n > 1
                        && matches!(
                            e.raw_os_error(),
                            Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP)
                        ) =>
                {
                    gso = false;
                }
                // No path now: the datagrams are lost (sent at this time, never received),
                // the gap is noted, and the schedule goes on.
                Err(e) if is_no_path(&e) => {
                    // A failure soon after the last gap closed continues it: ICMP unreachable
                    // fails every other send (the error is reported once, on the next send).
                    let reopen = |g: &&mut NoPath| {
                        g.end_ns == 0 || send_ns - g.end_ns <= (2 * interval).max(GAP_MERGE_NS)
                    };
                    match out.no_path.last_mut().filter(reopen) {
                        Some(gap) => {
                            gap.datagrams += n as u64;
                            gap.end_ns = 0;
                        }
                        None => out.no_path.push(NoPath {
                            start_ns: send_ns,
                            end_ns: 0,
                            datagrams: n as u64,
                            error: e.to_string(),
                        }),
                    }
                    for i in 0..n as u64 {
                        out.records.push(Record {
                            seq: seq + i,
                            send_ns: Some(send_ns),
                            recv_ns: None,
                            bytes: payload as u32,
                        });
                    }
                    last_failed_ns = send_ns;
                    seq += n as u64;
                }
                Err(e) => {
                    out.error = Some(format!("sending datagram {seq}: {e}"));
                    break;
                }
            }
        }
        // A gap still open when the test ended: it lasted at least to the last failed send.
        if let Some(gap) = out.no_path.last_mut().filter(|g| g.end_ns == 0) {
            gap.end_ns = last_failed_ns;
        }
        out
    })
}

/// Retries a send that found the device queue full (for up to [`FULL_QUEUE_WAIT`]) or was
/// interrupted, instead of dropping the datagram locally; a queue full for longer is no path.
fn retrying(mut send: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    let mut full = 0u32;
    loop {
        match send() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if e.raw_os_error() == Some(libc::ENOBUFS)
                    && full < FULL_QUEUE_WAIT.as_micros() as u32 / 50 =>
            {
                full += 1;
                std::thread::sleep(Duration::from_micros(50))
            }
            other => return other,
        }
    }
}

fn send_retrying(sock: &UdpSocket, buf: &[u8]) -> io::Result<()> {
    retrying(|| sock.send(buf).map(drop))
}

/// Sends `buf` as datagrams of `segment` bytes each in one system call (UDP GSO) on a
/// connected socket.
fn send_segments(sock: &UdpSocket, buf: &[u8], segment: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let size = segment as u16;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
    let mut control = [0u64; 4]; // 32 bytes, 8-aligned: room for one u16 control message
    debug_assert!(space <= std::mem::size_of_val(&control));
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    retrying(|| {
        // SAFETY: msghdr is plain data; the iovec and control buffer outlive the call, the
        // control length is what CMSG_SPACE says one u16 needs, and the cmsg pointer from
        // CMSG_FIRSTHDR points into `control`.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, size);
            if libc::sendmsg(sock.as_raw_fd(), &msg, 0) < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    })
}

/// Receives one datagram, or several coalesced by UDP GRO; returns the bytes and the size
/// of each datagram in them (the whole length when not coalesced).
fn recv_coalesced(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, usize)> {
    use std::os::fd::AsRawFd;
    let mut control = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: as in `send_segments`; the kernel writes at most `msg_controllen` bytes of
    // control data, and CMSG_NXTHDR stays within it.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        let mut segment = n;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::c_int);
                if size > 0 {
                    segment = size as usize;
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok((n, segment))
    }
}

/// Asks the kernel to hand over back-to-back datagrams of one flow coalesced (UDP GRO),
/// best effort: one system call then receives up to 64 of them.
fn enable_gro(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let _ = sockopt::set(sock.as_raw_fd(), libc::SOL_UDP, UDP_GRO, 1 as libc::c_int);
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

    /// The peer finished sending `n` packets: wait at most `drain_ms` more for them (less
    /// when the stream's own evidence says none can still come: [`Arrivals`]).
    pub fn peer_done(&self, n: u64, drain_ms: u64) {
        self.peer_sent.store(n, Ordering::Relaxed);
        self.drain_deadline_mono.store(
            mono_ns().saturating_add(drain_ms as i64 * 1_000_000),
            Ordering::Relaxed,
        );
    }
}

/// Beyond the greatest lateness and the spread seen again, how long a receiver still waits
/// for a missing packet.
pub const LATE_MARGIN_NS: i64 = 250_000_000;

/// A stream's own evidence of how late its packets come, by which a receiver stops waiting
/// for the missing ones once none can still arrive (docs/methods.md, "Loss"), instead of
/// always waiting the test's whole drain. Each arrival is taken against its packet's place in
/// the schedule, `arrival − send_offset(seq)` on this host's monotonic clock: the time the
/// stream would have started had every packet been as late as this one (its one-way delay,
/// or its round trip for echoes, plus the sender's start and lateness). Only this host's
/// clock and the schedule enter, so no clock offset between the ends does; the least and
/// the greatest of these bound what was seen, their difference is the delay spread.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Arrivals {
    /// The least and the greatest `arrival − send_offset`; None before the first arrival.
    seen: Option<(i64, i64)>,
}

impl Arrivals {
    /// A packet due `offset_ns` into the schedule arrived at `arrival_mono`.
    pub fn note(&mut self, offset_ns: u64, arrival_mono: i64) {
        let late = arrival_mono.saturating_sub(offset_ns.min(i64::MAX as u64) as i64);
        self.seen = Some(match self.seen {
            None => (late, late),
            Some((lo, hi)) => (lo.min(late), hi.max(late)),
        });
    }

    /// Monotonic time after which a packet due `offset_ns` into the schedule, not arrived
    /// yet, counts lost: its place in the schedule at the greatest lateness seen, plus the
    /// spread once more (a packet up to twice the spread later than the least delayed one
    /// still counts) and [`LATE_MARGIN_NS`]. Asked for the stream's last packet, this is
    /// never before the latest arrival: every packet's arrival is its place (at most the
    /// last's) plus its lateness (at most the greatest), so a link still delivering late
    /// packets moves the bound with them. None before any packet has arrived: then only the
    /// test's drain bounds the wait.
    pub fn lost_after(&self, offset_ns: u64) -> Option<i64> {
        let (lo, hi) = self.seen?;
        let due = hi.saturating_add(offset_ns.min(i64::MAX as u64) as i64);
        Some(
            due.saturating_add(hi.saturating_sub(lo))
                .saturating_add(LATE_MARGIN_NS),
        )
    }
}

/// What a receiver makes of each datagram: a new packet of this test, or one to count and
/// drop (not a probe packet of this test, without its token, a duplicate). Memory grows with
/// the packets that arrived, never with the sequence numbers a peer writes: a far number
/// costs one record, not a table up to it. Fuzzed by `fuzz/fuzz_targets/datagrams.rs`.
#[derive(Debug)]
pub struct Intake {
    max_count: u64,
    token: Option<DataToken>,
    /// First copies, in arrival order.
    records: Vec<Record>,
    /// Sequence numbers seen, to tell duplicates (randomly keyed: a peer cannot pick
    /// numbers that collide).
    seen: ahash::AHashSet<u64>,
    duplicates: u64,
    foreign: u64,
    spoofed: u64,
}

impl Intake {
    /// For a test of `max_count` packets whose packets carry `token` (if they have room).
    pub fn new(max_count: u64, token: Option<DataToken>) -> Intake {
        Intake {
            max_count,
            token,
            records: Vec::new(),
            seen: Default::default(),
            duplicates: 0,
            foreign: 0,
            spoofed: 0,
        }
    }

    /// Takes one datagram received at `recv_ns`; its sequence number if it is a new packet
    /// of this test.
    pub fn take(&mut self, d: &[u8], recv_ns: i64) -> Option<u64> {
        let Some(h) = parse_cellperf(d).filter(|h| h.seq < self.max_count) else {
            self.foreign += 1;
            return None;
        };
        if self.token.is_some_and(|t| !t.carried_by(d)) {
            self.spoofed += 1;
            return None;
        }
        if !self.seen.insert(h.seq) {
            self.duplicates += 1;
            return None;
        }
        self.records.push(Record {
            seq: h.seq,
            send_ns: Some(h.send_ns),
            recv_ns: Some(recv_ns),
            bytes: d.len() as u32,
        });
        Some(h.seq)
    }

    /// The latest packet numbered below `below` not taken yet, if any.
    pub fn latest_missing(&self, below: u64) -> Option<u64> {
        (0..below.min(self.max_count))
            .rev()
            .find(|j| !self.seen.contains(j))
    }

    /// Distinct packets taken.
    pub fn packets(&self) -> u64 {
        self.records.len() as u64
    }

    /// Heap bytes held, for the tests and the fuzz target that bound it.
    pub fn heap_bytes(&self) -> usize {
        self.records.capacity() * std::mem::size_of::<Record>()
            + self.seen.capacity() * (std::mem::size_of::<u64>() + 1)
    }

    /// The packets in sequence order, and the counts of what was dropped.
    pub fn finish(mut self) -> ReceiveOutcome {
        self.records.sort_unstable_by_key(|r| r.seq);
        ReceiveOutcome {
            received: self.records,
            echoed: Vec::new(),
            duplicates: self.duplicates,
            foreign: self.foreign,
            spoofed: self.spoofed,
        }
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
    /// Probe packets without the test's token (forged, or from another test): dropped.
    pub spoofed: u64,
}

/// Receives the packets of `spec`'s stream, sequence numbers below its count (carrying
/// `token`, if the test has one), until `ctl` says to stop, every packet of the test or all
/// the peer says it sent are in, or, once the peer is done, the drain deadline passes or the
/// stream's own evidence says the missing ones are lost (the latest missing one's place in
/// the schedule past [`Arrivals::lost_after`]). With
/// `echo`, returns each first copy to the sender at once, its header send time replaced by
/// this host's.
pub fn spawn_receiver(
    wake: &Arc<Wake>,
    sock: UdpSocket,
    spec: &UdpSpec,
    token: Option<DataToken>,
    echo: bool,
    ctl: Arc<ReceiveControl>,
) -> Waking<ReceiveOutcome> {
    let spec = spec.clone();
    let max_count = spec.count;
    spawn_waking(wake, move || {
        let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
        enable_gro(&sock);
        let mut intake = Intake::new(max_count, token);
        let mut arrivals = Arrivals::default();
        // For the peer's count, the number below which the latest packet not taken is
        // searched (it only moves down as packets come: the search walks the stream once).
        let mut missing_from = (u64::MAX, u64::MAX);
        let mut echoed = Vec::new();
        // Room for the largest coalesced read (GRO stops at 64 datagrams and 64 KiB).
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            if ctl.stop.load(Ordering::Relaxed) {
                break;
            }
            // Every packet of the test in: nothing is left to wait for, whether or not the
            // peer has said it is done (its word would come a half round trip later).
            if intake.packets() >= max_count {
                break;
            }
            let peer_sent = ctl.peer_sent.load(Ordering::Relaxed);
            if peer_sent != u64::MAX
                && (intake.packets() >= peer_sent
                    || mono_ns() > ctl.drain_deadline_mono.load(Ordering::Relaxed))
            {
                break;
            }
            let (n, segment) = match recv_coalesced(&sock, &mut buf) {
                Ok(v) => v,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    // Nothing waiting in the socket: once the peer is done, what is still
                    // missing is lost when the stream's evidence says it cannot come now
                    // (asked only here, so a receiver that was not scheduled for a while
                    // reads what the kernel holds before it gives up on anything).
                    // Each missing packet by its own place: the latest one decides.
                    if peer_sent != u64::MAX {
                        if missing_from.0 != peer_sent {
                            missing_from = (peer_sent, peer_sent);
                        }
                        let latest = intake.latest_missing(missing_from.1);
                        missing_from.1 = latest.map_or(0, |j| j + 1);
                        let lost_after =
                            latest.and_then(|j| arrivals.lost_after(spec.send_offset_ns(j)));
                        if lost_after.is_some_and(|t| mono_ns() > t) {
                            break;
                        }
                    }
                    continue;
                }
                // ICMP errors from our own earlier sends surface here; they are not data.
                Err(_) => continue,
            };
            let now = realtime_ns();
            let now_mono = mono_ns();
            let (mut got, mut got_bytes) = (0u64, 0u64);
            for d in buf[..n].chunks_mut(segment.max(1)) {
                let Some(seq) = intake.take(d, now) else {
                    continue;
                };
                arrivals.note(spec.send_offset_ns(seq), now_mono);
                got += 1;
                got_bytes += d.len() as u64;
                ctl.last_seq.store(seq, Ordering::Relaxed);
                if echo {
                    let send_ns = realtime_ns();
                    write_cellperf(d, seq, send_ns, true);
                    if send_retrying(&sock, d).is_ok() {
                        echoed.push(Record {
                            seq,
                            send_ns: Some(send_ns),
                            recv_ns: None,
                            bytes: d.len() as u32,
                        });
                    }
                }
            }
            if got > 0 {
                ctl.packets_received.fetch_add(got, Ordering::Relaxed);
                ctl.bytes_received.fetch_add(got_bytes, Ordering::Relaxed);
                ctl.last_recv_ns.store(now, Ordering::Relaxed);
            }
        }
        ReceiveOutcome {
            echoed,
            ..intake.finish()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Direction;

    /// An upload of `count` packets of 100 B, one every millisecond.
    fn stream_of(count: u64) -> UdpSpec {
        UdpSpec {
            direction: Direction::Up,
            payload_bytes: 100,
            interval_ns: 1_000_000,
            count,
            drain_ms: 0,
            trains: None,
        }
    }

    /// A receiver of `spec`'s stream on `sock` (returning each packet with `echo`), and its
    /// control.
    fn receiver(
        sock: UdpSocket,
        spec: &UdpSpec,
        token: Option<DataToken>,
        echo: bool,
    ) -> (Arc<ReceiveControl>, Waking<ReceiveOutcome>) {
        let ctl = ReceiveControl::new();
        let rx = spawn_receiver(&Wake::new().unwrap(), sock, spec, token, echo, ctl.clone());
        (ctl, rx)
    }

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        enlarge_buffers(&a);
        enlarge_buffers(&b);
        (a, b)
    }

    /// Issue 27 item 2: a send that finds no path (here ICMP port unreachable: nothing on
    /// the peer's port for the first 100 ms) no longer ends the test: the schedule goes on,
    /// the unsent datagrams are in the records (lost), one gap covers the stretch.
    #[test]
    fn a_sender_keeps_its_schedule_through_no_path() {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = peer.local_addr().unwrap();
        drop(peer);
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(at).unwrap();
        let spec = UdpSpec {
            direction: Direction::Up,
            payload_bytes: 100,
            interval_ns: 2_000_000,
            count: 150,
            drain_ms: 0,
            trains: None,
        };
        let start = mono_ns();
        let sender = spawn_sender(
            &Wake::new().unwrap(),
            sock,
            spec,
            None,
            start,
            Arc::new(AtomicBool::new(false)),
        );
        std::thread::sleep(Duration::from_millis(100));
        let back = UdpSocket::bind(at).unwrap();
        let out = sender.join().unwrap();
        assert_eq!(out.error, None);
        assert_eq!(out.records.len(), 150);
        assert!(out.records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        assert_eq!(out.no_path.len(), 1, "{:?}", out.no_path);
        let gap = &out.no_path[0];
        assert!(gap.error.contains("Connection refused"), "{}", gap.error);
        let ms = (gap.end_ns - gap.start_ns) as f64 / 1e6;
        assert!((50.0..250.0).contains(&ms), "{ms} ms");
        assert!(gap.datagrams >= 10, "{gap:?}");
        // What went out after the gap arrived.
        back.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 200];
        assert_eq!(back.recv(&mut buf).unwrap(), 100);
    }

    /// Trains of 3 and 5 packets in turn, one every 30 ms: each train leaves at its period's
    /// start, back to back, and every packet arrives once.
    #[test]
    fn trains_leave_together_at_each_period() {
        let (a, b) = pair();
        let spec = UdpSpec {
            direction: Direction::Up,
            payload_bytes: 1400,
            interval_ns: 1,
            count: 3 + 5 + 3 + 5 + 3,
            drain_ms: 500,
            trains: Some(crate::wire::Trains {
                lengths: vec![3, 5],
                period_ns: 30_000_000,
                payloads: vec![],
            }),
        };
        let (ctl, rx) = receiver(b, &spec, None, false);
        let sent = spawn_sender(
            &Wake::new().unwrap(),
            a,
            spec.clone(),
            None,
            mono_ns(),
            Arc::new(AtomicBool::new(false)),
        )
        .join()
        .unwrap();
        assert_eq!((sent.records.len(), sent.error), (19, None));
        ctl.peer_done(19, 1000);
        assert_eq!(rx.join().unwrap().received.len(), 19);
        let firsts = [0usize, 3, 8, 11, 16];
        let t = |i: usize| sent.records[i].send_ns.unwrap();
        for (k, w) in firsts.windows(2).enumerate() {
            let gap_ms = (t(w[1]) - t(w[0])) as f64 / 1e6;
            assert!((25.0..35.0).contains(&gap_ms), "train {k}: {gap_ms} ms");
            // Inside a train: all within a millisecond of its first packet.
            assert!(
                (w[0]..w[1]).all(|i| t(i) - t(w[0]) < 1_000_000),
                "train {k}"
            );
        }
    }

    /// Trains that cycle sizes: every packet arrives with its train's size and the test's
    /// token, also when the sender is behind and every packet is due at once (a GSO send
    /// carries one size: the old sender sent them all at the largest).
    #[test]
    fn trains_that_cycle_sizes_send_each_packet_at_its_trains_size() {
        let (a, b) = pair();
        let spec = UdpSpec {
            direction: Direction::Up,
            payload_bytes: 1400,
            interval_ns: 1,
            count: 2 + 1 + 2 + 1 + 2 + 1,
            drain_ms: 500,
            trains: Some(crate::wire::Trains {
                lengths: vec![2, 1],
                period_ns: 1_000_000,
                payloads: vec![100, 1400, 400, 800],
            }),
        };
        let token = DataToken::for_test(&Cookie([5; 16]), 100);
        let (ctl, rx) = receiver(b, &spec, token, false);
        // Started 50 ms ago: all nine packets are due at the first send.
        let sent = spawn_sender(
            &Wake::new().unwrap(),
            a,
            spec.clone(),
            token,
            mono_ns() - 50_000_000,
            Arc::new(AtomicBool::new(false)),
        )
        .join()
        .unwrap();
        assert_eq!((sent.records.len(), sent.error), (9, None));
        ctl.peer_done(9, 1000);
        let got = rx.join().unwrap();
        let sizes: Vec<u32> = got.received.iter().map(|r| r.bytes).collect();
        // Trains [0 1] [2] [3 4] [5] [6 7] [8]: 100, 1400, 400, 800, 100, 1400.
        assert_eq!(sizes, [100, 100, 1400, 400, 400, 800, 100, 100, 1400]);
        let sent_sizes: Vec<u32> = sent.records.iter().map(|r| r.bytes).collect();
        assert_eq!(sent_sizes, sizes);
        assert_eq!(got.spoofed, 0);
    }

    #[test]
    fn sender_and_echoing_receiver_exchange_every_packet_once() {
        let (a, b) = pair();
        let spec = UdpSpec {
            direction: Direction::Echo,
            payload_bytes: 40,
            interval_ns: 200_000,
            count: 200,
            drain_ms: 500,
            trains: None,
        };
        let (back, back_rx) = receiver(a.try_clone().unwrap(), &spec, None, false);
        let (fwd, echo) = receiver(b, &spec, None, true);
        let sent = spawn_sender(
            &Wake::new().unwrap(),
            a,
            spec.clone(),
            None,
            mono_ns(),
            Arc::new(AtomicBool::new(false)),
        )
        .join()
        .unwrap();
        assert_eq!(sent.records.len(), 200);
        assert!(sent.error.is_none());
        fwd.peer_done(200, 1000);
        back.peer_done(200, 1000);
        let at_echo = echo.join().unwrap();
        let returned = back_rx.join().unwrap();
        assert_eq!(
            (
                at_echo.received.len(),
                at_echo.echoed.len(),
                at_echo.duplicates
            ),
            (200, 200, 0)
        );
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
    fn echoes_are_marked_on_the_wire_and_keep_the_request_number() {
        let (a, b) = pair();
        let (ctl, echo) = receiver(b, &stream_of(1), None, true);
        let mut p = [0u8; 40];
        write_cellperf(&mut p, 0, 1_000, false);
        a.send(&p).unwrap();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = [0u8; 64];
        let n = a.recv(&mut got).unwrap();
        ctl.peer_done(1, 0);
        echo.join().unwrap();
        let h = parse_cellperf(&got[..n]).unwrap();
        assert_eq!((&got[..4], n, h.seq, h.echo), (&b"CPE1"[..], 40, 0, true));
        assert_eq!(
            &got[20..n],
            &p[20..],
            "the payload after the header comes back as it went"
        );
    }

    /// A sender far behind its schedule sends in GSO batches: the kernel cuts each into
    /// datagrams with their own headers, and the (GRO) receiver gets every one, once, whole.
    #[test]
    fn batched_sends_arrive_as_separate_datagrams() {
        let (a, b) = pair();
        // 3 MB: less than the receive buffer holds, so nothing is dropped even if the receiver
        // thread does not run until the end.
        let spec = UdpSpec {
            direction: Direction::Up,
            payload_bytes: 1000,
            interval_ns: 1,
            count: 3000,
            drain_ms: 2000,
            trains: None,
        };
        let (ctl, rx) = receiver(b, &spec, None, false);
        let sent = spawn_sender(
            &Wake::new().unwrap(),
            a,
            spec.clone(),
            None,
            mono_ns(),
            Arc::new(AtomicBool::new(false)),
        )
        .join()
        .unwrap();
        assert!(sent.error.is_none(), "{:?}", sent.error);
        ctl.peer_done(sent.records.len() as u64, 2000);
        let got = rx.join().unwrap();
        // Batches share one send time: far fewer distinct times than packets.
        let mut times: Vec<i64> = sent.records.iter().map(|r| r.send_ns.unwrap()).collect();
        times.dedup();
        assert!(
            times.len() * 4 < sent.records.len(),
            "{} send times for {} packets",
            times.len(),
            sent.records.len()
        );
        assert_eq!(
            sent.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (0..sent.records.len() as u64).collect::<Vec<_>>()
        );
        assert_eq!((got.duplicates, got.foreign), (0, 0));
        assert_eq!(got.received.len(), 3000);
        assert!(got
            .received
            .iter()
            .all(|r| r.bytes == 1000 && r.send_ns == sent.records[r.seq as usize].send_ns));
    }

    #[test]
    fn foreign_out_of_range_and_duplicate_datagrams_are_counted_not_logged() {
        let (a, b) = pair();
        let (ctl, rx) = receiver(b, &stream_of(10), None, false);
        let mut p = [0u8; 30];
        for seq in [3u64, 3, 11, 4] {
            write_cellperf(&mut p, seq, 1_000, false);
            a.send(&p).unwrap();
        }
        a.send(b"not a probe packet").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        ctl.peer_done(2, 0);
        let out = rx.join().unwrap();
        assert_eq!(
            out.received.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [3, 4]
        );
        assert_eq!((out.duplicates, out.foreign), (1, 2));
    }

    /// A peer that writes the highest number the test allows (as a hostile client of a
    /// 64 Mi-packet test would) costs one record, not a table up to that number.
    #[test]
    fn far_sequence_numbers_cost_one_record_each() {
        let (a, b) = pair();
        let max_count = 64 << 20;
        let (ctl, rx) = receiver(b, &stream_of(max_count), None, false);
        let mut p = [0u8; 20];
        for seq in [max_count - 1, 0, max_count / 2, max_count - 1, max_count] {
            write_cellperf(&mut p, seq, 1_000, false);
            a.send(&p).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        ctl.peer_done(3, 0);
        let out = rx.join().unwrap();
        assert_eq!(
            out.received.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [0, max_count / 2, max_count - 1]
        );
        assert_eq!((out.duplicates, out.foreign), (1, 1));
        assert!(
            out.received.capacity() < 64,
            "{} records kept",
            out.received.capacity()
        );

        let mut intake = Intake::new(u64::MAX, None);
        let mut p = [0u8; 20];
        for seq in [u64::MAX - 1, 1 << 62, (64 << 20) - 1, 1 << 62] {
            write_cellperf(&mut p, seq, 1, false);
            intake.take(&p, 2);
        }
        assert_eq!(
            (intake.packets(), intake.heap_bytes() < 4096),
            (3, true),
            "{} heap bytes for 3 packets",
            intake.heap_bytes()
        );
        assert_eq!(intake.finish().duplicates, 1);
    }

    /// Datagrams from the peer's own address and port (as a spoofer would forge them) without
    /// the test's token are dropped and counted; the token's packets are all taken, echoed
    /// with the token kept.
    #[test]
    fn datagrams_without_the_tests_token_are_dropped_and_counted() {
        let (a, b) = pair();
        let cookie = Cookie([7; 16]);
        let token = DataToken::for_test(&cookie, 100);
        assert!(token.is_some() && DataToken::for_test(&cookie, 27).is_none());
        let spec = UdpSpec {
            direction: Direction::Echo,
            payload_bytes: 100,
            interval_ns: 100_000,
            count: 50,
            drain_ms: 500,
            trains: None,
        };
        let (ctl, echo) = receiver(b, &spec, token, true);
        // Forged: right header and numbers, no token, another cookie's token, a short packet.
        let mut forged = [0u8; 100];
        for seq in 0..10u64 {
            write_cellperf(&mut forged, seq, 1_000, false);
            a.send(&forged).unwrap();
        }
        DataToken::for_test(&Cookie([8; 16]), 100)
            .unwrap()
            .stamp(&mut forged);
        a.send(&forged).unwrap();
        a.send(&forged[..24]).unwrap();
        let (back, back_rx) = receiver(a.try_clone().unwrap(), &spec, token, false);
        let sent = spawn_sender(
            &Wake::new().unwrap(),
            a,
            spec.clone(),
            token,
            mono_ns(),
            Arc::new(AtomicBool::new(false)),
        )
        .join()
        .unwrap();
        assert_eq!(sent.records.len(), 50);
        ctl.peer_done(50, 1000);
        back.peer_done(50, 1000);
        let at_echo = echo.join().unwrap();
        assert_eq!(
            (at_echo.received.len(), at_echo.spoofed, at_echo.duplicates),
            (50, 12, 0)
        );
        // The forged copies of numbers 0..10 came first, yet the real ones were taken.
        assert!(at_echo
            .received
            .iter()
            .take(10)
            .all(|r| r.send_ns != Some(1_000)));
        let returned = back_rx.join().unwrap();
        assert_eq!((returned.received.len(), returned.spoofed), (50, 0));
    }

    /// Deterministic stand-in for the `datagrams` fuzz target: random and mutated datagrams
    /// are each taken once or counted once as dropped, and memory follows what was taken.
    #[test]
    fn random_datagrams_add_up_and_memory_follows_what_was_taken() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let cookie = Cookie([3; 16]);
        let mut intake = Intake::new(64 << 20, DataToken::for_test(&cookie, 100));
        let mut good = [0u8; 100];
        DataToken::for_test(&cookie, 100).unwrap().stamp(&mut good);
        for i in 0..20_000 {
            let mut d = good;
            write_cellperf(&mut d, next() >> if i % 3 == 0 { 0 } else { 38 }, 5, false);
            for _ in 0..next() % 3 {
                d[(next() % 100) as usize] = next() as u8;
            }
            intake.take(&d[..(next() % 101) as usize], i);
        }
        let taken = intake.packets();
        assert!(
            taken > 1000 && intake.heap_bytes() <= 4096 + 200 * taken as usize,
            "{taken} {}",
            intake.heap_bytes()
        );
        let out = intake.finish();
        assert_eq!(
            out.received.len() as u64 + out.duplicates + out.foreign + out.spoofed,
            20_000
        );
        assert!(out.received.windows(2).all(|w| w[0].seq < w[1].seq));
        assert!(out.duplicates > 0 && out.foreign > 0 && out.spoofed > 0);
    }

    /// The evidence is each arrival against its place in the schedule: a missing packet is
    /// lost once its own place, at the greatest lateness seen, plus the spread again and the
    /// margin has passed; a later arrival moves the bound.
    #[test]
    fn a_missing_packet_is_lost_after_the_greatest_lateness_and_the_spread_again() {
        let ms = 1_000_000i64;
        let mut a = Arrivals::default();
        assert_eq!(a.lost_after(0), None);
        // Due at 0, 10, 20 ms; arrived 100, 150 (40 ms later than the first), 120 ms.
        a.note(0, 100 * ms);
        a.note(10_000_000, 150 * ms);
        a.note(20_000_000, 120 * ms);
        // Packet due at 30 ms: 30 + 140 (greatest) + 40 (spread) + 250 (margin).
        assert_eq!(a.lost_after(30_000_000), Some(460 * ms));
        // Packet 2 again, 260 ms later than it was (a link still delivering): the bound
        // moves past that arrival.
        a.note(20_000_000, 400 * ms);
        assert_eq!(a.lost_after(30_000_000), Some((30 + 380 + 280 + 250) * ms));
    }

    /// Sends 20 packets by hand, one due every `interval_ms`, packet k `late_ms(k)` after its
    /// place (None: never), and says the peer is done (drain 2 s) when packet 18 has gone
    /// (the word overtaking a late last packet) or, with `done_last`, after the last one sent;
    /// the receiver's packets and how long it took after the last send to stop.
    fn received_with_lateness(
        interval_ms: u64,
        late_ms: impl Fn(u64) -> Option<u64>,
        done_last: bool,
    ) -> (Vec<u64>, Duration) {
        let (a, b) = pair();
        let spec = UdpSpec {
            interval_ns: interval_ms * 1_000_000,
            ..stream_of(20)
        };
        let (ctl, rx) = receiver(b, &spec, None, false);
        let start = std::time::Instant::now();
        let mut plan: Vec<(u64, u64)> = (0..spec.count)
            .filter_map(|k| late_ms(k).map(|l| (k * interval_ms + l, k)))
            .collect();
        plan.sort();
        let mut p = [0u8; 100];
        for (at_ms, k) in plan {
            let at = start + Duration::from_millis(at_ms);
            std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
            write_cellperf(&mut p, k, realtime_ns(), false);
            a.send(&p).unwrap();
            if k == spec.count - 2 && !done_last {
                ctl.peer_done(spec.count, 2000);
            }
        }
        if done_last {
            ctl.peer_done(spec.count, 2000);
        }
        let done = std::time::Instant::now();
        let out = rx.join().unwrap();
        let waited = done.elapsed();
        (out.received.iter().map(|r| r.seq).collect(), waited)
    }

    /// Issue 34: after the peer is done, a receiver waits for a missing packet only as long
    /// as the stream's own evidence says it can still come, not the test's whole drain (2 s,
    /// which every UMTS VoIP call that lost one uplink packet paid). Packets 10 ms apart,
    /// packet 5 300 ms late (the spread seen): the last packet as late, after the peer's word,
    /// still counts; when it is lost, the receiver gives up at its bound (its place, 190 ms,
    /// plus 300 ms of lateness, 300 of spread and 250: some 860 ms after packet 18), before
    /// the 2 s. Packets 30 ms apart, the first lost: its own bound (250 ms) is past when the
    /// last one (570 ms) is in, so the receiver stops at once (by the last packet's bound it
    /// would wait 250 ms more).
    #[test]
    fn a_late_packet_within_the_spread_counts_and_a_lost_one_does_not_hold_the_drain() {
        let late = |k: u64| Some(if k == 5 { 300 } else { 0 });
        let (got, _) =
            received_with_lateness(10, |k| if k == 19 { Some(300) } else { late(k) }, false);
        assert_eq!(got, (0..20).collect::<Vec<_>>());
        let (got, waited) =
            received_with_lateness(10, |k| if k == 19 { None } else { late(k) }, false);
        assert_eq!(got, (0..19).collect::<Vec<_>>());
        assert!(
            waited < Duration::from_millis(1500),
            "waited {waited:?} for a lost packet"
        );
        let (got, waited) = received_with_lateness(30, |k| (k != 0).then_some(0), true);
        assert_eq!(got, (1..20).collect::<Vec<_>>());
        assert!(
            waited < Duration::from_millis(150),
            "waited {waited:?} for packet 0"
        );
    }
}
