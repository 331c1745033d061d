//! Packet loss on the radio link: independent (Bernoulli) or bursty (Gilbert–Elliott).
use crate::element::{Drops, DueQueue, Element, Nanos, Packet};
use crate::random::SeededRng;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossSpec {
    /// Each packet lost with probability `p`.
    Iid { p: f64 },
    /// Two-state Markov chain advanced once per packet: Good→Bad with probability `p`,
    /// Bad→Good with `r`; a packet is lost with `loss_good` / `loss_bad` in each state.
    GilbertElliott {
        p: f64,
        r: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

impl LossSpec {
    /// Long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::Iid { p } => p,
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let bad = if p + r > 0.0 { p / (p + r) } else { 0.0 };
                (1.0 - bad) * loss_good + bad * loss_bad
            }
        }
    }
}

pub struct Loss {
    spec: LossSpec,
    rng: SeededRng,
    bad: bool,
    passed: DueQueue,
    drops: Drops,
}

impl Loss {
    pub fn new(spec: LossSpec, seed: u64) -> Self {
        Loss {
            spec,
            rng: SeededRng::new(seed),
            bad: false,
            passed: DueQueue::default(),
            drops: Drops::default(),
        }
    }

    fn lose(&mut self) -> bool {
        match self.spec {
            LossSpec::Iid { p } => self.rng.next_f64() < p,
            LossSpec::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad { r } else { p };
                if self.rng.next_f64() < flip {
                    self.bad = !self.bad;
                }
                self.rng.next_f64() < if self.bad { loss_bad } else { loss_good }
            }
        }
    }
}

impl Element for Loss {
    fn accept(&mut self, packet: Packet) {
        if self.lose() {
            self.drops.add(packet.len());
        } else {
            self.passed.push(packet);
        }
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.passed.release_into(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.passed.next_due()
    }

    fn drops(&self) -> Drops {
        self.drops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::packet;

    fn losses(spec: LossSpec, n: usize) -> Vec<bool> {
        let mut l = Loss::new(spec, 42);
        let mut out = Vec::new();
        (0..n)
            .map(|i| {
                let before = l.drops().packets;
                l.accept(packet(100, i as Nanos));
                l.release(i as Nanos, &mut out);
                l.drops().packets > before
            })
            .collect()
    }

    #[test]
    fn iid_loss_rate_within_binomial_bounds() {
        let n = 100_000;
        let lost = losses(LossSpec::Iid { p: 0.01 }, n)
            .iter()
            .filter(|&&x| x)
            .count() as f64;
        // 4 standard deviations of Binomial(n, 0.01).
        let sd = (n as f64 * 0.01 * 0.99).sqrt();
        assert!((lost - 1000.0).abs() < 4.0 * sd, "{lost}");
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        let spec = LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let n = 400_000;
        let v = losses(spec, n);
        let rate = v.iter().filter(|&&x| x).count() as f64 / n as f64;
        assert!(
            (rate - spec.mean_loss()).abs() < 0.004,
            "{rate} vs {}",
            spec.mean_loss()
        );
        // Mean burst length is 1/r = 4 packets (independent losses would give ~1.04).
        let bursts = v.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
        let burst = v.iter().filter(|&&x| x).count() as f64 / bursts;
        assert!((burst - 4.0).abs() < 0.3, "{burst}");
    }
}
