//! RTCP of the `stream` test over UDP (RFC 3550 §6, on the stream's own port as RFC 5761
//! allows): the server's sender reports and the MN's receiver reports, with the receiver's
//! statistics (Appendix A.3 and A.8). The capture analysis reads them back
//! (`cellperf_analysis::rtp`).

use crate::clock::realtime_ns;

/// Time between reports, both ends (**choice**: RFC 3550 §6.2's reduced minimum, 360 s / the
/// session bandwidth in kb/s, is about 1 s at 384 kb/s; its fixed 5-s minimum would leave
/// a 10-s test two reports).
pub const REPORT_INTERVAL_NS: i64 = 1_000_000_000;
/// Media clock of the stream's RTP timestamps (payload type 33, MP2T: 90 kHz).
pub const CLOCK_HZ: f64 = 90_000.0;
const SR: u8 = 200;
const RR: u8 = 201;
const SDES: u8 = 202;
/// The canonical name both ends give in their SDES (RFC 3550 §6.5.1 wants one in each
/// compound packet).
const CNAME: &[u8] = b"cellperf";

/// NTP timestamp (RFC 3550 §4: seconds since 1900, 32.32 fixed point) of a Unix time in ns.
pub fn ntp(ts_ns: i64) -> u64 {
    let s = (ts_ns.div_euclid(1_000_000_000) + 2_208_988_800) as u64;
    let frac = ((ts_ns.rem_euclid(1_000_000_000) as u128) << 32) / 1_000_000_000;
    s << 32 | frac as u64
}

/// Appends one SDES chunk with the CNAME, padded to a 32-bit boundary.
fn sdes(out: &mut Vec<u8>, ssrc: u32) {
    let mut chunk = ssrc.to_be_bytes().to_vec();
    chunk.extend([1, CNAME.len() as u8]);
    chunk.extend(CNAME);
    chunk.push(0); // end of the item list
    while !chunk.len().is_multiple_of(4) {
        chunk.push(0);
    }
    out.extend([0x81, SDES]);
    out.extend(((chunk.len() / 4) as u16).to_be_bytes());
    out.extend(chunk);
}

/// The server's sender report (no report blocks: it receives no RTP) and its SDES.
pub fn sender_report(ssrc: u32, now_ns: i64, rtp_ts: u32, packets: u32, octets: u32) -> Vec<u8> {
    let mut out = vec![0x80, SR, 0, 6];
    out.extend(ssrc.to_be_bytes());
    out.extend(ntp(now_ns).to_be_bytes());
    out.extend(rtp_ts.to_be_bytes());
    out.extend(packets.to_be_bytes());
    out.extend(octets.to_be_bytes());
    sdes(&mut out, ssrc);
    out
}

/// The middle 32 bits of a sender report's NTP timestamp, if `d` is one.
pub fn sender_report_ntp(d: &[u8]) -> Option<u32> {
    if d.len() < 28 || d[0] >> 6 != 2 || d[1] != SR {
        return None;
    }
    Some((u64::from_be_bytes(d[8..16].try_into().ok()?) >> 16) as u32)
}

/// Whether a datagram is RTCP (RFC 5761 §4: second byte 192..=223) of version 2.
pub fn is_rtcp(d: &[u8]) -> bool {
    d.len() >= 8 && d[0] >> 6 == 2 && (192..=223).contains(&d[1])
}

/// The MN's receiver statistics of one source (RFC 3550 A.3, A.8).
#[derive(Debug, Clone, Default)]
pub struct Receiver {
    source: Option<u32>,
    base_seq: u64,
    highest_seq: u64,
    received: u64,
    expected_prior: u64,
    received_prior: u64,
    /// In RTP timestamp units.
    jitter: f64,
    last_transit: Option<f64>,
    /// Middle bits of the last SR's NTP time and when it came (wall clock ns).
    last_sr: Option<(u32, i64)>,
    pub reports_sent: u64,
}

impl Receiver {
    /// A media packet: its extended sequence number, RTP timestamp and source, and when it
    /// arrived. Packets of another source than the first are not this stream's.
    pub fn on_packet(&mut self, seq: u64, rtp_ts: u32, ssrc: u32, arrival_ns: i64) {
        match self.source {
            None => {
                self.source = Some(ssrc);
                self.base_seq = seq;
                self.highest_seq = seq;
            }
            Some(s) if s != ssrc => return,
            Some(_) => self.highest_seq = self.highest_seq.max(seq),
        }
        self.received += 1;
        let transit = arrival_ns as f64 / 1e9 * CLOCK_HZ - rtp_ts as f64;
        if let Some(last) = self.last_transit {
            self.jitter += ((transit - last).abs() - self.jitter) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    pub fn on_sender_report(&mut self, ntp_middle: u32, arrival_ns: i64) {
        self.last_sr = Some((ntp_middle, arrival_ns));
    }

    /// The receiver report for now (with its SDES), None before the first packet.
    pub fn report(&mut self, reporter: u32, now_ns: i64) -> Option<Vec<u8>> {
        let source = self.source?;
        let expected = self.highest_seq - self.base_seq + 1;
        let lost = expected as i64 - self.received as i64;
        let expected_interval = expected - self.expected_prior;
        let lost_interval = expected_interval as i64 - (self.received - self.received_prior) as i64;
        self.expected_prior = expected;
        self.received_prior = self.received;
        let fraction = if expected_interval == 0 || lost_interval <= 0 {
            0
        } else {
            ((lost_interval << 8) / expected_interval as i64).min(255) as u8
        };
        let cumulative = lost.clamp(-0x80_0000, 0x7f_ffff) as i32 as u32 & 0x00ff_ffff;
        let (lsr, dlsr) = match self.last_sr {
            Some((mid, at)) => (mid, (((now_ns - at).max(0) as u128) << 16) / 1_000_000_000),
            None => (0, 0),
        };
        let mut out = vec![0x81, RR, 0, 7];
        out.extend(reporter.to_be_bytes());
        out.extend(source.to_be_bytes());
        out.extend((u32::from(fraction) << 24 | cumulative).to_be_bytes());
        out.extend((self.highest_seq as u32).to_be_bytes());
        out.extend((self.jitter.round() as u32).to_be_bytes());
        out.extend(lsr.to_be_bytes());
        out.extend((dlsr as u32).to_be_bytes());
        sdes(&mut out, reporter);
        self.reports_sent += 1;
        Some(out)
    }
}

/// When the next report is due, and whether it is now.
#[derive(Debug, Clone, Copy)]
pub struct Every {
    next_ns: i64,
}

impl Every {
    pub fn new() -> Every {
        Every {
            next_ns: realtime_ns() + REPORT_INTERVAL_NS,
        }
    }

    pub fn due(&mut self, now_ns: i64) -> bool {
        if now_ns < self.next_ns {
            return false;
        }
        self.next_ns = now_ns + REPORT_INTERVAL_NS;
        true
    }
}

impl Default for Every {
    fn default() -> Self {
        Every::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellperf_analysis::rtp::{parse_rtcp, Rtcp};

    #[test]
    fn reports_parse_back() {
        let sr = sender_report(7, 1_500_000_000, 90_000, 10, 12_000);
        let r = parse_rtcp(&sr).unwrap();
        assert!(matches!(
            r[0],
            Rtcp::Sender {
                ssrc: 7,
                rtp_ts: 90_000,
                packets: 10,
                octets: 12_000,
                ..
            }
        ));
        assert_eq!(r.len(), 2); // and the SDES
        let mid = sender_report_ntp(&sr).unwrap();
        assert_eq!(mid, ((2_208_988_801u64 & 0xffff) << 16 | 0x8000) as u32);
        let mut rx = Receiver::default();
        assert!(rx.report(9, 0).is_none());
        // Packets 0..10 of source 42, 10 ms apart on a 10-ms media clock; 3 and 4 lost,
        // packet 6 arriving 1 ms late.
        for seq in (0..10u64).filter(|s| *s != 3 && *s != 4) {
            let late = if seq == 6 { 1_000_000 } else { 0 };
            rx.on_packet(seq, (seq * 900) as u32, 42, seq as i64 * 10_000_000 + late);
        }
        rx.on_packet(11, 0, 43, 0); // another source: not counted
        rx.on_sender_report(mid, 2_000_000_000);
        let rr = rx.report(9, 3_500_000_000).unwrap();
        let r = parse_rtcp(&rr).unwrap();
        let Rtcp::Receiver { ssrc: 9, blocks } = &r[0] else {
            panic!("{r:?}")
        };
        let b = blocks[0];
        assert_eq!(
            (b.source_ssrc, b.highest_seq, b.cumulative_lost),
            (42, 9, 2)
        );
        assert_eq!(b.fraction_lost, (2 * 256 / 10) as u8);
        assert_eq!((b.lsr, b.dlsr), (mid, 1 << 16 | 1 << 15)); // 1.5 s
                                                               // Jitter: |D| = 90 units (1 ms at 90 kHz) into and out of packet 6, else 0.
        let mut expect = 0.0f64;
        for d in [0.0, 0.0, 0.0, 90.0, 90.0, 0.0, 0.0] {
            expect += (d - expect) / 16.0;
        }
        assert_eq!(b.jitter, expect.round() as u32);
        // The next report: nothing new lost.
        let rr = rx.report(9, 4_500_000_000).unwrap();
        let Rtcp::Receiver { blocks, .. } = &parse_rtcp(&rr).unwrap()[0] else {
            panic!()
        };
        assert_eq!((blocks[0].fraction_lost, rx.reports_sent), (0, 2));
    }
}
