//! Cubic and Vegas against values worked out from their definitions (RFC 9438; Brakmo and
//! Peterson 1995).
use crate::congestion::{Controller, Variant};
use crate::receiver::Receiver;
use crate::tcp::{Sender, TcpConfig};
use cellperf_link::Nanos;

const MS: Nanos = 1_000_000;

/// Feeds a window's worth of ACKs per round trip of `rtt` to `c` from time `from` to `until`
/// (congestion avoidance: ssthresh below cwnd); returns cwnd.
fn avoid(c: &mut Controller, mut cwnd: f64, rtt: Nanos, from: Nanos, until: Nanos) -> f64 {
    let mut ssthresh = 1.0;
    let mut t = from;
    while t < until {
        let acks = cwnd.floor() as u64;
        for k in 0..acks {
            let now = t + k * rtt / acks;
            c.on_new_ack(&mut cwnd, &mut ssthresh, 1, Some(rtt), now);
        }
        t += rtt;
    }
    cwnd
}

#[test]
fn cubic_returns_to_w_max_after_k_then_grows_cubically() {
    // Loss at cwnd = FlightSize = 100: ssthresh = 0.7·100 = 70, W_max = 100,
    // K = ∛((100 − 70)/0.4) = ∛75 = 4.217 s.
    let mut c = Controller::new(Variant::Cubic, false);
    assert_eq!(c.ssthresh_after_loss(100.0, 100.0, 0), 70.0);
    let k = 75f64.cbrt();
    let rtt = 100 * MS;
    // With a 100-ms RTT the Reno-friendly estimate reaches 70 + 0.53·42 ≈ 92 by K, below
    // W(K) = 100: the cubic curve rules. At K (aiming one RTT ahead, W(K + 0.1) ≈ 100.0004)
    // the window is on the plateau at W_max.
    let at_k = avoid(&mut c, 70.0, rtt, 0, (k * 1e9) as Nanos);
    assert!((at_k - 100.0).abs() < 1.0, "{at_k}");
    // At 2K: W(2K) = 0.4·K³ + 100 = 0.4·75 + 100 = 130 (one RTT ahead: W(2K + 0.1) = 132.2).
    let at_2k = avoid(
        &mut c,
        at_k,
        rtt,
        (k * 1e9) as Nanos,
        (2.0 * k * 1e9) as Nanos,
    );
    assert!((129.0..=133.0).contains(&at_2k), "{at_2k}");
}

#[test]
fn cubic_fast_convergence_lowers_w_max_on_a_second_loss_below_it() {
    // Second loss at cwnd 80 < W_max 100: W_max = 80·(1 + 0.7)/2 = 68, ssthresh 0.7·80 = 56.
    let mut c = Controller::new(Variant::Cubic, false);
    c.ssthresh_after_loss(100.0, 100.0, 0);
    assert!((c.ssthresh_after_loss(80.0, 80.0, 0) - 56.0).abs() < 1e-9);
    // K = ∛((68 − 56)/0.4) = ∛30 = 3.107 s: the plateau is at 68, not 80. With a 200-ms RTT
    // the Reno-friendly estimate is 56 + 0.53·15.5 ≈ 64 by then, below the curve; the 16
    // rounds end at 3.2 s, aiming at W(3.4 s) ≈ 68.01.
    let at_k = avoid(&mut c, 56.0, 200 * MS, 0, (30f64.cbrt() * 1e9) as Nanos);
    assert!((at_k - 68.0).abs() < 1.0, "{at_k}");
}

#[test]
fn cubic_on_a_short_path_grows_as_reno_friendly_estimate() {
    // Small W_max and a short RTT: W_est outruns the cubic curve (W(0.2 s) ≈ 7.1). Each round
    // acknowledges floor(cwnd) segments, each adding α/cwnd, α = 3·0.3/1.7 = 0.529: between
    // α·7/8 and α per round, so after 20 rounds from 7, between 16.3 and 17.6 (Reno: 27).
    let mut c = Controller::new(Variant::Cubic, false);
    c.ssthresh_after_loss(10.0, 10.0, 0);
    let w = avoid(&mut c, 7.0, 10 * MS, 0, 200 * MS);
    assert!((16.26..=17.58).contains(&w), "{w}");
}

/// A path of `rate` segments per second and base RTT `base`: a window above the BDP queues
/// (cwnd − BDP) segments, adding (cwnd − BDP)/rate to the RTT. Returns cwnd per round.
fn queueing_path(sender: &mut Sender, base: Nanos, rate: f64, rounds: usize) -> Vec<f64> {
    let mut receiver = Receiver::new(None, false);
    let mut out = Vec::new();
    sender.start(0, &mut out);
    let bdp = rate * base as f64 / 1e9;
    let mut now = 0;
    let mut windows = Vec::new();
    for _ in 0..rounds {
        let queued = (out.len() as f64 - bdp).max(0.0);
        now += base + (queued / rate * 1e9) as Nanos;
        for seq in std::mem::take(&mut out) {
            let ack = receiver.on_segment(seq, now, now).expect("no delayed ACKs");
            sender.on_ack(ack, now, &mut out);
        }
        windows.push(sender.cwnd());
    }
    windows
}

#[test]
fn vegas_settles_between_alpha_and_beta_segments_queued_where_reno_keeps_growing() {
    // 100 segments/s, base RTT 100 ms: BDP 10. Vegas holds 2..4 segments in the queue,
    // cwnd 12..14 (±1 for the round it decides on); Reno passes 30 in the same 60 rounds.
    let cfg = |variant| TcpConfig {
        variant,
        ..TcpConfig::default()
    };
    let vegas = queueing_path(&mut Sender::new(cfg(Variant::Vegas)), 100 * MS, 100.0, 60);
    let tail = &vegas[40..];
    assert!(
        tail.iter().all(|&w| (11.0..=15.0).contains(&w)),
        "{vegas:?}"
    );
    let reno = queueing_path(&mut Sender::new(cfg(Variant::Reno)), 100 * MS, 100.0, 60);
    assert!(reno[59] > 30.0, "{reno:?}");
}

#[test]
fn vegas_grows_one_segment_per_rtt_on_a_path_that_never_queues() {
    // Infinite rate: RTT stays at its base, diff = 0 < α every round: +1 per round trip once
    // out of slow start (ssthresh 4: 2, 4 after rounds 1 and 2, then 5, 6, ... 10 after 8).
    let cfg = TcpConfig {
        variant: Variant::Vegas,
        initial_ssthresh: 4.0,
        ..TcpConfig::default()
    };
    let w = queueing_path(&mut Sender::new(cfg), 100 * MS, 1e12, 8);
    assert_eq!(&w[..3], &[2.0, 4.0, 5.0]);
    assert_eq!(w[7], 10.0, "{w:?}");
}

#[test]
fn westwood_sets_ssthresh_to_the_estimated_bandwidth_times_the_minimum_rtt() {
    // 100 segments acknowledged per 100-ms round trip: every sample is 1000 segments/s, and
    // the cascaded filters start at the first sample, so BWE = 1000/s. RTT_min 100 ms:
    // ssthresh = 1000 · 0.1 = 100 segments, whatever the window was (Reno: flight/2 = 60).
    let mut c = Controller::new(Variant::Westwood, false);
    let rtt = 100 * MS;
    // The first ACK (1 ms) opens the interval; one each ms after it: a sample of 101
    // segments in 101 ms at 102 ms, 203 ms, 304 ms.
    for k in 1..=400u64 {
        c.on_delivered(1, Some(rtt), k * MS);
    }
    assert!(
        (c.bandwidth_estimate() - 1000.0).abs() < 1e-6,
        "{}",
        c.bandwidth_estimate()
    );
    assert!((c.ssthresh_after_loss(120.0, 120.0, 400 * MS) - 100.0).abs() < 1e-6);
}

#[test]
fn westwood_filters_a_rate_change_and_halves_before_its_first_estimate() {
    let mut c = Controller::new(Variant::Westwood, false);
    // No estimate yet: a loss halves the window, as Reno's.
    assert_eq!(c.ssthresh_after_loss(40.0, 40.0, 0), 20.0);
    let rtt = 100 * MS;
    // One sample at 1000/s, then the rate halves: the first stage moves 1/8 of the way
    // (1000 → 937.5), the estimate 1/8 of the way to the first stage (992.2).
    // One ACK per ms: at 102 ms a sample of 101 segments in 101 ms (1000/s).
    for k in 1..=102u64 {
        c.on_delivered(1, Some(rtt), k * MS);
    }
    assert!((c.bandwidth_estimate() - 1000.0).abs() < 1e-6);
    // Then one per 2 ms: at 204 ms, 51 segments in 102 ms (500/s).
    for k in 1..=51u64 {
        c.on_delivered(1, Some(rtt), (102 + 2 * k) * MS);
    }
    let expected = 0.875 * 1000.0 + 0.125 * (0.875 * 1000.0 + 0.125 * 500.0);
    assert!(
        (c.bandwidth_estimate() - expected).abs() < 1.0,
        "{}",
        c.bandwidth_estimate()
    );
}
