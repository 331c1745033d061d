//! Link capacity as an endless stream of service segments, whatever its source.
//!
//! A mahimahi trace gives *instants* (each a 1500-byte delivery opportunity at a millisecond);
//! a per-slot rate trace and a constant rate give *fluid* stretches (a rate held over an
//! interval). The rate server (`server.rs`) consumes either kind the same way, bytes first
//! come first served, so sub-millisecond release times fall out of the arithmetic instead of
//! from a millisecond tick. Outages are a filter over the stream (`outage.rs`).
use crate::element::{Nanos, NANOS_PER_SEC};
use crate::error::LinkError;
use crate::replay_heavy::HeavySeries;
use std::sync::{Arc, Mutex};

/// Bytes of one mahimahi delivery opportunity (the MTU those traces were recorded with).
pub const MAHIMAHI_OPPORTUNITY_BYTES: f64 = cellperf_channel::mahimahi::PACKET_BYTES;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Segment {
    /// `bytes` may be delivered at the instant `at`, to packets waiting by then.
    Instant { at: Nanos, bytes: f64 },
    /// Delivery at `bits_per_sec` during [start, end).
    Fluid {
        start: Nanos,
        end: Nanos,
        bits_per_sec: f64,
    },
}

impl Segment {
    /// When the segment's capacity is exhausted (no later delivery is possible from it).
    pub fn end(&self) -> Nanos {
        match *self {
            Segment::Instant { at, .. } => at,
            Segment::Fluid { end, .. } => end,
        }
    }
}

/// An endless, time-ordered stream of service segments.
pub trait Capacity: Send {
    fn next_segment(&mut self) -> Segment;
    /// Skips the segments that end before `t` (cheaper than pulling them one by one for
    /// long traces; the default pulls them). Returns the first segment ending at or after `t`.
    fn first_ending_at_or_after(&mut self, t: Nanos) -> Segment {
        loop {
            let s = self.next_segment();
            if s.end() >= t {
                return s;
            }
        }
    }
    /// Label of the channel state in force at the last segment handed out (for the radio log),
    /// e.g. a Markov state index; `None` when the source has no states.
    fn state_label(&self) -> Option<String> {
        None
    }
}

/// Delivery opportunities from a mahimahi trace: one integer millisecond per line, each line one
/// 1500-byte opportunity, the trace repeating with a period equal to its last time.
#[derive(Debug, Clone)]
pub struct MahimahiTrace {
    times_ms: Times,
    period_ms: u64,
    index: usize,
    loops: u64,
}

impl MahimahiTrace {
    pub fn from_file(path: &str) -> Result<Self, LinkError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LinkError::file(path, format!("cannot read the trace ({e})")))?;
        Self::parse(&text, path)
    }

    /// Parses trace text (with the channel crate's mahimahi reader, the one parser of the
    /// format); `name` is used in error messages.
    pub fn parse(text: &str, name: &str) -> Result<Self, LinkError> {
        let times = cellperf_channel::mahimahi::parse(text.as_bytes()).map_err(|e| match e {
            cellperf_channel::ChannelError::EmptyTrace => LinkError::file(
                name,
                "the trace is empty (expected one millisecond time per line)",
            ),
            other => LinkError::file(name, other.to_string()),
        })?;
        let period_ms = *times.last().unwrap_or(&1);
        Ok(MahimahiTrace {
            times_ms: Times::Whole(times.into()),
            period_ms,
            index: 0,
            loops: 0,
        })
    }

    /// A trace from its opportunities (ms, non-decreasing, the last > 0), e.g. a replay
    /// bundle's heavy series, owned or shared with the replay (`replay::replay_link`).
    pub fn from_millis(times_ms: impl Into<Arc<Vec<u64>>>) -> Self {
        let times_ms = times_ms.into();
        let period_ms = times_ms.last().copied().unwrap_or(1).max(1);
        MahimahiTrace {
            times_ms: Times::Whole(times_ms),
            period_ms,
            index: 0,
            loops: 0,
        }
    }

    /// A trace read as it is used: a replay bundle's heavy series (`replay_heavy`), its
    /// period the last line's time; the trace's copies share what is parsed.
    pub fn from_series(series: HeavySeries) -> Self {
        MahimahiTrace {
            period_ms: series.last_ms(),
            times_ms: Times::Lazy(Arc::new(Mutex::new(series))),
            index: 0,
            loops: 0,
        }
    }

    /// Mean capacity over one period of the trace (of a trace read as it is used, over the
    /// part read so far).
    pub fn mean_bits_per_sec(&self) -> f64 {
        let (count, span_ms) = self.times_ms.count_and_span(self.period_ms);
        count as f64 * MAHIMAHI_OPPORTUNITY_BYTES * 8.0 / (span_ms.max(1) as f64 / 1000.0)
    }

    pub fn period_ms(&self) -> u64 {
        self.period_ms
    }

    fn time_of(&self, loops: u64, index: usize) -> Nanos {
        let ms = self.times_ms.get(index).expect("an index handed out");
        (loops * self.period_ms + ms) * 1_000_000
    }
}

/// A mahimahi trace's times: parsed whole, or a bundle's heavy series parsed as it is read.
#[derive(Debug, Clone)]
enum Times {
    Whole(Arc<Vec<u64>>),
    Lazy(Arc<Mutex<HeavySeries>>),
}

impl Times {
    fn lazy(s: &Mutex<HeavySeries>) -> std::sync::MutexGuard<'_, HeavySeries> {
        s.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `i`th time; None past the end.
    fn get(&self, i: usize) -> Option<u64> {
        match self {
            Times::Whole(v) => v.get(i).copied(),
            Times::Lazy(s) => Self::lazy(s).get(i),
        }
    }

    /// The index of the first time at or after `within` ns, from index `from` on; None
    /// past the end.
    fn first_at_or_after(&self, from: usize, within: Nanos) -> Option<usize> {
        let find = |times: &[u64]| {
            let k = from + times[from..].partition_point(|&ms| ms * 1_000_000 < within);
            (k < times.len()).then_some(k)
        };
        match self {
            Times::Whole(v) => find(v),
            Times::Lazy(s) => find(Self::lazy(s).reach(within.div_ceil(1_000_000))),
        }
    }

    /// How many times, over how many ms (a lazy series': those parsed so far).
    fn count_and_span(&self, period_ms: u64) -> (usize, u64) {
        match self {
            Times::Whole(v) => (v.len(), period_ms),
            Times::Lazy(s) => {
                let s = Self::lazy(s);
                match s.complete() {
                    true => (s.parsed().len(), period_ms),
                    false => (s.parsed().len(), s.parsed().last().copied().unwrap_or(1)),
                }
            }
        }
    }
}

impl Capacity for MahimahiTrace {
    fn next_segment(&mut self) -> Segment {
        let at = self.time_of(self.loops, self.index);
        self.index += 1;
        if self.times_ms.get(self.index).is_none() {
            self.index = 0;
            self.loops += 1;
        }
        Segment::Instant {
            at,
            bytes: MAHIMAHI_OPPORTUNITY_BYTES,
        }
    }

    fn first_ending_at_or_after(&mut self, t: Nanos) -> Segment {
        let period_ns = self.period_ms * 1_000_000;
        // Loop k holds times in [k·P, (k+1)·P]: its last entry can equal the next loop's start.
        let target_loop = (t / period_ns).saturating_sub(1);
        if target_loop > self.loops {
            self.loops = target_loop;
            self.index = 0;
        }
        if self.time_of(self.loops, self.index) < t {
            let within = t - self.loops * period_ns;
            let from = self.index;
            // First opportunity at or after `within` in this loop (binary search, times sorted).
            match self.times_ms.first_at_or_after(from, within) {
                None => {
                    self.loops += 1;
                    self.index = 0;
                }
                Some(k) => self.index = k,
            }
        }
        let mut s = self.next_segment();
        while s.end() < t {
            s = self.next_segment();
        }
        s
    }
}

/// A rate held constant over each slot of fixed length (EV-DO: 1/600 s), repeating.
#[derive(Debug, Clone)]
pub struct SlotRates {
    slot_ns: f64,
    rates_bps: Arc<[f64]>,
    slot: u64,
}

impl SlotRates {
    pub fn new(slot_secs: f64, rates_bps: Vec<f64>, name: &str) -> Result<Self, LinkError> {
        if !(slot_secs.is_finite() && slot_secs > 0.0) {
            return Err(LinkError::spec(format!(
                "{name}: slot length must be a positive number of seconds, got {slot_secs}"
            )));
        }
        if rates_bps.is_empty() {
            return Err(LinkError::file(name, "the rate trace is empty"));
        }
        if let Some(i) = rates_bps.iter().position(|r| !r.is_finite() || *r < 0.0) {
            return Err(LinkError::file(
                name,
                format!(
                    "slot {}: rate {} is not a non-negative number",
                    i + 1,
                    rates_bps[i]
                ),
            ));
        }
        if rates_bps.iter().all(|&r| r == 0.0) {
            return Err(LinkError::file(
                name,
                "every slot has rate 0, so the link could never deliver",
            ));
        }
        Ok(SlotRates {
            slot_ns: slot_secs * NANOS_PER_SEC,
            rates_bps: rates_bps.into(),
            slot: 0,
        })
    }

    /// Reads one number per line: a rate in bit/s, or, with `state_rates_bps`, a state index
    /// into that table (e.g. EV-DO DRC indices).
    pub fn from_file(
        path: &str,
        slot_secs: f64,
        state_rates_bps: Option<&[f64]>,
    ) -> Result<Self, LinkError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LinkError::file(path, format!("cannot read the rate trace ({e})")))?;
        let mut rates = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let rate = match state_rates_bps {
                None => line
                    .parse::<f64>()
                    .ok()
                    .filter(|r| r.is_finite() && *r >= 0.0)
                    .ok_or_else(|| {
                        LinkError::file(
                            path,
                            format!("line {}: not a non-negative rate in bit/s", i + 1),
                        )
                    })?,
                Some(table) => {
                    let k: usize = line.parse().map_err(|_| {
                        LinkError::file(path, format!("line {}: not a state index", i + 1))
                    })?;
                    *table.get(k).ok_or_else(|| {
                        LinkError::file(
                            path,
                            format!(
                                "line {}: state {k} is outside the rate table of {} states",
                                i + 1,
                                table.len()
                            ),
                        )
                    })?
                }
            };
            rates.push(rate);
        }
        Self::new(slot_secs, rates, path)
    }

    pub fn constant(bits_per_sec: f64) -> Result<Self, LinkError> {
        if !(bits_per_sec.is_finite() && bits_per_sec > 0.0) {
            return Err(LinkError::spec(format!(
                "rate must be a positive number of bit/s, got {bits_per_sec}"
            )));
        }
        // One very long slot: the segment never ends in practice.
        Ok(SlotRates {
            slot_ns: u64::MAX as f64 / 4.0,
            rates_bps: vec![bits_per_sec].into(),
            slot: 0,
        })
    }

    pub fn mean_bits_per_sec(&self) -> f64 {
        self.rates_bps.iter().sum::<f64>() / self.rates_bps.len() as f64
    }

    fn bound(&self, slot: u64) -> Nanos {
        (slot as f64 * self.slot_ns).round() as Nanos
    }
}

impl Capacity for SlotRates {
    fn next_segment(&mut self) -> Segment {
        loop {
            let slot = self.slot;
            self.slot += 1;
            let rate = self.rates_bps[(slot % self.rates_bps.len() as u64) as usize];
            if rate > 0.0 {
                return Segment::Fluid {
                    start: self.bound(slot),
                    end: self.bound(slot + 1),
                    bits_per_sec: rate,
                };
            }
        }
    }

    fn first_ending_at_or_after(&mut self, t: Nanos) -> Segment {
        let slot_of_t = (t as f64 / self.slot_ns).floor() as u64;
        if slot_of_t > self.slot {
            self.slot = slot_of_t;
        }
        let mut s = self.next_segment();
        while s.end() < t {
            s = self.next_segment();
        }
        s
    }
}

/// Bytes deliverable by `bits_per_sec` in `nanos`.
pub fn fluid_bytes(bits_per_sec: f64, nanos: Nanos) -> f64 {
    bits_per_sec * nanos as f64 / (8.0 * NANOS_PER_SEC)
}

/// Nanoseconds `bits_per_sec` needs to deliver `bytes` (rounded up, so a packet is never early).
pub fn fluid_nanos(bits_per_sec: f64, bytes: f64) -> Nanos {
    (bytes * 8.0 * NANOS_PER_SEC / bits_per_sec).ceil() as Nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mahimahi_trace_loops_with_its_last_time_as_period() {
        let mut t = MahimahiTrace::parse("0\n0\n5\n10\n", "t").unwrap();
        let ats: Vec<Nanos> = (0..8).map(|_| t.next_segment().end()).collect();
        let ms = 1_000_000;
        assert_eq!(
            ats,
            vec![0, 0, 5 * ms, 10 * ms, 10 * ms, 10 * ms, 15 * ms, 20 * ms]
        );
    }

    #[test]
    fn mahimahi_skip_matches_pulling() {
        let text = "1\n3\n3\n7\n20\n";
        for t in [
            0u64,
            2_500_000,
            3_000_000,
            19_000_000,
            20_000_001,
            55_000_000,
            1_000_000_000,
        ] {
            let mut a = MahimahiTrace::parse(text, "t").unwrap();
            let mut b = a.clone();
            let sa = a.first_ending_at_or_after(t);
            let sb = loop {
                let s = b.next_segment();
                if s.end() >= t {
                    break s;
                }
            };
            assert_eq!(sa, sb, "t={t}");
            assert_eq!(a.next_segment(), b.next_segment());
        }
    }

    #[test]
    fn bad_mahimahi_traces_say_what_is_wrong() {
        let e = MahimahiTrace::parse("5\n3\n", "x.trace")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("x.trace: line 2:") && e.contains("decrease"),
            "{e}"
        );
        let e = MahimahiTrace::parse("", "x.trace").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = MahimahiTrace::parse("0\n0\n", "x.trace")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lasts 0 ms"), "{e}");
        let e = MahimahiTrace::parse("1\n-4\n", "x.trace")
            .unwrap_err()
            .to_string();
        // The line is named, never quoted: a trace path may name any file (issue 31).
        assert!(
            e.contains("line 2: not a whole number") && !e.contains("-4"),
            "{e}"
        );
    }

    #[test]
    fn public_trace_mean_rate_matches_its_readme() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/traces/mahimahi/Verizon-LTE-short.down"
        );
        if !std::path::Path::new(path).exists() {
            eprintln!("skipped: {path} absent");
            return;
        }
        let t = MahimahiTrace::from_file(path).unwrap();
        // The traces README gives 5.03 Mb/s.
        assert!(
            (t.mean_bits_per_sec() / 1e6 - 5.03).abs() < 0.01,
            "{}",
            t.mean_bits_per_sec()
        );
    }

    #[test]
    fn slot_rates_skip_zero_slots_and_loop() {
        let mut s = SlotRates::new(0.001, vec![8000.0, 0.0, 16000.0], "s").unwrap();
        let ms = 1_000_000;
        assert_eq!(
            s.next_segment(),
            Segment::Fluid {
                start: 0,
                end: ms,
                bits_per_sec: 8000.0
            }
        );
        assert_eq!(
            s.next_segment(),
            Segment::Fluid {
                start: 2 * ms,
                end: 3 * ms,
                bits_per_sec: 16000.0
            }
        );
        assert_eq!(
            s.next_segment(),
            Segment::Fluid {
                start: 3 * ms,
                end: 4 * ms,
                bits_per_sec: 8000.0
            }
        );
        assert!(SlotRates::new(0.001, vec![0.0, 0.0], "s").is_err());
        assert!(SlotRates::new(0.0, vec![1.0], "s").is_err());
    }

    #[test]
    fn evdo_slot_boundaries_do_not_drift() {
        let mut s = SlotRates::new(1.0 / 600.0, vec![38_400.0], "s").unwrap();
        let seg = s.first_ending_at_or_after(3_600_000_000_000);
        // Slot 2,160,000 starts exactly at 3600 s.
        assert_eq!(
            seg,
            Segment::Fluid {
                start: 3_600_000_000_000,
                end: 3_600_001_666_667,
                bits_per_sec: 38_400.0
            }
        );
    }
}

/// Per-slot rates drawn from a Markov rate model (`cellperf_channel::MarkovModel`), one state
/// per slot, for as long as the link runs.
pub struct MarkovRates {
    sampler: cellperf_channel::MarkovSampler,
    slot_ns: f64,
    slot: u64,
}

impl MarkovRates {
    pub fn new(model: &cellperf_channel::MarkovModel, seed: u64) -> Self {
        MarkovRates {
            sampler: model.sampler(seed),
            slot_ns: model.slot_s() * NANOS_PER_SEC,
            slot: 0,
        }
    }

    fn bound(&self, slot: u64) -> Nanos {
        (slot as f64 * self.slot_ns).round() as Nanos
    }
}

impl Capacity for MarkovRates {
    fn next_segment(&mut self) -> Segment {
        loop {
            let slot = self.slot;
            self.slot += 1;
            let rate = self.sampler.next_rate_bps();
            if rate > 0.0 {
                return Segment::Fluid {
                    start: self.bound(slot),
                    end: self.bound(slot + 1),
                    bits_per_sec: rate,
                };
            }
        }
    }
}

/// Capacity offered up to a time, read off a capacity stream (for the radio log's rate column
/// and for a shared cell's per-slot user rates).
pub struct CapacityMeter {
    capacity: Box<dyn Capacity>,
    segment: Segment,
    /// Offered bytes before `upto`.
    offered: f64,
    upto: Nanos,
}

impl CapacityMeter {
    pub fn new(mut capacity: Box<dyn Capacity>) -> Self {
        let segment = capacity.next_segment();
        CapacityMeter {
            capacity,
            segment,
            offered: 0.0,
            upto: 0,
        }
    }

    /// Bytes the link could have delivered in [previous call's `t`, `t`).
    pub fn offered_until(&mut self, t: Nanos) -> f64 {
        let before = self.offered;
        while self.upto < t {
            match self.segment {
                Segment::Instant { at, bytes } => {
                    if at >= t {
                        break;
                    }
                    if at >= self.upto {
                        self.offered += bytes;
                    }
                    self.segment = self.capacity.next_segment();
                }
                Segment::Fluid {
                    start,
                    end,
                    bits_per_sec,
                } => {
                    if start >= t {
                        break;
                    }
                    let from = start.max(self.upto);
                    let to = end.min(t);
                    if to > from {
                        self.offered += fluid_bytes(bits_per_sec, to - from);
                    }
                    if end <= t {
                        self.segment = self.capacity.next_segment();
                    } else {
                        break;
                    }
                }
            }
        }
        self.upto = self.upto.max(t);
        self.offered - before
    }
}

#[cfg(test)]
mod meter_tests {
    use super::*;

    #[test]
    fn meter_counts_instants_and_fluid_parts() {
        let ms = 1_000_000;
        let mut m = CapacityMeter::new(Box::new(
            MahimahiTrace::parse("1\n1\n5\n10\n", "t").unwrap(),
        ));
        assert_eq!(m.offered_until(ms), 0.0);
        assert_eq!(m.offered_until(2 * ms), 3000.0);
        // [2, 20) ms holds the opportunities at 5, 10, 11, 11 and 15 ms.
        assert_eq!(m.offered_until(20 * ms), 1500.0 * 5.0);
        let mut m = CapacityMeter::new(Box::new(SlotRates::constant(8e6).unwrap()));
        assert!((m.offered_until(ms / 2) - 500.0).abs() < 1e-6);
        assert!((m.offered_until(1000 * ms) - 999_500.0).abs() < 1e-3);
    }

    #[test]
    fn markov_rates_follow_the_model_stationary_mean() {
        // Two states, 1 Mb/s and 100 kb/s, switching with probability 0.01 / 0.02 per 1 ms slot.
        let model = cellperf_channel::MarkovModel::from_json(&two_state_model_json(
            1e6, 1e5, 0.01, 0.02, 0.001,
        ))
        .unwrap();
        let mut m = CapacityMeter::new(Box::new(MarkovRates::new(&model, 5)));
        let secs = 2000;
        let bytes = m.offered_until(secs * 1_000_000_000);
        let mean_bps = bytes * 8.0 / secs as f64;
        // Stationary: good 2/3, bad 1/3 → 700 kb/s.
        assert!((mean_bps - 700_000.0).abs() < 15_000.0, "{mean_bps}");
    }

    #[test]
    fn a_two_state_channel_starts_in_each_state_as_often_as_it_is_there() {
        // Bad one slot in 40 (good → bad 0.001, back 0.039 a slot): of 2,000 seeds about 50
        // start in Bad. Rows counted alike started half of them there (1,000 ± 67).
        let model = cellperf_channel::MarkovModel::from_json(&two_state_model_json(
            1e6, 1e5, 0.001, 0.039, 0.001,
        ))
        .unwrap();
        let bad = (0..2000u64)
            .filter(|&seed| model.generate(1, seed)[0] == 1)
            .count();
        assert!((25..=80).contains(&bad), "{bad} of 2000 seeds start in Bad");
        // A symmetric channel still starts in each state half the time.
        let model = cellperf_channel::MarkovModel::from_json(&two_state_model_json(
            1e6, 1e5, 0.01, 0.01, 0.001,
        ))
        .unwrap();
        let bad = (0..2000u64)
            .filter(|&seed| model.generate(1, seed)[0] == 1)
            .count();
        assert!(
            (900..=1100).contains(&bad),
            "{bad} of 2000 seeds start in Bad"
        );
    }
}

/// A two-state (Gilbert–Elliott) rate channel as a Markov model file: Good at `good_bps`,
/// Bad at `bad_bps`, switching with the given per-slot probabilities. Each row's `count` (what a
/// generated trace starts from) is its state's stationary share, so the channel starts in Bad
/// as often as it is in Bad: a channel blocked one slot in 40 starts blocked one seed in 40,
/// not one in two.
pub fn two_state_model_json(
    good_bps: f64,
    bad_bps: f64,
    p_good_to_bad: f64,
    p_bad_to_good: f64,
    slot_s: f64,
) -> String {
    let total = p_good_to_bad + p_bad_to_good;
    let (fg, fb) = if total > 0.0 {
        (p_bad_to_good / total, p_good_to_bad / total)
    } else {
        (1.0, 0.0)
    };
    let share = |fraction: f64| (fraction * 1e6).round() as u64;
    serde_json::json!({
        "format": "cellperf-markov-rate-model",
        "version": 1,
        "order": 1,
        "slot_s": slot_s,
        "states": [{"rate_bps": good_bps, "fraction": fg}, {"rate_bps": bad_bps, "fraction": fb}],
        "transitions": [
            {"context": [0], "count": share(fg), "next": [0, 1], "p": [1.0 - p_good_to_bad, p_good_to_bad]},
            {"context": [1], "count": share(fb), "next": [1, 0], "p": [1.0 - p_bad_to_good, p_bad_to_good]},
        ],
        "source": {"kind": "gilbert-elliott rate channel (seed 001 §2)"},
    })
    .to_string()
}
