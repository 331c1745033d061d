//! Counting blocks of consecutive states ("n-grams") and lagged state pairs on the
//! run-length form of a trace. A block inside one run is the same block for every position
//! of that run, so a run costs O(block length), not O(run length): a day of stationary
//! EV-DO slots (52 M slots, sojourns of hundreds of slots) is counted in milliseconds.
use crate::error::ChannelError;
use crate::trace::Run;
use std::collections::HashMap;

/// Codes below this use a dense counting array (4 M entries = 32 MB of counters at most).
const DENSE_LIMIT: u64 = 1 << 22;

/// Counts indexed by a block code: x_{i−m+1}·K^{m−1} + … + x_i (oldest symbol most significant).
enum Counter {
    Dense(Vec<u64>),
    Sparse(HashMap<u64, u64>),
}

impl Counter {
    fn new(codes: u64) -> Self {
        if codes <= DENSE_LIMIT {
            Counter::Dense(vec![0; codes as usize])
        } else {
            Counter::Sparse(HashMap::new())
        }
    }

    #[inline]
    fn add(&mut self, code: u64, n: u64) {
        match self {
            Counter::Dense(v) => v[code as usize] += n,
            Counter::Sparse(m) => *m.entry(code).or_insert(0) += n,
        }
    }

    /// Non-zero (code, count) pairs in increasing code order.
    fn into_sorted(self) -> Vec<(u64, u64)> {
        match self {
            Counter::Dense(v) => v.into_iter().enumerate().filter(|(_, n)| *n > 0).map(|(c, n)| (c as u64, n)).collect(),
            Counter::Sparse(m) => {
                let mut out: Vec<(u64, u64)> = m.into_iter().collect();
                out.sort_unstable();
                out
            }
        }
    }
}

/// K^m, or an error when block codes would not fit in 63 bits.
pub fn code_space(k: usize, m: usize) -> Result<u64, ChannelError> {
    let mut space: u64 = 1;
    for _ in 0..m {
        space = space
            .checked_mul(k.max(1) as u64)
            .filter(|s| *s <= 1 << 63)
            .ok_or(ChannelError::TooManyStates { states: k, limit: (1u64 << (63 / m.max(1))) as usize })?;
    }
    Ok(space)
}

/// Counts of every block of `m` consecutive states (states < `k`), as sorted (code, count).
/// A trace of N slots has N − m + 1 blocks.
pub fn block_counts(runs: &[Run], k: usize, m: usize) -> Result<Vec<(u64, u64)>, ChannelError> {
    assert!(m >= 1, "blocks have at least one state");
    let space = code_space(k, m)?;
    let k = k as u64;
    let mut counter = Counter::new(space);
    let mut code: u64 = 0;
    let mut filled = 0usize;
    for run in runs {
        let s = run.state as u64;
        let stepped = run.slots.min(m as u64);
        for _ in 0..stepped {
            code = (code * k + s) % space;
            filled += 1;
            if filled >= m {
                counter.add(code, 1);
            }
        }
        if run.slots > m as u64 {
            // `code` is now the block of m copies of s, the block at every later slot of the run.
            counter.add(code, run.slots - m as u64);
        }
    }
    Ok(counter.into_sorted())
}

/// Counts of state pairs (X_i, X_{i+lag}) as sorted (X_i·K + X_{i+lag}, count); N − lag pairs.
pub fn lagged_pair_counts(runs: &[Run], k: usize, lag: u64) -> Result<Vec<(u64, u64)>, ChannelError> {
    let space = code_space(k, 2)?;
    let k = k as u64;
    let mut counter = Counter::new(space);
    // Walk the trace twice at once: `a` at slot i, `b` at slot i + lag; between changes of
    // either run the pair is constant.
    let (mut a, mut a_left) = (0usize, runs.first().map_or(0, |r| r.slots));
    let (mut b, mut b_left) = (0usize, runs.first().map_or(0, |r| r.slots));
    let mut skip = lag;
    while b < runs.len() && skip > 0 {
        let step = skip.min(b_left);
        skip -= step;
        b_left -= step;
        if b_left == 0 {
            b += 1;
            b_left = runs.get(b).map_or(0, |r| r.slots);
        }
    }
    while b < runs.len() {
        let step = a_left.min(b_left);
        counter.add(runs[a].state as u64 * k + runs[b].state as u64, step);
        a_left -= step;
        b_left -= step;
        if a_left == 0 {
            a += 1;
            a_left = runs.get(a).map_or(0, |r| r.slots);
        }
        if b_left == 0 {
            b += 1;
            b_left = runs.get(b).map_or(0, |r| r.slots);
        }
    }
    Ok(counter.into_sorted())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::runs;

    fn naive_blocks(x: &[u16], k: u64, m: usize) -> Vec<(u64, u64)> {
        let mut h: HashMap<u64, u64> = HashMap::new();
        for w in x.windows(m) {
            *h.entry(w.iter().fold(0, |c, &s| c * k + s as u64)).or_default() += 1;
        }
        let mut v: Vec<_> = h.into_iter().collect();
        v.sort_unstable();
        v
    }

    fn naive_pairs(x: &[u16], k: u64, lag: usize) -> Vec<(u64, u64)> {
        let mut h: HashMap<u64, u64> = HashMap::new();
        for i in 0..x.len().saturating_sub(lag) {
            *h.entry(x[i] as u64 * k + x[i + lag] as u64).or_default() += 1;
        }
        let mut v: Vec<_> = h.into_iter().collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn run_counting_equals_slot_by_slot_counting() {
        let mut rng = crate::rng::SeededRng::new(3);
        let mut x = Vec::new();
        for _ in 0..300 {
            let s = rng.below(4) as u16;
            for _ in 0..1 + rng.below(9) {
                x.push(s);
            }
        }
        let r = runs(&x);
        for m in 1..=5 {
            assert_eq!(block_counts(&r, 4, m).unwrap(), naive_blocks(&x, 4, m), "m={m}");
        }
        for lag in [0u64, 1, 2, 7, 50, 1000, x.len() as u64 - 1, x.len() as u64, x.len() as u64 + 5] {
            assert_eq!(lagged_pair_counts(&r, 4, lag).unwrap(), naive_pairs(&x, 4, lag as usize), "lag={lag}");
        }
    }

    #[test]
    fn sparse_counter_for_large_alphabets() {
        let x: Vec<u16> = (0..2000u32).map(|i| ((i * 7919) % 3000) as u16).collect();
        let r = runs(&x);
        assert_eq!(block_counts(&r, 3000, 3).unwrap(), naive_blocks(&x, 3000, 3));
        assert!(code_space(65536, 5).is_err());
    }
}
