//! How the congestion window grows on new ACKs and what ssthresh becomes on a loss, per
//! variant. Loss detection and recovery (duplicate ACKs, timer) are the sender's (`tcp.rs`),
//! common to all variants.
//! - Reno and NewReno (RFC 5681 §3.1): +1 segment per ACK in slow start, +1/cwnd per ACK in
//!   congestion avoidance; ssthresh = max(FlightSize/2, 2).
//! - Cubic (RFC 9438 §4): in congestion avoidance the window follows
//!   W(t) = C·(t − K)³ + W_max, K = ∛((W_max − cwnd_epoch)/C), C = 0.4, with the Reno-friendly
//!   estimate W_est as a floor; ssthresh = max(β·FlightSize, 2), β = 0.7, fast convergence.
//! - Vegas (Brakmo and Peterson, 1995): once per round trip, diff = cwnd·(1 − baseRTT/RTT)
//!   (segments queued in the network); +1 when diff < α = 2, −1 when diff > β = 4; slow start
//!   ends when diff > γ = 1. Losses are handled as Reno handles them.
//! - Westwood+ (Mascolo et al., MobiCom 2001; Grieco and Mascolo, CCR 2004, the "+" that
//!   samples once per round trip): the window grows as Reno's; the sender estimates the
//!   bandwidth its ACKs show, a sample b = segments acknowledged / time once per round trip
//!   (at least 50 ms, as Linux's `tcp_westwood`), filtered twice by the EWMA x ← 7/8·x + 1/8·b
//!   (Linux's cascade); on a loss ssthresh = max(BWE·RTT_min, 2) segments instead of half the
//!   window, so a loss the link did not cause (a radio error, a handoff) costs less. Before
//!   the first estimate a loss halves the window as Reno's does (**choice**).
use cellperf_link::Nanos;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Reno,
    NewReno,
    Cubic,
    Vegas,
    Westwood,
}

impl Variant {
    pub fn parse(name: &str) -> Option<Variant> {
        Some(match name.to_ascii_lowercase().as_str() {
            "reno" => Variant::Reno,
            "newreno" => Variant::NewReno,
            "cubic" => Variant::Cubic,
            "vegas" => Variant::Vegas,
            "westwood" | "westwood+" => Variant::Westwood,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::Reno => "reno",
            Variant::NewReno => "newreno",
            Variant::Cubic => "cubic",
            Variant::Vegas => "vegas",
            Variant::Westwood => "westwood",
        }
    }

    pub const NAMES: [&'static str; 5] = ["reno", "newreno", "cubic", "vegas", "westwood"];
}

const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
const VEGAS_ALPHA: f64 = 2.0;
const VEGAS_BETA: f64 = 4.0;
const VEGAS_GAMMA: f64 = 1.0;
/// Westwood+'s shortest bandwidth-sampling interval (Linux: `TCP_WESTWOOD_RTT_MIN`, HZ/20).
const WESTWOOD_MIN_INTERVAL: Nanos = 50_000_000;

fn secs(n: Nanos) -> f64 {
    n as f64 / 1e9
}

#[derive(Debug, Clone, Default)]
struct CubicState {
    w_max: f64,
    /// Start of the current congestion-avoidance epoch, its K and its Reno-friendly estimate.
    epoch: Option<(Nanos, f64)>,
    w_est: f64,
}

#[derive(Debug, Clone, Default)]
struct VegasState {
    /// The smallest RTT ever seen (propagation delay estimate).
    base_rtt: Option<Nanos>,
    /// The current round: when it started and the smallest RTT seen in it.
    round_start: Option<Nanos>,
    round_min_rtt: Option<Nanos>,
}

#[derive(Debug, Clone, Default)]
struct WestwoodState {
    /// The current sampling interval: when it started and the segments acknowledged in it.
    since: Option<Nanos>,
    acked: u64,
    /// The latest RTT sample (the sampling interval's length).
    last_rtt: Option<Nanos>,
    /// The two cascaded filters' outputs, segments per second (`estimate` is BWE).
    first_stage: f64,
    estimate: f64,
}

impl WestwoodState {
    /// Counts `acked` segments acknowledged at `now`; at the end of a sampling interval
    /// (one RTT, at least 50 ms) turns them into a bandwidth sample and filters it.
    fn on_delivered(&mut self, acked: u64, rtt: Option<Nanos>, now: Nanos) {
        if rtt.is_some() {
            self.last_rtt = rtt;
        }
        let Some(since) = self.since else {
            // The first ACK opens the first interval; what it acknowledged was sent before.
            self.since = Some(now);
            return;
        };
        self.acked += acked;
        let interval = now - since;
        if interval <= self.last_rtt.unwrap_or(0).max(WESTWOOD_MIN_INTERVAL) {
            return;
        }
        let sample = self.acked as f64 / secs(interval);
        let filter = |x: f64, b: f64| if x == 0.0 { b } else { 0.875 * x + 0.125 * b };
        self.first_stage = filter(self.first_stage, sample);
        self.estimate = filter(self.estimate, self.first_stage);
        self.since = Some(now);
        self.acked = 0;
    }
}

#[derive(Debug, Clone)]
pub struct Controller {
    variant: Variant,
    /// Grow per segment acknowledged, not per ACK (RFC 3465, Linux).
    byte_counting: bool,
    min_rtt: Option<Nanos>,
    cubic: CubicState,
    vegas: VegasState,
    westwood: WestwoodState,
}

impl Controller {
    pub fn new(variant: Variant, byte_counting: bool) -> Self {
        Controller {
            variant,
            byte_counting,
            min_rtt: None,
            cubic: CubicState::default(),
            vegas: VegasState::default(),
            westwood: WestwoodState::default(),
        }
    }

    fn note_rtt(&mut self, rtt: Option<Nanos>) {
        if let Some(r) = rtt {
            self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        }
    }

    /// Every ACK of new data, in fast recovery too (`acked` segments; `rtt` its sample, if
    /// any): what a bandwidth estimate counts.
    pub fn on_delivered(&mut self, acked: u64, rtt: Option<Nanos>, now: Nanos) {
        self.note_rtt(rtt);
        if self.variant == Variant::Westwood {
            self.westwood.on_delivered(acked, rtt, now);
        }
    }

    /// Westwood+'s bandwidth estimate, segments per second (0 before the first sample).
    pub fn bandwidth_estimate(&self) -> f64 {
        self.westwood.estimate
    }

    /// Grows (or for Vegas, may shrink) the window on an ACK of `acked` new segments;
    /// `rtt` is the sample this ACK gave, if any.
    pub fn on_new_ack(
        &mut self,
        cwnd: &mut f64,
        ssthresh: &mut f64,
        acked: u64,
        rtt: Option<Nanos>,
        now: Nanos,
    ) {
        self.note_rtt(rtt);
        // With byte counting each segment acknowledged grows the window as an ACK would.
        let (steps, per_step) = if self.byte_counting {
            (acked, 1)
        } else {
            (1, acked)
        };
        match self.variant {
            Variant::Reno | Variant::NewReno | Variant::Westwood => {
                (0..steps).for_each(|_| reno_increase(cwnd, *ssthresh))
            }
            Variant::Cubic => {
                (0..steps).for_each(|_| self.cubic_increase(cwnd, *ssthresh, per_step, now))
            }
            Variant::Vegas => self.vegas_update(cwnd, ssthresh, rtt, now),
        }
    }

    /// The new ssthresh when a loss is detected (fast retransmit or timeout).
    pub fn ssthresh_after_loss(&mut self, cwnd: f64, flight: f64, _now: Nanos) -> f64 {
        match self.variant {
            Variant::Cubic => {
                // Fast convergence (RFC 9438 §4.7): release bandwidth to newer flows.
                self.cubic.w_max = if cwnd < self.cubic.w_max {
                    cwnd * (1.0 + CUBIC_BETA) / 2.0
                } else {
                    cwnd
                };
                self.cubic.epoch = None;
                (flight * CUBIC_BETA).max(2.0)
            }
            Variant::Westwood if self.westwood.estimate > 0.0 && self.min_rtt.is_some() => {
                let rtt_min = secs(self.min_rtt.expect("checked"));
                (self.westwood.estimate * rtt_min).max(2.0)
            }
            _ => (flight / 2.0).max(2.0),
        }
    }

    /// Fast recovery ended with the window at ssthresh.
    pub fn on_recovery_end(&mut self, _cwnd: f64, _now: Nanos) {
        self.cubic.epoch = None;
    }

    /// The retransmission timer fired (the window is 1 now).
    pub fn on_timeout(&mut self, _now: Nanos) {
        self.cubic.epoch = None;
        self.vegas.round_start = None;
    }

    fn cubic_increase(&mut self, cwnd: &mut f64, ssthresh: f64, acked: u64, now: Nanos) {
        if *cwnd < ssthresh {
            *cwnd += 1.0;
            return;
        }
        let c = &mut self.cubic;
        let (start, k) = *c.epoch.get_or_insert_with(|| {
            if c.w_max < *cwnd {
                c.w_max = *cwnd;
            }
            c.w_est = *cwnd;
            (now, ((c.w_max - *cwnd) / CUBIC_C).cbrt())
        });
        let rtt = secs(self.min_rtt.unwrap_or(0));
        let t = secs(now - start);
        let w_cubic = |t: f64| CUBIC_C * (t - k).powi(3) + c.w_max;
        // RFC 9438 §4.3: Reno-friendly region, α = 3(1−β)/(1+β) per RTT.
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        c.w_est += alpha * acked as f64 / *cwnd;
        if w_cubic(t) < c.w_est {
            *cwnd = c.w_est;
            return;
        }
        // §4.4: aim at W(t + RTT), at most 1.5·cwnd.
        let target = w_cubic(t + rtt).clamp(*cwnd, 1.5 * *cwnd);
        *cwnd += (target - *cwnd) / *cwnd;
    }

    fn vegas_update(&mut self, cwnd: &mut f64, ssthresh: &mut f64, rtt: Option<Nanos>, now: Nanos) {
        let v = &mut self.vegas;
        if let Some(r) = rtt {
            v.base_rtt = Some(v.base_rtt.map_or(r, |b| b.min(r)));
            v.round_min_rtt = Some(v.round_min_rtt.map_or(r, |m| m.min(r)));
        }
        let slow_start = *cwnd < *ssthresh;
        if slow_start {
            *cwnd += 1.0;
        }
        let start = *v.round_start.get_or_insert(now);
        let (Some(base), Some(round_rtt)) = (v.base_rtt, v.round_min_rtt) else {
            return;
        };
        // Vegas decides once per round trip; in between the window holds (in avoidance).
        if now - start < round_rtt {
            return;
        }
        // A round trip has passed: compare expected and actual rates.
        let diff = *cwnd * (1.0 - base as f64 / round_rtt as f64);
        if slow_start {
            if diff > VEGAS_GAMMA {
                // Leave slow start at the window the path holds without queueing, plus one.
                let target = (*cwnd * base as f64 / round_rtt as f64).floor();
                *cwnd = cwnd.min(target + 1.0).max(2.0);
                *ssthresh = ssthresh.min(*cwnd - 1.0).max(2.0);
            }
        } else if diff < VEGAS_ALPHA {
            *cwnd += 1.0;
        } else if diff > VEGAS_BETA {
            // Shrinking keeps the window out of slow start (ssthresh below it).
            *cwnd = (*cwnd - 1.0).max(2.0);
            *ssthresh = ssthresh.min(*cwnd - 1.0).max(2.0);
        }
        v.round_start = Some(now);
        v.round_min_rtt = None;
    }
}

fn reno_increase(cwnd: &mut f64, ssthresh: f64) {
    if *cwnd < ssthresh {
        *cwnd += 1.0;
    } else {
        *cwnd += 1.0 / *cwnd;
    }
}
