//! Connectivity gaps: when they happen (scheduled, random, or caused by handoffs) and the
//! capacity filter that removes service inside them.
//!
//! Seed 004 (§IV.B.2) saw UMTS gaps of several seconds at cell changes, with packets either lost
//! or delivered late in a burst; seed 000 saw delay spikes and burst losses near handoffs. An
//! outage here is a window with no service at all. In *buffer* mode packets wait in the link's
//! queue (which may overflow) and leave in a burst afterwards; in *drop* mode packets arriving
//! during the window are lost as well.
use crate::capacity::{Capacity, Segment};
use crate::element::Nanos;
use crate::random::{exponential, SeededRng};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutageMode {
    Buffer,
    Drop,
}

/// A change of serving cell, as the radio log records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Handoff {
    pub at: Nanos,
    pub bs_id: String,
    pub sector_id: String,
    /// Gap in service the handoff causes (0 for a seamless one).
    pub outage: Nanos,
}

/// Handoffs in time order: a fixed list (from a file) or a seeded random process (profiles).
#[derive(Debug, Clone)]
pub enum HandoffSchedule {
    Listed {
        handoffs: Arc<[Handoff]>,
        next: usize,
    },
    Random(RandomHandoffs),
}

/// Handoffs at exponentially distributed intervals; each is inter-BS with probability
/// `inter_bs_fraction`, otherwise to another sector of the same BS (three sectors per BS, 000 §3).
#[derive(Debug, Clone)]
pub struct RandomHandoffs {
    pub rng: SeededRng,
    pub mean_interval: Nanos,
    pub inter_bs_fraction: f64,
    pub inter_bs_outage: Nanos,
    pub inter_sector_outage: Nanos,
    pub bs: u64,
    pub sector: u64,
    pub last: Nanos,
}

pub const SECTORS_PER_BS: u64 = 3;

impl HandoffSchedule {
    pub fn listed(mut handoffs: Vec<Handoff>) -> Self {
        handoffs.sort_by_key(|h| h.at);
        HandoffSchedule::Listed {
            handoffs: handoffs.into(),
            next: 0,
        }
    }

    pub fn next_handoff(&mut self) -> Option<Handoff> {
        match self {
            HandoffSchedule::Listed { handoffs, next } => {
                let h = handoffs.get(*next).cloned();
                *next += 1;
                h
            }
            HandoffSchedule::Random(r) => {
                r.last += exponential(&mut r.rng, r.mean_interval as f64) as Nanos;
                let outage = if r.rng.next_f64() < r.inter_bs_fraction {
                    r.bs += 1;
                    r.sector = 1 + r.rng.below(SECTORS_PER_BS);
                    r.inter_bs_outage
                } else {
                    r.sector = 1 + (r.sector + r.rng.below(SECTORS_PER_BS - 1)) % SECTORS_PER_BS;
                    r.inter_sector_outage
                };
                Some(Handoff {
                    at: r.last,
                    bs_id: r.bs.to_string(),
                    sector_id: r.sector.to_string(),
                    outage,
                })
            }
        }
    }
}

/// Outages at exponentially distributed intervals with exponentially distributed durations.
#[derive(Debug, Clone)]
pub struct RandomOutages {
    pub rng: SeededRng,
    pub mean_interval: Nanos,
    pub mean_duration: Nanos,
    pub last_end: Nanos,
}

impl RandomOutages {
    fn next_window(&mut self) -> (Nanos, Nanos) {
        let start = self.last_end + exponential(&mut self.rng, self.mean_interval as f64) as Nanos;
        let end = start + (exponential(&mut self.rng, self.mean_duration as f64) as Nanos).max(1);
        self.last_end = end;
        (start, end)
    }
}

/// Every outage window of a link in time order, overlapping ones merged. Cloning gives an
/// independent reader of the same windows (the server, its capacity filter and the radio log
/// each read their own).
#[derive(Debug, Clone, Default)]
pub struct OutagePlan {
    scheduled: Arc<[(Nanos, Nanos)]>,
    next_scheduled: usize,
    random: Option<RandomOutages>,
    handoffs: Option<HandoffSchedule>,
    heads: [Option<(Nanos, Nanos)>; 3],
    primed: bool,
    /// The merged window most recently returned by `window_ending_after`.
    current: Option<(Nanos, Nanos)>,
    exhausted: bool,
}

impl OutagePlan {
    /// `scheduled` are (start, duration) pairs.
    pub fn new(
        scheduled: &[(Nanos, Nanos)],
        random: Option<RandomOutages>,
        handoffs: Option<HandoffSchedule>,
    ) -> Self {
        let mut windows: Vec<(Nanos, Nanos)> = scheduled
            .iter()
            .filter(|w| w.1 > 0)
            .map(|&(s, d)| (s, s + d))
            .collect();
        windows.sort();
        OutagePlan {
            scheduled: windows.into(),
            random,
            handoffs,
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.scheduled.is_empty() && self.random.is_none() && self.handoffs.is_none()
    }

    fn pull(&mut self, source: usize) -> Option<(Nanos, Nanos)> {
        match source {
            0 => {
                let w = self.scheduled.get(self.next_scheduled).copied();
                self.next_scheduled += 1;
                w
            }
            1 => self.random.as_mut().map(|r| r.next_window()),
            _ => loop {
                let h = self.handoffs.as_mut()?.next_handoff()?;
                if h.outage > 0 {
                    break Some((h.at, h.at + h.outage));
                }
            },
        }
    }

    fn next_raw(&mut self) -> Option<(Nanos, Nanos)> {
        if !self.primed {
            for i in 0..3 {
                self.heads[i] = self.pull(i);
            }
            self.primed = true;
        }
        let (i, w) = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|w| (i, w)))
            .min_by_key(|(_, w)| w.0)?;
        self.heads[i] = self.pull(i);
        Some(w)
    }

    /// The first window whose end is after `t` (queries must not go back in time).
    pub fn window_ending_after(&mut self, t: Nanos) -> Option<(Nanos, Nanos)> {
        loop {
            if let Some(w) = self.current {
                if w.1 > t {
                    return Some(w);
                }
            }
            if self.exhausted {
                return None;
            }
            // Build the next merged window: absorb raw windows that start before its end.
            let Some(mut w) = self.next_raw() else {
                self.exhausted = true;
                self.current = None;
                return None;
            };
            while let Some(next) = self.peek_raw_start() {
                if next > w.1 {
                    break;
                }
                let n = self.next_raw().expect("peeked");
                w.1 = w.1.max(n.1);
            }
            self.current = Some(w);
        }
    }

    fn peek_raw_start(&mut self) -> Option<Nanos> {
        self.heads.iter().filter_map(|h| h.map(|w| w.0)).min()
    }

    pub fn in_outage(&mut self, t: Nanos) -> bool {
        matches!(self.window_ending_after(t), Some((s, _)) if s <= t)
    }
}

/// Capacity with every outage window cut out.
pub struct OutageClipped {
    inner: Box<dyn Capacity>,
    plan: OutagePlan,
    pending: Option<Segment>,
}

impl OutageClipped {
    pub fn new(inner: Box<dyn Capacity>, plan: OutagePlan) -> Self {
        OutageClipped {
            inner,
            plan,
            pending: None,
        }
    }
}

impl Capacity for OutageClipped {
    fn next_segment(&mut self) -> Segment {
        loop {
            let seg = self
                .pending
                .take()
                .unwrap_or_else(|| self.inner.next_segment());
            match seg {
                Segment::Instant { at, .. } => match self.plan.window_ending_after(at) {
                    Some((s, e)) if s <= at => {
                        self.pending = Some(self.inner.first_ending_at_or_after(e));
                    }
                    _ => return seg,
                },
                Segment::Fluid {
                    start,
                    end,
                    bits_per_sec,
                } => match self.plan.window_ending_after(start) {
                    Some((s, e)) if s <= start => {
                        if e < end {
                            self.pending = Some(Segment::Fluid {
                                start: e,
                                end,
                                bits_per_sec,
                            });
                        } else {
                            self.pending = Some(self.inner.first_ending_at_or_after(e));
                        }
                    }
                    Some((s, _)) if s < end => {
                        self.pending = Some(Segment::Fluid {
                            start: s,
                            end,
                            bits_per_sec,
                        });
                        return Segment::Fluid {
                            start,
                            end: s,
                            bits_per_sec,
                        };
                    }
                    _ => return seg,
                },
            }
        }
    }

    fn state_label(&self) -> Option<String> {
        self.inner.state_label()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{MahimahiTrace, SlotRates};

    const MS: Nanos = 1_000_000;

    #[test]
    fn windows_from_all_sources_merge_in_order() {
        let handoffs = HandoffSchedule::listed(vec![
            Handoff {
                at: 50 * MS,
                bs_id: "1".into(),
                sector_id: "2".into(),
                outage: 30 * MS,
            },
            Handoff {
                at: 500 * MS,
                bs_id: "2".into(),
                sector_id: "1".into(),
                outage: 0,
            },
        ]);
        let mut plan = OutagePlan::new(
            &[(10 * MS, 5 * MS), (70 * MS, 20 * MS), (200 * MS, MS)],
            None,
            Some(handoffs),
        );
        assert_eq!(plan.window_ending_after(0), Some((10 * MS, 15 * MS)));
        assert_eq!(plan.window_ending_after(15 * MS), Some((50 * MS, 90 * MS)));
        assert!(plan.in_outage(60 * MS));
        assert!(!plan.in_outage(90 * MS));
        assert_eq!(
            plan.window_ending_after(95 * MS),
            Some((200 * MS, 201 * MS))
        );
        assert_eq!(plan.window_ending_after(201 * MS), None);
    }

    #[test]
    fn clipping_removes_instants_and_cuts_fluid_segments() {
        let trace = MahimahiTrace::parse("1\n2\n3\n4\n5\n6\n", "t").unwrap();
        let mut c = OutageClipped::new(
            Box::new(trace),
            OutagePlan::new(&[(2 * MS, 2 * MS)], None, None),
        );
        let ats: Vec<Nanos> = (0..4).map(|_| c.next_segment().end()).collect();
        assert_eq!(ats, vec![MS, 4 * MS, 5 * MS, 6 * MS]);

        let rate = SlotRates::constant(8e6).unwrap();
        let mut c = OutageClipped::new(
            Box::new(rate),
            OutagePlan::new(&[(2 * MS, 3 * MS), (9 * MS, MS)], None, None),
        );
        let Segment::Fluid { start, end, .. } = c.next_segment() else {
            panic!()
        };
        assert_eq!((start, end), (0, 2 * MS));
        let Segment::Fluid { start, end, .. } = c.next_segment() else {
            panic!()
        };
        assert_eq!((start, end), (5 * MS, 9 * MS));
        let Segment::Fluid { start, .. } = c.next_segment() else {
            panic!()
        };
        assert_eq!(start, 10 * MS);
    }

    #[test]
    fn a_long_outage_over_a_long_trace_is_skipped_quickly() {
        let text: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
        let trace = MahimahiTrace::parse(&text, "t").unwrap();
        let hour = 3_600_000 * MS;
        let mut c = OutageClipped::new(Box::new(trace), OutagePlan::new(&[(0, hour)], None, None));
        assert_eq!(c.next_segment().end(), hour);
    }

    #[test]
    fn random_handoffs_are_reproducible_and_change_cells() {
        let make = || {
            HandoffSchedule::Random(RandomHandoffs {
                rng: SeededRng::new(3),
                mean_interval: 25_000 * MS,
                inter_bs_fraction: 0.3,
                inter_bs_outage: 200 * MS,
                inter_sector_outage: 0,
                bs: 1,
                sector: 1,
                last: 0,
            })
        };
        let (mut a, mut b) = (make(), make());
        let hs: Vec<Handoff> = (0..2000).map(|_| a.next_handoff().unwrap()).collect();
        assert_eq!(
            hs[1999],
            (0..2000).map(|_| b.next_handoff().unwrap()).last().unwrap()
        );
        let mean_s = hs[1999].at as f64 / 2000.0 / 1e9;
        assert!((mean_s - 25.0).abs() < 2.0, "{mean_s}");
        let inter_bs = hs.windows(2).filter(|w| w[0].bs_id != w[1].bs_id).count() as f64 / 1999.0;
        assert!((inter_bs - 0.3).abs() < 0.05, "{inter_bs}");
        assert!(hs
            .windows(2)
            .all(|w| (w[0].bs_id.clone(), w[0].sector_id.clone())
                != (w[1].bs_id.clone(), w[1].sector_id.clone())));
    }
}
