//! One-way delay of packets matched across two captures, accumulated one packet at a time
//! (docs/methods.md §1, §12): any matcher that knows a packet's send and arrival times hands them
//! to [`OwdAccumulator::add`], in any order, and [`OwdAccumulator::finish`] gives the
//! flow's summary and each interval's mean.
//!
//! **Excess** OWD (002 §7) is raw OWD − the flow's minimum raw OWD: a constant clock offset
//! between the capture hosts cancels. The minimum, maximum, mean and standard deviation
//! are exact (nanosecond integer sums), and so are the percentiles of a flow's first
//! [`EXACT_SAMPLES`] delays; past that, the delays are counted per [`BIN_NS`] and the
//! percentiles are those bins' centres (within 5 µs), so that memory stays bounded on a
//! capture of any length. The excess distribution is the raw one shifted by its minimum,
//! and its standard deviation is the raw one's. **Choice**: the standard deviation is the
//! population one (÷ n, numpy's default).

use ahash::AHashMap;

use crate::udp_stream::{OwdKind, OwdSummary};
use crate::MAX_INTERVALS;

/// Delays a flow keeps one by one (512 KiB); beyond, they are counted per [`BIN_NS`].
pub const EXACT_SAMPLES: usize = 1 << 16;
/// Width of the bins delays are counted in past [`EXACT_SAMPLES`].
pub const BIN_NS: i64 = 10_000;

/// A flow's delays: each one, or counts per bin.
#[derive(Debug, Clone)]
enum Delays {
    Exact(Vec<i64>),
    Binned(AHashMap<i64, u64>),
}

#[derive(Debug, Clone)]
pub struct OwdAccumulator {
    /// Receive minus send time of each matched packet (ns, receiver's minus sender's clock).
    delays: Delays,
    n: u64,
    /// The first delay, and the sums of each delay's difference from it and its square.
    first: Option<i64>,
    sum: i128,
    sum_sq: i128,
    min: i64,
    max: i64,
    /// Per interval of the arrival time: (sum of raw − the first raw OWD, count).
    bins: Vec<(i128, u64)>,
    t0: i64,
    interval_ns: i64,
}

impl Default for OwdAccumulator {
    /// Intervals of 5 s from time 0 (docs/methods.md §3).
    fn default() -> Self {
        OwdAccumulator::new(0, 5_000_000_000)
    }
}

impl OwdAccumulator {
    /// Intervals of `interval_ns` start at `t0` (the receiver's clock, as its series does).
    pub fn new(t0: i64, interval_ns: i64) -> Self {
        OwdAccumulator {
            delays: Delays::Exact(Vec::new()),
            n: 0,
            first: None,
            sum: 0,
            sum_sq: 0,
            min: i64::MAX,
            max: i64::MIN,
            bins: Vec::new(),
            t0,
            interval_ns: interval_ns.max(1),
        }
    }

    /// One packet sent at `send_ns` (sender's clock) that arrived at `recv_ns` (receiver's).
    #[inline]
    pub fn add(&mut self, send_ns: i64, recv_ns: i64) {
        let raw = recv_ns.saturating_sub(send_ns);
        let base = *self.first.get_or_insert(raw);
        let d = raw as i128 - base as i128;
        self.n += 1;
        self.sum += d;
        self.sum_sq += d * d;
        self.min = self.min.min(raw);
        self.max = self.max.max(raw);
        match &mut self.delays {
            Delays::Exact(v) if v.len() < EXACT_SAMPLES => v.push(raw),
            Delays::Exact(v) => {
                let mut bins = AHashMap::new();
                for x in v.drain(..).chain([raw]) {
                    *bins.entry(x.div_euclid(BIN_NS)).or_insert(0) += 1;
                }
                self.delays = Delays::Binned(bins);
            }
            Delays::Binned(bins) => *bins.entry(raw.div_euclid(BIN_NS)).or_insert(0) += 1,
        }
        let bin = (recv_ns.saturating_sub(self.t0).max(0) / self.interval_ns) as usize;
        // Past the series (its flow's report counts the packets left out, from the
        // receiver's own series, which stops at the same place).
        if bin >= MAX_INTERVALS {
            return;
        }
        if bin >= self.bins.len() {
            self.bins.resize(bin + 1, (0, 0));
        }
        let b = &mut self.bins[bin];
        b.0 += d;
        b.1 += 1;
    }

    /// The flow's summary (`None` when no packet was matched) and each interval's mean
    /// (`None` for an interval without a matched arrival), in milliseconds, as `kind`
    /// (raw or excess; half-RTT is not a one-way measurement and gives raw).
    pub fn finish(self, kind: OwdKind) -> (Option<OwdSummary>, Vec<Option<f64>>) {
        let Some(base) = self.first else {
            return (None, Vec::new());
        };
        let n = self.n;
        let shift = match kind {
            OwdKind::Excess => self.min,
            OwdKind::Raw | OwdKind::OffsetCorrected | OwdKind::HalfRtt => 0,
        };
        let ms = |ns: f64| ns / 1e6;
        // Mean and variance from the exact sums: n²·var = n·Σd² − (Σd)².
        let (sum, nn) = (self.sum, n as i128);
        let var = (nn * self.sum_sq - sum * sum) as f64 / (nn * nn) as f64;
        let mean = base as f64 + sum as f64 / n as f64;
        let sorted = SortedDelays::new(self.delays);
        let q = |p: f64| {
            // By the interpolation of `stats::quantile_sorted`.
            let pos = p * (n - 1) as f64;
            let (lo, hi) = (pos.floor() as u64, pos.ceil() as u64);
            let (a, b) = (sorted.nth(lo) - shift as f64, sorted.nth(hi) - shift as f64);
            ms(a + (b - a) * (pos - lo as f64))
        };
        let summary = OwdSummary {
            kind,
            min: ms((self.min - shift) as f64),
            median: q(0.5),
            p95: q(0.95),
            p99: q(0.99),
            max: ms((self.max - shift) as f64),
            mean: ms(mean - shift as f64),
            std: ms(var.max(0.0).sqrt()),
            samples: n,
        };
        let intervals = self
            .bins
            .iter()
            .map(|&(s, c)| (c > 0).then(|| ms(s as f64 / c as f64 + (base - shift) as f64)))
            .collect();
        (Some(summary), intervals)
    }
}

/// The delays in order, for their percentiles.
enum SortedDelays {
    Exact(Vec<i64>),
    /// (bin, count) by bin, with the running count up to each.
    Binned(Vec<(i64, u64)>),
}

impl SortedDelays {
    fn new(d: Delays) -> Self {
        match d {
            Delays::Exact(mut v) => {
                v.sort_unstable();
                SortedDelays::Exact(v)
            }
            Delays::Binned(bins) => {
                let mut v: Vec<(i64, u64)> = bins.into_iter().collect();
                v.sort_unstable();
                let mut seen = 0;
                for b in &mut v {
                    seen += b.1;
                    b.1 = seen;
                }
                SortedDelays::Binned(v)
            }
        }
    }

    /// The `k`-th smallest delay (its bin's centre, when binned), in nanoseconds.
    fn nth(&self, k: u64) -> f64 {
        match self {
            SortedDelays::Exact(v) => v[k as usize] as f64,
            SortedDelays::Binned(v) => {
                let at = v.partition_point(|b| b.1 <= k).min(v.len() - 1);
                (v[at].0 * BIN_NS) as f64 + BIN_NS as f64 / 2.0
            }
        }
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
        let (s, iv) = a.finish(OwdKind::Raw);
        assert_eq!(s.unwrap().samples, 2);
        assert_eq!(iv.len(), 11);
    }

    #[test]
    fn past_the_exact_samples_percentiles_come_from_bins_and_the_rest_stays_exact() {
        // EXACT_SAMPLES + 1000 delays cycling over 0..1000 µs (plus 7 ns), clock 3 s ahead.
        let n = EXACT_SAMPLES as i64 + 1000;
        let mut a = OwdAccumulator::new(0, 1_000_000_000_000);
        for i in 0..n {
            let d = (i % 1000) * 1000 + 7;
            a.add(i, i + 3_000_000_000 + d);
        }
        assert!(matches!(a.delays, Delays::Binned(_)));
        let (s, _) = a.finish(OwdKind::Excess);
        let s = s.unwrap();
        assert_eq!((s.samples, s.min, s.max), (n as u64, 0.0, 0.999));
        // Each 1 µs step equally often: mean 499.5 µs above the minimum (exact sums).
        let per = (n / 1000) as f64;
        let extra = (n % 1000) as f64; // the first 1000 steps once more
        let mean_us = (per * 499_500.0 + extra * (extra - 1.0) / 2.0) / n as f64;
        assert!((s.mean - mean_us / 1000.0).abs() < 1e-9);
        // The median (exactly 0.499 or 0.5 ms) within half a bin (5 µs) of either.
        assert!((s.median - 0.4995).abs() <= 0.0055 + 1e-9, "{}", s.median);
    }
}
