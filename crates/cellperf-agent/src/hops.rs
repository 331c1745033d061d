//! The `hops` test (docs/methods.md §2, seed 003 slides 9-10): the round trip to each router on
//! the path and the loss of its answers, as mtr measures them. UDP probes leave with TTL (IPv6:
//! hop limit) 1, 2, ...; the router where the TTL runs out answers ICMP time exceeded, the
//! target answers port unreachable. The answers are read from the socket's error queue
//! (`IP_RECVERR` / `IPV6_RECVERR` and `MSG_ERRQUEUE`, as tracepath does): no raw socket, no
//! privilege. A probe is known by its destination port, which the error queue returns with
//! each answer (a router may quote no more of the datagram than its UDP header).
//!
//! Each round sends one probe per TTL from 1 up to the end of the path, spread over the round
//! (`interval`, default 1 s as mtr): every router gets one probe a round, within the ICMP rate
//! limit a Linux router applies per destination (one answer a second after a burst of six).
//! The end of the path is the least TTL whose answer was not time exceeded (the target's port
//! unreachable, or another unreachable that ends the path). The first round finds it as
//! tracepath does: TTL t + 1 leaves once t is answered (or a round has passed without an
//! answer), so that probes beyond the target do not spend its ICMP rate limit; later rounds go
//! up to the end alone. Probes beyond the end (sent after a silent hop) are left out of the hops.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use arrow_array::builder::{
    Float64Builder, StringBuilder, TimestampNanosecondBuilder, UInt16Builder, UInt32Builder,
    UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use cellperf_analysis::stats::{mean_std, quantile_sorted};
use serde::Serialize;

use crate::clock::{mono_ns, realtime_ns};
use crate::sockopt;

/// traceroute's and mtr's first destination port.
pub const FIRST_PORT: u16 = 33434;
/// Destination ports in use, one per probe in turn: an answer is matched to its probe by
/// port, so a port is used again only after this many probes (33 s at 30 probes a second,
/// longer than any answer is waited for).
pub const PORT_SPAN: u16 = 1000;
pub const MAX_HOPS: u8 = 64;
/// UDP payload of a probe (bytes): small, as tracepath's and mtr's.
pub const PAYLOAD: usize = 32;

/// What to probe, how often and how long to wait.
#[derive(Debug, Clone)]
pub struct HopsConfig {
    pub target: IpAddr,
    pub first_port: u16,
    pub max_hops: u8,
    pub rounds: u32,
    pub interval_ns: u64,
    /// Wait for answers after the last probe.
    pub timeout_ns: u64,
}

impl HopsConfig {
    /// Refuses settings the test cannot run with; the reason names the option.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_HOPS).contains(&self.max_hops) {
            return Err(format!(
                "--max-hops: {} is outside 1..{MAX_HOPS}",
                self.max_hops
            ));
        }
        if self.rounds == 0 || self.rounds > 100_000 {
            return Err(format!("--count: {} is outside 1..100000", self.rounds));
        }
        if !(1_000_000..=60_000_000_000).contains(&self.interval_ns) {
            return Err(format!(
                "--interval: {} s is outside 0.001..60 s",
                self.interval_ns as f64 / 1e9
            ));
        }
        if self.timeout_ns > 60_000_000_000 {
            return Err(format!(
                "--timeout: {} s is over 60 s",
                self.timeout_ns as f64 / 1e9
            ));
        }
        if self.first_port == 0 || self.first_port as u32 + PORT_SPAN as u32 > 65_536 {
            return Err(format!(
                "--port: {} leaves no room for {PORT_SPAN} probe ports below 65536",
                self.first_port
            ));
        }
        if self.target.is_unspecified() || self.target.is_multicast() {
            return Err(format!("TARGET: {} is not a unicast address", self.target));
        }
        Ok(())
    }
}

/// How a probe was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// A router on the way: ICMP time exceeded (ICMPv6 type 3).
    TimeExceeded,
    /// The target: port unreachable (ICMP 3/3, ICMPv6 1/4).
    PortUnreachable,
    /// Another destination unreachable: the path ends at the router that sent it.
    Unreachable,
}

impl Answer {
    /// The answer an ICMP (or ICMPv6) type and code mean; None for any other message.
    pub fn of(v6: bool, icmp_type: u8, code: u8) -> Option<Answer> {
        match (v6, icmp_type, code) {
            (false, 11, _) | (true, 3, _) => Some(Answer::TimeExceeded),
            (false, 3, 3) | (true, 1, 4) => Some(Answer::PortUnreachable),
            (false, 3, _) | (true, 1, _) => Some(Answer::Unreachable),
            _ => None,
        }
    }
}

/// One probe and its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probe {
    pub round: u32,
    pub ttl: u8,
    pub port: u16,
    /// Wall clock at the send (ns); the answer's from the kernel's receive stamp.
    pub send_ns: i64,
    pub recv_ns: Option<i64>,
    pub responder: Option<IpAddr>,
    pub answer: Option<Answer>,
}

impl Probe {
    pub fn rtt_ms(&self) -> Option<f64> {
        self.recv_ns.map(|r| (r - self.send_ns) as f64 / 1e6)
    }
}

/// One hop's round trips (ms) over its answered probes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopRtt {
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub p95: f64,
    pub max: f64,
    pub mean: f64,
    pub std: f64,
}

/// One TTL of the path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hop {
    pub ttl: u8,
    pub sent: u64,
    pub answered: u64,
    /// Probes without an answer within the wait / probes sent.
    pub loss_rate: f64,
    /// The address that answered most often (None: no answer at all, mtr's `???`).
    pub responder: Option<IpAddr>,
    /// Every address that answered, most frequent first (several: load-balanced paths).
    pub responders: Vec<IpAddr>,
    /// The target answered at this TTL (port unreachable).
    pub reached: bool,
    pub rtt_ms: Option<HopRtt>,
}

/// The hops 1..=end of the path from the probes: the end is the least TTL answered by
/// anything but time exceeded; without one, the highest TTL that had any answer.
pub fn hops(probes: &[Probe]) -> Vec<Hop> {
    let end = probes
        .iter()
        .filter(|p| matches!(p.answer, Some(a) if a != Answer::TimeExceeded))
        .map(|p| p.ttl)
        .min()
        .or_else(|| {
            probes
                .iter()
                .filter(|p| p.answer.is_some())
                .map(|p| p.ttl)
                .max()
        })
        .unwrap_or(0);
    (1..=end)
        .map(|ttl| {
            let mine: Vec<&Probe> = probes.iter().filter(|p| p.ttl == ttl).collect();
            let mut rtts: Vec<f64> = mine.iter().filter_map(|p| p.rtt_ms()).collect();
            rtts.sort_unstable_by(f64::total_cmp);
            let mut by_address: Vec<(IpAddr, usize)> = Vec::new();
            for a in mine.iter().filter_map(|p| p.responder) {
                match by_address.iter_mut().find(|(x, _)| *x == a) {
                    Some((_, n)) => *n += 1,
                    None => by_address.push((a, 1)),
                }
            }
            by_address.sort_by_key(|a| std::cmp::Reverse(a.1));
            let q = |x| quantile_sorted(&rtts, x).unwrap_or(f64::NAN);
            let sent = mine.len() as u64;
            let answered = rtts.len() as u64;
            Hop {
                ttl,
                sent,
                answered,
                loss_rate: if sent == 0 {
                    0.0
                } else {
                    1.0 - answered as f64 / sent as f64
                },
                responder: by_address.first().map(|a| a.0),
                responders: by_address.iter().map(|a| a.0).collect(),
                reached: mine
                    .iter()
                    .any(|p| p.answer == Some(Answer::PortUnreachable)),
                rtt_ms: mean_std(&rtts).map(|(mean, std)| HopRtt {
                    min: rtts[0],
                    q1: q(0.25),
                    median: q(0.5),
                    q3: q(0.75),
                    p95: q(0.95),
                    max: rtts[rtts.len() - 1],
                    mean,
                    std,
                }),
            }
        })
        .collect()
}

/// An answer read from the error queue: the probe's destination port, who answered, how,
/// and when (the kernel's stamp, wall clock).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Heard {
    port: u16,
    from: Option<IpAddr>,
    answer: Answer,
    recv_ns: i64,
}

/// Sends the probes and collects their answers; `keep_going()` is asked before each probe and
/// while waiting (false: stop with what was measured).
pub fn run(cfg: &HopsConfig, keep_going: &mut dyn FnMut() -> bool) -> Result<Vec<Probe>, String> {
    cfg.check()?;
    let target = cfg.target.to_canonical();
    let v6 = target.is_ipv6();
    let sock = UdpSocket::bind(if v6 { "[::]:0" } else { "0.0.0.0:0" })
        .map_err(|e| format!("cannot open a UDP socket ({e})"))?;
    let fd = sock.as_raw_fd();
    let (level, recverr) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::IPPROTO_IP, libc::IP_RECVERR)
    };
    sockopt::set(fd, level, recverr, 1 as libc::c_int)
        .and_then(|_| sockopt::set(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1 as libc::c_int))
        .and_then(|_| sock.set_nonblocking(true))
        .map_err(|e| format!("cannot ask for ICMP errors on the socket ({e})"))?;
    let payload = [0u8; PAYLOAD];
    let mut probes: Vec<Probe> = Vec::new();
    // Outstanding probe of each port offset: its index in `probes`.
    let mut by_port: Vec<Option<usize>> = vec![None; PORT_SPAN as usize];
    let mut end = cfg.max_hops;
    let start = mono_ns();
    let collect = |probes: &mut Vec<Probe>, by_port: &mut Vec<Option<usize>>, end: &mut u8| {
        for h in read_errors(fd, v6) {
            let Some(slot) = h
                .port
                .checked_sub(cfg.first_port)
                .filter(|o| *o < PORT_SPAN)
            else {
                continue;
            };
            let Some(i) = by_port[slot as usize].take() else {
                continue; // a second answer, or one to a probe of long ago
            };
            let p = &mut probes[i];
            p.recv_ns = Some(h.recv_ns);
            p.responder = h.from;
            p.answer = Some(h.answer);
            if h.answer != Answer::TimeExceeded {
                *end = (*end).min(p.ttl);
            }
        }
        // Datagrams answered on an open port (no ICMP then): read and dropped.
        let mut buf = [0u8; 64];
        while sock.recv(&mut buf).is_ok() {}
    };
    let mut round_start = start;
    'rounds: for round in 0..cfg.rounds {
        if round > 0 {
            // The first round may have taken longer than a round: the next starts now then.
            round_start = (round_start + cfg.interval_ns as i64).max(mono_ns());
        }
        let mut ttl = 1u8;
        let mut last_sent = i64::MIN;
        while ttl <= end {
            let due = round_start + ((ttl as u64 - 1) * cfg.interval_ns / end as u64) as i64;
            loop {
                collect(&mut probes, &mut by_port, &mut end);
                let now = mono_ns();
                // The first round finds the path: TTL t + 1 waits for t's answer (or a round),
                // so that no burst of probes beyond the target, sent before its answer came,
                // spends the target's ICMP rate limit.
                let previous_done = round > 0
                    || ttl == 1
                    || probes.last().is_some_and(|p| p.recv_ns.is_some())
                    || now >= last_sent + cfg.interval_ns as i64;
                if (now >= due && previous_done) || ttl > end {
                    break;
                }
                wait_readable(fd, (due - now).clamp(1_000_000, 100_000_000));
                if !keep_going() {
                    break 'rounds;
                }
            }
            if ttl > end {
                break;
            }
            let n = probes.len();
            let port = cfg.first_port + (n % PORT_SPAN as usize) as u16;
            let ttl_set = if v6 {
                sockopt::set(
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_UNICAST_HOPS,
                    ttl as libc::c_int,
                )
            } else {
                sockopt::set(fd, libc::IPPROTO_IP, libc::IP_TTL, ttl as libc::c_int)
            };
            ttl_set.map_err(|e| format!("cannot set the TTL ({e})"))?;
            let to = SocketAddr::new(target, port);
            let mut send_ns = realtime_ns();
            let mut sent = sock.send_to(&payload, to);
            if sent.as_ref().is_err_and(|e| {
                matches!(
                    e.raw_os_error(),
                    Some(libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH)
                )
            }) {
                // An answer that came since the queue was read is reported on the send,
                // which then sends nothing (the socket's pending error); once more.
                send_ns = realtime_ns();
                sent = sock.send_to(&payload, to);
            }
            match sent {
                Ok(_) => {}
                // No route now (a link down): the probe is lost, the test goes on.
                Err(e) if crate::udp::is_no_path(&e) => {}
                Err(e) => return Err(format!("cannot send a probe to {target} ({e})")),
            }
            last_sent = mono_ns();
            by_port[n % PORT_SPAN as usize] = Some(n);
            probes.push(Probe {
                round,
                ttl,
                port,
                send_ns,
                recv_ns: None,
                responder: None,
                answer: None,
            });
            ttl += 1;
        }
    }
    // The last answers: until each probe is answered or the wait after the last is over.
    let last = mono_ns();
    while by_port.iter().any(|p| p.is_some()) && mono_ns() - last < cfg.timeout_ns as i64 {
        collect(&mut probes, &mut by_port, &mut end);
        wait_readable(fd, 20_000_000);
        if !keep_going() {
            break;
        }
    }
    collect(&mut probes, &mut by_port, &mut end);
    Ok(probes)
}

/// Waits up to `ns` for the socket to be readable or to have an error queued.
fn wait_readable(fd: i32, ns: i64) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call.
    unsafe { libc::poll(&mut p, 1, (ns / 1_000_000).max(1) as libc::c_int) };
}

/// Every ICMP answer queued on the socket now.
fn read_errors(fd: i32, v6: bool) -> Vec<Heard> {
    let mut out = Vec::new();
    loop {
        let mut data = [0u8; 64];
        let mut control = [0u64; 64]; // 512 bytes, 8-aligned: the error, its offender, a stamp
                                      // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
        let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: msghdr is plain data; the name, iovec and control buffers outlive the call
        // and their lengths are theirs; the kernel writes at most `msg_controllen` bytes of
        // control data, CMSG_NXTHDR stays within it, and each structure read out of it is
        // read unaligned from within its message's length.
        let heard = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &mut name as *mut _ as *mut libc::c_void;
            msg.msg_namelen = std::mem::size_of_val(&name) as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control);
            if libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) < 0 {
                return out;
            }
            let port = sockaddr_of(&name as *const _ as *const libc::sockaddr).map(|a| a.port());
            let (mut err, mut stamp) = (None, None);
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
                let data = libc::CMSG_DATA(cmsg);
                if (level == libc::IPPROTO_IP && kind == libc::IP_RECVERR)
                    || (level == libc::IPPROTO_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let ee = std::ptr::read_unaligned(data as *const libc::sock_extended_err);
                    let offender = data.add(std::mem::size_of::<libc::sock_extended_err>());
                    err = Some((ee, sockaddr_of(offender as *const libc::sockaddr)));
                } else if level == libc::SOL_SOCKET && kind == libc::SO_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                    stamp = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            err.zip(port).and_then(|((ee, from), port)| {
                let icmp = ee.ee_origin == libc::SO_EE_ORIGIN_ICMP
                    || ee.ee_origin == libc::SO_EE_ORIGIN_ICMP6;
                let answer = Answer::of(v6, ee.ee_type, ee.ee_code).filter(|_| icmp)?;
                Some(Heard {
                    port,
                    from: from.map(|a| a.ip().to_canonical()),
                    answer,
                    recv_ns: stamp.unwrap_or_else(realtime_ns),
                })
            })
        };
        out.extend(heard);
    }
}

/// The address a `sockaddr_in`/`sockaddr_in6` holds (None for another family).
///
/// SAFETY: `sa` points to at least a `sockaddr_in6`'s bytes (or a `sockaddr_in`'s when its
/// family says AF_INET).
unsafe fn sockaddr_of(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    match std::ptr::read_unaligned(sa as *const libc::sa_family_t) as libc::c_int {
        libc::AF_INET => {
            let a = std::ptr::read_unaligned(sa as *const libc::sockaddr_in);
            Some(SocketAddr::new(
                IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            let a = std::ptr::read_unaligned(sa as *const libc::sockaddr_in6);
            Some(SocketAddr::new(
                IpAddr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
            ))
        }
        _ => None,
    }
}

/// The probes as an Arrow batch (`--log`): one row per probe, RTT in ms (null: no answer).
pub fn to_record_batch(probes: &[Probe]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let schema = Schema::new(vec![
        Field::new("round", DataType::UInt32, false),
        Field::new("ttl", DataType::UInt8, false),
        Field::new("port", DataType::UInt16, false),
        Field::new("send_ts", ts.clone(), false),
        Field::new("recv_ts", ts, true),
        Field::new("rtt_ms", DataType::Float64, true),
        Field::new("responder", DataType::Utf8, true),
        Field::new("answer", DataType::Utf8, true),
    ]);
    let (mut round, mut ttl, mut port) = (
        UInt32Builder::new(),
        UInt8Builder::new(),
        UInt16Builder::new(),
    );
    let mut send = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut recv = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let (mut rtt, mut from, mut answer) = (
        Float64Builder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    for p in probes {
        round.append_value(p.round);
        ttl.append_value(p.ttl);
        port.append_value(p.port);
        send.append_value(p.send_ns);
        recv.append_option(p.recv_ns);
        rtt.append_option(p.rtt_ms());
        from.append_option(p.responder.map(|a| a.to_string()));
        answer.append_option(p.answer.map(|a| match a {
            Answer::TimeExceeded => "time_exceeded",
            Answer::PortUnreachable => "port_unreachable",
            Answer::Unreachable => "unreachable",
        }));
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(round.finish()),
        Arc::new(ttl.finish()),
        Arc::new(port.finish()),
        Arc::new(send.finish()),
        Arc::new(recv.finish()),
        Arc::new(rtt.finish()),
        Arc::new(from.finish()),
        Arc::new(answer.finish()),
    ];
    RecordBatch::try_new(Arc::new(schema), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn probe(round: u32, ttl: u8, rtt_ms: Option<i64>, from: &str, answer: Answer) -> Probe {
        Probe {
            round,
            ttl,
            port: FIRST_PORT,
            send_ns: 1_000 * MS,
            recv_ns: rtt_ms.map(|r| 1_000 * MS + r * MS),
            responder: rtt_ms.map(|_| from.parse().unwrap()),
            answer: rtt_ms.map(|_| answer),
        }
    }

    #[test]
    fn icmp_types_and_codes() {
        assert_eq!(Answer::of(false, 11, 0), Some(Answer::TimeExceeded));
        assert_eq!(Answer::of(false, 3, 3), Some(Answer::PortUnreachable));
        assert_eq!(Answer::of(false, 3, 1), Some(Answer::Unreachable));
        assert_eq!(Answer::of(true, 3, 0), Some(Answer::TimeExceeded));
        assert_eq!(Answer::of(true, 1, 4), Some(Answer::PortUnreachable));
        assert_eq!(Answer::of(false, 0, 0), None); // an echo reply is no answer to a probe
        assert_eq!(Answer::of(true, 2, 0), None); // packet too big
    }

    /// Two routers and the target at TTL 3, three rounds; the first round's probes beyond the
    /// target (TTL 4, 5: sent before its answer came) are left out.
    #[test]
    fn hops_per_ttl() {
        use Answer::*;
        let probes = vec![
            probe(0, 1, Some(10), "10.0.0.1", TimeExceeded),
            probe(0, 2, Some(30), "10.0.1.1", TimeExceeded),
            probe(0, 3, Some(50), "10.0.2.2", PortUnreachable),
            probe(0, 4, Some(51), "10.0.2.2", PortUnreachable),
            probe(0, 5, None, "", PortUnreachable),
            probe(1, 1, Some(12), "10.0.0.1", TimeExceeded),
            probe(1, 2, None, "", TimeExceeded),
            probe(1, 3, Some(54), "10.0.2.2", PortUnreachable),
            probe(2, 1, Some(14), "10.0.0.1", TimeExceeded),
            probe(2, 2, Some(34), "10.0.9.9", TimeExceeded),
            probe(2, 3, Some(52), "10.0.2.2", PortUnreachable),
        ];
        let h = hops(&probes);
        assert_eq!(h.len(), 3);
        assert_eq!((h[0].sent, h[0].answered, h[0].loss_rate), (3, 3, 0.0));
        let r = h[0].rtt_ms.as_ref().unwrap();
        assert_eq!((r.min, r.median, r.max, r.mean), (10.0, 12.0, 14.0, 12.0));
        assert_eq!((r.q1, r.q3), (11.0, 13.0));
        assert!((h[1].loss_rate - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(h[1].responders.len(), 2); // two routers answered at TTL 2
        assert!(!h[1].reached && h[2].reached);
        assert_eq!(h[2].responder, Some("10.0.2.2".parse().unwrap()));
        assert_eq!(h[2].rtt_ms.as_ref().unwrap().median, 52.0);
        // Nothing answered: no hops; only routers answered: up to the last that did.
        assert!(hops(&[probe(0, 1, None, "", TimeExceeded)]).is_empty());
        let h = hops(&probes[..2]);
        assert_eq!((h.len(), h[1].reached), (2, false));
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let ok = HopsConfig {
            target: "127.0.0.1".parse().unwrap(),
            first_port: FIRST_PORT,
            max_hops: 30,
            rounds: 3,
            interval_ns: 100_000_000,
            timeout_ns: 1_000_000_000,
        };
        assert_eq!(ok.check(), Ok(()));
        for (bad, option) in [
            (
                HopsConfig {
                    max_hops: 0,
                    ..ok.clone()
                },
                "--max-hops",
            ),
            (
                HopsConfig {
                    rounds: 0,
                    ..ok.clone()
                },
                "--count",
            ),
            (
                HopsConfig {
                    interval_ns: 0,
                    ..ok.clone()
                },
                "--interval",
            ),
            (
                HopsConfig {
                    first_port: 65_000,
                    ..ok.clone()
                },
                "--port",
            ),
            (
                HopsConfig {
                    target: "0.0.0.0".parse().unwrap(),
                    ..ok.clone()
                },
                "TARGET",
            ),
        ] {
            assert!(bad.check().unwrap_err().starts_with(option), "{option}");
        }
    }

    /// On loopback the target is the first hop: every probe is answered by port unreachable
    /// from 127.0.0.1 (the local stack's ICMP, read from the error queue), after the first
    /// round none goes beyond TTL 1.
    #[test]
    fn loopback_target_is_one_hop() {
        let cfg = HopsConfig {
            target: "127.0.0.1".parse().unwrap(),
            first_port: FIRST_PORT,
            max_hops: 8,
            rounds: 3,
            interval_ns: 50_000_000,
            timeout_ns: 500_000_000,
        };
        let probes = run(&cfg, &mut || true).unwrap();
        let h = hops(&probes);
        assert_eq!(h.len(), 1);
        assert!(h[0].reached);
        assert_eq!(h[0].responder, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(h[0].sent, 3);
        assert_eq!(probes.iter().filter(|p| p.round > 0).count(), 2);
        let r = h[0].rtt_ms.as_ref().unwrap();
        assert!(r.min >= 0.0 && r.max < 50.0, "{r:?}");
        assert_eq!(to_record_batch(&probes).unwrap().num_rows(), probes.len());
    }
}
