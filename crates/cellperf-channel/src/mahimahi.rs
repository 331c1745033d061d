//! mahimahi link traces ↔ per-slot rates.
//!
//! A mahimahi trace has one integer per line: a millisecond at which one packet of up to
//! 1500 bytes may leave the link (several lines may repeat a millisecond); the trace repeats
//! with a period equal to its last time stamp. Opportunity t belongs to millisecond
//! [t, t + 1), so slot k (of `slot_s` seconds) gets the opportunities with
//! k·slot ≤ t < (k+1)·slot, each worth 1500 bytes.
use crate::error::ChannelError;

/// Bytes one mahimahi delivery opportunity may carry.
pub const PACKET_BYTES: f64 = 1500.0;

/// Parses a trace's text; the error names the first bad line.
pub fn parse(text: &[u8]) -> Result<Vec<u64>, ChannelError> {
    let mut out = Vec::new();
    let mut previous = 0u64;
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let bad = |reason: String| ChannelError::InvalidMahimahi { line: i + 1, reason };
        let text = std::str::from_utf8(trimmed).map_err(|_| bad("not text".into()))?;
        // The line itself is never quoted: a trace path may name any file (a campaign run as
        // root given `/etc/shadow`), and the message ends up on screen and in the store.
        let ms: u64 = text.parse().map_err(|_| bad("not a whole number of milliseconds".into()))?;
        if ms < previous {
            return Err(bad(format!("{ms} ms comes after {previous} ms (time stamps must not decrease)")));
        }
        previous = ms;
        out.push(ms);
    }
    match out.last() {
        None => Err(ChannelError::EmptyTrace),
        Some(0) => Err(ChannelError::InvalidMahimahi { line: 1, reason: "the trace lasts 0 ms (its last time stamp is its period)".into() }),
        Some(_) => Ok(out),
    }
}

/// Per-slot rates (bit/s) of one period of a trace: ceil(period / slot) slots. An
/// opportunity at exactly the period belongs to the next repetition's slot 0.
pub fn to_slot_rates(timestamps_ms: &[u64], slot_s: f64) -> Result<Vec<f64>, ChannelError> {
    if !(slot_s > 0.0 && slot_s.is_finite()) {
        return Err(ChannelError::InvalidParameter(format!("slot length {slot_s} s is not positive")));
    }
    let period = *timestamps_ms.last().ok_or(ChannelError::EmptyTrace)?;
    if period == 0 {
        return Err(ChannelError::InvalidParameter("the mahimahi trace lasts 0 ms".into()));
    }
    let slot_ms = slot_s * 1000.0;
    let slots = ((period as f64 / slot_ms) - 1e-9).ceil().max(1.0) as usize;
    let mut packets = vec![0u32; slots];
    for &t in timestamps_ms {
        let k = ((t % period) as f64 / slot_ms + 1e-9).floor() as usize;
        packets[k.min(slots - 1)] += 1;
    }
    let bits = PACKET_BYTES * 8.0 / slot_s;
    Ok(packets.into_iter().map(|p| p as f64 * bits).collect())
}

/// The delivery opportunities of per-slot rates: credit accumulates at the slot's rate, and
/// each whole packet of credit becomes one opportunity, spread evenly over the slot. The last
/// line is at least the duration (so mahimahi's period matches the trace) — a final
/// opportunity at the end stands in for the leftover credit.
pub fn from_slot_rates(rates_bps: &[f64], slot_s: f64) -> Result<Vec<u64>, ChannelError> {
    if !(slot_s > 0.0 && slot_s.is_finite()) {
        return Err(ChannelError::InvalidParameter(format!("slot length {slot_s} s is not positive")));
    }
    if rates_bps.is_empty() {
        return Err(ChannelError::EmptyTrace);
    }
    let packet_bits = PACKET_BYTES * 8.0;
    let slot_ms = slot_s * 1000.0;
    let mut credit = 0.0f64;
    let mut out = Vec::new();
    for (k, &rate) in rates_bps.iter().enumerate() {
        credit += rate * slot_s;
        let n = (credit / packet_bits + 1e-9).floor();
        if n >= 1.0 {
            credit -= n * packet_bits;
            let start = k as f64 * slot_ms;
            for j in 0..n as u64 {
                out.push((start + j as f64 * slot_ms / n + 1e-9).floor() as u64);
            }
        }
    }
    let duration_ms = (rates_bps.len() as f64 * slot_ms).round().max(1.0) as u64;
    if out.last().is_none_or(|&t| t < duration_ms) {
        out.push(duration_ms);
    }
    Ok(out)
}

/// The text of a trace: one time stamp per line.
pub fn to_text(timestamps_ms: &[u64]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::with_capacity(timestamps_ms.len() * 8);
    for t in timestamps_ms {
        writeln!(out, "{t}").expect("writing to memory cannot fail");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_bad_lines() {
        assert_eq!(parse(b"1\n1\n3\r\n\n5\n").unwrap(), vec![1, 1, 3, 5]);
        assert_eq!(parse(b"").unwrap_err(), ChannelError::EmptyTrace);
        let e = parse(b"1\n2\nx\n").unwrap_err();
        assert_eq!(e.to_string(), "line 3: not a whole number of milliseconds");
        assert!(parse(b"5\n4\n").unwrap_err().to_string().starts_with("line 2: 4 ms comes after 5 ms"));
        assert!(parse(b"0\n0\n").is_err());
    }

    #[test]
    fn one_ms_slots_round_trip() {
        let ts = vec![0, 0, 1, 3, 3, 3, 4, 7, 9, 10];
        let rates = to_slot_rates(&ts, 0.001).unwrap();
        // 10 ms period; the opportunity at 10 ms is slot 0 of the next period.
        assert_eq!(rates.len(), 10);
        assert_eq!(rates[0], 3.0 * 12_000_000.0);
        assert_eq!(rates[3], 3.0 * 12_000_000.0);
        assert_eq!(rates[2], 0.0);
        let back = from_slot_rates(&rates, 0.001).unwrap();
        assert_eq!(back, vec![0, 0, 0, 1, 3, 3, 3, 4, 7, 9, 10]);
        assert_eq!(parse(&to_text(&back)).unwrap(), back);
        // Same rates again: the appended end marker is the only difference in the count.
        assert_eq!(to_slot_rates(&back, 0.001).unwrap(), rates.iter().enumerate().map(|(i, &r)| if i == 0 { r + 12e6 } else { r }).collect::<Vec<_>>());
    }

    #[test]
    fn mean_rate_is_kept_by_both_directions() {
        let rates: Vec<f64> = (0..6000).map(|k| if (k / 50) % 2 == 0 { 2_457_600.0 } else { 307_200.0 }).collect();
        let slot_s = 1.0 / 600.0;
        let ts = from_slot_rates(&rates, slot_s).unwrap();
        let mean_in = rates.iter().sum::<f64>() / rates.len() as f64;
        let mean_out = ts.len() as f64 * 12_000.0 / (6000.0 * slot_s);
        assert!((mean_out / mean_in - 1.0).abs() < 0.001, "{mean_out} vs {mean_in}");
        assert_eq!(*ts.last().unwrap(), 10_000);
        let back = to_slot_rates(&ts, slot_s).unwrap();
        assert_eq!(back.len(), 6000);
        let mean_back = back.iter().sum::<f64>() / back.len() as f64;
        assert!((mean_back / mean_in - 1.0).abs() < 0.001);
    }
}
