//! A TCP bulk sender and its receiver in virtual time, counted in segments.
//!
//! The sender always has data (a bulk transfer). Sequence numbers count segments from 0; an
//! acknowledgment carries the next segment the receiver expects (cumulative). What the sender
//! does follows the RFCs closely enough to be checked by hand:
//! - slow start and congestion avoidance per RFC 5681 §3.1 (cwnd += 1 per ACK of new data
//!   below ssthresh, += 1/cwnd above; ssthresh = max(FlightSize/2, 2) on loss);
//! - fast retransmit on the third duplicate ACK and fast recovery (RFC 5681 §3.2): Reno leaves
//!   recovery on the first ACK of new data, NewReno (RFC 6582) stays until everything sent
//!   before the loss is acknowledged, retransmitting one hole per partial ACK;
//! - the retransmission timer of RFC 6298 (SRTT/RTTVAR, clock granularity G, a minimum and
//!   a maximum), Karn's rule (no RTT sample from a retransmitted segment, nor, as BSD times
//!   segments, from one in flight when a loss was repaired: its ACK may wait for the hole to
//!   fill and would inflate the RTO) and exponential
//!   backoff; a timeout sets cwnd to 1 and goes back to the first unacknowledged segment;
//! - Cubic (RFC 9438) and Vegas (Brakmo and Peterson, 1995) change only how the window grows
//!   and shrinks (`congestion.rs`).
//!
//! The receiver acknowledges every segment, or with delayed ACKs every second one and after a
//! timeout, and at once when a segment is out of order, fills a hole or is a duplicate
//! (RFC 5681 §4.2). Its advertised window is fixed: the application reads at once.
use crate::congestion::{Controller, Variant};
use cellperf_link::Nanos;
use std::collections::{BTreeSet, VecDeque};

/// What the sender and receiver are configured with (docs/simulate.md lists the defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct TcpConfig {
    pub variant: Variant,
    /// Initial congestion window, segments.
    pub initial_window: f64,
    /// Initial slow-start threshold, segments (infinite for "no threshold").
    pub initial_ssthresh: f64,
    /// The receiver's advertised window, segments.
    pub receive_window: u64,
    /// Duplicate ACKs that trigger a fast retransmit.
    pub dupack_threshold: u32,
    pub initial_rto: Nanos,
    pub min_rto: Nanos,
    pub max_rto: Nanos,
    /// RFC 6298's clock granularity G: RTO ≥ SRTT + G.
    pub granularity: Nanos,
    /// Delayed ACKs: acknowledge every second segment, or after this long. `None`: every segment.
    pub delayed_ack: Option<Nanos>,
    /// How the RTO is estimated from RTT samples.
    pub rto_estimator: RtoEstimator,
    /// From when the retransmission timer of the oldest unacknowledged segment runs.
    pub rto_timer: RtoTimer,
    /// What a timeout resends.
    pub timeout_recovery: TimeoutRecovery,
}

/// The retransmission timeout's estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoEstimator {
    /// RFC 6298: SRTT and RTTVAR, RTO = SRTT + max(G, 4·RTTVAR).
    Rfc6298,
    /// RFC 793 §3.7 (the textbook estimator of Comer's book, before Jacobson):
    /// SRTT = 7/8·SRTT + 1/8·R, RTO = 2·SRTT (β = 2), no variance term.
    Classic,
}

/// When the timer of the oldest unacknowledged segment started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoTimer {
    /// RFC 6298 §5.3: restarted by every ACK of new data (a slow but moving queue never
    /// times out).
    Ack,
    /// Per segment, from its (latest) transmission: a segment times out when its own ACK is
    /// later than one RTO after it was sent, however the ACKs before it came (a simulator
    /// that keeps one timer per segment, as Comer's book describes retransmission).
    Segment,
}

/// What the sender resends after a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutRecovery {
    /// Back to the first unacknowledged segment; the window then resends everything after it
    /// (BSD's go-back-N, RFC 5681/6298).
    GoBackN,
    /// Only the first unacknowledged segment; new data continues from where sending stopped.
    OneSegment,
}

impl RtoEstimator {
    pub const NAMES: [&'static str; 2] = ["rfc6298", "classic"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "rfc6298" => Some(Self::Rfc6298),
            "classic" => Some(Self::Classic),
            _ => None,
        }
    }
}

impl RtoTimer {
    pub const NAMES: [&'static str; 2] = ["ack", "segment"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ack" => Some(Self::Ack),
            "segment" => Some(Self::Segment),
            _ => None,
        }
    }
}

impl TimeoutRecovery {
    pub const NAMES: [&'static str; 2] = ["go-back-n", "one-segment"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "go-back-n" => Some(Self::GoBackN),
            "one-segment" => Some(Self::OneSegment),
            _ => None,
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            variant: Variant::Reno,
            initial_window: 1.0,
            initial_ssthresh: f64::INFINITY,
            receive_window: 1 << 20,
            dupack_threshold: 3,
            initial_rto: 1_000_000_000,
            min_rto: 1_000_000_000,
            max_rto: 60_000_000_000,
            granularity: 1_000_000,
            delayed_ack: None,
            rto_estimator: RtoEstimator::Rfc6298,
            rto_timer: RtoTimer::Ack,
            timeout_recovery: TimeoutRecovery::GoBackN,
        }
    }
}

/// What a sender did, for the run's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments put on the wire, retransmissions included.
    pub segments_sent: u64,
    pub retransmissions: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
}

/// Per segment in flight: when it was first sent and whether its ACK may time it (Karn).
#[derive(Debug, Clone, Copy)]
struct InFlight {
    sent: Nanos,
    /// Its latest transmission (the per-segment timer runs from here).
    last_sent: Nanos,
    timed: bool,
}

pub struct Sender {
    cfg: TcpConfig,
    cc: Controller,
    /// Oldest unacknowledged segment.
    snd_una: u64,
    /// Next segment to send (goes back to `snd_una` after a timeout).
    snd_nxt: u64,
    /// One past the highest segment ever sent.
    snd_max: u64,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    in_recovery: bool,
    /// NewReno's recovery point: one past the highest segment sent when the loss was detected.
    recover: Option<u64>,
    /// Whether the segment at `snd_una` has already been retransmitted by the timer
    /// (ssthresh is then held, RFC 5681 §3.1).
    una_timed_out: bool,
    srtt: Option<f64>,
    rttvar: f64,
    rto: Nanos,
    rto_deadline: Option<Nanos>,
    /// Segments in [snd_una, snd_max).
    flight: VecDeque<InFlight>,
    last_rtt: Option<Nanos>,
    stats: SenderStats,
}

impl Sender {
    pub fn new(cfg: TcpConfig) -> Self {
        Sender {
            cc: Controller::new(cfg.variant),
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd: cfg.initial_window,
            ssthresh: cfg.initial_ssthresh,
            dupacks: 0,
            in_recovery: false,
            recover: None,
            una_timed_out: false,
            srtt: None,
            rttvar: 0.0,
            rto: cfg.initial_rto,
            rto_deadline: None,
            flight: VecDeque::new(),
            last_rtt: None,
            stats: SenderStats::default(),
            cfg,
        }
    }

    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    pub fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }

    pub fn rto(&self) -> Nanos {
        self.rto
    }

    pub fn srtt(&self) -> Option<Nanos> {
        self.srtt.map(|s| s.round() as Nanos)
    }

    /// The latest RTT sample not yet taken (cleared by taking it).
    pub fn take_rtt_sample(&mut self) -> Option<Nanos> {
        self.last_rtt.take()
    }

    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// When the retransmission timer fires, if it runs.
    pub fn next_timer(&self) -> Option<Nanos> {
        self.rto_deadline
    }

    /// Sends the initial window.
    pub fn start(&mut self, now: Nanos, out: &mut Vec<u64>) {
        self.send_allowed(now, out);
    }

    /// Segments in flight as RFC 5681 counts them (sent and not acknowledged).
    fn flight_size(&self) -> f64 {
        (self.snd_max - self.snd_una) as f64
    }

    fn window(&self) -> u64 {
        (self.cwnd.floor().max(1.0) as u64).min(self.cfg.receive_window)
    }

    fn transmit(&mut self, seq: u64, now: Nanos, out: &mut Vec<u64>) {
        if seq < self.snd_max {
            let f = &mut self.flight[(seq - self.snd_una) as usize];
            f.timed = false;
            f.last_sent = now;
            self.stats.retransmissions += 1;
        } else {
            self.flight.push_back(InFlight {
                sent: now,
                last_sent: now,
                timed: true,
            });
            self.snd_max = seq + 1;
        }
        self.stats.segments_sent += 1;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
        out.push(seq);
    }

    fn send_allowed(&mut self, now: Nanos, out: &mut Vec<u64>) {
        while self.snd_nxt < self.snd_una + self.window() {
            let seq = self.snd_nxt;
            self.snd_nxt += 1;
            self.transmit(seq, now, out);
        }
    }

    /// RFC 6298 §2: updates SRTT, RTTVAR and the RTO from one sample.
    fn sample_rtt(&mut self, r: Nanos) {
        let r = r as f64;
        if self.cfg.rto_estimator == RtoEstimator::Classic {
            let srtt = self.srtt.map_or(r, |s| 0.875 * s + 0.125 * r);
            self.srtt = Some(srtt);
            self.rto = ((2.0 * srtt).ceil() as Nanos).clamp(self.cfg.min_rto, self.cfg.max_rto);
            self.last_rtt = Some(r as Nanos);
            return;
        }
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        let srtt = self.srtt.expect("set above");
        let rto = srtt + (4.0 * self.rttvar).max(self.cfg.granularity as f64);
        self.rto = (rto.ceil() as Nanos).clamp(self.cfg.min_rto, self.cfg.max_rto);
        self.last_rtt = Some(r as Nanos);
    }

    /// Takes a cumulative ACK (`ack` = next segment the receiver expects) and appends the
    /// segments to send now to `out`.
    pub fn on_ack(&mut self, ack: u64, now: Nanos, out: &mut Vec<u64>) {
        if ack > self.snd_max {
            return; // acknowledges data never sent: ignore (RFC 5681 cannot happen here)
        }
        if ack <= self.snd_una {
            if ack == self.snd_una && self.snd_max > self.snd_una {
                self.on_duplicate_ack(now, out);
            }
            return;
        }
        let acked = ack - self.snd_una;
        // Karn: sample only from the newest acknowledged segment, and only if it was sent once.
        let newest = self.flight[(acked - 1) as usize];
        let rtt = newest.timed.then(|| now - newest.sent);
        if let Some(r) = rtt {
            self.sample_rtt(r);
        }
        self.flight.drain(..acked as usize);
        self.snd_una = ack;
        self.snd_nxt = self.snd_nxt.max(ack);
        self.una_timed_out = false;
        self.cc.on_delivered(acked, rtt, now);
        if self.in_recovery {
            self.on_ack_in_recovery(ack, acked, now, out);
        } else {
            self.dupacks = 0;
            self.cc
                .on_new_ack(&mut self.cwnd, &mut self.ssthresh, acked, rtt, now);
        }
        // RFC 6298 §5.2-5.3: stop the timer when all is acknowledged, else restart it (from
        // now, or from when the oldest unacknowledged segment was last sent).
        self.rto_deadline = self.flight.front().map(|f| match self.cfg.rto_timer {
            RtoTimer::Ack => now + self.rto,
            RtoTimer::Segment => f.last_sent + self.rto,
        });
        self.send_allowed(now, out);
    }

    fn on_ack_in_recovery(&mut self, ack: u64, acked: u64, now: Nanos, out: &mut Vec<u64>) {
        let full = match self.cfg.variant {
            // Reno leaves recovery on any ACK of new data.
            Variant::Reno => true,
            _ => self.recover.is_none_or(|r| ack >= r),
        };
        if full {
            self.in_recovery = false;
            self.dupacks = 0;
            self.cwnd = self.ssthresh;
            self.cc.on_recovery_end(self.cwnd, now);
        } else {
            // RFC 6582 §3.2 step 3, partial ACK: retransmit the next hole, deflate the window
            // by what was acknowledged, add back one segment.
            self.transmit(ack, now, out);
            self.cwnd = (self.cwnd - acked as f64 + 1.0).max(1.0);
        }
    }

    fn on_duplicate_ack(&mut self, now: Nanos, out: &mut Vec<u64>) {
        self.dupacks += 1;
        if self.in_recovery {
            // Each further duplicate means a segment left the network: inflate (RFC 5681 §3.2 step 4).
            self.cwnd += 1.0;
            self.send_allowed(now, out);
            return;
        }
        if self.dupacks != self.cfg.dupack_threshold {
            return;
        }
        // NewReno: no new fast retransmit for losses of data sent before the last recovery or
        // timeout (RFC 6582 §3.2 step 2) — those duplicates may come from go-back-N.
        if self.cfg.variant != Variant::Reno && self.recover.is_some_and(|r| self.snd_una < r) {
            return;
        }
        self.stats.fast_retransmits += 1;
        self.untime_flight();
        self.ssthresh = self
            .cc
            .ssthresh_after_loss(self.cwnd, self.flight_size(), now);
        self.recover = Some(self.snd_max);
        self.in_recovery = true;
        let una = self.snd_una;
        self.transmit(una, now, out);
        self.cwnd = self.ssthresh + self.cfg.dupack_threshold as f64;
        self.send_allowed(now, out);
    }

    /// A loss is being repaired: the ACKs of what is in flight now may wait for the hole.
    fn untime_flight(&mut self) {
        for f in &mut self.flight {
            f.timed = false;
        }
    }

    /// The retransmission timer fired at `now` (call when `now >= next_timer()`).
    pub fn on_timeout(&mut self, now: Nanos, out: &mut Vec<u64>) {
        if self.rto_deadline.is_none_or(|d| d > now) {
            return;
        }
        self.stats.timeouts += 1;
        self.untime_flight();
        if !self.una_timed_out {
            self.ssthresh = self
                .cc
                .ssthresh_after_loss(self.cwnd, self.flight_size(), now);
        }
        self.una_timed_out = true;
        self.cwnd = 1.0;
        self.cc.on_timeout(now);
        self.in_recovery = false;
        self.dupacks = 0;
        self.recover = Some(self.snd_max);
        // RFC 6298 §5.5-5.6: back off, go back to the first unacknowledged segment.
        self.rto = (self.rto.saturating_mul(2)).min(self.cfg.max_rto);
        self.rto_deadline = None;
        match self.cfg.timeout_recovery {
            TimeoutRecovery::GoBackN => {
                self.snd_nxt = self.snd_una;
                self.send_allowed(now, out);
            }
            TimeoutRecovery::OneSegment => {
                let una = self.snd_una;
                self.transmit(una, now, out);
            }
        }
    }
}

/// What a receiver got, for the run's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Segments that arrived, duplicates included.
    pub segments_received: u64,
    /// Segments delivered in order to the application (goodput).
    pub segments_delivered: u64,
    pub acks_sent: u64,
}

pub struct Receiver {
    delayed_ack: Option<Nanos>,
    rcv_nxt: u64,
    out_of_order: BTreeSet<u64>,
    /// In-order segments not yet acknowledged (delayed ACKs).
    unacked: u32,
    ack_deadline: Option<Nanos>,
    stats: ReceiverStats,
}

impl Receiver {
    pub fn new(delayed_ack: Option<Nanos>) -> Self {
        Receiver {
            delayed_ack,
            rcv_nxt: 0,
            out_of_order: BTreeSet::new(),
            unacked: 0,
            ack_deadline: None,
            stats: ReceiverStats::default(),
        }
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// When a delayed ACK is due, if one is pending.
    pub fn next_timer(&self) -> Option<Nanos> {
        self.ack_deadline
    }

    fn ack(&mut self) -> u64 {
        self.unacked = 0;
        self.ack_deadline = None;
        self.stats.acks_sent += 1;
        self.rcv_nxt
    }

    /// Takes segment `seq` at `now`; returns the ACK to send now, if any.
    pub fn on_segment(&mut self, seq: u64, now: Nanos) -> Option<u64> {
        self.stats.segments_received += 1;
        if seq < self.rcv_nxt || (seq > self.rcv_nxt && !self.out_of_order.insert(seq)) {
            return Some(self.ack()); // a duplicate: tell the sender where we are
        }
        if seq > self.rcv_nxt {
            return Some(self.ack()); // out of order: a duplicate ACK at once
        }
        let filled_hole = !self.out_of_order.is_empty();
        self.rcv_nxt += 1;
        self.stats.segments_delivered += 1;
        while self.out_of_order.first() == Some(&self.rcv_nxt) {
            self.out_of_order.pop_first();
            self.rcv_nxt += 1;
            self.stats.segments_delivered += 1;
        }
        self.unacked += 1;
        match self.delayed_ack {
            Some(delay) if !filled_hole && self.unacked < 2 => {
                self.ack_deadline.get_or_insert(now + delay);
                None
            }
            _ => Some(self.ack()),
        }
    }

    /// The delayed-ACK timer fired: returns the ACK if one was pending.
    pub fn on_timer(&mut self, now: Nanos) -> Option<u64> {
        match self.ack_deadline {
            Some(d) if d <= now => Some(self.ack()),
            _ => None,
        }
    }
}
