//! Small statistics shared by every metric: quantiles, a bounded-memory quantile sketch,
//! the box-plot summary and the second-order difference plot (docs/methods.md §3).

use serde::Serialize;

/// Quantile of sorted data by linear interpolation between closest ranks (numpy's default),
/// so figures agree with what a user gets from `numpy.percentile`.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

/// Mean and population standard deviation (÷ n; **choice**, numpy's default) of a sample;
/// `None` when empty.
pub fn mean_std(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    Some((mean, (values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt()))
}

/// min / median / p95 / max of a sample, in the unit of the sample.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Summary {
    pub min: f64,
    pub median: f64,
    pub p95: f64,
    pub max: f64,
    pub samples: u64,
}

impl Summary {
    /// Sorts `values` in place and summarises them; `None` for an empty sample.
    pub fn of(values: &mut [f64]) -> Option<Summary> {
        values.sort_unstable_by(|a, b| a.total_cmp(b));
        Some(Summary {
            min: *values.first()?,
            median: quantile_sorted(values, 0.5)?,
            p95: quantile_sorted(values, 0.95)?,
            max: *values.last()?,
            samples: values.len() as u64,
        })
    }
}

/// Quantiles of a stream in bounded memory: logarithmic buckets of relative width
/// [`Sketch::ACCURACY`] (the DDSketch idea), so a flow with ten million RTT samples
/// costs a few kilobytes. Values must be positive; zero and below share one bucket.
#[derive(Debug, Clone, Default)]
pub struct Sketch {
    offset: i32,
    counts: Vec<u64>,
    nonpositive: u64,
    n: u64,
    min: f64,
    max: f64,
}

impl Sketch {
    /// Relative accuracy of every quantile returned (0.5 %).
    pub const ACCURACY: f64 = 0.005;

    fn gamma_ln() -> f64 {
        ((1.0 + Self::ACCURACY) / (1.0 - Self::ACCURACY)).ln()
    }

    pub fn add(&mut self, x: f64) {
        if self.n == 0 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.n += 1;
        if x <= 0.0 || !x.is_finite() {
            self.nonpositive += 1;
            return;
        }
        let idx = (x.ln() / Self::gamma_ln()).ceil() as i32;
        if self.counts.is_empty() {
            self.offset = idx;
            self.counts.push(0);
        }
        if idx < self.offset {
            let grow = (self.offset - idx) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.offset = idx;
        }
        let i = (idx - self.offset) as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        if q <= 0.0 {
            return Some(self.min);
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        let rank = (q * (self.n - 1) as f64).round() as u64;
        if rank < self.nonpositive {
            return Some(self.min.min(0.0));
        }
        let mut seen = self.nonpositive;
        let g = Self::gamma_ln().exp();
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                let idx = self.offset + i as i32;
                let v = 2.0 * g.powi(idx) / (g + 1.0);
                return Some(v.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    pub fn summary(&self) -> Option<Summary> {
        Some(Summary {
            min: self.min,
            median: self.quantile(0.5)?,
            p95: self.quantile(0.95)?,
            max: self.max,
            samples: self.n,
        })
    }
}

/// Box-plot summary of a series (000 §4.1): quartiles, IQR, whiskers at 1.5 IQR, outliers.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct BoxSummary {
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub iqr: f64,
    pub whisker_low: f64,
    pub whisker_high: f64,
    pub outliers: u64,
}

impl BoxSummary {
    pub fn of(series: &[f64]) -> Option<BoxSummary> {
        let mut s = series.to_vec();
        s.sort_unstable_by(|a, b| a.total_cmp(b));
        let q1 = quantile_sorted(&s, 0.25)?;
        let q3 = quantile_sorted(&s, 0.75)?;
        let iqr = q3 - q1;
        let (lo, hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
        let inside = || s.iter().copied().filter(|v| *v >= lo && *v <= hi);
        Some(BoxSummary {
            median: quantile_sorted(&s, 0.5)?,
            q1,
            q3,
            iqr,
            whisker_low: inside().fold(f64::INFINITY, f64::min),
            whisker_high: inside().fold(f64::NEG_INFINITY, f64::max),
            outliers: s.iter().filter(|v| **v < lo || **v > hi).count() as u64,
        })
    }
}

/// Mean, population standard deviation ([`mean_std`]) and maximum of a rate series, in its
/// unit; `None` when empty.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct RateSpread {
    pub mean: f64,
    pub std: f64,
    pub max: f64,
}

impl RateSpread {
    pub fn of(series: &[f64]) -> Option<RateSpread> {
        let (mean, std) = mean_std(series)?;
        Some(RateSpread { mean, std, max: series.iter().copied().fold(f64::NEG_INFINITY, f64::max) })
    }
}

/// Variability of a series from its second-order difference plot (docs/methods.md §3): points
/// (T[i+1]−T[i], T[i+2]−T[i+1]); CTM(r) is the share of points within radius r of the origin,
/// reported at r = 5 % and 10 % of the mean (**choice**, docs/methods.md §3).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Variability {
    pub ctm_5pct: f64,
    pub ctm_10pct: f64,
    pub first_difference_std: f64,
    pub points: u64,
}

pub fn sodp_points(series: &[f64]) -> Vec<(f64, f64)> {
    series.windows(3).map(|w| (w[1] - w[0], w[2] - w[1])).collect()
}

impl Variability {
    pub fn of(series: &[f64]) -> Option<Variability> {
        let pts = sodp_points(series);
        if pts.is_empty() {
            return None;
        }
        let mean = series.iter().sum::<f64>() / series.len() as f64;
        let ctm = |r: f64| pts.iter().filter(|(x, y)| (x * x + y * y).sqrt() <= r).count() as f64 / pts.len() as f64;
        let diffs: Vec<f64> = series.windows(2).map(|w| w[1] - w[0]).collect();
        let dm = diffs.iter().sum::<f64>() / diffs.len() as f64;
        let var = diffs.iter().map(|d| (d - dm).powi(2)).sum::<f64>() / diffs.len() as f64;
        Some(Variability {
            ctm_5pct: ctm(0.05 * mean),
            ctm_10pct: ctm(0.10 * mean),
            first_difference_std: var.sqrt(),
            points: pts.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_numpy_linear() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&s, 0.5), Some(2.5));
        assert!((quantile_sorted(&s, 0.95).unwrap() - 3.85).abs() < 1e-12);
        assert_eq!(quantile_sorted(&[], 0.5), None);
    }

    #[test]
    fn sketch_is_within_its_accuracy() {
        let mut sk = Sketch::default();
        let mut exact: Vec<f64> = (1..=100_000).map(|i| i as f64 * 0.013).collect();
        for v in &exact {
            sk.add(*v);
        }
        exact.sort_by(|a, b| a.total_cmp(b));
        for q in [0.01, 0.5, 0.95, 0.99] {
            let want = quantile_sorted(&exact, q).unwrap();
            let got = sk.quantile(q).unwrap();
            assert!((got - want).abs() / want < 0.011, "q{q}: {got} vs {want}");
        }
        assert_eq!(sk.quantile(0.0), Some(0.013));
        assert_eq!(sk.count(), 100_000);
    }

    #[test]
    fn box_summary_counts_outliers() {
        let b = BoxSummary::of(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap();
        assert_eq!((b.q1, b.median, b.q3), (2.0, 3.0, 4.0));
        assert_eq!(b.outliers, 1);
        assert_eq!(b.whisker_high, 4.0);
    }

    #[test]
    fn rate_spread_has_the_maximum_beside_mean_and_std() {
        let r = RateSpread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((r.mean, r.std, r.max), (5.0, 2.0, 9.0));
        assert_eq!(RateSpread::of(&[]), None);
    }

    #[test]
    fn constant_series_has_full_ctm() {
        let v = Variability::of(&[10.0; 20]).unwrap();
        assert_eq!(v.ctm_5pct, 1.0);
        assert_eq!(v.first_difference_std, 0.0);
        let alt: Vec<f64> = (0..20).map(|i| if i % 2 == 0 { 5.0 } else { 15.0 }).collect();
        assert_eq!(Variability::of(&alt).unwrap().ctm_10pct, 0.0);
    }
}
