//! Propagation and processing delay: fixed, plus optional jitter that never reorders packets.
use crate::element::{Element, Nanos, Packet};
use crate::random::{standard_normal, SeededRng};
use std::collections::VecDeque;

pub struct Delay {
    base: Nanos,
    /// Standard deviation of the normal jitter added to `base` (truncated at zero delay).
    jitter: Nanos,
    rng: SeededRng,
    last_due: Nanos,
    held: VecDeque<Packet>,
}

impl Delay {
    pub fn new(base: Nanos, jitter: Nanos, seed: u64) -> Self {
        Delay { base, jitter, rng: SeededRng::new(seed), last_due: 0, held: VecDeque::new() }
    }
}

impl Element for Delay {
    fn accept(&mut self, mut packet: Packet) {
        let mut delay = self.base as f64;
        if self.jitter > 0 {
            delay = (delay + self.jitter as f64 * standard_normal(&mut self.rng)).max(0.0);
        }
        // A radio link delivers in order (RLC), so jitter may bunch packets but not reorder them.
        let due = (packet.time + delay.round() as Nanos).max(self.last_due);
        self.last_due = due;
        packet.time = due;
        self.held.push_back(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        while self.held.front().is_some_and(|p| p.time <= now) {
            out.push(self.held.pop_front().expect("checked"));
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        self.held.front().map(|p| p.time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::run;

    #[test]
    fn fixed_delay_is_exact() {
        let mut d = Delay::new(20_000_000, 0, 1);
        let out = run(&mut d, &[(0, 100), (1_234_567, 100), (1_234_567, 60)], 1_000_000, 100_000_000);
        assert_eq!(out, vec![(20_000_000, 100), (21_234_567, 100), (21_234_567, 60)]);
    }

    #[test]
    fn jitter_keeps_order_and_has_the_requested_spread() {
        let mut d = Delay::new(50_000_000, 5_000_000, 7);
        // Packets 100 ms apart never catch up with each other: the spread is the jitter.
        let arrivals: Vec<(Nanos, usize)> = (0..2000).map(|i| (i * 100_000_000, 100)).collect();
        let out = run(&mut d, &arrivals, 10_000_000, 200_100_000_000);
        assert_eq!(out.len(), 2000);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        let delays: Vec<f64> = out.iter().zip(&arrivals).map(|(o, a)| (o.0 - a.0) as f64 / 1e6).collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        let sd = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / delays.len() as f64).sqrt();
        assert!((mean - 50.0).abs() < 0.5 && (sd - 5.0).abs() < 0.4, "{mean} {sd}");

        // Back-to-back packets are held back rather than overtaken.
        let mut d = Delay::new(50_000_000, 20_000_000, 7);
        let arrivals: Vec<(Nanos, usize)> = (0..1000).map(|i| (i * 100_000, 100)).collect();
        let out = run(&mut d, &arrivals, 1_000_000, 1_000_000_000);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}
