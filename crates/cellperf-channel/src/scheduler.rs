//! Slotted downlink schedulers (docs/methods.md §8, 002 §6, 001 §2.3): one user per slot,
//! Proportional Fair or Round Robin.
//!
//! Two ways to use them:
//! - **step by step** ([`SlotScheduler`]): the emulator calls [`SlotScheduler::schedule`]
//!   (or [`choose`](SlotScheduler::choose) then [`advance`](SlotScheduler::advance)) once per
//!   slot with each user's current rate and whether the user has data queued;
//!   users with empty queues are skipped.
//! - **trace-driven, full buffer** ([`simulate_full_buffer`]): every user always has data,
//!   rates come from per-slot traces; this is 002's PF-vs-RR comparison.
//!
//! PF keeps A_i, an exponential average of the rate user i was served at:
//! A_i[n] = (1−α)·A_i[n−1] + α·I_i[n−1]·R_i[n−1], and serves argmax_i R_i[n]/A_i[n].
//! A user with A_i = 0 (new, or just handed off) has an infinite ratio and is served first;
//! ties go to the higher rate, then the lower user index. Users whose rate is 0 are never
//! chosen by PF (the slot would carry nothing). RR is channel-blind: it serves the next
//! backlogged user in cyclic order whatever its rate.

/// PF's averaging weight recommended in practice (002 §6).
pub const DEFAULT_ALPHA: f64 = 1.0 / 1000.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Discipline {
    ProportionalFair { alpha: f64 },
    RoundRobin,
}

#[derive(Debug, Clone)]
pub struct SlotScheduler {
    discipline: Discipline,
    /// A_i in bit/s (PF only; kept at 0 under RR).
    average_bps: Vec<f64>,
    /// RR: the user to consider first in the next slot.
    next_in_cycle: usize,
}

impl SlotScheduler {
    /// A scheduler for `users` users. PF needs 0 < α ≤ 1.
    pub fn new(discipline: Discipline, users: usize) -> Result<Self, crate::ChannelError> {
        if let Discipline::ProportionalFair { alpha } = discipline {
            if !(alpha > 0.0 && alpha <= 1.0) {
                return Err(crate::ChannelError::InvalidParameter(format!("PF alpha {alpha} is not in (0, 1]")));
            }
        }
        Ok(SlotScheduler { discipline, average_bps: vec![0.0; users], next_in_cycle: 0 })
    }

    pub fn discipline(&self) -> Discipline {
        self.discipline
    }

    pub fn users(&self) -> usize {
        self.average_bps.len()
    }

    /// Adds a user (A = 0) and returns its index.
    pub fn add_user(&mut self) -> usize {
        self.average_bps.push(0.0);
        self.average_bps.len() - 1
    }

    /// Forgets a user's history, as a new sector does after a handoff (A_i = 0).
    pub fn reset_user(&mut self, user: usize) {
        self.average_bps[user] = 0.0;
    }

    /// PF's A_i of every user (bit/s).
    pub fn average_bps(&self) -> &[f64] {
        &self.average_bps
    }

    /// The user to serve this slot, without changing any state. `rates_bps[i]` is user i's
    /// rate in this slot, `backlogged[i]` whether it has data; `None` when nobody can be served.
    pub fn choose(&self, rates_bps: &[f64], backlogged: &[bool]) -> Option<usize> {
        let n = self.average_bps.len();
        debug_assert!(rates_bps.len() == n && backlogged.len() == n);
        match self.discipline {
            Discipline::RoundRobin => (0..n).map(|k| (self.next_in_cycle + k) % n).find(|&i| backlogged[i]),
            Discipline::ProportionalFair { .. } => {
                let mut best: Option<usize> = None;
                for i in 0..n {
                    let r = rates_bps[i];
                    if !backlogged[i] || r <= 0.0 {
                        continue;
                    }
                    best = match best {
                        None => Some(i),
                        Some(b) => {
                            // r/A_i > r_b/A_b without dividing (A may be 0).
                            let lhs = r * self.average_bps[b];
                            let rhs = rates_bps[b] * self.average_bps[i];
                            if lhs > rhs || (lhs == rhs && r > rates_bps[b]) { Some(i) } else { Some(b) }
                        }
                    };
                }
                best
            }
        }
    }

    /// Ends the slot: `served` is the user served and the rate it was served at (for PF the
    /// slot's rate under full buffer, or the bits actually carried / slot length when the
    /// queue held less), or `None` for an idle slot.
    pub fn advance(&mut self, served: Option<(usize, f64)>) {
        match self.discipline {
            Discipline::RoundRobin => {
                if let Some((user, _)) = served {
                    self.next_in_cycle = (user + 1) % self.average_bps.len();
                }
            }
            Discipline::ProportionalFair { alpha } => {
                let keep = 1.0 - alpha;
                for a in self.average_bps.iter_mut() {
                    *a *= keep;
                }
                if let Some((user, rate)) = served {
                    self.average_bps[user] += alpha * rate;
                }
            }
        }
    }

    /// [`choose`](Self::choose) then [`advance`](Self::advance) with the chosen user served
    /// at its full rate.
    pub fn schedule(&mut self, rates_bps: &[f64], backlogged: &[bool]) -> Option<usize> {
        let chosen = self.choose(rates_bps, backlogged);
        self.advance(chosen.map(|u| (u, rates_bps[u])));
        chosen
    }
}

/// One user of a trace-driven run: its rate trace (bit/s per slot, used cyclically from
/// `start_slot`) and the simulation slots at which its A_i is reset (handoffs; sorted).
#[derive(Debug, Clone, Copy)]
pub struct UserTrace<'a> {
    pub rates_bps: &'a [f64],
    pub start_slot: usize,
    pub resets: &'a [u64],
}

/// What each user got in a full-buffer run.
#[derive(Debug, Clone, PartialEq)]
pub struct FullBufferOutcome {
    /// Σ over each user's served slots of the slot's rate (bit/s · slots). Kept as a sum of
    /// rates rather than bits so that integer rates add up exactly: a constant trace gives
    /// PF and RR the very same total.
    pub served_rate_sum: Vec<f64>,
    /// Slots given to each user.
    pub served_slots: Vec<u64>,
    pub slots: u64,
    pub slot_s: f64,
}

impl FullBufferOutcome {
    /// Each user's throughput over the whole run (bit/s).
    pub fn throughput_bps(&self) -> Vec<f64> {
        self.served_rate_sum.iter().map(|r| r / self.slots as f64).collect()
    }

    /// System throughput (bit/s).
    pub fn system_throughput_bps(&self) -> f64 {
        self.served_rate_sum.iter().sum::<f64>() / self.slots as f64
    }

    /// Bits delivered to each user.
    pub fn served_bits(&self) -> Vec<f64> {
        self.served_rate_sum.iter().map(|r| r * self.slot_s).collect()
    }
}

/// Runs `slots` slots of a scheduler over full-buffer users (every user always has data).
pub fn simulate_full_buffer(
    users: &[UserTrace<'_>],
    slots: u64,
    slot_s: f64,
    discipline: Discipline,
) -> Result<FullBufferOutcome, crate::ChannelError> {
    use crate::ChannelError;
    if users.is_empty() {
        return Err(ChannelError::InvalidParameter("a scheduling run needs at least one user".into()));
    }
    if let Some(u) = users.iter().position(|u| u.rates_bps.is_empty()) {
        return Err(ChannelError::InvalidParameter(format!("user {u} has an empty rate trace")));
    }
    if !(slot_s > 0.0 && slot_s.is_finite()) {
        return Err(ChannelError::InvalidParameter(format!("slot length {slot_s} s is not positive")));
    }
    let n = users.len();
    let mut scheduler = SlotScheduler::new(discipline, n)?;
    let backlogged = vec![true; n];
    let mut position: Vec<usize> = users.iter().map(|u| u.start_slot % u.rates_bps.len()).collect();
    let mut next_reset: Vec<usize> = vec![0; n];
    let mut rates = vec![0.0f64; n];
    let mut served_rate_sum = vec![0.0f64; n];
    let mut served_slots = vec![0u64; n];
    for slot in 0..slots {
        for i in 0..n {
            let u = &users[i];
            rates[i] = u.rates_bps[position[i]];
            position[i] += 1;
            if position[i] == u.rates_bps.len() {
                position[i] = 0;
            }
            while next_reset[i] < u.resets.len() && u.resets[next_reset[i]] <= slot {
                if u.resets[next_reset[i]] == slot {
                    scheduler.reset_user(i);
                }
                next_reset[i] += 1;
            }
        }
        if let Some(u) = scheduler.schedule(&rates, &backlogged) {
            served_rate_sum[u] += rates[u];
            served_slots[u] += 1;
        }
    }
    Ok(FullBufferOutcome {
        served_rate_sum,
        served_slots,
        slots,
        slot_s,
    })
}

/// Jain's fairness index (Σx)²/(n·Σx²): 1 when all equal, 1/n when one takes everything.
pub fn jain_fairness(values: &[f64]) -> Option<f64> {
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (values.len() as f64 * squares))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PF: Discipline = Discipline::ProportionalFair { alpha: DEFAULT_ALPHA };

    #[test]
    fn round_robin_cycles_and_skips_empty_queues() {
        let mut s = SlotScheduler::new(Discipline::RoundRobin, 3).unwrap();
        let r = [1.0, 1.0, 1.0];
        let got: Vec<_> = (0..4).map(|_| s.schedule(&r, &[true, true, true])).collect();
        assert_eq!(got, vec![Some(0), Some(1), Some(2), Some(0)]);
        assert_eq!(s.schedule(&r, &[true, false, true]), Some(2));
        assert_eq!(s.schedule(&r, &[false, false, false]), None);
        assert_eq!(s.schedule(&r, &[true, true, false]), Some(0));
    }

    #[test]
    fn pf_follows_equation_5_and_6() {
        let alpha = 0.5;
        let mut s = SlotScheduler::new(Discipline::ProportionalFair { alpha }, 2).unwrap();
        // Slot 0: both A = 0, tie broken by the higher rate.
        assert_eq!(s.schedule(&[1.0, 2.0], &[true, true]), Some(1));
        assert_eq!(s.average_bps(), &[0.0, 1.0]);
        // Slot 1: user 0 has A = 0 → infinite ratio.
        assert_eq!(s.schedule(&[1.0, 2.0], &[true, true]), Some(0));
        assert_eq!(s.average_bps(), &[0.5, 0.5]);
        // Slot 2: ratios 3/0.5 vs 2/0.5.
        assert_eq!(s.schedule(&[3.0, 2.0], &[true, true]), Some(0));
        assert_eq!(s.average_bps(), &[1.75, 0.25]);
        // Empty queue or zero rate: skipped.
        assert_eq!(s.schedule(&[3.0, 2.0], &[false, true]), Some(1));
        assert_eq!(s.schedule(&[3.0, 0.0], &[false, true]), None);
        s.reset_user(0);
        assert_eq!(s.average_bps()[0], 0.0);
        assert!(SlotScheduler::new(Discipline::ProportionalFair { alpha: 0.0 }, 1).is_err());
    }

    #[test]
    fn constant_rates_pf_equals_rr_and_identical_users_are_fair() {
        let trace = vec![600_000.0; 10_000];
        let users: Vec<UserTrace> = (0..4).map(|i| UserTrace { rates_bps: &trace, start_slot: i * 77, resets: &[] }).collect();
        let pf = simulate_full_buffer(&users, 100_000, 0.001667, PF).unwrap();
        let rr = simulate_full_buffer(&users, 100_000, 0.001667, Discipline::RoundRobin).unwrap();
        assert_eq!(pf.system_throughput_bps(), rr.system_throughput_bps());
        assert!((rr.system_throughput_bps() - 600_000.0).abs() < 1e-6);
        assert_eq!(rr.served_slots, vec![25_000; 4]);
        assert!((jain_fairness(&pf.throughput_bps()).unwrap() - 1.0).abs() < 1e-6);
        assert_eq!(jain_fairness(&rr.throughput_bps()), Some(1.0));
        assert_eq!(jain_fairness(&[1.0, 0.0]), Some(0.5));
    }

    #[test]
    fn pf_gains_on_independent_fading_and_resets_cost_gain() {
        // Two-level i.i.d.-per-block fading: users peak at different times.
        let mut rng = crate::rng::SeededRng::new(9);
        let traces: Vec<Vec<f64>> = (0..4)
            .map(|_| (0..50_000).map(|i| if (i / 20 + rng.below(2) as usize) % 2 == 0 { 2.4e6 } else { 0.3e6 }).collect())
            .collect();
        let users: Vec<UserTrace> = traces.iter().map(|t| UserTrace { rates_bps: t, start_slot: 0, resets: &[] }).collect();
        let slots = 200_000;
        let pf = simulate_full_buffer(&users, slots, 0.001667, PF).unwrap().system_throughput_bps();
        let rr = simulate_full_buffer(&users, slots, 0.001667, Discipline::RoundRobin).unwrap().system_throughput_bps();
        assert!(pf / rr > 1.2, "gain {}", pf / rr);
        let resets: Vec<u64> = (0..slots).step_by(500).collect();
        let reset_users: Vec<UserTrace> = traces.iter().enumerate()
            .map(|(i, t)| UserTrace { rates_bps: t, start_slot: 0, resets: if i == 0 { &resets } else { &[] } })
            .collect();
        let pf_reset = simulate_full_buffer(&reset_users, slots, 0.001667, PF).unwrap().system_throughput_bps();
        assert!(pf_reset < pf, "{pf_reset} vs {pf}");
    }
}
