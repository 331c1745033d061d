//! Per-slot traces as the rest of the crate sees them: a slice of state indices (`u16`,
//! one per slot) plus a rate table (`rates_bps[state]`). Readers of any format (CSV,
//! Parquet, mahimahi, the emulator's radio log) end here.
use crate::error::ChannelError;
use std::collections::HashMap;

/// Most distinct states a trace may have (state indices are `u16`).
pub const MAX_STATES: usize = u16::MAX as usize + 1;

/// A maximal stretch of consecutive slots in one state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub state: u16,
    pub slots: u64,
}

/// Run-length encoding of a state sequence. Channel traces stay in one state for tens to
/// hundreds of slots (002 §5.3), so every statistic that can be computed on runs is.
pub fn runs(states: &[u16]) -> Vec<Run> {
    let mut out = Vec::new();
    let mut iter = states.iter();
    let Some(&first) = iter.next() else { return out };
    let mut current = Run { state: first, slots: 1 };
    for &s in iter {
        if s == current.state {
            current.slots += 1;
        } else {
            out.push(current);
            current = Run { state: s, slots: 1 };
        }
    }
    out.push(current);
    out
}

/// Turns per-slot rates into states: each distinct rate is a state, numbered in
/// increasing rate order. Returns (states, rate table).
pub fn states_from_rates(rates_bps: &[f64]) -> Result<(Vec<u16>, Vec<f64>), ChannelError> {
    if rates_bps.is_empty() {
        return Err(ChannelError::EmptyTrace);
    }
    if let Some(slot) = rates_bps.iter().position(|r| !r.is_finite() || *r < 0.0) {
        return Err(ChannelError::InvalidParameter(format!(
            "rate {} at slot {slot} is not a finite non-negative number",
            rates_bps[slot]
        )));
    }
    // First pass: distinct bit patterns (+0.0 and -0.0 are one rate: -0.0 was rejected above
    // only if negative, and -0.0 < 0.0 is false, so normalise it).
    let key = |r: f64| if r == 0.0 { 0u64 } else { r.to_bits() };
    let mut provisional: HashMap<u64, u32> = HashMap::new();
    let mut codes = Vec::with_capacity(rates_bps.len());
    let mut last: Option<(u64, u32)> = None;
    for &r in rates_bps {
        let k = key(r);
        // Consecutive slots usually repeat the previous rate: skip the hash lookup then.
        let code = match last {
            Some((lk, lc)) if lk == k => lc,
            _ => {
                let n = provisional.len() as u32;
                let c = *provisional.entry(k).or_insert(n);
                if provisional.len() > MAX_STATES {
                    return Err(ChannelError::TooManyStates { states: provisional.len(), limit: MAX_STATES });
                }
                last = Some((k, c));
                c
            }
        };
        codes.push(code);
    }
    let mut distinct: Vec<(f64, u32)> = provisional.iter().map(|(&k, &c)| (f64::from_bits(k), c)).collect();
    distinct.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank = vec![0u16; distinct.len()];
    for (i, &(_, c)) in distinct.iter().enumerate() {
        rank[c as usize] = i as u16;
    }
    let states = codes.into_iter().map(|c| rank[c as usize]).collect();
    Ok((states, distinct.into_iter().map(|(r, _)| r).collect()))
}

/// Checks that every state indexes the rate table (`table_len` entries).
pub fn check_states(states: &[u16], table_len: usize) -> Result<(), ChannelError> {
    if states.is_empty() {
        return Err(ChannelError::EmptyTrace);
    }
    match states.iter().position(|&s| s as usize >= table_len) {
        Some(slot) => Err(ChannelError::UnknownState { state: states[slot] as u64, slot }),
        None => Ok(()),
    }
}

/// Maps external state codes (e.g. DRC indices, CQI values as logged) to table indices:
/// `codes[i]` is the code of table entry i. Unknown codes are an error naming the slot.
pub fn states_from_codes(values: &[i64], codes: &[i64]) -> Result<Vec<u16>, ChannelError> {
    if values.is_empty() {
        return Err(ChannelError::EmptyTrace);
    }
    if codes.len() > MAX_STATES {
        return Err(ChannelError::TooManyStates { states: codes.len(), limit: MAX_STATES });
    }
    let lookup: HashMap<i64, u16> = codes.iter().enumerate().map(|(i, &c)| (c, i as u16)).collect();
    let mut out = Vec::with_capacity(values.len());
    let mut last: Option<(i64, u16)> = None;
    for (slot, &v) in values.iter().enumerate() {
        let s = match last {
            Some((lv, ls)) if lv == v => ls,
            _ => {
                let s = *lookup.get(&v).ok_or(ChannelError::UnknownState { state: v as u64, slot })?;
                last = Some((v, s));
                s
            }
        };
        out.push(s);
    }
    Ok(out)
}

/// Per-slot rates of a state sequence.
pub fn rates_of(states: &[u16], rates_bps: &[f64]) -> Result<Vec<f64>, ChannelError> {
    check_states(states, rates_bps.len())?;
    Ok(states.iter().map(|&s| rates_bps[s as usize]).collect())
}

/// Places time-stamped samples on the slot grid, holding each value until the next sample
/// (a radio log writes a row when something changes, a per-slot log every slot; both come
/// out as one value per slot). A sample goes to the slot whose start t0 + k·slot_s is nearest
/// (t0 = the first time stamp), so time stamps of a per-slot log land in their own slot even
/// after decimal rounding or at epoch magnitudes; when several samples fall in one slot the
/// last one wins.
/// Returns the slot index of each sample, to be used with [`hold_by_slot`].
pub fn slot_of_times(times_s: &[f64], slot_s: f64) -> Result<Vec<u64>, ChannelError> {
    if !(slot_s > 0.0 && slot_s.is_finite()) {
        return Err(ChannelError::InvalidParameter(format!("slot length {slot_s} s is not positive")));
    }
    let Some(&t0) = times_s.first() else { return Err(ChannelError::EmptyTrace) };
    let mut out = Vec::with_capacity(times_s.len());
    let mut previous = t0;
    for (row, &t) in times_s.iter().enumerate() {
        if !t.is_finite() || t < previous {
            return Err(ChannelError::NonMonotonicTime { row });
        }
        previous = t;
        out.push(((t - t0) / slot_s).round() as u64);
    }
    Ok(out)
}

/// Expands samples at (non-decreasing) slot indices into one value per slot from slot 0
/// to the last sample's slot, holding each value until the next sample.
pub fn hold_by_slot<T: Copy>(slots: &[u64], values: &[T]) -> Result<Vec<T>, ChannelError> {
    if slots.len() != values.len() {
        return Err(ChannelError::LengthMismatch { what: "slot indices and values", expected: slots.len(), got: values.len() });
    }
    let (Some(&first), Some(&last)) = (slots.first(), slots.last()) else { return Err(ChannelError::EmptyTrace) };
    if let Some(row) = slots.windows(2).position(|w| w[1] < w[0]) {
        return Err(ChannelError::NonMonotonicTime { row: row + 1 });
    }
    let total = (last - first + 1) as usize;
    let mut out = Vec::with_capacity(total);
    for i in 0..slots.len() {
        let end = if i + 1 < slots.len() { slots[i + 1] } else { last + 1 };
        // A sample superseded by a later one in the same slot contributes no slot.
        for _ in slots[i]..end {
            out.push(values[i]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_a_short_sequence() {
        let r = runs(&[1, 1, 2, 2, 2, 1]);
        assert_eq!(r, vec![Run { state: 1, slots: 2 }, Run { state: 2, slots: 3 }, Run { state: 1, slots: 1 }]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn distinct_rates_become_ordered_states() {
        let (s, t) = states_from_rates(&[300.0, 100.0, 300.0, 200.0, -0.0, 0.0]).unwrap();
        assert_eq!(t, vec![0.0, 100.0, 200.0, 300.0]);
        assert_eq!(s, vec![3, 1, 3, 2, 0, 0]);
        assert_eq!(states_from_rates(&[]), Err(ChannelError::EmptyTrace));
        assert!(states_from_rates(&[1.0, f64::NAN]).is_err());
        assert!(states_from_rates(&[1.0, -5.0]).is_err());
    }

    #[test]
    fn codes_map_to_table_and_unknown_codes_are_named() {
        assert_eq!(states_from_codes(&[14, 14, 0, 3], &[0, 1, 2, 3, 14]).unwrap(), vec![4, 4, 0, 3]);
        assert_eq!(states_from_codes(&[1, 9], &[0, 1]), Err(ChannelError::UnknownState { state: 9, slot: 1 }));
        assert_eq!(check_states(&[0, 5], 5), Err(ChannelError::UnknownState { state: 5, slot: 1 }));
    }

    #[test]
    fn time_stamps_are_held_on_the_slot_grid() {
        let slots = slot_of_times(&[10.0, 10.002, 10.0024, 10.0071], 0.001).unwrap();
        assert_eq!(slots, vec![0, 2, 2, 7]);
        let held = hold_by_slot(&slots, &[1u16, 2, 3, 4]).unwrap();
        assert_eq!(held, vec![1, 1, 3, 3, 3, 3, 3, 4]);
        assert_eq!(slot_of_times(&[1.0, 0.5], 0.001), Err(ChannelError::NonMonotonicTime { row: 1 }));
        // Exact multiples of a decimal slot length land in their own slot.
        let s = slot_of_times(&[0.0, 0.001667, 0.003334, 0.005001], 0.001667).unwrap();
        assert_eq!(s, vec![0, 1, 2, 3]);
        let epoch: Vec<f64> = (0..100_000).map(|k| 1.7e9 + k as f64 * 0.001667).collect();
        let s = slot_of_times(&epoch, 0.001667).unwrap();
        assert!(s.iter().enumerate().all(|(k, &v)| v == k as u64));
    }
}
