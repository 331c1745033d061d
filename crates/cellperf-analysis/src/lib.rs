//! cellperf's analysis core: captures → flows → per-packet records → metrics (docs/methods.md §3–§4).
//!
//! [`analyze`] reads one capture (any vantage point), or two (the MN's and the CN's) in
//! step, keeps per-flow streaming state (with two captures, the TCP packets paired across
//! them as they come, see [`tcp_two_sided`], and each UDP datagram's compact record), then
//! computes every flow's metrics:
//! - TCP: goodput, throughput series, RTT (Karn), retransmission classes (two captures:
//!   normal / spurious / unavoidable / serial; one capture: fast / RTO / spurious and said so),
//!   ACK compression (two captures), duplicate ACKs, zero windows, out-of-order;
//! - UDP: probe-stream metrics from [`udp_stream`] (loss, jitter, OWD, gaps, delay periods);
//!   for an echoed flow, round trips and half-RTT OWD from [`udp_echo`].
//!
//! [`rtp::analyze_capture`] is a pass of its own: the RTP streams and RTCP reports of one
//! capture (the `stream` test's, docs/methods.md §13).
//!
//! Uplink is MN→CN. Which endpoint is the MN is decided per flow, in this order:
//! `--mn-addr`; the TTL (a packet's TTL is highest at the capture of its sender, since every
//! router on the way lowers it); and else the connection's initiator (**choice**: phones
//! open connections), with the basis reported beside the direction.

pub mod flows;
mod gso;
mod in_step;
pub mod matching;
pub mod nat;
pub mod owd;
mod pass;
pub mod record;
pub mod rtp;
pub mod seq;
pub mod spikes;
pub mod stats;
pub mod tables;
pub mod tcp_one_sided;
pub mod tcp_two_sided;
pub mod udp_echo;
pub mod udp_stream;

mod report;
mod side;
mod tcp_feed;


use cellperf_capture::decode::{decode_frame, Skip, Transport};
use cellperf_capture::{Addr, Capture, CaptureError};
use flows::{PROTO_TCP, PROTO_UDP};

pub use report::{
    analyze, Analysis, AnalysisError, CaptureInput, CaptureSummary, FlowReport, Options, Report, Tables, TranslatedEnds,
};
pub use side::Side;

/// The longest interval series a flow gets (about 61 days of 5 s intervals). A damaged
/// capture can hold a timestamp decades ahead; binning it must not allocate every interval
/// in between. Packets past the last interval are left out of the series and counted.
pub const MAX_INTERVALS: usize = 1 << 20;

pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Counts of what one pass over a capture found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PassCounts {
    pub frames: u64,
    pub tcp: u64,
    pub udp: u64,
    pub other_ip: u64,
    pub non_ip: u64,
    pub malformed: u64,
    pub skipped_unknown_link: u64,
    /// Link types of the interfaces those packets were on.
    pub unsupported_link_types: Vec<u32>,
    /// IP fragments after the first of a TCP or UDP datagram (no ports of their own: their
    /// bytes go to the flow of their datagram's first fragment).
    pub later_fragments: u64,
    /// Frames captured twice, left out of every flow's figures (see `pass`).
    pub capture_duplicates: u64,
}

/// A capture's TCP and UDP packets (and the later fragments of TCP/UDP datagrams), one at
/// a time, with the counts of what was read. Two of them read a pair of captures in step.
pub struct PacketStream<'a> {
    frames: cellperf_capture::Frames<'a>,
    pub counts: PassCounts,
}

impl<'a> PacketStream<'a> {
    /// The whole capture, its pages mapped ahead on another core.
    pub fn new(capture: &'a Capture) -> Self {
        PacketStream { frames: capture.frames_mapped_ahead(), counts: PassCounts::default() }
    }

    /// The first packets only: no page mapping ahead.
    pub fn prefix(capture: &'a Capture) -> Self {
        PacketStream { frames: capture.frames(), counts: PassCounts::default() }
    }

    /// The next packet to analyse, counting every frame on the way.
    #[inline(always)]
    pub fn next_packet(&mut self) -> Option<cellperf_capture::Packet<'a>> {
        for frame in self.frames.by_ref() {
            self.counts.frames += 1;
            match decode_frame(&frame) {
                Ok(p) => {
                    match p.transport {
                        Transport::Tcp(_) => self.counts.tcp += 1,
                        Transport::Udp(_) => self.counts.udp += 1,
                        Transport::Other(PROTO_TCP | PROTO_UDP) if p.ip.fragment.after_first() => {
                            self.counts.later_fragments += 1
                        }
                        Transport::Other(_) => {
                            self.counts.other_ip += 1;
                            continue;
                        }
                    }
                    return Some(p);
                }
                Err(Skip::NotIp) => self.counts.non_ip += 1,
                Err(Skip::Malformed) => self.counts.malformed += 1,
            }
        }
        None
    }

    /// The counts, with what ended reading early, if anything.
    pub fn finish(self) -> (PassCounts, Option<CaptureError>) {
        let mut counts = self.counts;
        counts.skipped_unknown_link = self.frames.skipped_unknown_link();
        counts.unsupported_link_types = self.frames.unsupported_link_types().to_vec();
        (counts, self.frames.warning().cloned())
    }
}

/// The address a user gave for the MN, parsed.
pub fn parse_addr(s: &str) -> Option<Addr> {
    cellperf_capture::addr_from_str(s)
}
