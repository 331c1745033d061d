//! Linux's loss recovery (`Recovery::Linux`) against the classic one on crafted loss and delay
//! patterns, with the retransmissions counted exactly (each expectation is worked out in the
//! comment above it).
use crate::congestion::Variant;
use crate::receiver::{Ack, Receiver};
use crate::tcp::{Recovery, RtoEstimator, Sender, TcpConfig};
use cellperf_link::Nanos;
use std::collections::{HashMap, VecDeque};

const MS: Nanos = 1_000_000;
const RTT: Nanos = 100 * MS;

/// Initial window `window`, in congestion avoidance from the start if `avoid`.
fn config(recovery: Recovery, variant: Variant, window: f64, avoid: bool) -> TcpConfig {
    TcpConfig {
        variant,
        initial_window: window,
        initial_ssthresh: if avoid { window } else { f64::INFINITY },
        min_rto: 200 * MS,
        recovery,
        ..TcpConfig::default()
    }
}

/// What a run over `path` did.
#[derive(Debug)]
struct Run {
    /// Retransmitted segments in the order sent.
    retransmitted: Vec<u64>,
    /// When the first `until` segments were acknowledged.
    done: Nanos,
}

/// A FIFO path of unlimited rate: `path(sent_at, seq, nth)` gives when the `nth` transmission
/// (from 1) of `seq`, sent at `sent_at`, reaches the receiver, or `None` if it is lost; the
/// receiver's ACK reaches the sender at once. Runs until segment `until` is acknowledged.
fn run(sender: &mut Sender, path: &dyn Fn(Nanos, u64, u32) -> Option<Nanos>, until: u64) -> Run {
    let sack = true;
    let mut receiver = Receiver::new(None, sack);
    let mut wire: VecDeque<(Nanos, u64, Nanos)> = VecDeque::new();
    let mut sends: HashMap<u64, u32> = HashMap::new();
    let mut retransmitted = Vec::new();
    let mut out = Vec::new();
    let mut put = |out: &mut Vec<u64>, now: Nanos, wire: &mut VecDeque<(Nanos, u64, Nanos)>| {
        for seq in out.drain(..) {
            let nth = sends.entry(seq).or_insert(0);
            *nth += 1;
            if *nth > 1 {
                retransmitted.push(seq);
            }
            if let Some(at) = path(now, seq, *nth) {
                // FIFO: nothing overtakes what was sent before it.
                let at = wire.back().map_or(at, |&(last, _, _)| at.max(last));
                wire.push_back((at, seq, now));
            }
        }
    };
    sender.start(0, &mut out);
    put(&mut out, 0, &mut wire);
    let mut now = 0;
    while sender.snd_una() < until {
        let arrival = wire.front().map(|&(at, _, _)| at);
        let timer = sender.next_timer();
        match (arrival, timer) {
            (Some(at), _) if timer.is_none_or(|t| at <= t) => {
                now = at;
                let (_, seq, sent) = wire.pop_front().expect("an arrival");
                if let Some(ack) = receiver.on_segment(seq, sent, at) {
                    sender.on_ack(ack, at, &mut out);
                    put(&mut out, at, &mut wire);
                }
            }
            (_, Some(t)) => {
                now = t;
                sender.on_timeout(t, &mut out);
                put(&mut out, t, &mut wire);
            }
            _ => panic!("nothing in flight and no timer"),
        }
    }
    Run {
        retransmitted,
        done: now,
    }
}

/// Drops the first transmission of each of `lost`; everything else takes one RTT.
fn losing(lost: &'static [u64]) -> impl Fn(Nanos, u64, u32) -> Option<Nanos> {
    move |sent, seq, nth| (nth > 1 || !lost.contains(&seq)).then_some(sent + RTT)
}

#[test]
fn linux_recovery_repairs_three_losses_of_one_window_in_one_round_trip() {
    // A window of 20 (0..19, in congestion avoidance) loses 3, 7 and 8. At 100 ms the ACKs of
    // 0..2 send 20..22; 4 and 5 are SACKed (23, 24 go: in flight stays under cwnd); the third
    // SACKed segment (6) marks 3 lost (sent before a delivered one) and starts recovery:
    // ssthresh = ⌊cwnd 20.15⌋ / 2 = 10 (Linux halves the window, not the flight), PRR lets
    // ⌈10·k/20⌉ segments out by the k-th delivered one — 3 at once (the forced first), 7 and
    // 8 (RACK marks them when 9 is SACKed) at k = 3 and 5.
    // All three arrive at 200 ms, and everything up to 25 is acknowledged then.
    let mut s = Sender::new(config(Recovery::Linux, Variant::Reno, 20.0, true));
    let r = run(&mut s, &losing(&[3, 7, 8]), 25);
    assert_eq!(r.retransmitted, vec![3, 7, 8]);
    assert_eq!(r.done, 2 * RTT);
    let st = s.stats();
    assert_eq!(
        (st.fast_retransmits, st.timeouts, st.retransmissions),
        (3, 0, 3)
    );
    assert_eq!(s.ssthresh(), 10.0);
    // Classic NewReno repairs one hole per round trip: 3 at 100 ms, 7 on the partial ACK at
    // 200 ms, 8 on the next at 300 ms, acknowledged at 400 ms.
    let mut s = Sender::new(config(Recovery::Classic, Variant::NewReno, 20.0, true));
    let r = run(&mut s, &losing(&[3, 7, 8]), 25);
    assert_eq!(r.retransmitted, vec![3, 7, 8]);
    assert_eq!(r.done, 4 * RTT);
}

#[test]
fn linux_recovery_finds_a_lost_retransmission_without_a_timeout() {
    // 3 is lost, and so is its first retransmission (sent at 100 ms). New data sent after that
    // retransmission is SACKed at 200 ms: RACK deems the retransmission lost and sends 3 a
    // third time, acknowledged at 300 ms. Classic NewReno has no way to see it: it waits for
    // its timer.
    let path = |sent: Nanos, seq: u64, nth: u32| (seq != 3 || nth > 2).then_some(sent + RTT);
    let mut s = Sender::new(config(Recovery::Linux, Variant::Reno, 20.0, true));
    let r = run(&mut s, &path, 21);
    assert_eq!(r.retransmitted, vec![3, 3]);
    assert_eq!(r.done, 3 * RTT);
    assert_eq!(s.stats().timeouts, 0);
    let mut s = Sender::new(config(Recovery::Classic, Variant::NewReno, 20.0, true));
    let r = run(&mut s, &path, 21);
    assert_eq!(r.retransmitted, vec![3, 3]);
    assert_eq!(s.stats().timeouts, 1);
}

/// Round 1 (0..9, sent at 0) takes one RTT; whatever is sent from 100 ms until 500 ms waits
/// in the path until 600 ms (a zero-rate stretch: nothing is lost), except `lost` first
/// transmissions.
fn stalling(lost: &'static [u64]) -> impl Fn(Nanos, u64, u32) -> Option<Nanos> {
    move |sent, seq, nth| {
        if nth == 1 && lost.contains(&seq) {
            return None;
        }
        Some(if (RTT..500 * MS).contains(&sent) {
            (sent + RTT).max(600 * MS)
        } else {
            sent + RTT
        })
    }
}

#[test]
fn a_spurious_timeout_is_undone_by_the_timestamp_its_ack_echoes() {
    // IW 10 in slow start: round 1's ten 100-ms samples at 100 ms leave SRTT 100 ms and
    // RTTVAR 50·0.75⁹ = 3.8 ms → RTO at its 200-ms minimum, and send 10..29 (window 20), which
    // stall until 600 ms. The timer fires at 300 ms: segment 10 is sent again (window 1,
    // ssthresh 10; the next timeout, backed off, would be at 700 ms). At 600 ms the original
    // 10 arrives first: its ACK echoes 100 ms, before the retransmission (300 ms), so the
    // timeout was spurious — the window (20) and threshold (none) come back and nothing else
    // is resent.
    let mut s = Sender::new(config(Recovery::Linux, Variant::Reno, 10.0, false));
    let r = run(&mut s, &stalling(&[]), 30);
    assert_eq!(r.retransmitted, vec![10]);
    let st = s.stats();
    assert_eq!((st.timeouts, st.undone_timeouts), (1, 1));
    assert_eq!(s.ssthresh(), f64::INFINITY);
    assert!(s.cwnd() >= 20.0, "{}", s.cwnd());
    // Classic go-back-N resends from 10 on: at 600 ms the k-th original ACK (of 10 + k)
    // opens the window to 1 + k in slow start, and una + window reaches 2k + 11 > 29 by
    // the tenth: every one of 11..29 is sent a second time, 20 retransmissions in all.
    let mut s = Sender::new(config(Recovery::Classic, Variant::Reno, 10.0, false));
    let r = run(&mut s, &stalling(&[]), 30);
    assert_eq!(s.stats().timeouts, 1);
    assert_eq!(r.retransmitted, (10..30).collect::<Vec<_>>());
}

#[test]
fn f_rto_undoes_a_timeout_when_data_sent_before_it_is_sacked() {
    // As above, but the original 10 is lost: at 600 ms 11..29 arrive before the retransmitted
    // 10 and are SACKed. No ACK echoes an old timestamp with new data acknowledged, but the
    // first SACK covers data never retransmitted: F-RTO (RFC 5682 §3.1 step 3b) calls the
    // timeout spurious. The retransmission of 10 then fills the hole: one retransmission in
    // all, where go-back-N resends 11..29 too.
    let mut s = Sender::new(config(Recovery::Linux, Variant::Reno, 10.0, false));
    let r = run(&mut s, &stalling(&[10]), 30);
    assert_eq!(r.retransmitted, vec![10]);
    assert_eq!(s.stats().undone_timeouts, 1);
}

#[test]
fn a_real_timeout_is_not_undone() {
    // Segments 10..29 are all lost: the timeout (at 300 ms) is real. The ACK of the resent 10
    // echoes the retransmission's own timestamp and acknowledges only retransmitted data; F-RTO
    // then sends new data (30, 31), whose SACKs (beyond the data the timeout concerned) say
    // the loss was real. Nothing is undone, and 11..29 are each resent once in slow start.
    let lost: &'static [u64] = &[
        10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    ];
    let mut s = Sender::new(config(Recovery::Linux, Variant::Reno, 10.0, false));
    let r = run(&mut s, &losing(lost), 30);
    assert_eq!(r.retransmitted, (10..30).collect::<Vec<_>>());
    let st = s.stats();
    assert_eq!((st.timeouts, st.undone_timeouts), (1, 0));
}

#[test]
fn byte_counting_grows_by_segments_acknowledged() {
    // An ACK of two segments: +2 in slow start, +1/10 + 1/10.1 in avoidance; per ACK: +1, +1/10.
    for (byte_counting, slow, avoid) in [(true, 12.0, 10.0 + 0.1 + 1.0 / 10.1), (false, 11.0, 10.1)]
    {
        let grow = |ssthresh: f64| {
            let mut s = Sender::new(TcpConfig {
                initial_window: 10.0,
                initial_ssthresh: ssthresh,
                byte_counting,
                ..TcpConfig::default()
            });
            let mut out = Vec::new();
            s.start(0, &mut out);
            s.on_ack(2, RTT, &mut out);
            s.cwnd()
        };
        assert_eq!(grow(f64::INFINITY), slow);
        assert!((grow(10.0) - avoid).abs() < 1e-12, "{}", grow(10.0));
    }
}

#[test]
fn linux_rto_adds_the_minimum_to_srtt() {
    // One segment at a time (receive window 1), each acknowledged 100 ms after it was sent:
    // RTTVAR decays toward 0. RFC 6298's RTO is then its 200-ms floor; Linux's is SRTT + the
    // 200-ms minimum = 300 ms.
    for (estimator, rto) in [
        (RtoEstimator::Rfc6298, 200 * MS),
        (RtoEstimator::Linux, 300 * MS),
    ] {
        let mut s = Sender::new(TcpConfig {
            initial_window: 1.0,
            receive_window: 1,
            min_rto: 200 * MS,
            rto_estimator: estimator,
            ..TcpConfig::default()
        });
        let mut out = Vec::new();
        s.start(0, &mut out);
        for k in 1..=60u64 {
            s.on_ack(k, k * RTT, &mut out);
        }
        assert!(s.rto().abs_diff(rto) < MS, "{estimator:?}: {}", s.rto());
    }
}

#[test]
fn receiver_reports_sack_blocks_newest_first_and_echoes_timestamps() {
    // Segment k is sent at k ms. 0 arrives, then 2, 3, 5, 7, 6, 1.
    let mut r = Receiver::new(None, true);
    let mut at = |seq: u64| {
        r.on_segment(seq, seq * MS, 100 * MS)
            .expect("no delayed ACKs")
    };
    let ack = |next, sack: &[(u64, u64)], echo: u64| Ack {
        next,
        sack: sack.to_vec(),
        echo: Some(echo * MS),
    };
    assert_eq!(at(0), ack(1, &[], 0));
    // Out of order: the block of the newest arrival first; TS.Recent stays 0's (RFC 7323
    // takes no timestamp from beyond the last ACK's edge).
    assert_eq!(at(2), ack(1, &[(2, 3)], 0));
    assert_eq!(at(3), ack(1, &[(2, 4)], 0));
    assert_eq!(at(5), ack(1, &[(5, 6), (2, 4)], 0));
    assert_eq!(at(7), ack(1, &[(7, 8), (5, 6), (2, 4)], 0));
    assert_eq!(at(6), ack(1, &[(5, 8), (2, 4)], 0));
    // 1 fills the first hole: ACK 4, its own timestamp echoed.
    assert_eq!(at(1), ack(4, &[(5, 8)], 1));
}

#[test]
fn a_window_the_receiver_limits_does_not_grow() {
    // Receive window 5, IW 2, slow start: Linux grows the window only while it limits the
    // sending (`tcp_is_cwnd_limited`; in slow start, up to twice what is in flight): 2, 4,
    // then 5 in flight at most, so it stops at 10. The classic model grows on every ACK.
    for (recovery, cwnd) in [(Recovery::Linux, 10.0), (Recovery::Classic, 2.0 + 40.0)] {
        let mut s = Sender::new(TcpConfig {
            initial_window: 2.0,
            receive_window: 5,
            recovery,
            ..TcpConfig::default()
        });
        let mut out = Vec::new();
        s.start(0, &mut out);
        for k in 1..=40u64 {
            s.on_ack(k, k * RTT, &mut out);
        }
        assert_eq!(s.cwnd(), cwnd, "{recovery:?}");
    }
}
