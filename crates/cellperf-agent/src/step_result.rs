//! What one step of a probe measured ([`StepResult`]): made by [`crate::probe`], read by
//! [`crate::result`] into the result document. Types only, below both.

use cellperf_analysis::stats::Summary;
use cellperf_analysis::udp_stream::StreamSummary;
use serde::Serialize;

use crate::wire::NoPath;

/// One step's result: a stream summary per direction plus RTT and pacing figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepResult {
    pub up: Option<StreamSummary>,
    pub down: Option<StreamSummary>,
    pub rtt_ms: Option<Summary>,
    /// Mean and standard deviation of the round trips (004 Fig. 1, per ping size).
    pub rtt_mean_std_ms: Option<(f64, f64)>,
    /// Half of each round trip: the OWD estimate for unsynchronised clocks (docs/methods.md §1).
    pub half_rtt_ms: Option<Summary>,
    pub send_lateness_us: Option<Lateness>,
    pub tcp: Option<TcpStepResult>,
    pub payload_bytes: Option<u32>,
    /// Where a sender found no path: (direction, the stretch), the probe's up, the server's down.
    pub no_path: Vec<(&'static str, NoPath)>,
    /// Set when the control connection broke during the step: what was measured is kept.
    pub partial: Option<String>,
}

/// How late each paced send left against its absolute deadline (µs); p99 is the
/// pacing target's figure (issue 4: ≤ 50 µs at 1000 packets/s).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Lateness {
    pub min: f64,
    pub median: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub samples: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TcpStepResult {
    pub direction: &'static str,
    pub throughput_bps: f64,
    pub up_bps: Option<f64>,
    pub down_bps: Option<f64>,
    pub bytes_received: u64,
    pub duration_s: f64,
    pub data_segments_sent: u64,
    pub data_segments_received: u64,
    pub retransmitted_segments: u64,
    pub retransmission_rate: Option<f64>,
    pub rtt_ms: Option<Summary>,
    pub congestion: Option<String>,
    pub mss: Option<u32>,
    pub window_bytes: Option<u32>,
    /// The sender's congestion window over time, per direction (TCP_INFO every 100 ms).
    pub window: Vec<WindowSeries>,
    /// Longest time a receiver got no byte between its first and its last (s, 0.1-s
    /// samples): an outage the kernel's retransmissions bridged shows here.
    pub longest_stall_s: f64,
    /// After the test: how long the receivers still got bytes, and how many (not in the
    /// rates; bounded by [`crate::tcp::DRAIN_MAX_NS`]).
    pub drain_s: f64,
    pub drain_bytes: u64,
}

/// A sender's congestion window and slow-start threshold (segments, summed over streams;
/// the threshold null until the first loss), one sample every `interval_s` from the start.
#[derive(Debug, Clone, Serialize)]
pub struct WindowSeries {
    pub direction: &'static str,
    pub interval_s: f64,
    pub cwnd: Vec<u64>,
    pub ssthresh: Vec<Option<u64>>,
}
