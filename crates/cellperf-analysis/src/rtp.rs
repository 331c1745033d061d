//! RTP streams and RTCP reports in a capture (docs/methods.md §13; seed 004 §VI.C: the
//! fast-start burst of a streaming server, RTCP loss notification, the SSRC of the first three
//! packets differing from the rest's, and what that costs header compression).
//!
//! A UDP datagram is RTP when its payload has version 2 and a second byte outside 192..=223,
//! RTCP when its second byte is in 192..=223 and it parses as a compound RTCP packet (the RFC
//! 5761 rule that lets both share a port). A 5-tuple carries RTP when at least
//! [`MIN_RTP_PACKETS`] of its datagrams look like RTP and they are at least 90 % of them
//! (**choice**: a few datagrams of another protocol can pass for RTP by chance); each SSRC in
//! it is a stream. Per stream, as tshark's RTP analysis (`-z rtp,streams`): packets, loss from
//! the extended sequence numbers, the largest gap between arrivals, and RFC 3550 jitter in
//! milliseconds (A.8: J += (|D| − J)/16 over consecutive packets in capture order, D the
//! difference of their spacing in capture time and in RTP time) — its last and largest value
//! and its mean over the packets after the first, where the media clock is known from a static
//! payload type (RFC 3551); a dynamic one has none without its SDP, and no jitter, as in tshark.

use std::collections::HashMap;

use cellperf_capture::decode::{addr_to_string, Transport};
use cellperf_capture::{Addr, Capture, CaptureError};
use serde::Serialize;

use crate::PacketStream;

/// Least RTP-looking datagrams of a 5-tuple for it to count as RTP.
pub const MIN_RTP_PACKETS: usize = 10;
/// A stream's lead over its media clock below this many media intervals is no start-up burst.
const BURST_MIN_INTERVALS: f64 = 5.0;
/// The burst ends where the lead first reaches this share of its largest value.
const BURST_END_SHARE: f64 = 0.9;

/// The media clock of a static RTP payload type (RFC 3551 Tables 4 and 5); None for dynamic ones.
pub fn clock_rate(payload_type: u8) -> Option<u32> {
    Some(match payload_type {
        0 | 3 | 4 | 5 | 7 | 8 | 9 | 12 | 13 | 15 | 18 => 8_000,
        6 => 16_000,
        10 | 11 => 44_100,
        16 => 11_025,
        17 => 22_050,
        14 | 25 | 26 | 28 | 31 | 32 | 33 | 34 => 90_000,
        _ => return None,
    })
}

/// The fixed RTP header of a datagram's payload, if it has the look of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpHeader {
    pub payload_type: u8,
    pub marker: bool,
    pub seq: u16,
    pub timestamp: u32,
    pub ssrc: u32,
}

impl RtpHeader {
    pub fn parse(b: &[u8]) -> Option<RtpHeader> {
        if b.len() < 12 || b[0] >> 6 != 2 || (192..=223).contains(&b[1]) {
            return None;
        }
        Some(RtpHeader {
            payload_type: b[1] & 0x7f,
            marker: b[1] & 0x80 != 0,
            seq: u16::from_be_bytes([b[2], b[3]]),
            timestamp: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            ssrc: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        })
    }
}

/// One report block of an RTCP sender or receiver report (RFC 3550 §6.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportBlock {
    pub source_ssrc: u32,
    /// Fraction lost since the previous report, in 1/256.
    pub fraction_lost: u8,
    /// Cumulative packets lost (24-bit signed).
    pub cumulative_lost: i32,
    pub highest_seq: u32,
    /// Interarrival jitter in RTP timestamp units.
    pub jitter: u32,
    /// Middle 32 bits of the NTP timestamp of the last SR received (0: none).
    pub lsr: u32,
    /// Delay since that SR, in 1/65536 s.
    pub dlsr: u32,
}

/// What one RTCP packet of a compound said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rtcp {
    Sender { ssrc: u32, ntp: u64, rtp_ts: u32, packets: u32, octets: u32, blocks: Vec<ReportBlock> },
    Receiver { ssrc: u32, blocks: Vec<ReportBlock> },
    /// SDES, BYE, APP, feedback: counted, not read.
    Other(u8),
}

/// The RTCP packets of a compound datagram; None when it is not one (a bad version, length
/// or an RTCP packet type outside 200..=206 first).
pub fn parse_rtcp(mut b: &[u8]) -> Option<Vec<Rtcp>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 4 || b[0] >> 6 != 2 {
            return None;
        }
        let count = (b[0] & 0x1f) as usize;
        let pt = b[1];
        let len = (u16::from_be_bytes([b[2], b[3]]) as usize + 1) * 4;
        if len > b.len() || (out.is_empty() && !(200..=206).contains(&pt)) {
            return None;
        }
        let body = &b[4..len];
        let blocks = |at: usize| -> Option<Vec<ReportBlock>> {
            (0..count)
                .map(|i| {
                    let r = body.get(at + 24 * i..at + 24 * (i + 1))?;
                    let word = |k: usize| u32::from_be_bytes([r[k], r[k + 1], r[k + 2], r[k + 3]]);
                    // 24-bit two's complement.
                    let lost = ((word(4) & 0x00ff_ffff) << 8) as i32 >> 8;
                    Some(ReportBlock {
                        source_ssrc: word(0),
                        fraction_lost: r[4],
                        cumulative_lost: lost,
                        highest_seq: word(8),
                        jitter: word(12),
                        lsr: word(16),
                        dlsr: word(20),
                    })
                })
                .collect()
        };
        let word = |k: usize| body.get(k..k + 4).map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        out.push(match pt {
            200 => Rtcp::Sender {
                ssrc: word(0)?,
                ntp: (word(4)? as u64) << 32 | word(8)? as u64,
                rtp_ts: word(12)?,
                packets: word(16)?,
                octets: word(20)?,
                blocks: blocks(24)?,
            },
            201 => Rtcp::Receiver { ssrc: word(0)?, blocks: blocks(4)? },
            other => Rtcp::Other(other),
        });
        b = &b[len..];
    }
    (!out.is_empty()).then_some(out)
}

/// Source and destination of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FiveTuple {
    src: Addr,
    src_port: u16,
    dst: Addr,
    dst_port: u16,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    ts_ns: i64,
    header: RtpHeader,
    /// IP bytes on the wire.
    bytes: u32,
}

/// The start-up burst of a stream: the media the sender ran ahead of its clock at the start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Burst {
    /// From the first packet to the one where the lead first reached 90 % of its largest.
    pub duration_s: f64,
    pub packets: u64,
    pub bytes: u64,
    /// IP bytes × 8 over the burst's duration.
    pub rate_bps: f64,
    /// Largest lead: media time sent (RTP time since the first packet) − time taken.
    pub lead_s: f64,
}

/// One RTP stream: a 5-tuple and an SSRC.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RtpStream {
    pub src: String,
    pub src_port: u16,
    pub dst: String,
    pub dst_port: u16,
    pub ssrc: u32,
    pub payload_type: u8,
    pub packets: u64,
    pub bytes: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub first_seq: u16,
    /// Extended highest sequence number (wraps counted).
    pub highest_seq: u64,
    /// highest − first + 1, and expected − packets (negative with duplicates), as tshark's.
    pub expected: u64,
    pub lost: i64,
    /// Largest time between consecutive packets (ms).
    pub max_delta_ms: f64,
    /// RFC 3550 jitter (ms): after the last packet, its largest, and its mean over the packets
    /// after the first (the values tshark's `-z rtp,streams` prints).
    pub jitter_ms: Option<f64>,
    pub max_jitter_ms: Option<f64>,
    pub mean_jitter_ms: Option<f64>,
    /// Mean rate of the stream (IP bytes) from its first to its last packet.
    pub rate_bps: f64,
    pub burst: Option<Burst>,
}

/// Where a 5-tuple's SSRC changed, and what the change costs header compression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SsrcChange {
    pub src: String,
    pub src_port: u16,
    pub dst: String,
    pub dst_port: u16,
    pub ts_ns: i64,
    /// Packets of the 5-tuple before this one.
    pub after_packets: u64,
    pub from_ssrc: u32,
    pub to_ssrc: u32,
    /// The IP/UDP/RTP header an IR packet carries in full to set up the new context (40 B
    /// over IPv4, 60 over IPv6), where a compressed packet of an established context takes 1.
    pub refresh_bytes: u32,
}

/// One report block of an RTCP SR or RR, with the round trip it gives at this capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RtcpReport {
    pub ts_ns: i64,
    pub src: String,
    pub dst: String,
    /// `sr` or `rr`.
    pub kind: &'static str,
    pub reporter_ssrc: u32,
    pub source_ssrc: u32,
    pub fraction_lost: f64,
    pub cumulative_lost: i32,
    pub highest_seq: u32,
    /// The reported jitter in ms (its RTP units over the source stream's clock), if known.
    pub jitter_ms: Option<f64>,
    /// This capture's time − LSR − DLSR (RFC 3550 §6.4.1), at the capture of the SR's
    /// sender; None without an SR (LSR 0).
    pub rtt_ms: Option<f64>,
}

/// Everything RTP and RTCP in one capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RtpReport {
    pub streams: Vec<RtpStream>,
    pub ssrc_changes: Vec<SsrcChange>,
    pub reports: Vec<RtcpReport>,
    /// RTCP sender reports seen (their report blocks are in `reports`).
    pub sender_reports: u64,
}

/// Seconds between 1900 (NTP's epoch) and 1970.
const NTP_UNIX_OFFSET_S: i64 = 2_208_988_800;

/// A Unix time in ns as NTP's middle 32 bits (16.16 fixed point seconds).
fn ntp_short(ts_ns: i64) -> u32 {
    let s = ts_ns.div_euclid(1_000_000_000) + NTP_UNIX_OFFSET_S;
    let frac = (ts_ns.rem_euclid(1_000_000_000) as u64) << 16;
    (((s as u64) << 16) | (frac / 1_000_000_000)) as u32
}

/// Reads the capture and finds its RTP streams, SSRC changes and RTCP reports.
pub fn analyze_capture(capture: &Capture) -> Result<RtpReport, CaptureError> {
    let mut stream = PacketStream::new(capture);
    let mut rtp: HashMap<FiveTuple, (u64, Vec<Seen>)> = HashMap::new();
    let mut order: Vec<FiveTuple> = Vec::new();
    let mut rtcp: Vec<(i64, FiveTuple, Vec<Rtcp>)> = Vec::new();
    while let Some(p) = stream.next_packet() {
        let Transport::Udp(u) = p.transport else { continue };
        if p.ip.fragment.after_first() {
            continue;
        }
        let key = FiveTuple { src: p.ip.src, src_port: u.src_port, dst: p.ip.dst, dst_port: u.dst_port };
        let entry = rtp.entry(key).or_insert_with(|| {
            order.push(key);
            (0, Vec::new())
        });
        entry.0 += 1;
        if let Some(header) = RtpHeader::parse(u.payload) {
            entry.1.push(Seen { ts_ns: p.ts_ns, header, bytes: p.ip.len });
        } else if let Some(r) = parse_rtcp(u.payload) {
            rtcp.push((p.ts_ns, key, r));
        }
    }
    let (_, warning) = stream.finish();
    if let Some(w) = warning {
        return Err(w);
    }
    let mut out = RtpReport::default();
    for key in order {
        let (datagrams, seen) = &rtp[&key];
        if seen.len() < MIN_RTP_PACKETS || (seen.len() as f64) < 0.9 * *datagrams as f64 {
            continue;
        }
        tuple_streams(key, seen, &mut out);
    }
    let clocks: HashMap<u32, u32> = out
        .streams
        .iter()
        .filter_map(|s| clock_rate(s.payload_type).map(|c| (s.ssrc, c)))
        .collect();
    for (ts_ns, key, packets) in rtcp {
        for p in packets {
            let (kind, reporter, blocks) = match p {
                Rtcp::Sender { ssrc, blocks, .. } => {
                    out.sender_reports += 1;
                    ("sr", ssrc, blocks)
                }
                Rtcp::Receiver { ssrc, blocks } => ("rr", ssrc, blocks),
                Rtcp::Other(_) => continue,
            };
            for b in blocks {
                let rtt = (b.lsr != 0).then(|| {
                    ntp_short(ts_ns).wrapping_sub(b.lsr).wrapping_sub(b.dlsr) as i32 as f64 / 65_536.0 * 1e3
                });
                out.reports.push(RtcpReport {
                    ts_ns,
                    src: addr_to_string(key.src),
                    dst: addr_to_string(key.dst),
                    kind,
                    reporter_ssrc: reporter,
                    source_ssrc: b.source_ssrc,
                    fraction_lost: b.fraction_lost as f64 / 256.0,
                    cumulative_lost: b.cumulative_lost,
                    highest_seq: b.highest_seq,
                    jitter_ms: clocks.get(&b.source_ssrc).map(|c| b.jitter as f64 / *c as f64 * 1e3),
                    rtt_ms: rtt,
                });
            }
        }
    }
    Ok(out)
}

/// The streams of one 5-tuple (one per SSRC, in order of first packet) and its SSRC changes.
fn tuple_streams(key: FiveTuple, seen: &[Seen], out: &mut RtpReport) {
    let (src, dst) = (addr_to_string(key.src), addr_to_string(key.dst));
    // IP + UDP + RTP fixed headers.
    let header_bytes = if key.src >> 32 == 0xffff { 20 + 8 + 12 } else { 40 + 8 + 12 };
    for (i, w) in seen.windows(2).enumerate() {
        if w[0].header.ssrc != w[1].header.ssrc {
            out.ssrc_changes.push(SsrcChange {
                src: src.clone(),
                src_port: key.src_port,
                dst: dst.clone(),
                dst_port: key.dst_port,
                ts_ns: w[1].ts_ns,
                after_packets: i as u64 + 1,
                from_ssrc: w[0].header.ssrc,
                to_ssrc: w[1].header.ssrc,
                refresh_bytes: header_bytes,
            });
        }
    }
    let mut ssrcs: Vec<u32> = Vec::new();
    for s in seen {
        if !ssrcs.contains(&s.header.ssrc) {
            ssrcs.push(s.header.ssrc);
        }
    }
    for ssrc in ssrcs {
        let mine: Vec<&Seen> = seen.iter().filter(|s| s.header.ssrc == ssrc).collect();
        out.streams.push(stream_of(&src, &dst, key, &mine));
    }
}

fn stream_of(src: &str, dst: &str, key: FiveTuple, p: &[&Seen]) -> RtpStream {
    let first = p[0];
    let clock = clock_rate(first.header.payload_type);
    let (mut ext, mut highest) = (first.header.seq as u64, first.header.seq as u64);
    let (mut max_delta, mut jitter, mut max_jitter, mut sum_jitter) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for w in p.windows(2) {
        // Extended sequence number: the 16-bit step taken as the nearest (wraps and reorders).
        ext = (ext as i64 + w[1].header.seq.wrapping_sub(w[0].header.seq) as i16 as i64).max(0) as u64;
        highest = highest.max(ext);
        let arrival_ms = (w[1].ts_ns - w[0].ts_ns) as f64 / 1e6;
        max_delta = max_delta.max(arrival_ms);
        if let Some(c) = clock {
            let media_ms = w[1].header.timestamp.wrapping_sub(w[0].header.timestamp) as i32 as f64 / c as f64 * 1e3;
            jitter += ((arrival_ms - media_ms).abs() - jitter) / 16.0;
            max_jitter = max_jitter.max(jitter);
            sum_jitter += jitter;
        }
    }
    let expected = highest - first.header.seq as u64 + 1;
    let bytes: u64 = p.iter().map(|s| s.bytes as u64).sum();
    let last = p[p.len() - 1];
    let span_s = (last.ts_ns - first.ts_ns) as f64 / 1e9;
    RtpStream {
        src: src.to_string(),
        src_port: key.src_port,
        dst: dst.to_string(),
        dst_port: key.dst_port,
        ssrc: first.header.ssrc,
        payload_type: first.header.payload_type,
        packets: p.len() as u64,
        bytes,
        first_ns: first.ts_ns,
        last_ns: last.ts_ns,
        first_seq: first.header.seq,
        highest_seq: highest,
        expected,
        lost: expected as i64 - p.len() as i64,
        max_delta_ms: max_delta,
        jitter_ms: clock.map(|_| jitter),
        max_jitter_ms: clock.map(|_| max_jitter),
        mean_jitter_ms: clock.map(|_| sum_jitter / (p.len() - 1).max(1) as f64),
        rate_bps: if span_s > 0.0 { bytes as f64 * 8.0 / span_s } else { 0.0 },
        burst: clock.and_then(|c| burst(p, c)),
    }
}

/// The start-up burst: lead(i) = RTP time of packet i since the first − capture time since
/// the first. A sender on its media clock keeps the lead near 0; a fast-start server runs
/// ahead at the start and then holds the lead it gained. The burst lasts until the lead first
/// reaches 90 % of its largest value; none when that is under five media intervals (the
/// stream's median RTP step).
fn burst(p: &[&Seen], clock: u32) -> Option<Burst> {
    if p.len() < 3 {
        return None;
    }
    let t0 = p[0];
    let lead: Vec<f64> = p
        .iter()
        .map(|s| {
            s.header.timestamp.wrapping_sub(t0.header.timestamp) as i32 as f64 / clock as f64
                - (s.ts_ns - t0.ts_ns) as f64 / 1e9
        })
        .collect();
    let mut steps: Vec<f64> = p
        .windows(2)
        .map(|w| w[1].header.timestamp.wrapping_sub(w[0].header.timestamp) as i32 as f64 / clock as f64)
        .collect();
    steps.sort_unstable_by(f64::total_cmp);
    let interval = steps[steps.len() / 2];
    let most = lead.iter().copied().fold(f64::MIN, f64::max);
    if most < BURST_MIN_INTERVALS * interval || most <= 0.0 {
        return None;
    }
    let end = lead.iter().position(|&l| l >= BURST_END_SHARE * most)?;
    let duration_s = (p[end].ts_ns - t0.ts_ns) as f64 / 1e9;
    let bytes: u64 = p[..=end].iter().map(|s| s.bytes as u64).sum();
    Some(Burst {
        duration_s,
        packets: end as u64 + 1,
        bytes,
        rate_bps: if duration_s > 0.0 { bytes as f64 * 8.0 / duration_s } else { 0.0 },
        lead_s: most,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver report (RFC 3550 §6.4.2) with one block, as literal bytes.
    static RR: [u8; 32] = [
        0x81, 201, 0, 7, // V=2, RC=1, PT=RR, length 7 words
        0, 0, 0, 9, // reporter SSRC
        0xde, 0xad, 0xbe, 0xef, // source SSRC
        64, 0xff, 0xff, 0xfe, // fraction 64/256, cumulative lost −2
        0, 1, 0, 5, // highest seq: cycle 1, seq 5
        0, 0, 0x01, 0x68, // jitter 360 units (4 ms at 90 kHz)
        0x12, 0x34, 0x56, 0x78, // LSR
        0, 1, 0x80, 0, // DLSR 1.5 s
    ];

    #[test]
    fn receiver_report_fields() {
        let r = parse_rtcp(&RR).unwrap();
        let Rtcp::Receiver { ssrc, blocks } = &r[0] else { panic!("{r:?}") };
        assert_eq!(*ssrc, 9);
        let b = blocks[0];
        assert_eq!((b.source_ssrc, b.fraction_lost, b.cumulative_lost), (0xdeadbeef, 64, -2));
        assert_eq!((b.highest_seq, b.jitter, b.lsr, b.dlsr), (65_541, 360, 0x1234_5678, 0x0001_8000));
        // A length past the datagram, a second byte that is no RTCP type, version 1: none.
        assert_eq!(parse_rtcp(&RR[..28]), None);
        let mut bad = RR;
        bad[1] = 96;
        assert_eq!(parse_rtcp(&bad), None);
        bad = RR;
        bad[0] = 0x41;
        assert_eq!(parse_rtcp(&bad), None);
        // RTP never takes an RTCP datagram, nor RTCP an RTP one.
        assert_eq!(RtpHeader::parse(&RR), None);
    }

    #[test]
    fn ntp_middle_bits() {
        // 1970-01-01 00:00:01.5 is NTP 2208988801.5: its middle 32 bits.
        let s = 2_208_988_801u64;
        assert_eq!(ntp_short(1_500_000_000), ((s & 0xffff) << 16 | 0x8000) as u32);
    }

    fn seen(ms: f64, seq: u16, ts: u32, ssrc: u32) -> Seen {
        Seen {
            ts_ns: (ms * 1e6) as i64,
            header: RtpHeader { payload_type: 33, marker: false, seq, timestamp: ts, ssrc },
            bytes: 1228,
        }
    }

    /// 10-ms media packets (900 RTP units at 90 kHz): the first three on another SSRC, then a
    /// fast start (packets 0..=21 of the media SSRC 2.5 ms apart), then 10 ms apart; packet 30
    /// lost, packet 40 5 ms late.
    #[test]
    fn streams_ssrc_changes_jitter_and_burst() {
        let mut p = vec![seen(0.0, 100, 0, 7), seen(1.0, 101, 900, 7), seen(2.0, 102, 1800, 7)];
        let mut t = 5.0;
        for i in 0..60u32 {
            if i != 30 {
                let late = if i == 40 { 5.0 } else { 0.0 };
                p.push(seen(t + late, 65_530u16.wrapping_add(i as u16), i * 900, 42));
            }
            t += if i < 21 { 2.5 } else { 10.0 };
        }
        let key = FiveTuple {
            src: crate::parse_addr("10.0.0.1").unwrap(),
            src_port: 5260,
            dst: crate::parse_addr("10.0.0.2").unwrap(),
            dst_port: 40000,
        };
        let mut out = RtpReport::default();
        tuple_streams(key, &p, &mut out);
        assert_eq!(out.ssrc_changes.len(), 1);
        let c = &out.ssrc_changes[0];
        assert_eq!((c.after_packets, c.from_ssrc, c.to_ssrc, c.refresh_bytes), (3, 7, 42, 40));
        let s = &out.streams[1];
        // Sequence numbers wrap (65530 .. 65535, 0 .. 53): 60 expected, one lost.
        assert_eq!(
            (s.ssrc, s.packets, s.first_seq, s.highest_seq, s.expected, s.lost),
            (42, 59, 65_530, 65_589, 60, 1)
        );
        assert_eq!(s.max_delta_ms, 20.0); // across the lost packet
        // |D| per step: 7.5 ms for the 21 steps of the burst (2.5 ms apart, 10 ms of media),
        // 5 ms into and out of the late packet 40 (steps 39 and 40), else 0: 58 steps.
        let mut d = vec![7.5; 21];
        d.extend([0.0; 17]);
        d.extend([5.0, 5.0]);
        d.extend([0.0; 18]);
        let (mut j, mut most, mut sum) = (0.0f64, 0.0f64, 0.0);
        for x in &d {
            j += (x - j) / 16.0;
            most = most.max(j);
            sum += j;
        }
        assert!((s.jitter_ms.unwrap() - j).abs() < 1e-9, "{s:?} {j}");
        assert!((s.max_jitter_ms.unwrap() - most).abs() < 1e-9);
        assert!((s.mean_jitter_ms.unwrap() - sum / 58.0).abs() < 1e-9);
        // The lead gains 7.5 ms a packet up to 157.5 ms (packet 21) and holds; 90 % of it
        // (141.75) first at packet 19 (142.5 ms), 47.5 ms after the first.
        let b = s.burst.as_ref().unwrap();
        assert!((b.lead_s - 0.1575).abs() < 1e-9, "{b:?}");
        assert_eq!(b.packets, 20);
        assert!((b.duration_s - 0.0475).abs() < 1e-9);
        assert!((b.rate_bps - 20.0 * 1228.0 * 8.0 / 0.0475).abs() < 1e-3);
        // The three packets of the first SSRC are a stream of their own, without a burst.
        assert_eq!((out.streams[0].ssrc, out.streams[0].packets, out.streams[0].lost), (7, 3, 0));
        assert!(out.streams[0].burst.is_none());
    }
}
