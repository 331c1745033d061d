//! Statistics of a per-slot state trace (docs/methods.md §7, 002 §5): rate mean and spread, modal
//! fraction, entropy, sojourn times, conditional entropy by Markov depth and by lag, and the
//! one-step Markov fit's sojourn RMSE (002 eq. 4). Everything but the run-length pass works
//! on runs, so cost follows the number of state changes rather than the number of slots.
use crate::error::ChannelError;
use crate::markov::MarkovModel;
use crate::ngram::{block_counts, lagged_pair_counts};
use crate::trace::{check_states, runs, Run};
use serde::Serialize;

/// What to compute beyond the one-number summaries.
#[derive(Debug, Clone)]
pub struct StatsOptions {
    /// Conditional entropy for Markov depths 1..=max_depth.
    pub max_depth: usize,
    /// Lags (slots) for H(X_{i+d} | X_i) / H(X_{i+d}).
    pub lags: Vec<u64>,
}

impl Default for StatsOptions {
    fn default() -> Self {
        StatsOptions { max_depth: 4, lags: log_spaced_lags(1000, 31) }
    }
}

/// About `count` distinct integer lags from 1 to `max`, evenly spaced on a log scale.
pub fn log_spaced_lags(max: u64, count: usize) -> Vec<u64> {
    let max = max.max(1);
    let steps = count.max(2) - 1;
    let mut lags: Vec<u64> = (0..=steps)
        .map(|k| ((max as f64).powf(k as f64 / steps as f64)).round() as u64)
        .collect();
    lags.dedup();
    lags
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StateStats {
    pub state: u16,
    pub rate_bps: f64,
    pub fraction: f64,
    /// Observed mean run length in this state (slots); runs cut by the trace ends count as they are.
    pub mean_sojourn_slots: f64,
    /// 1/(1 − P_ii) from the one-step Markov fit; `None` when the state is never left.
    pub markov_sojourn_slots: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LagEntropy {
    pub lag_slots: u64,
    /// `None` when the lag is not shorter than the trace or the lagged state never varies.
    pub normalized: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TraceStats {
    pub slots: u64,
    pub mean_rate_bps: f64,
    pub std_rate_bps: f64,
    pub modal_state: u16,
    pub modal_rate_bps: f64,
    pub modal_fraction: f64,
    pub entropy_bits: f64,
    pub state_changes: u64,
    /// Slots per run over the whole trace.
    pub mean_sojourn_slots: f64,
    /// Visited states only, in state order.
    pub states: Vec<StateStats>,
    /// H(X_i | X_{i−1}..X_{i−n}) / H(X) for n = 1..=max_depth; `None` when H(X) = 0 or the
    /// trace is not longer than n.
    pub cond_entropy_by_depth: Vec<Option<f64>>,
    pub cond_entropy_by_lag: Vec<LagEntropy>,
    /// 002 eq. 4 over the states with a finite analytic sojourn; `None` if there are none.
    pub markov_rmse: Option<f64>,
}

fn entropy_of_counts(counts: impl Iterator<Item = u64> + Clone) -> f64 {
    let total: u64 = counts.clone().sum();
    if total == 0 {
        return 0.0;
    }
    let t = total as f64;
    let h: f64 = counts.filter(|&n| n > 0).map(|n| { let p = n as f64 / t; -p * p.log2() }).sum();
    h.max(0.0)
}

/// H(last symbol | the symbols before it) from sorted block counts of alphabet `k`.
fn conditional_entropy(blocks: &[(u64, u64)], k: u64) -> Option<f64> {
    let total: u64 = blocks.iter().map(|b| b.1).sum();
    if total == 0 {
        return None;
    }
    let t = total as f64;
    let mut h = 0.0;
    // Blocks are sorted by code, so the blocks of one context are adjacent.
    for group in blocks.chunk_by(|a, b| a.0 / k == b.0 / k) {
        let n_context: f64 = group.iter().map(|b| b.1 as f64).sum();
        for b in group {
            let n = b.1 as f64;
            h += n / t * (n_context / n).log2();
        }
    }
    Some(h.max(0.0))
}

/// All statistics of one trace (`states[i] < rates_bps.len()`).
pub fn trace_stats(states: &[u16], rates_bps: &[f64], options: &StatsOptions) -> Result<TraceStats, ChannelError> {
    check_states(states, rates_bps.len())?;
    let r = runs(states);
    stats_of_runs(&r, states, rates_bps, options)
}

fn stats_of_runs(r: &[Run], states: &[u16], rates_bps: &[f64], options: &StatsOptions) -> Result<TraceStats, ChannelError> {
    let k = rates_bps.len();
    let n = states.len() as u64;
    let mut occupancy = vec![0u64; k];
    let mut run_count = vec![0u64; k];
    for run in r {
        occupancy[run.state as usize] += run.slots;
        run_count[run.state as usize] += 1;
    }
    let nf = n as f64;
    let mean: f64 = occupancy.iter().zip(rates_bps).map(|(&c, &rate)| c as f64 * rate).sum::<f64>() / nf;
    let var: f64 = occupancy.iter().zip(rates_bps).map(|(&c, &rate)| c as f64 * (rate - mean).powi(2)).sum::<f64>() / nf;
    // Modal state: most slots; ties to the lower state.
    let modal = (0..k).max_by(|&a, &b| occupancy[a].cmp(&occupancy[b]).then(b.cmp(&a))).unwrap_or(0);
    let entropy = entropy_of_counts(occupancy.iter().copied());

    let markov_sojourn = if n >= 2 {
        MarkovModel::fit(states, rates_bps, 1.0, 1)?.mean_sojourn_slots()?
    } else {
        vec![None; k]
    };
    let per_state: Vec<StateStats> = (0..k)
        .filter(|&s| occupancy[s] > 0)
        .map(|s| StateStats {
            state: s as u16,
            rate_bps: rates_bps[s],
            fraction: occupancy[s] as f64 / nf,
            mean_sojourn_slots: occupancy[s] as f64 / run_count[s] as f64,
            markov_sojourn_slots: markov_sojourn[s],
        })
        .collect();
    let errors: Vec<f64> = per_state
        .iter()
        .filter_map(|s| s.markov_sojourn_slots.map(|an| (s.mean_sojourn_slots - an).abs() / an))
        .collect();
    let markov_rmse = (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64);

    let k64 = k as u64;
    let mut by_depth = Vec::with_capacity(options.max_depth);
    for depth in 1..=options.max_depth {
        let value = if entropy > 0.0 && n > depth as u64 {
            conditional_entropy(&block_counts(r, k, depth + 1)?, k64).map(|h| h / entropy)
        } else {
            None
        };
        by_depth.push(value);
    }
    let mut by_lag = Vec::with_capacity(options.lags.len());
    for &lag in &options.lags {
        let pairs = lagged_pair_counts(r, k, lag)?;
        let mut later = vec![0u64; k];
        for &(code, c) in &pairs {
            later[(code % k64) as usize] += c;
        }
        let h_later = entropy_of_counts(later.iter().copied());
        let normalized = if h_later > 0.0 { conditional_entropy(&pairs, k64).map(|h| h / h_later) } else { None };
        by_lag.push(LagEntropy { lag_slots: lag, normalized });
    }

    Ok(TraceStats {
        slots: n,
        mean_rate_bps: mean,
        std_rate_bps: var.sqrt(),
        modal_state: modal as u16,
        modal_rate_bps: rates_bps[modal],
        modal_fraction: occupancy[modal] as f64 / nf,
        entropy_bits: entropy,
        state_changes: r.len() as u64 - 1,
        mean_sojourn_slots: nf / r.len() as f64,
        states: per_state,
        cond_entropy_by_depth: by_depth,
        cond_entropy_by_lag: by_lag,
        markov_rmse,
    })
}

/// Statistics of consecutive windows of `window_slots` slots (the last one may be shorter).
pub fn window_stats(
    states: &[u16],
    rates_bps: &[f64],
    window_slots: usize,
    options: &StatsOptions,
) -> Result<Vec<TraceStats>, ChannelError> {
    if window_slots == 0 {
        return Err(ChannelError::InvalidParameter("window must be at least one slot".into()));
    }
    check_states(states, rates_bps.len())?;
    states.chunks(window_slots).map(|w| stats_of_runs(&runs(w), w, rates_bps, options)).collect()
}

/// Pearson correlation of two equally long series; `None` if either is constant or empty.
pub fn correlation(x: &[f64], y: &[f64]) -> Result<Option<f64>, ChannelError> {
    if x.len() != y.len() {
        return Err(ChannelError::LengthMismatch { what: "correlated series", expected: x.len(), got: y.len() });
    }
    if x.is_empty() {
        return Ok(None);
    }
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    Ok((sxx > 0.0 && syy > 0.0).then(|| (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0)))
}

/// Correlation per consecutive window of `window_slots` samples.
pub fn window_correlation(x: &[f64], y: &[f64], window_slots: usize) -> Result<Vec<Option<f64>>, ChannelError> {
    if window_slots == 0 {
        return Err(ChannelError::InvalidParameter("window must be at least one slot".into()));
    }
    if x.len() != y.len() {
        return Err(ChannelError::LengthMismatch { what: "correlated series", expected: x.len(), got: y.len() });
    }
    x.chunks(window_slots).zip(y.chunks(window_slots)).map(|(a, b)| correlation(a, b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededRng;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn constant_trace() {
        let s = trace_stats(&[3; 5000], &[0.0, 1.0, 2.0, 9.0], &StatsOptions::default()).unwrap();
        assert_eq!((s.slots, s.modal_state, s.modal_fraction, s.entropy_bits), (5000, 3, 1.0, 0.0));
        assert_eq!((s.mean_rate_bps, s.std_rate_bps, s.mean_sojourn_slots), (9.0, 0.0, 5000.0));
        assert!(s.cond_entropy_by_depth.iter().all(|c| c.is_none()));
        assert_eq!(s.markov_rmse, None);
    }

    #[test]
    fn iid_uniform_trace() {
        let mut rng = SeededRng::new(1);
        let x: Vec<u16> = (0..400_000).map(|_| rng.below(4) as u16).collect();
        let s = trace_stats(&x, &[1.0, 2.0, 3.0, 4.0], &StatsOptions::default()).unwrap();
        assert!(close(s.entropy_bits, 2.0, 1e-3));
        assert!(close(s.mean_rate_bps, 2.5, 0.01) && close(s.std_rate_bps, 1.25f64.sqrt(), 0.01));
        // No memory: every conditional entropy ≈ 1 (small plug-in bias from 4^5 blocks).
        for c in &s.cond_entropy_by_depth {
            assert!(close(c.unwrap(), 1.0, 0.01), "{c:?}");
        }
        for l in &s.cond_entropy_by_lag {
            assert!(close(l.normalized.unwrap(), 1.0, 1e-3), "{l:?}");
        }
        // Geometric runs with P_ii = 1/4: mean 4/3 slots.
        assert!(close(s.mean_sojourn_slots, 4.0 / 3.0, 0.01));
        assert!(s.markov_rmse.unwrap() < 0.01);
    }

    #[test]
    fn order_one_chain_matches_analytic_values() {
        // Three states, P = [[.9,.1,0],[.05,.9,.05],[0,.2,.8]]; stationary π ∝ (1/2, 1, 1/4)
        // by detailed balance: π0·.1 = π1·.05, π1·.05 = π2·.2.
        let p: [[f64; 3]; 3] = [[0.9, 0.1, 0.0], [0.05, 0.9, 0.05], [0.0, 0.2, 0.8]];
        let pi: [f64; 3] = [2.0 / 7.0, 4.0 / 7.0, 1.0 / 7.0];
        let mut rng = SeededRng::new(11);
        let mut x = vec![1u16];
        for _ in 0..2_000_000 {
            let row = p[*x.last().unwrap() as usize];
            let u = rng.next_f64();
            x.push(if u < row[0] { 0 } else if u < row[0] + row[1] { 1 } else { 2 });
        }
        let s = trace_stats(&x, &[1e5, 1e6, 2e6], &StatsOptions::default()).unwrap();
        let h: f64 = pi.iter().map(|p| -p * p.log2()).sum();
        assert!(close(s.entropy_bits, h, 0.01), "{} vs {h}", s.entropy_bits);
        let h_cond: f64 = (0..3).map(|i| pi[i] * p[i].iter().filter(|&&q| q > 0.0).map(|q| -q * q.log2()).sum::<f64>()).sum();
        let c = &s.cond_entropy_by_depth;
        assert!(close(c[0].unwrap(), h_cond / h, 0.01), "{:?} vs {}", c[0], h_cond / h);
        // Order 1: more history does not help (beyond plug-in bias).
        for d in 1..4 {
            assert!(c[d].unwrap() > c[0].unwrap() - 0.005, "{c:?}");
        }
        for (st, want) in s.states.iter().zip([10.0, 10.0, 5.0]) {
            assert!(close(st.markov_sojourn_slots.unwrap(), want, want * 0.03));
            assert!(close(st.mean_sojourn_slots, want, want * 0.03));
            assert!(close(st.fraction, pi[st.state as usize], 0.02));
        }
        assert!(s.markov_rmse.unwrap() < 0.01);
        // Memory fades with lag.
        let lags = &s.cond_entropy_by_lag;
        assert!(lags.first().unwrap().normalized.unwrap() < 0.6);
        assert!(lags.last().unwrap().normalized.unwrap() > 0.99);
    }

    #[test]
    fn windows_and_correlation() {
        let x: Vec<u16> = (0..1000).map(|i| (i / 100 % 2) as u16).collect();
        let w = window_stats(&x, &[1.0, 2.0], 300, &StatsOptions { max_depth: 1, lags: vec![1] }).unwrap();
        assert_eq!(w.iter().map(|s| s.slots).collect::<Vec<_>>(), vec![300, 300, 300, 100]);
        assert_eq!(w[3].entropy_bits, 0.0);
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!(close(correlation(&a, &[2.0, 4.0, 6.0, 8.0]).unwrap().unwrap(), 1.0, 1e-12));
        assert!(close(correlation(&a, &[8.0, 6.0, 4.0, 2.0]).unwrap().unwrap(), -1.0, 1e-12));
        assert_eq!(correlation(&a, &[1.0; 4]).unwrap(), None);
        assert_eq!(window_correlation(&a, &a, 2).unwrap(), vec![Some(1.0), Some(1.0)]);
        assert!(log_spaced_lags(1000, 31).starts_with(&[1, 2, 3]));
        assert_eq!(*log_spaced_lags(1000, 31).last().unwrap(), 1000);
    }
}
