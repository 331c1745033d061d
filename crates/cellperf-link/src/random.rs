//! Distributions the link elements draw from, over the project's one seeded generator
//! (`cellperf_channel::SeededRng`), so a seed reproduces a run's losses, jitter and outages.
pub use cellperf_channel::SeededRng;

/// Exponentially distributed with the given mean.
pub fn exponential(rng: &mut SeededRng, mean: f64) -> f64 {
    -mean * (1.0 - rng.next_f64()).ln()
}

/// Standard normal (Box–Muller; one of the pair is discarded to keep the generator stateless).
pub fn standard_normal(rng: &mut SeededRng) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments() {
        let mut rng = SeededRng::new(11);
        let n = 200_000;
        let e: f64 = (0..n).map(|_| exponential(&mut rng, 3.0)).sum::<f64>() / n as f64;
        assert!((e - 3.0).abs() < 0.05, "{e}");
        let xs: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.02, "{m} {v}");
    }
}
