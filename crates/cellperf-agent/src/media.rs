//! The `stream` application test (METHODS §13, seed 004 §VI.B): a constant-bitrate media
//! stream from the CN to the MN, as RTP packets (RFC 3550 fixed header, dynamic payload type
//! 96) over UDP, or over one TCP connection framed as RFC 4571 (a 2-byte length before each
//! packet). The MN records every packet's arrival; [`playout`] plays that record through a
//! buffer of a set size.
//!
//! The MN opens the session with one JSON request line (`StreamRequest`): over TCP it is the
//! first line on the connection, over UDP a datagram to the same port, repeated every 250 ms
//! until the first media packet arrives (the request itself may be lost on the link). After
//! the RTP header each packet carries its extended sequence number (u64) and send time (i64
//! ns, wall clock), then padding up to the packet size.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cellperf_analysis::udp_stream::{self, OwdKind, StreamPacket, StreamSummary};
use serde::{Deserialize, Serialize};

use crate::clock::{mono_ns, realtime_ns, wait_until};
use crate::log::LogRow;
use crate::wire::Record;

const RTP_HEADER: usize = 12;
/// RTP header, extended sequence number, send time.
pub const MIN_PACKET: u32 = (RTP_HEADER + 16) as u32;
/// Largest RTP packet: what one UDP datagram (and one RFC 4571 frame) holds.
pub const MAX_PACKET: u32 = 65_507;
/// Media clock of the RTP timestamps (the video rate of RFC 3551).
const RTP_CLOCK_HZ: f64 = 90_000.0;
/// Packets closer than this cannot be paced by one sending thread on a busy host: a bitrate
/// needing more is refused, not sent slower than asked.
pub const MIN_INTERVAL_NS: u64 = 20_000;
pub const MAX_DURATION_S: f64 = 3_600.0;
const REQUEST_RETRY_MS: u64 = 250;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Udp,
    Tcp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamRequest {
    /// Tells a repeated UDP request from a new session.
    pub session: u64,
    pub transport: Transport,
    pub rate_bps: f64,
    pub packet_bytes: u32,
    pub duration_s: f64,
}

impl StreamRequest {
    /// Packet spacing and count; an error names the option that does not fit.
    pub fn schedule(&self) -> Result<(u64, u64), String> {
        if !(MIN_PACKET..=MAX_PACKET).contains(&self.packet_bytes) {
            return Err(format!("--packet: {} B outside {MIN_PACKET}..{MAX_PACKET} B (RTP header, sequence number and send time take {MIN_PACKET})", self.packet_bytes));
        }
        if !(self.duration_s.is_finite()
            && self.duration_s > 0.0
            && self.duration_s <= MAX_DURATION_S)
        {
            return Err(format!(
                "--duration: {} s outside 0..{MAX_DURATION_S} s",
                self.duration_s
            ));
        }
        if !(self.rate_bps.is_finite() && self.rate_bps > 0.0) {
            return Err(format!(
                "--rate: must be a positive bitrate, not {}",
                self.rate_bps
            ));
        }
        let interval = self.packet_bytes as f64 * 8.0 / self.rate_bps * 1e9;
        if interval < MIN_INTERVAL_NS as f64 {
            let max = self.packet_bytes as f64 * 8.0 / (MIN_INTERVAL_NS as f64 / 1e9);
            return Err(format!(
                "--rate: {} bit/s is above what the test can send with {} B packets ({max:.3e} bit/s, one packet every {} µs)",
                self.rate_bps, self.packet_bytes, MIN_INTERVAL_NS / 1000
            ));
        }
        let count = ((self.duration_s * 1e9 / interval).round() as u64).max(1);
        Ok((interval.round() as u64, count))
    }
}

/// Packet `seq` of a stream: RTP header, extended sequence number, send time, padding.
fn packet(buf: &mut [u8], seq: u64, interval_ns: u64, ssrc: u32) {
    buf[0] = 0x80; // version 2, no padding, extension or CSRC
    buf[1] = 96; // dynamic payload type, no marker
    buf[2..4].copy_from_slice(&(seq as u16).to_be_bytes());
    let ts = (seq as f64 * interval_ns as f64 / 1e9 * RTP_CLOCK_HZ) as u64 as u32;
    buf[4..8].copy_from_slice(&ts.to_be_bytes());
    buf[8..12].copy_from_slice(&ssrc.to_be_bytes());
    buf[12..20].copy_from_slice(&seq.to_be_bytes());
    buf[20..28].copy_from_slice(&realtime_ns().to_be_bytes());
}

/// (extended seq, send ns) of a received packet; None for anything that is not one of ours.
fn parse(buf: &[u8]) -> Option<(u64, i64)> {
    if buf.len() < MIN_PACKET as usize || buf[0] != 0x80 || buf[1] & 0x7f != 96 {
        return None;
    }
    let seq = u64::from_be_bytes(buf[12..20].try_into().ok()?);
    let sent = i64::from_be_bytes(buf[20..28].try_into().ok()?);
    Some((seq, sent))
}

/// Sends a request's packets on their schedule through `send`; stops at the first error.
fn send_stream(
    req: &StreamRequest,
    mut send: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let (interval_ns, count) = req
        .schedule()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    crate::clock::tighten_timer_slack();
    let mut buf = vec![0u8; req.packet_bytes as usize];
    let start = mono_ns();
    for seq in 0..count {
        wait_until(start + (seq * interval_ns) as i64);
        packet(&mut buf, seq, interval_ns, req.session as u32);
        send(&buf)?;
    }
    Ok(())
}

/// The CN's end: a TCP listener and a UDP socket on the same port, one thread per session.
pub struct MediaServer {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl MediaServer {
    pub fn bind(addr: SocketAddr) -> io::Result<MediaServer> {
        // Port 0: the kernel picks the TCP port; the UDP socket must then get the same one.
        for _ in 0..20 {
            let tcp = TcpListener::bind(addr)?;
            match UdpSocket::bind(tcp.local_addr()?) {
                Ok(udp) => return Ok(MediaServer { tcp, udp }),
                Err(e) if addr.port() != 0 => return Err(e),
                Err(_) => continue,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "no port free for both TCP and UDP",
        ))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// Serves while `keep_going()` says so (asked about every 100 ms), as [`crate::server::Server::serve`].
    pub fn serve(&self, keep_going: &mut dyn FnMut() -> bool) -> io::Result<()> {
        self.tcp.set_nonblocking(true)?;
        self.udp
            .set_read_timeout(Some(Duration::from_millis(100)))?;
        let seen: Arc<Mutex<HashSet<(SocketAddr, u64)>>> = Arc::default();
        let mut buf = vec![0u8; 2048];
        while keep_going() {
            match self.tcp.accept() {
                Ok((s, _)) => {
                    std::thread::spawn(move || serve_tcp(s));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            let (n, from) = match self.udp.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(_) => continue, // an ICMP error of an earlier send: not ours to stop for
            };
            let Ok(req) = serde_json::from_slice::<StreamRequest>(buf[..n].trim_ascii()) else {
                continue;
            };
            if req.transport != Transport::Udp
                || !seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert((from, req.session))
            {
                continue;
            }
            let sock = self.udp.try_clone()?;
            std::thread::spawn(move || {
                let _ = send_stream(&req, |p| sock.send_to(p, from).map(|_| ()));
            });
        }
        Ok(())
    }
}

fn serve_tcp(s: TcpStream) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_nodelay(true);
    let mut line = String::new();
    let Ok(mut writer) = s.try_clone() else {
        return;
    };
    if BufReader::new(s).take(4096).read_line(&mut line).is_err() {
        return;
    }
    let Ok(req) = serde_json::from_str::<StreamRequest>(line.trim()) else {
        return;
    };
    let _ = send_stream(&req, |p| {
        let mut frame = Vec::with_capacity(p.len() + 2);
        frame.extend_from_slice(&(p.len() as u16).to_be_bytes());
        frame.extend_from_slice(p);
        writer.write_all(&frame)
    });
    let _ = writer.shutdown(std::net::Shutdown::Write);
}

/// What the MN received: the request's wall-clock time and one record per packet received
/// (the first copy of each sequence number), in arrival order.
#[derive(Debug, Clone, Default)]
pub struct Received {
    pub request_ns: i64,
    pub interval_ns: u64,
    pub expected: u64,
    pub records: Vec<Record>,
}

/// The MN's end: asks `server` for `req` and records the packets until the stream is over
/// (TCP: the server closes; UDP: `drain_ms` after the last packet was due).
pub fn receive(server: SocketAddr, req: &StreamRequest, drain_ms: u64) -> Result<Received, String> {
    let (interval_ns, expected) = req.schedule()?;
    let line = serde_json::to_string(req).map_err(|e| e.to_string())? + "\n";
    let mut out = Received {
        request_ns: realtime_ns(),
        interval_ns,
        expected,
        records: Vec::new(),
    };
    let mut seen = HashSet::new();
    let mut keep = |buf: &[u8], out: &mut Received| {
        if let Some((seq, sent)) = parse(buf) {
            if seq < expected && seen.insert(seq) {
                out.records.push(Record {
                    seq,
                    send_ns: Some(sent),
                    recv_ns: Some(realtime_ns()),
                    bytes: buf.len() as u32,
                });
            }
        }
    };
    let budget_ns = (req.duration_s * 1e9) as i64 + drain_ms as i64 * 1_000_000;
    match req.transport {
        Transport::Tcp => {
            let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(10))
                .map_err(|e| format!("{server}: cannot connect ({e})"))?;
            s.write_all(line.as_bytes())
                .map_err(|e| format!("{server}: {e}"))?;
            // The whole stream late by its duration again is a dead stream, not a slow one.
            s.set_read_timeout(Some(Duration::from_nanos(
                budget_ns.max(0) as u64 + 30_000_000_000,
            )))
            .map_err(|e| e.to_string())?;
            let mut r = BufReader::with_capacity(1 << 16, s);
            let mut buf = vec![0u8; MAX_PACKET as usize];
            loop {
                let mut len = [0u8; 2];
                match r.read_exact(&mut len) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(format!("{server}: stream broke off ({e})")),
                }
                let n = u16::from_be_bytes(len) as usize;
                r.read_exact(&mut buf[..n])
                    .map_err(|e| format!("{server}: stream broke off ({e})"))?;
                keep(&buf[..n], &mut out);
            }
        }
        Transport::Udp => {
            let local: SocketAddr = if server.is_ipv4() {
                "0.0.0.0:0"
            } else {
                "[::]:0"
            }
            .parse()
            .unwrap();
            let sock = UdpSocket::bind(local).map_err(|e| e.to_string())?;
            crate::udp::enlarge_buffers(&sock);
            sock.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(|e| e.to_string())?;
            let start = mono_ns();
            let mut last_request: Option<i64> = None;
            let mut buf = vec![0u8; MAX_PACKET as usize];
            // The stream is due to end `duration` after the first packet; without any packet
            // the requests go on until the whole budget is spent.
            let mut end = start + budget_ns;
            loop {
                let now = mono_ns();
                if now >= end || (out.records.len() as u64) == expected {
                    break;
                }
                if out.records.is_empty()
                    && last_request.is_none_or(|t| now - t >= (REQUEST_RETRY_MS * 1_000_000) as i64)
                {
                    sock.send_to(line.as_bytes(), server)
                        .map_err(|e| format!("{server}: cannot send the request ({e})"))?;
                    last_request = Some(now);
                }
                match sock.recv_from(&mut buf) {
                    Ok((n, from)) if from == server => {
                        let first = out.records.is_empty();
                        keep(&buf[..n], &mut out);
                        if first && !out.records.is_empty() {
                            end = mono_ns() + budget_ns;
                        }
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => {} // ICMP unreachable while the server is not up yet: retry
                }
            }
        }
    }
    Ok(out)
}

/// The stream as the agents' UDP streams are measured (`udp_stream::analyze`: loss, jitter,
/// OWD on the two hosts' wall clocks) and its per-packet log rows (flow `<flow_id>/down`),
/// one per packet sent; plus every packet's arrival by sequence number, for [`playout`].
pub fn analyse(r: &Received, flow_id: &str) -> (StreamSummary, Vec<LogRow>, Vec<Option<i64>>) {
    let mut packets: Vec<StreamPacket> = (0..r.expected)
        .map(|seq| StreamPacket {
            seq,
            send_ns: None,
            recv_ns: None,
            bytes: 0,
        })
        .collect();
    for rec in &r.records {
        packets[rec.seq as usize] = StreamPacket {
            seq: rec.seq,
            send_ns: rec.send_ns,
            recv_ns: rec.recv_ns,
            bytes: rec.bytes,
        };
    }
    let arrival = packets.iter().map(|p| p.recv_ns).collect();
    let a = udp_stream::analyze(&packets, 0, true, OwdKind::Raw, 1_000_000_000);
    let rows = a
        .packets
        .iter()
        .map(|p| LogRow {
            flow_id: format!("{flow_id}/down"),
            step: 0,
            direction: "down",
            seq: p.seq,
            send_ns: p.send_ns,
            recv_ns: p.recv_ns,
            bytes: p.bytes,
            lost: Some(p.recv_ns.is_none()),
            owd_ms: p.owd_ms,
            owd_kind: "raw",
            rtt_ms: None,
            jitter_ms: p.jitter_ms,
        })
        .collect();
    (a.summary, rows, arrival)
}

/// A stream played through a buffer of `buffer_ns` of media.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Playout {
    /// From the request to the start of playback (None: nothing arrived).
    pub startup_ns: Option<i64>,
    pub stalls: u64,
    pub stall_ns: i64,
    /// Packets that arrived after their time in a playout that never stalls (start-up delay
    /// plus their media time): what a fixed buffer of this size would have missed.
    pub late: u64,
    /// Packets that never arrived (skipped by the player, as concealment would).
    pub lost: u64,
    /// (wall-clock start ns, duration ns) of each stall.
    pub stall_periods: Vec<(i64, i64)>,
}

/// Plays packets `0..expected` (media time seq × interval) as they arrived (`arrival[seq]`,
/// None = lost). Playback starts once a buffer of media has arrived (every received packet
/// of its first `buffer_ns`); when the packet due has not arrived the player stalls until
/// a buffer of media from it on is in, as a buffering media player does (rebuffering).
pub fn playout(
    arrival: &[Option<i64>],
    interval_ns: u64,
    buffer_ns: u64,
    request_ns: i64,
) -> Playout {
    let n = arrival.len();
    let k = ((buffer_ns as f64 / interval_ns as f64).ceil() as usize).max(1);
    // When packets i..i+k (those that arrive) are all in.
    let filled = |i: usize| arrival[i..(i + k).min(n)].iter().flatten().max().copied();
    let mut out = Playout {
        lost: arrival.iter().filter(|a| a.is_none()).count() as u64,
        ..Default::default()
    };
    let Some(t0) = (0..n).find_map(|i| filled(i).map(|_| i)).and_then(filled) else {
        return out;
    };
    out.startup_ns = Some(t0 - request_ns);
    let mut shift = 0i64;
    for (i, a) in arrival.iter().enumerate() {
        let Some(a) = *a else { continue };
        let due = t0 + (i as u64 * interval_ns) as i64;
        if a > due {
            out.late += 1;
        }
        if a > due + shift {
            let resume = filled(i).unwrap_or(a);
            out.stalls += 1;
            out.stall_periods.push((due + shift, resume - due - shift));
            out.stall_ns += resume - due - shift;
            shift = resume - due;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn req(transport: Transport, rate: f64, dur: f64) -> StreamRequest {
        StreamRequest {
            session: 7,
            transport,
            rate_bps: rate,
            packet_bytes: 1000,
            duration_s: dur,
        }
    }

    #[test]
    fn schedule_and_refused_rates() {
        assert_eq!(
            req(Transport::Udp, 800_000.0, 2.0).schedule(),
            Ok((10_000_000, 200))
        );
        let e = req(Transport::Udp, 1e9, 1.0).schedule().unwrap_err();
        assert!(
            e.starts_with("--rate: 1000000000 bit/s is above what the test can send"),
            "{e}"
        );
        assert!(StreamRequest {
            packet_bytes: 20,
            ..req(Transport::Tcp, 1e6, 1.0)
        }
        .schedule()
        .unwrap_err()
        .starts_with("--packet"));
    }

    #[test]
    fn packets_parse_back() {
        let mut b = vec![0u8; 100];
        packet(&mut b, 70_000, 10_000_000, 1);
        assert_eq!(&b[2..4], &((70_000u64 as u16).to_be_bytes()));
        assert_eq!(parse(&b).map(|p| p.0), Some(70_000));
        assert_eq!(parse(&b[..20]), None);
    }

    #[test]
    fn playout_on_time_then_an_outage() {
        // 10 ms packets, 100 ms buffer (k = 10), each arriving 5 ms after its media time.
        let mut a: Vec<Option<i64>> = (0..100).map(|i| Some(i * 10 * MS + 5 * MS)).collect();
        let p = playout(&a, 10_000_000, 100_000_000, 0);
        assert_eq!(
            (p.startup_ns, p.stalls, p.late, p.lost),
            (Some(95 * MS), 0, 0, 0)
        );
        // An outage holds packets 40..60 until 700 ms (they leave in a burst): 450 ms late
        // for packet 40, more than the 90 ms of slack the buffer gives.
        for (i, x) in a.iter_mut().enumerate().take(60).skip(40) {
            *x = Some(700 * MS + i as i64);
        }
        a[80] = None;
        let p = playout(&a, 10_000_000, 100_000_000, 0);
        assert_eq!((p.stalls, p.lost), (1, 1));
        // Stalled at packet 40's time (95 + 400 ms); resumes when 40..50 are in.
        assert_eq!(p.stall_periods, vec![(495 * MS, 700 * MS + 49 - 495 * MS)]);
        assert_eq!(p.late, 20); // 40..59: all after their time in a playout that never stalls
                                // The same outage with a 1 s buffer: no stall.
        let p = playout(&a, 10_000_000, 1_000_000_000, 0);
        assert_eq!((p.stalls, p.stall_ns), (0, 0));
    }

    #[test]
    fn udp_and_tcp_streams_over_loopback() {
        let server = MediaServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || {
            server.serve(&mut || !s2.load(std::sync::atomic::Ordering::Relaxed))
        });
        for t in [Transport::Udp, Transport::Tcp] {
            let r = receive(addr, &req(t, 800_000.0, 0.5), 500).unwrap();
            assert_eq!((r.expected, r.records.len()), (50, 50), "{t:?}");
            assert!(r.records.iter().all(|x| x.bytes == 1000));
            let (summary, rows, arrival) = analyse(&r, "s");
            assert_eq!(
                (
                    summary.packets_received,
                    rows.len(),
                    arrival.iter().flatten().count()
                ),
                (50, 50, 50)
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap().unwrap();
    }
}
