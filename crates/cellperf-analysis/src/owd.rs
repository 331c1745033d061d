//! One-way delay of packets matched across two captures, accumulated one packet at a time
//! (METHODS §1, §12): any matcher that knows a packet's send and arrival times hands them
//! to [`OwdAccumulator::add`], in any order, and [`OwdAccumulator::finish`] gives the
//! flow's summary and each interval's mean.
//!
//! **Excess** OWD (002 §7) is raw OWD − the flow's minimum raw OWD: a constant clock offset
//! between the capture hosts cancels. Raw OWD is kept exactly (nanoseconds) so the minimum,
//! the percentiles and the standard deviation are those of the delays themselves: the
//! excess distribution is the raw one shifted by its minimum, and its standard deviation
//! is the raw one's. **Choice**: the standard deviation is the population one (÷ n, numpy's
//! default).

use crate::udp_stream::{OwdKind, OwdSummary};
use crate::MAX_INTERVALS;

#[derive(Debug, Clone)]
pub struct OwdAccumulator {
    /// Receive minus send time of each matched packet (ns, receiver's minus sender's clock).
    raw_ns: Vec<i64>,
    /// Per interval of the arrival time: (sum of raw − the first raw OWD, count).
    bins: Vec<(i128, u64)>,
    t0: i64,
    interval_ns: i64,
    /// Packets that arrived more than [`MAX_INTERVALS`] intervals after `t0`.
    past_series: u64,
}

impl Default for OwdAccumulator {
    /// Intervals of 5 s from time 0 (METHODS §3).
    fn default() -> Self {
        OwdAccumulator::new(0, 5_000_000_000)
    }
}

impl OwdAccumulator {
    /// Intervals of `interval_ns` start at `t0` (the receiver's clock, as its series does).
    pub fn new(t0: i64, interval_ns: i64) -> Self {
        OwdAccumulator { raw_ns: Vec::new(), bins: Vec::new(), t0, interval_ns: interval_ns.max(1), past_series: 0 }
    }

    /// One packet sent at `send_ns` (sender's clock) that arrived at `recv_ns` (receiver's).
    #[inline]
    pub fn add(&mut self, send_ns: i64, recv_ns: i64) {
        let raw = recv_ns.saturating_sub(send_ns);
        let base = *self.raw_ns.first().unwrap_or(&raw);
        self.raw_ns.push(raw);
        let bin = (recv_ns.saturating_sub(self.t0).max(0) / self.interval_ns) as usize;
        if bin >= MAX_INTERVALS {
            self.past_series += 1;
            return;
        }
        if bin >= self.bins.len() {
            self.bins.resize(bin + 1, (0, 0));
        }
        let b = &mut self.bins[bin];
        b.0 += (raw as i128) - (base as i128);
        b.1 += 1;
    }

    pub fn samples(&self) -> u64 {
        self.raw_ns.len() as u64
    }

    /// The flow's summary (`None` when no packet was matched) and each interval's mean
    /// (`None` for an interval without a matched arrival), in milliseconds, as `kind`
    /// (raw or excess; half-RTT is not a one-way measurement and gives raw).
    pub fn finish(mut self, kind: OwdKind) -> (Option<OwdSummary>, Vec<Option<f64>>) {
        let n = self.raw_ns.len();
        if n == 0 {
            return (None, Vec::new());
        }
        let base = self.raw_ns[0];
        self.raw_ns.sort_unstable();
        let min = self.raw_ns[0];
        let shift = match kind {
            OwdKind::Excess => min,
            OwdKind::Raw | OwdKind::OffsetCorrected | OwdKind::HalfRtt => 0,
        };
        let sum: i128 = self.raw_ns.iter().map(|&x| (x - min) as i128).sum();
        let mean_above_min = sum as f64 / n as f64;
        let var = self
            .raw_ns
            .iter()
            .map(|&x| {
                let d = (x - min) as f64 - mean_above_min;
                d * d
            })
            .sum::<f64>()
            / n as f64;
        let ms = |ns: f64| ns / 1e6;
        let q = |p: f64| {
            // On the exact integers, by the interpolation of `stats::quantile_sorted`.
            let pos = p * (n - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            let (a, b) = ((self.raw_ns[lo] - shift) as f64, (self.raw_ns[hi] - shift) as f64);
            ms(a + (b - a) * (pos - lo as f64))
        };
        let summary = OwdSummary {
            kind,
            min: ms((min - shift) as f64),
            median: q(0.5),
            p95: q(0.95),
            p99: q(0.99),
            max: ms((self.raw_ns[n - 1] - shift) as f64),
            mean: ms(mean_above_min + (min - shift) as f64),
            std: ms(var.sqrt()),
            samples: n as u64,
        };
        let intervals = self
            .bins
            .iter()
            .map(|&(s, c)| (c > 0).then(|| ms(s as f64 / c as f64 + (base - shift) as f64)))
            .collect();
        (Some(summary), intervals)
    }

    /// Packets left out of the interval means (see [`MAX_INTERVALS`]).
    pub fn past_series(&self) -> u64 {
        self.past_series
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn excess_owd_mean_std_and_percentiles_are_exact() {
        // Receiver's clock 5 s ahead; per-packet delays 40, 60, 50, 90, 40 ms.
        let mut a = OwdAccumulator::new(5_000 * MS, 100 * MS);
        let delays = [40, 60, 50, 90, 40];
        for (i, d) in delays.iter().enumerate() {
            let send = i as i64 * 30 * MS;
            a.add(send, send + 5_000 * MS + d * MS);
        }
        let (s, iv) = a.clone().finish(OwdKind::Excess);
        let s = s.unwrap();
        // Excess: 0, 20, 10, 50, 0 → mean 16, population std sqrt((256+16+36+1156+256)/5).
        assert_eq!((s.min, s.max, s.mean, s.samples), (0.0, 50.0, 16.0, 5));
        assert!((s.std - (1720.0f64 / 5.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.median, 10.0);
        // Sorted 0, 0, 10, 20, 50: p95 at position 3.8 = 20 + 0.8·30.
        assert!((s.p95 - 44.0).abs() < 1e-9);
        // Arrivals at 5040, 5090, 5110, 5180, 5160 ms → bins 0, 0, 1, 1, 1.
        assert_eq!(iv, vec![Some(10.0), Some((10.0 + 50.0 + 0.0) / 3.0)]);
        let (raw, _) = a.finish(OwdKind::Raw);
        let raw = raw.unwrap();
        assert_eq!((raw.min, raw.mean), (5_040.0, 5_056.0));
        assert!((raw.std - s.std).abs() < 1e-9);
    }

    #[test]
    fn nothing_matched_gives_nothing() {
        assert_eq!(OwdAccumulator::new(0, MS).finish(OwdKind::Excess), (None, Vec::new()));
    }

    #[test]
    fn a_far_arrival_stays_in_the_summary_but_not_the_series() {
        let mut a = OwdAccumulator::new(0, 1);
        a.add(0, 10);
        a.add(i64::MAX - 5, i64::MAX);
        assert_eq!(a.past_series(), 1);
        let (s, iv) = a.finish(OwdKind::Raw);
        assert_eq!(s.unwrap().samples, 2);
        assert_eq!(iv.len(), 11);
    }
}
