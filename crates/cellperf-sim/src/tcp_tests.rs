//! Hand-worked traces of the sender and receiver (each expected value is worked out in the
//! comment above it).
use crate::congestion::Variant;
use crate::receiver::Receiver;
use crate::tcp::{RtoEstimator, RtoTimer, Sender, TcpConfig, TimeoutRecovery};
use cellperf_link::Nanos;

const MS: Nanos = 1_000_000;

fn config(variant: Variant, initial_window: f64, ssthresh: f64) -> TcpConfig {
    TcpConfig {
        variant,
        initial_window,
        initial_ssthresh: ssthresh,
        min_rto: 200 * MS,
        ..TcpConfig::default()
    }
}

/// A loss-free path of infinite rate and a fixed round trip: every segment sent at t is
/// acknowledged at t + rtt (no delayed ACKs). Returns the window at the end of each round.
fn windows_per_round(sender: &mut Sender, rtt: Nanos, rounds: usize) -> Vec<f64> {
    let mut receiver = Receiver::new(None, false);
    let mut out = Vec::new();
    sender.start(0, &mut out);
    let mut windows = Vec::new();
    for round in 1..=rounds {
        let now = round as Nanos * rtt;
        let in_flight: Vec<u64> = std::mem::take(&mut out);
        for seq in in_flight {
            let ack = receiver.on_segment(seq, now, now).expect("no delayed ACKs");
            sender.on_ack(ack, now, &mut out);
        }
        windows.push(sender.cwnd());
    }
    windows
}

#[test]
fn slow_start_doubles_per_round_trip_up_to_ssthresh_then_adds_one() {
    // IW 1, ssthresh 16: 2, 4, 8, 16 after 1..4 round trips. In round 5 the 16 ACKs each add
    // 1/cwnd: 16 + 1/16 + 1/16.0625 + ... = 16.97 (just under 17).
    let mut s = Sender::new(config(Variant::Reno, 1.0, 16.0));
    let w = windows_per_round(&mut s, 100 * MS, 6);
    assert_eq!(&w[..4], &[2.0, 4.0, 8.0, 16.0]);
    assert!(w[4] > 16.96 && w[4] < 17.0, "{}", w[4]);
    // Round 6: the window was still 16 (floor of 16.97) all through round 5, so again 16 ACKs,
    // now at ~1/17.4 each: 16.97 + 0.92 ≈ 17.89.
    assert!(w[5] > 17.85 && w[5] < 17.95, "{}", w[5]);
    assert_eq!(s.stats().retransmissions, 0);
    // Every round's ACK gave a 100-ms sample: SRTT 100 ms, RTTVAR shrinks to ~0 → RTO at its
    // 200-ms floor.
    assert_eq!(s.srtt(), Some(100 * MS));
    assert_eq!(s.rto(), 200 * MS);
}

/// Sends the initial window of 10 (segments 0..9) in congestion avoidance (ssthresh 10).
fn ten_in_flight(variant: Variant) -> (Sender, Vec<u64>) {
    let mut s = Sender::new(config(variant, 10.0, 10.0));
    let mut out = Vec::new();
    s.start(0, &mut out);
    assert_eq!(out, (0..10).collect::<Vec<_>>());
    (s, Vec::new())
}

#[test]
fn reno_recovers_one_loss_by_fast_retransmit_and_halves_the_window() {
    // Segment 0 of 0..9 is lost: 1..9 arrive and give 9 duplicate ACKs of 0.
    let (mut s, mut out) = ten_in_flight(Variant::Reno);
    let t = 100 * MS;
    s.on_ack(0, t, &mut out);
    s.on_ack(0, t, &mut out);
    assert!(out.is_empty() && !s.in_recovery());
    // Third duplicate: ssthresh = 10/2 = 5, retransmit 0, cwnd = 5 + 3 = 8.
    s.on_ack(0, t, &mut out);
    assert_eq!(out, vec![0]);
    assert_eq!((s.ssthresh(), s.cwnd()), (5.0, 8.0));
    out.clear();
    // Six more duplicates inflate cwnd to 14: at 11..14 one new segment each (10..13).
    for _ in 0..6 {
        s.on_ack(0, t, &mut out);
    }
    assert_eq!(s.cwnd(), 14.0);
    assert_eq!(out, vec![10, 11, 12, 13]);
    out.clear();
    // The retransmission arrives: ACK 10. Recovery ends, cwnd = ssthresh = 5; 4 segments in
    // flight (10..13), so one more goes (14).
    s.on_ack(10, 2 * t, &mut out);
    assert!(!s.in_recovery());
    assert_eq!(s.cwnd(), 5.0);
    assert_eq!(out, vec![14]);
    let st = s.stats();
    assert_eq!(
        (st.fast_retransmits, st.retransmissions, st.timeouts),
        (1, 1, 0)
    );
    assert_eq!(st.segments_sent, 16);
}

/// Segments 0 and 5 of 0..9 are lost; returns the sender after the 8 duplicate ACKs of 0
/// (from 1..4 and 6..9) and the retransmitted 0's ACK of 5.
fn two_losses(variant: Variant) -> (Sender, Vec<u64>) {
    let (mut s, mut out) = ten_in_flight(variant);
    let t = 100 * MS;
    for _ in 0..8 {
        s.on_ack(0, t, &mut out);
    }
    // FR at the third: cwnd 8, then 9..13 over five more: new segments 10, 11, 12.
    assert_eq!(out, vec![0, 10, 11, 12]);
    assert_eq!(s.cwnd(), 13.0);
    out.clear();
    s.on_ack(5, 2 * t, &mut out);
    (s, out)
}

#[test]
fn newreno_retransmits_the_second_hole_on_the_partial_ack_and_stays_in_recovery() {
    let (mut s, mut out) = two_losses(Variant::NewReno);
    // ACK 5 is partial (recover = 10): retransmit 5, cwnd = 13 − 5 + 1 = 9; in flight 5..12,
    // window 9 allows 13.
    assert!(s.in_recovery());
    assert_eq!(s.cwnd(), 9.0);
    assert_eq!(out, vec![5, 13]);
    out.clear();
    // The retransmitted 5 arrives after 6..12: ACK 13 ≥ recover ends recovery at ssthresh 5.
    s.on_ack(13, 3 * 100 * MS, &mut out);
    assert!(!s.in_recovery());
    assert_eq!((s.ssthresh(), s.cwnd()), (5.0, 5.0));
    // One in flight (13), window 5: 14..17.
    assert_eq!(out, vec![14, 15, 16, 17]);
    assert_eq!(s.stats().fast_retransmits, 1);
    assert_eq!(s.stats().retransmissions, 2);
}

#[test]
fn reno_leaves_recovery_on_the_partial_ack_and_needs_a_second_fast_retransmit() {
    let (mut s, mut out) = two_losses(Variant::Reno);
    // ACK 5 ends Reno's recovery: cwnd = 5, in flight 5..12 (8) > 5, nothing sent.
    assert!(!s.in_recovery());
    assert_eq!(s.cwnd(), 5.0);
    assert!(out.is_empty());
    // 10, 11, 12 arrive: three duplicate ACKs of 5 → a second fast retransmit with
    // ssthresh = max(8/2, 2) = 4, cwnd 7.
    for _ in 0..3 {
        s.on_ack(5, 3 * 100 * MS, &mut out);
    }
    assert_eq!(out, vec![5]);
    assert_eq!((s.ssthresh(), s.cwnd()), (4.0, 7.0));
    assert_eq!(s.stats().fast_retransmits, 2);
}

#[test]
fn newreno_makes_no_fast_retransmit_for_duplicates_of_data_sent_before_a_timeout() {
    let (mut s, mut out) = ten_in_flight(Variant::NewReno);
    s.on_timeout(1000 * MS, &mut out);
    assert_eq!(out, vec![0]);
    out.clear();
    // Duplicates of 0 (the old segments arriving late): snd_una 0 < recover 10, no FR.
    for _ in 0..5 {
        s.on_ack(0, 1100 * MS, &mut out);
    }
    assert!(out.is_empty());
    assert_eq!(s.stats().fast_retransmits, 0);
}

#[test]
fn rto_follows_rfc_6298_backs_off_and_karn_skips_retransmitted_samples() {
    let mut s = Sender::new(config(Variant::Reno, 2.0, 16.0));
    let mut out = Vec::new();
    s.start(0, &mut out);
    assert_eq!(out, vec![0, 1]);
    out.clear();
    assert_eq!(s.next_timer(), Some(1000 * MS)); // initial RTO 1 s
                                                 // Sample 100 ms: SRTT 100, RTTVAR 50, RTO = 100 + 4·50 = 300 ms; the timer restarts.
    s.on_ack(1, 100 * MS, &mut out);
    assert_eq!(s.rto(), 300 * MS);
    assert_eq!(s.next_timer(), Some(400 * MS));
    // Sample 200 ms (segment 1 sent at 0): RTTVAR = 0.75·50 + 0.25·100 = 62.5,
    // SRTT = 0.875·100 + 0.125·200 = 112.5, RTO = 112.5 + 250 = 362.5 ms.
    s.on_ack(2, 200 * MS, &mut out);
    assert_eq!(s.rto(), 362_500_000);
    // Window is 2 + 1 + 1 = 4 (slow start), segments 2..5 went at 100 and 200 ms.
    assert_eq!(out, vec![2, 3, 4, 5]);
    out.clear();
    // Nothing comes back: the timer fires 362.5 ms after the last ACK.
    let fire = 200 * MS + 362_500_000;
    assert_eq!(s.next_timer(), Some(fire));
    s.on_timeout(fire, &mut out);
    // FlightSize 4 → ssthresh 2, cwnd 1, RTO doubled, segment 2 again.
    assert_eq!(out, vec![2]);
    assert_eq!((s.cwnd(), s.ssthresh(), s.rto()), (1.0, 2.0, 725 * MS));
    assert_eq!(s.next_timer(), Some(fire + 725 * MS));
    out.clear();
    // A second timeout of the same segment holds ssthresh, doubles the RTO again.
    s.on_timeout(fire + 725 * MS, &mut out);
    assert_eq!((s.ssthresh(), s.rto()), (2.0, 1450 * MS));
    // ACK of the retransmitted 2: Karn, no sample; the backed-off RTO stays.
    s.on_ack(3, fire + 800 * MS, &mut out);
    assert_eq!(s.rto(), 1450 * MS);
    assert_eq!(s.take_rtt_sample(), Some(200 * MS)); // the last sample taken was 200 ms
    assert_eq!(s.stats().timeouts, 2);
}

#[test]
fn receiver_delays_acks_for_in_order_pairs_and_acks_holes_at_once() {
    let mut r = Receiver::new(Some(200 * MS), false);
    assert_eq!(r.on_segment(0, 0, 0).map(|a| a.next), None);
    assert_eq!(r.next_timer(), Some(200 * MS));
    assert_eq!(r.on_segment(1, 0, 10 * MS).map(|a| a.next), Some(2)); // every second segment
    assert_eq!(r.next_timer(), None);
    assert_eq!(r.on_segment(2, 0, 20 * MS).map(|a| a.next), None);
    assert_eq!(r.on_timer(100 * MS).map(|a| a.next), None);
    assert_eq!(r.on_timer(220 * MS).map(|a| a.next), Some(3)); // the delayed-ACK timer
    assert_eq!(r.on_segment(4, 0, 300 * MS).map(|a| a.next), Some(3)); // out of order: duplicate ACK at once
    assert_eq!(r.on_segment(3, 0, 310 * MS).map(|a| a.next), Some(5)); // fills the hole: at once
    assert_eq!(r.on_segment(1, 0, 320 * MS).map(|a| a.next), Some(5)); // a duplicate: at once
    let st = r.stats();
    assert_eq!(
        (st.segments_received, st.segments_delivered, st.acks_sent),
        (6, 5, 5)
    );
}

#[test]
fn no_rtt_sample_from_segments_in_flight_when_the_timer_fired() {
    // 0..3 sent at 0; 0 is lost, 1..3 wait at the receiver. The timer fires at 1 s and
    // resends 0; its ACK (4) covers 3, sent once at 0 — but that ACK waited for the hole, so
    // timing 3 would give a 1.1-s "RTT". No sample: the backed-off RTO (2 s) stays.
    let mut s = Sender::new(config(Variant::Reno, 4.0, 16.0));
    let mut out = Vec::new();
    s.start(0, &mut out);
    s.on_timeout(1000 * MS, &mut out);
    assert_eq!(s.rto(), 2000 * MS);
    s.on_ack(4, 1100 * MS, &mut out);
    assert_eq!(s.take_rtt_sample(), None);
    assert_eq!(s.rto(), 2000 * MS);
    // Segments sent after the repair are timed again: 4 at 1.1 s, acknowledged at 1.15 s.
    assert!(out.contains(&4));
    s.on_ack(5, 1150 * MS, &mut out);
    assert_eq!(s.take_rtt_sample(), Some(50 * MS));
}

fn textbook(initial_window: f64) -> TcpConfig {
    TcpConfig {
        initial_window,
        min_rto: MS,
        rto_estimator: RtoEstimator::Classic,
        ..TcpConfig::default()
    }
}

#[test]
fn classic_rto_is_twice_the_smoothed_rtt_without_a_variance_term() {
    let mut s = Sender::new(textbook(2.0));
    let mut out = Vec::new();
    s.start(0, &mut out);
    // First sample 100 ms: SRTT = 100, RTO = 2·100 = 200 ms (RFC 6298 would give
    // 100 + 4·50 = 300 ms, the test above).
    s.on_ack(1, 100 * MS, &mut out);
    assert_eq!(s.srtt(), Some(100 * MS));
    assert_eq!(s.rto(), 200 * MS);
    // Sample 200 ms: SRTT = 7/8·100 + 1/8·200 = 112.5 ms, RTO = 225 ms.
    s.on_ack(2, 200 * MS, &mut out);
    assert_eq!(s.rto(), 225 * MS);
    // Segment 2 (sent at 100 ms) acknowledged at 400 ms: a 300-ms sample, SRTT =
    // 7/8·112.5 + 1/8·300 = 135.9375 ms, RTO = 271.875 ms (no RTTVAR: RFC 6298 would add
    // 4·RTTVAR and reach about 500 ms).
    s.on_ack(3, 400 * MS, &mut out);
    assert_eq!(s.rto(), 271_875_000);
}

#[test]
fn the_per_segment_timer_runs_from_the_oldest_segments_transmission() {
    // 0 and 1 go at 0; ACK 1 at 900 ms gives a 900-ms sample: classic RTO 1.8 s. Slow start
    // sends 2 and 3. Restarted by the ACK, the timer would fire at 0.9 + 1.8 = 2.7 s;
    // per segment it fires 1.8 s after segment 1 was sent, at 1.8 s.
    for (timer, fire) in [(RtoTimer::Ack, 2700 * MS), (RtoTimer::Segment, 1800 * MS)] {
        let mut s = Sender::new(TcpConfig {
            rto_timer: timer,
            ..textbook(2.0)
        });
        let mut out = Vec::new();
        s.start(0, &mut out);
        s.on_ack(1, 900 * MS, &mut out);
        assert_eq!(out, vec![0, 1, 2, 3]);
        assert_eq!(s.rto(), 1800 * MS);
        assert_eq!(s.next_timer(), Some(fire), "{timer:?}");
        // Then ACK 2 at 1 s: the oldest is now 2, sent at 900 ms → 900 + 1800 (per segment),
        // 1000 + 1800 (restarted). No sample: 1 was sent at 0 and acknowledged at 1 s gives
        // 1 s, SRTT = 7/8·900 + 1/8·1000 = 912.5, RTO 1825 ms.
        s.on_ack(2, 1000 * MS, &mut out);
        assert_eq!(s.rto(), 1825 * MS);
        let expect = match timer {
            RtoTimer::Ack => 1000 * MS + 1825 * MS,
            RtoTimer::Segment => 900 * MS + 1825 * MS,
        };
        assert_eq!(s.next_timer(), Some(expect), "{timer:?}");
    }
}

#[test]
fn go_back_n_resends_the_window_after_a_timeout_and_one_segment_does_not() {
    // 0..3 in flight; the timer fires at 1 s (initial RTO) and resends 0. The original 0 was
    // only late: its ACK (1) comes at 1.1 s. cwnd 1 → 2 (slow start).
    for (recovery, resent) in [
        (TimeoutRecovery::GoBackN, vec![1, 2]),
        (TimeoutRecovery::OneSegment, vec![]),
    ] {
        let mut s = Sender::new(TcpConfig {
            timeout_recovery: recovery,
            ..textbook(4.0)
        });
        let mut out = Vec::new();
        s.start(0, &mut out);
        out.clear();
        s.on_timeout(1000 * MS, &mut out);
        assert_eq!(out, vec![0]);
        out.clear();
        s.on_ack(1, 1100 * MS, &mut out);
        assert_eq!(s.cwnd(), 2.0);
        // Go-back-N: snd_nxt went back to 0, so 1 and 2 (still on their way) go again.
        // One segment: snd_nxt stayed at 4, and 1..3 in flight fill the window of 2.
        assert_eq!(out, resent, "{recovery:?}");
        assert_eq!(s.stats().retransmissions, 1 + resent.len() as u64);
    }
}
