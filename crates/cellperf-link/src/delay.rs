//! Propagation and processing delay: a base that may wander slowly, plus optional per-packet
//! jitter, never reordering packets.
//!
//! A cellular path's base delay is not constant: routing in the core, the RNC/PDSN's load and
//! the radio bearer's configuration move it by milliseconds to tens of milliseconds over
//! seconds (CellReplay found a fixed minimum delay underestimates RTT by 13-17 %). The wander
//! is an Ornstein-Uhlenbeck process: mean zero, standard deviation `sd`, correlation time
//! `tau`, stepped exactly on a fixed grid from time zero so that the same seed gives the same
//! delay curve whatever traffic crosses it.
use crate::element::{DueQueue, Element, Nanos, Packet};
use crate::random::{standard_normal, SeededRng};

/// A slowly varying offset to the base delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wander {
    /// Standard deviation of the offset, nanoseconds.
    pub sd: Nanos,
    /// Correlation time: the offset's autocorrelation at lag `tau` is 1/e.
    pub tau: Nanos,
}

/// Grid of the wander process: fine against any `tau` worth modelling (≥ 1 s) and coarse
/// enough that stepping it costs nothing per packet.
const WANDER_STEP: Nanos = 10_000_000;

struct WanderState {
    wander: Wander,
    rng: SeededRng,
    /// The offset (ns, may be negative) at grid time `at`.
    offset: f64,
    at: Nanos,
}

impl WanderState {
    fn new(wander: Wander, seed: u64) -> Self {
        let mut rng = SeededRng::new(seed);
        // Start in the stationary distribution, not at zero.
        let offset = wander.sd as f64 * standard_normal(&mut rng);
        WanderState {
            wander,
            rng,
            offset,
            at: 0,
        }
    }

    /// The offset at `now`, after stepping the grid up to it.
    fn at(&mut self, now: Nanos) -> f64 {
        let keep = (-(WANDER_STEP as f64) / self.wander.tau.max(1) as f64).exp();
        let fresh = self.wander.sd as f64 * (1.0 - keep * keep).sqrt();
        while self.at + WANDER_STEP <= now {
            self.offset = self.offset * keep + fresh * standard_normal(&mut self.rng);
            self.at += WANDER_STEP;
        }
        self.offset
    }
}

pub struct Delay {
    base: Nanos,
    /// Standard deviation of the normal jitter added to `base` (truncated at zero delay).
    jitter: Nanos,
    rng: SeededRng,
    wander: Option<WanderState>,
    held: DueQueue,
}

impl Delay {
    pub fn new(base: Nanos, jitter: Nanos, seed: u64) -> Self {
        Delay {
            base,
            jitter,
            rng: SeededRng::new(seed),
            wander: None,
            held: DueQueue::default(),
        }
    }

    /// The base delay wanders by `wander` (its own random stream, drawn from `seed`).
    pub fn with_wander(mut self, wander: Wander, seed: u64) -> Self {
        if wander.sd > 0 {
            self.wander = Some(WanderState::new(wander, seed));
        }
        self
    }
}

impl Element for Delay {
    fn accept(&mut self, mut packet: Packet) {
        let mut delay = self.base as f64;
        if let Some(w) = &mut self.wander {
            delay = (delay + w.at(packet.time)).max(0.0);
        }
        if self.jitter > 0 {
            delay = (delay + self.jitter as f64 * standard_normal(&mut self.rng)).max(0.0);
        }
        // Jitter may bunch packets but not reorder them.
        packet.time += delay.round() as Nanos;
        self.held.push_in_order(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.held.release_into(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.held.next_due()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::run;

    #[test]
    fn fixed_delay_is_exact() {
        let mut d = Delay::new(20_000_000, 0, 1);
        let out = run(
            &mut d,
            &[(0, 100), (1_234_567, 100), (1_234_567, 60)],
            1_000_000,
            100_000_000,
        );
        assert_eq!(
            out,
            vec![(20_000_000, 100), (21_234_567, 100), (21_234_567, 60)]
        );
    }

    #[test]
    fn jitter_keeps_order_and_has_the_requested_spread() {
        let mut d = Delay::new(50_000_000, 5_000_000, 7);
        // Packets 100 ms apart never catch up with each other: the spread is the jitter.
        let arrivals: Vec<(Nanos, usize)> = (0..2000).map(|i| (i * 100_000_000, 100)).collect();
        let out = run(&mut d, &arrivals, 10_000_000, 200_100_000_000);
        assert_eq!(out.len(), 2000);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
        let delays: Vec<f64> = out
            .iter()
            .zip(&arrivals)
            .map(|(o, a)| (o.0 - a.0) as f64 / 1e6)
            .collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        let sd =
            (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / delays.len() as f64).sqrt();
        assert!(
            (mean - 50.0).abs() < 0.5 && (sd - 5.0).abs() < 0.4,
            "{mean} {sd}"
        );

        // Back-to-back packets are held back rather than overtaken.
        let mut d = Delay::new(50_000_000, 20_000_000, 7);
        let arrivals: Vec<(Nanos, usize)> = (0..1000).map(|i| (i * 100_000, 100)).collect();
        let out = run(&mut d, &arrivals, 1_000_000, 1_000_000_000);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    /// Delays of packets sent every `gap` for `n` packets through `d`, in ms.
    fn delays(d: &mut Delay, gap: Nanos, n: u64) -> Vec<f64> {
        let arrivals: Vec<(Nanos, usize)> = (0..n).map(|i| (i * gap, 100)).collect();
        let out = run(d, &arrivals, 10_000_000, n * gap + 1_000_000_000);
        assert_eq!(out.len() as u64, n);
        out.iter()
            .zip(&arrivals)
            .map(|(o, a)| (o.0 - a.0) as f64 / 1e6)
            .collect()
    }

    #[test]
    fn wander_has_its_spread_and_correlation_time() {
        // 2000 s sampled every 100 ms: sd 10 ms around 100 ms, correlation time 5 s.
        let wander = Wander {
            sd: 10_000_000,
            tau: 5_000_000_000,
        };
        let mut d = Delay::new(100_000_000, 0, 1).with_wander(wander, 3);
        let x = delays(&mut d, 100_000_000, 20_000);
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / x.len() as f64;
        assert!(
            (mean - 100.0).abs() < 2.0 && (var.sqrt() - 10.0).abs() < 1.5,
            "{mean} {}",
            var.sqrt()
        );
        // Autocorrelation at lag tau (50 samples) is about 1/e; at one sample, nearly 1.
        let acf = |lag: usize| {
            x.iter()
                .zip(&x[lag..])
                .map(|(a, b)| (a - mean) * (b - mean))
                .sum::<f64>()
                / ((x.len() - lag) as f64 * var)
        };
        assert!((acf(50) - (-1f64).exp()).abs() < 0.08, "{}", acf(50));
        assert!(acf(1) > 0.97, "{}", acf(1));
    }

    #[test]
    fn wander_depends_on_time_not_traffic() {
        // The same seed gives the same delay at the same instant whether 1 or 10 packets crossed.
        let wander = Wander {
            sd: 5_000_000,
            tau: 2_000_000_000,
        };
        let mut sparse = Delay::new(50_000_000, 0, 1).with_wander(wander, 9);
        let mut dense = Delay::new(50_000_000, 0, 1).with_wander(wander, 9);
        let a = delays(&mut sparse, 1_000_000_000, 30);
        let b = delays(&mut dense, 100_000_000, 300);
        for (i, v) in a.iter().enumerate() {
            assert_eq!(*v, b[i * 10], "second {i}");
        }
    }

    #[test]
    fn no_wander_is_the_fixed_delay() {
        let mut d = Delay::new(20_000_000, 0, 1).with_wander(
            Wander {
                sd: 0,
                tau: 1_000_000_000,
            },
            3,
        );
        assert!(delays(&mut d, 50_000_000, 100).iter().all(|&v| v == 20.0));
    }
}
