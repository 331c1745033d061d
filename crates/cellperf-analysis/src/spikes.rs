//! Delay spikes of a stream (seed 000 ch. 5: "a delay spike of 5 sec ... does not coincide
//! with a handoff"), found on the per-packet one-way delay (docs/methods.md §3).
//!
//! The baseline is the median delay of the stream's received packets, its spread the
//! median absolute deviation scaled to a standard deviation (× 1.4826). A packet is *high*
//! when its delay exceeds the baseline by more than [`SPIKE_FACTOR`] spreads and at least
//! [`SPIKE_MIN_MS`]; a spike is a run of high packets, consecutive among the received ones
//! in sending order. It starts at the first one's sending time and lasts until the latest
//! arrival among them. Whether it lies near a handoff is the campaign's to say (it knows the
//! handoffs): see `python/cellperf/handoffs/`.

use serde::Serialize;

use crate::stats::quantile_sorted;
use crate::record::PacketResult;

/// Spreads above the baseline a packet's delay must exceed (**choice**: 5 MADs, far outside
/// a stream's ordinary jitter).
pub const SPIKE_FACTOR: f64 = 5.0;
/// The least excess over the baseline that makes a packet high (**choice**: 100 ms, below
/// which a voice call does not suffer: G.114's 150 ms is near for most baselines).
pub const SPIKE_MIN_MS: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelaySpike {
    /// Sending time of its first packet (sender's clock, ns).
    pub start_ns: i64,
    /// Until the arrival of its last packet (ms).
    pub duration_ms: f64,
    pub packets: u64,
    /// Its highest delay (ms, of the stream's OWD kind).
    pub peak_ms: f64,
}

/// A stream's delay spikes and the line they crossed.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct SpikeSummary {
    pub count: u64,
    pub baseline_ms: f64,
    pub threshold_ms: f64,
    /// The highest delay of any spike (`None` without spikes).
    pub peak_ms: Option<f64>,
}

/// The spikes of `packets` (sending order) and their summary; `None` without delays.
pub fn delay_spikes(packets: &[PacketResult]) -> Option<(SpikeSummary, Vec<DelaySpike>)> {
    let timed: Vec<(i64, i64, f64)> =
        packets.iter().filter_map(|p| Some((p.send_ns?, p.recv_ns?, p.owd_ms?))).collect();
    let mut delays: Vec<f64> = timed.iter().map(|t| t.2).collect();
    delays.sort_unstable_by(|a, b| a.total_cmp(b));
    let baseline = quantile_sorted(&delays, 0.5)?;
    let mut deviations: Vec<f64> = delays.iter().map(|d| (d - baseline).abs()).collect();
    deviations.sort_unstable_by(|a, b| a.total_cmp(b));
    let spread = 1.4826 * quantile_sorted(&deviations, 0.5)?;
    let threshold = baseline + (SPIKE_FACTOR * spread).max(SPIKE_MIN_MS);
    let mut spikes: Vec<DelaySpike> = Vec::new();
    let mut open = false;
    for &(send, recv, d) in &timed {
        if d <= threshold {
            open = false;
            continue;
        }
        match spikes.last_mut().filter(|_| open) {
            Some(s) => {
                s.packets += 1;
                s.peak_ms = s.peak_ms.max(d);
                s.duration_ms = s.duration_ms.max((recv - s.start_ns) as f64 / 1e6);
            }
            None => spikes.push(DelaySpike {
                start_ns: send,
                duration_ms: (recv - send) as f64 / 1e6,
                packets: 1,
                peak_ms: d,
            }),
        }
        open = true;
    }
    let summary = SpikeSummary {
        count: spikes.len() as u64,
        baseline_ms: baseline,
        threshold_ms: threshold,
        peak_ms: spikes.iter().map(|s| s.peak_ms).reduce(f64::max),
    };
    Some((summary, spikes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets every 20 ms with these delays (ms); `None`: lost.
    fn stream(delays: &[Option<f64>]) -> Vec<PacketResult> {
        delays
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let send = i as i64 * 20_000_000;
                PacketResult {
                    seq: i as u64,
                    send_ns: Some(send),
                    recv_ns: d.map(|d| send + (d * 1e6) as i64),
                    bytes: 100,
                    owd_ms: *d,
                    jitter_ms: None,
                }
            })
            .collect()
    }

    #[test]
    fn runs_of_high_delays_are_spikes() {
        // Baseline 50 ms, spread small: the line is 150 ms (the 100-ms floor).
        let mut d: Vec<Option<f64>> = (0..40).map(|i| Some(50.0 + (i % 3) as f64)).collect();
        d[10] = Some(400.0); // a one-packet spike
        d[20] = Some(300.0); // a spike of three, a loss inside it does not split it
        d[21] = None;
        d[22] = Some(5000.0);
        d[23] = Some(200.0);
        d[30] = Some(150.0); // on the line: not high
        let (s, spikes) = delay_spikes(&stream(&d)).unwrap();
        assert_eq!((s.count, s.baseline_ms, s.threshold_ms, s.peak_ms), (2, 51.0, 151.0, Some(5000.0)));
        assert_eq!(spikes[0], DelaySpike { start_ns: 200_000_000, duration_ms: 400.0, packets: 1, peak_ms: 400.0 });
        // From packet 20's sending (400 ms) to the latest arrival, packet 22's (440 + 5000 ms).
        assert_eq!(spikes[1], DelaySpike { start_ns: 400_000_000, duration_ms: 5040.0, packets: 3, peak_ms: 5000.0 });
    }

    #[test]
    fn a_wide_spread_raises_the_line() {
        // Delays alternate 50 and 150 ms, then one of 400: median 150, MAD 100, so the line
        // is 150 + 5 × 148.26 ms and 400 ms is below it.
        let d: Vec<Option<f64>> = (0..20).map(|i| Some(if i % 2 == 0 { 50.0 } else { 150.0 })).chain([Some(400.0)]).collect();
        let (s, spikes) = delay_spikes(&stream(&d)).unwrap();
        assert!((s.threshold_ms - (150.0 + 5.0 * 1.4826 * 100.0)).abs() < 1e-9, "{s:?}");
        assert!(spikes.is_empty());
        assert_eq!(delay_spikes(&stream(&[None, None])), None);
    }
}
