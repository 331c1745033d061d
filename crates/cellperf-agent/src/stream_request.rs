//! The `stream` test's request (`start_stream`, [`crate::media`]), a message of the control
//! protocol ([`crate::wire`]): below both, so the protocol does not import the test.

use serde::{Deserialize, Serialize};

/// The fixed RTP header (RFC 3550).
const RTP_HEADER: usize = 12;
/// RTP header, extended sequence number, send time.
pub const MIN_PACKET: u32 = (RTP_HEADER + 16) as u32;
/// Largest RTP packet: what one UDP datagram (and one RFC 4571 frame) holds.
pub const MAX_PACKET: u32 = 65_507;
/// Packets closer than this cannot be paced by one sending thread on a busy host: a bitrate
/// needing more is refused, not sent slower than asked.
pub const MIN_INTERVAL_NS: u64 = 20_000;
pub const MAX_DURATION_S: f64 = 3_600.0;
/// A fast start sends its media this many times faster than the media rate (**choice**: 004
/// §VI.C says only "at the maximal available rate"; five times keeps it a burst a link of a
/// few times the media rate must queue).
pub const FAST_START_FACTOR: u64 = 5;
/// Most packets of the bandwidth probe before the media (004 saw three).
pub const MAX_PROBE_PACKETS: u32 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Udp,
    Tcp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamRequest {
    pub transport: Transport,
    pub rate_bps: f64,
    pub packet_bytes: u32,
    pub duration_s: f64,
    /// Seconds of media sent at the start at [`FAST_START_FACTOR`] × the rate, the stream
    /// staying that far ahead of its media clock after (a fast-start server; 0: none).
    #[serde(default)]
    pub fast_start_s: f64,
    /// RTP packets sent back to back before the media on an SSRC of their own (the bandwidth
    /// probe of 004 §VI.C, whose three packets' SSRC differed from the media's; 0: none).
    #[serde(default)]
    pub probe_packets: u32,
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
        if !(self.fast_start_s.is_finite() && (0.0..=self.duration_s).contains(&self.fast_start_s))
        {
            return Err(format!(
                "--fast-start: {} s outside 0..{} s (--duration)",
                self.fast_start_s, self.duration_s
            ));
        }
        if self.fast_start_s > 0.0 && interval / (FAST_START_FACTOR as f64) < MIN_INTERVAL_NS as f64
        {
            return Err(format!(
                "--fast-start: {FAST_START_FACTOR} × {} bit/s is above what the test can send with {} B packets (one packet every {} µs)",
                self.rate_bps, self.packet_bytes, MIN_INTERVAL_NS / 1000
            ));
        }
        if self.probe_packets > MAX_PROBE_PACKETS {
            return Err(format!(
                "--probe-packets: {} is over {MAX_PROBE_PACKETS}",
                self.probe_packets
            ));
        }
        Ok((interval.round() as u64, count))
    }

    /// Packets of the fast start: the first `fast_start_s` of media.
    pub fn fast_start_packets(&self, interval_ns: u64, count: u64) -> u64 {
        ((self.fast_start_s * 1e9 / interval_ns as f64).round() as u64).min(count)
    }
}

/// When packet `seq` leaves, from the stream's start (ns): the first `fast` packets
/// [`FAST_START_FACTOR`] times faster than the media rate, the rest `interval_ns` apart,
/// ahead of their media time by what the fast start gained.
pub fn send_offset_ns(seq: u64, interval_ns: u64, fast: u64) -> u64 {
    if seq < fast {
        seq * interval_ns / FAST_START_FACTOR
    } else {
        fast * interval_ns / FAST_START_FACTOR + (seq - fast) * interval_ns
    }
}
