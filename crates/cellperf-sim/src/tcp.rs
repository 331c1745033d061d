//! A TCP bulk sender in virtual time, counted in segments (its receiver: `receiver.rs`).
//!
//! The sender always has data (a bulk transfer). Sequence numbers count segments from 0; an
//! acknowledgment carries the next segment the receiver expects (cumulative). What the sender
//! does follows the RFCs closely enough to be checked by hand:
//! - slow start and congestion avoidance per RFC 5681 §3.1 (cwnd += 1 per ACK of new data
//!   below ssthresh, += 1/cwnd above, or per segment acknowledged with byte counting;
//!   ssthresh = max(FlightSize/2, 2) on loss);
//! - fast retransmit on the third duplicate ACK and fast recovery (RFC 5681 §3.2): Reno leaves
//!   recovery on the first ACK of new data, NewReno (RFC 6582) stays until everything sent
//!   before the loss is acknowledged, retransmitting one hole per partial ACK;
//! - or, with `Recovery::Linux`, what Linux does with SACK: a scoreboard of SACKed and lost
//!   segments (`scoreboard.rs`, RACK loss marking once three segments are SACKed), recovery
//!   entered when a segment is deemed lost, the window in recovery set by PRR (RFC 6937, as `tcp_cwnd_reduction`), a timeout
//!   resending only what was not SACKed, and a timeout found spurious undone — by the
//!   timestamp its first ACK echoes (Eifel detection, RFC 3522; `tcp_packet_delayed`) or by
//!   F-RTO (RFC 5682 §3.1, SACK-enhanced, as `tcp_process_loss`) — restoring the window;
//! - the retransmission timer of RFC 6298 (SRTT/RTTVAR, clock granularity G, a minimum and
//!   a maximum), Karn's rule (no RTT sample from a retransmitted segment, nor, as BSD times
//!   segments, from one in flight when a loss was repaired: its ACK may wait for the hole to
//!   fill and would inflate the RTO) and exponential
//!   backoff; a timeout sets cwnd to 1 and goes back to the first unacknowledged segment;
//! - Cubic (RFC 9438) and Vegas (Brakmo and Peterson, 1995) change only how the window grows
//!   and shrinks (`congestion.rs`).
use crate::congestion::{Controller, Variant};
use crate::receiver::Ack;
use crate::scoreboard::{Delivery, Scoreboard};
use cellperf_link::Nanos;

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
    /// How losses are found and repaired.
    pub recovery: Recovery,
    /// Grow the window per segment acknowledged rather than per ACK (RFC 3465 with no limit,
    /// as Linux's `tcp_slow_start` and `tcp_cong_avoid_ai`): delayed ACKs then do not halve
    /// the growth.
    pub byte_counting: bool,
}

/// The retransmission timeout's estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoEstimator {
    /// RFC 6298: SRTT and RTTVAR, RTO = SRTT + max(G, 4·RTTVAR).
    Rfc6298,
    /// RFC 793 §3.7 (the textbook estimator of Comer's book, before Jacobson):
    /// SRTT = 7/8·SRTT + 1/8·R, RTO = 2·SRTT (β = 2), no variance term.
    Classic,
    /// Linux's `tcp_set_rto`: RFC 6298's SRTT and RTTVAR, RTO = SRTT + max(4·RTTVAR, minimum):
    /// the minimum bounds the variance term, not the RTO.
    Linux,
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
    pub const NAMES: [&'static str; 3] = ["rfc6298", "classic", "linux"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "rfc6298" => Some(Self::Rfc6298),
            "classic" => Some(Self::Classic),
            "linux" => Some(Self::Linux),
            _ => None,
        }
    }
}

/// How the sender finds and repairs losses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Duplicate ACKs, fast retransmit and recovery as the variant has them (Reno, NewReno),
    /// go-back-N or one segment after a timeout; no SACK.
    Classic,
    /// Linux's with SACK (the module's comment): RACK marking, PRR, and spurious timeouts
    /// undone (timestamps, F-RTO).
    Linux,
}

impl Recovery {
    pub const NAMES: [&'static str; 2] = ["classic", "linux"];
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "classic" => Some(Self::Classic),
            "linux" => Some(Self::Linux),
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
            recovery: Recovery::Classic,
            byte_counting: false,
        }
    }
}

/// What a sender did, for the run's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments put on the wire, retransmissions included.
    pub segments_sent: u64,
    pub retransmissions: u64,
    /// Retransmissions not made by the timer: fast retransmits (classic: one per recovery),
    /// or every retransmission of SACK recovery (Linux; those after a timeout are the timer's).
    pub fast_retransmits: u64,
    pub timeouts: u64,
    /// Timeouts found spurious and undone (Linux recovery).
    pub undone_timeouts: u64,
}

/// Linux's congestion states (`tcp_ca_state`) as far as they matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Fast recovery: the window follows PRR until `high_seq` is acknowledged.
    Recovery,
    /// After a timeout, until `high_seq` is acknowledged.
    Loss,
}

/// What Linux recovery keeps between ACKs.
#[derive(Debug, Clone, Copy)]
struct LinuxRecovery {
    state: State,
    /// One past the highest segment sent when recovery or loss began.
    high_seq: u64,
    /// The window and threshold before the reduction, for an undo (`prior_cwnd`,
    /// `prior_ssthresh`); PRR's RecoverFS is `prior_cwnd`.
    prior_cwnd: f64,
    prior_ssthresh: f64,
    /// When the first retransmission of this episode left (`retrans_stamp`).
    retrans_stamp: Option<Nanos>,
    /// F-RTO is testing the latest timeout.
    frto: bool,
    /// F-RTO step 2b: the next transmissions are new data, not retransmissions.
    send_new: bool,
    /// PRR's counters (RFC 6937).
    prr_delivered: u64,
    prr_out: u64,
    /// The last sending stopped at the window, not the receive window (Linux's
    /// `is_cwnd_limited`), and what was in flight then (`max_packets_out`).
    cwnd_limited: bool,
    max_out: u64,
}

pub struct Sender {
    cfg: TcpConfig,
    cc: Controller,
    /// Oldest unacknowledged segment.
    snd_una: u64,
    /// Next segment to send (goes back to `snd_una` after a classic timeout).
    snd_nxt: u64,
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
    min_rtt: Option<Nanos>,
    rto: Nanos,
    rto_deadline: Option<Nanos>,
    /// Segments in [snd_una, end).
    board: Scoreboard,
    linux: LinuxRecovery,
    last_rtt: Option<Nanos>,
    stats: SenderStats,
}

impl Sender {
    pub fn new(cfg: TcpConfig) -> Self {
        Sender {
            cc: Controller::new(cfg.variant, cfg.byte_counting),
            snd_una: 0,
            snd_nxt: 0,
            cwnd: cfg.initial_window,
            ssthresh: cfg.initial_ssthresh,
            dupacks: 0,
            in_recovery: false,
            recover: None,
            una_timed_out: false,
            srtt: None,
            rttvar: 0.0,
            min_rtt: None,
            rto: cfg.initial_rto,
            rto_deadline: None,
            board: Scoreboard::default(),
            linux: LinuxRecovery {
                state: State::Open,
                high_seq: 0,
                prior_cwnd: 0.0,
                prior_ssthresh: 0.0,
                retrans_stamp: None,
                frto: false,
                send_new: false,
                prr_delivered: 0,
                prr_out: 0,
                cwnd_limited: false,
                max_out: 0,
            },
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
        match self.cfg.recovery {
            Recovery::Classic => self.in_recovery,
            Recovery::Linux => self.linux.state == State::Recovery,
        }
    }

    /// When the retransmission timer fires, if it runs.
    pub fn next_timer(&self) -> Option<Nanos> {
        self.rto_deadline
    }

    /// Sends the initial window.
    pub fn start(&mut self, now: Nanos, out: &mut Vec<u64>) {
        self.send_allowed(now, out);
    }

    /// One past the highest segment ever sent.
    fn snd_max(&self) -> u64 {
        self.board.end()
    }

    /// Segments in flight as RFC 5681 counts them (sent and not acknowledged).
    fn flight_size(&self) -> f64 {
        (self.snd_max() - self.snd_una) as f64
    }

    fn window(&self) -> u64 {
        self.cwnd.floor().max(1.0) as u64
    }

    fn transmit(&mut self, seq: u64, now: Nanos, out: &mut Vec<u64>) {
        if self.board.sent(seq, now) {
            self.stats.retransmissions += 1;
            self.linux.retrans_stamp.get_or_insert(now);
            if self.cfg.recovery == Recovery::Linux && self.linux.state != State::Loss {
                self.stats.fast_retransmits += 1;
            }
        }
        self.stats.segments_sent += 1;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto);
        }
        out.push(seq);
    }

    fn send_allowed(&mut self, now: Nanos, out: &mut Vec<u64>) {
        if self.cfg.recovery == Recovery::Linux {
            return self.send_linux(now, out);
        }
        let limit = self.snd_una + self.window().min(self.cfg.receive_window);
        while self.snd_nxt < limit {
            let seq = self.snd_nxt;
            self.snd_nxt += 1;
            self.transmit(seq, now, out);
        }
    }

    /// Linux's sending rule: while fewer than cwnd segments are in flight (`tcp_cwnd_test`),
    /// the lowest lost segment not yet retransmitted, else new data within the receive window.
    fn send_linux(&mut self, now: Nanos, out: &mut Vec<u64>) {
        while self.board.in_flight() < self.window() {
            let lost = if self.linux.send_new {
                None
            } else {
                self.board.next_lost()
            };
            let seq = match lost {
                Some(seq) => seq,
                None if self.snd_max() < self.snd_una + self.cfg.receive_window => self.snd_max(),
                None => {
                    self.linux.cwnd_limited = false;
                    self.linux.max_out = self.board.in_flight();
                    self.linux.send_new = false;
                    return;
                }
            };
            self.transmit(seq, now, out);
            if self.linux.state == State::Recovery {
                self.linux.prr_out += 1;
            }
        }
        self.linux.cwnd_limited = true;
        self.linux.max_out = self.board.in_flight();
        self.linux.send_new = false;
    }

    /// RFC 6298 §2: updates SRTT, RTTVAR and the RTO from one sample.
    fn sample_rtt(&mut self, r: Nanos) {
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
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
        let rto = match self.cfg.rto_estimator {
            RtoEstimator::Linux => srtt + (4.0 * self.rttvar).max(self.cfg.min_rto as f64),
            _ => srtt + (4.0 * self.rttvar).max(self.cfg.granularity as f64),
        };
        self.rto = (rto.ceil() as Nanos).clamp(self.cfg.min_rto, self.cfg.max_rto);
        self.last_rtt = Some(r as Nanos);
    }

    /// Takes an ACK (a segment number: the next segment the receiver expects, or an `Ack`
    /// with SACK blocks and the echoed timestamp) and appends the segments to send now to
    /// `out`.
    pub fn on_ack(&mut self, ack: impl Into<Ack>, now: Nanos, out: &mut Vec<u64>) {
        let ack = ack.into();
        if ack.next > self.snd_max() {
            return; // acknowledges data never sent: ignore (RFC 5681 cannot happen here)
        }
        if ack.next < self.snd_una {
            return; // an old ACK, overtaken
        }
        let advanced = ack.next > self.snd_una;
        let mut delivery = Delivery::default();
        let mut rtt = None;
        if advanced {
            let (d, newest) = self.board.ack(ack.next, now, self.min_rtt);
            delivery = d;
            // Karn: sample only from the newest acknowledged segment, and only if it was sent once.
            let newest = newest.expect("the ACK advanced");
            rtt = newest.timed.then(|| now - newest.sent);
            if let Some(r) = rtt {
                self.sample_rtt(r);
            }
            self.snd_una = ack.next;
            self.snd_nxt = self.snd_nxt.max(ack.next);
            self.una_timed_out = false;
            self.cc.on_delivered(delivery.acked, rtt, now);
        }
        match self.cfg.recovery {
            Recovery::Classic if advanced => {
                self.classic_new_ack(ack.next, delivery.acked, rtt, now, out)
            }
            Recovery::Classic => {
                if ack.next == self.snd_una && self.snd_max() > self.snd_una {
                    self.on_duplicate_ack(now, out);
                }
                return;
            }
            Recovery::Linux => {
                self.board.sack(&ack.sack, now, self.min_rtt, &mut delivery);
                self.linux_ack(&ack, advanced, delivery, rtt, now);
            }
        }
        if advanced {
            // RFC 6298 §5.2-5.3: stop the timer when all is acknowledged, else restart it
            // (from now, or from when the oldest unacknowledged segment was last sent).
            self.rto_deadline = self.board.oldest().map(|f| match self.cfg.rto_timer {
                RtoTimer::Ack => now + self.rto,
                RtoTimer::Segment => f.last_sent + self.rto,
            });
        }
        self.send_allowed(now, out);
    }

    fn classic_new_ack(
        &mut self,
        ack: u64,
        acked: u64,
        rtt: Option<Nanos>,
        now: Nanos,
        out: &mut Vec<u64>,
    ) {
        if self.in_recovery {
            self.on_ack_in_recovery(ack, acked, now, out);
        } else {
            self.dupacks = 0;
            self.cc
                .on_new_ack(&mut self.cwnd, &mut self.ssthresh, acked, rtt, now);
        }
    }

    /// Linux's `tcp_fastretrans_alert` and window growth for one ACK (SACK blocks already
    /// on the scoreboard).
    fn linux_ack(
        &mut self,
        ack: &Ack,
        advanced: bool,
        d: Delivery,
        rtt: Option<Nanos>,
        now: Nanos,
    ) {
        let dupack = !advanced && ack.next == self.snd_una && self.snd_max() > self.snd_una;
        match self.linux.state {
            State::Loss => self.process_loss(ack, advanced, dupack, d),
            State::Recovery if self.snd_una >= self.linux.high_seq => {
                // Recovery ends with the window at ssthresh (`tcp_end_cwnd_reduction`).
                self.cwnd = self.ssthresh;
                self.cc.on_recovery_end(self.cwnd, now);
                self.open();
            }
            _ => {}
        }
        let newly_lost = if self.linux.state != State::Open
            || self.board.sacked_out() >= self.cfg.dupack_threshold as u64
        {
            self.board.mark_lost()
        } else {
            0
        };
        // With RACK, recovery starts when a segment is deemed lost (`tcp_time_to_recover`).
        if self.linux.state == State::Open && self.board.lost_out() > 0 {
            self.enter_recovery(now);
        }
        if self.linux.state == State::Recovery {
            self.prr(d, advanced && newly_lost == 0);
        } else if advanced && d.delivered > 0 && self.cwnd_limited() {
            // Linux grows the window on ACKs of new data, by what they delivered
            // (`tcp_may_raise_cwnd`, `tcp_cong_avoid(sk, ack, acked_sacked)`), and only while
            // the window is what limits the sending.
            self.cc
                .on_new_ack(&mut self.cwnd, &mut self.ssthresh, d.delivered, rtt, now);
        }
    }

    /// Linux's `tcp_is_cwnd_limited`: the window held the sending back, or in slow start it
    /// is under twice what was in flight.
    fn cwnd_limited(&self) -> bool {
        let l = &self.linux;
        l.cwnd_limited || (self.cwnd < self.ssthresh && self.cwnd < 2.0 * l.max_out as f64)
    }

    fn open(&mut self) {
        self.linux.state = State::Open;
        self.linux.frto = false;
        self.linux.retrans_stamp = None;
    }

    fn enter_recovery(&mut self, now: Nanos) {
        self.board.untime_all();
        self.linux.prior_cwnd = self.cwnd;
        self.linux.prior_ssthresh = self.ssthresh;
        self.ssthresh = self
            .cc
            .ssthresh_after_loss(self.cwnd, self.cwnd.floor(), now);
        self.linux.high_seq = self.snd_max();
        self.linux.prr_delivered = 0;
        self.linux.prr_out = 0;
        self.linux.state = State::Recovery;
    }

    /// PRR-SSRB as Linux's `tcp_cwnd_reduction`: the window is what is in flight plus what
    /// this ACK allows (`una_advanced_cleanly`: the ACK advanced and found no new loss).
    fn prr(&mut self, d: Delivery, una_advanced_cleanly: bool) {
        let l = &mut self.linux;
        if d.delivered == 0 {
            return;
        }
        l.prr_delivered += d.delivered;
        let ssthresh = self.ssthresh.floor() as i64;
        let in_flight = self.board.in_flight() as i64;
        let delta = ssthresh - in_flight;
        let (delivered, out) = (l.prr_delivered as i64, l.prr_out as i64);
        let mut sndcnt = if delta < 0 {
            let recover_fs = l.prior_cwnd.floor().max(1.0) as i64;
            (ssthresh * delivered + recover_fs - 1) / recover_fs - out
        } else {
            let allowed =
                (delivered - out).max(d.delivered as i64) + i64::from(una_advanced_cleanly);
            delta.min(allowed)
        };
        // Force a fast retransmit upon entering recovery.
        sndcnt = sndcnt.max(i64::from(out == 0));
        self.cwnd = (in_flight + sndcnt).max(1) as f64;
    }

    /// Linux's `tcp_process_loss`: after a timeout, an ACK may show the timeout spurious
    /// (undo), start or settle F-RTO, or end the loss state.
    fn process_loss(&mut self, ack: &Ack, advanced: bool, dupack: bool, d: Delivery) {
        let recovered = self.snd_una >= self.linux.high_seq;
        // Eifel: the ACK echoes a transmission older than the first retransmission.
        let delayed = self
            .linux
            .retrans_stamp
            .is_some_and(|r| ack.echo.is_some_and(|e| e < r));
        if advanced && delayed {
            return self.undo();
        }
        if self.linux.frto {
            // F-RTO step 3b: data sent before the timeout and never retransmitted was
            // (s)acknowledged.
            if d.original.is_some_and(|s| s < self.linux.high_seq) {
                return self.undo();
            }
            if self.snd_max() > self.linux.high_seq {
                if d.newly_sacked > 0 || dupack {
                    self.linux.frto = false; // step 3a: the loss was real
                }
            } else if advanced && !recovered {
                // Step 2b: send new data rather than retransmissions, if the window lets.
                self.linux.high_seq = self.snd_max();
                if self.snd_max() < self.snd_una + self.cfg.receive_window {
                    self.linux.send_new = true;
                    return;
                }
                self.linux.frto = false;
            }
        }
        if recovered {
            self.open();
        }
    }

    /// The timeout was spurious: restore the window and threshold it reduced (Reno's
    /// `undo_cwnd`: the larger of now and before) and forget the losses it marked.
    fn undo(&mut self) {
        self.stats.undone_timeouts += 1;
        self.cwnd = self.cwnd.max(self.linux.prior_cwnd);
        self.ssthresh = self.ssthresh.max(self.linux.prior_ssthresh);
        self.board.clear_lost();
        self.open();
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
        self.board.untime_all();
        self.ssthresh = self
            .cc
            .ssthresh_after_loss(self.cwnd, self.flight_size(), now);
        self.recover = Some(self.snd_max());
        self.in_recovery = true;
        let una = self.snd_una;
        self.transmit(una, now, out);
        self.cwnd = self.ssthresh + self.cfg.dupack_threshold as f64;
        self.send_allowed(now, out);
    }

    /// The retransmission timer fired at `now` (call when `now >= next_timer()`).
    pub fn on_timeout(&mut self, now: Nanos, out: &mut Vec<u64>) {
        if self.rto_deadline.is_none_or(|d| d > now) {
            return;
        }
        self.stats.timeouts += 1;
        self.board.untime_all();
        if self.cfg.recovery == Recovery::Linux {
            self.linux_timeout(now);
        } else {
            if !self.una_timed_out {
                self.ssthresh = self
                    .cc
                    .ssthresh_after_loss(self.cwnd, self.flight_size(), now);
            }
            self.una_timed_out = true;
            self.in_recovery = false;
            self.dupacks = 0;
            self.recover = Some(self.snd_max());
        }
        self.cwnd = 1.0;
        self.cc.on_timeout(now);
        // RFC 6298 §5.5-5.6: back off, go back to the first unacknowledged segment.
        self.rto = (self.rto.saturating_mul(2)).min(self.cfg.max_rto);
        self.rto_deadline = None;
        match (self.cfg.recovery, self.cfg.timeout_recovery) {
            (Recovery::Linux, _) => self.send_allowed(now, out),
            (_, TimeoutRecovery::GoBackN) => {
                self.snd_nxt = self.snd_una;
                self.send_allowed(now, out);
            }
            (_, TimeoutRecovery::OneSegment) => {
                let una = self.snd_una;
                self.transmit(una, now, out);
            }
        }
    }

    /// Linux's `tcp_enter_loss`: a new episode (not a timeout during recovery) keeps the
    /// window and threshold for an undo and sets a new threshold; everything not SACKed is
    /// lost; F-RTO tests the timeout unless it came during fast recovery.
    fn linux_timeout(&mut self, now: Nanos) {
        let l = self.linux;
        let new_episode = l.state == State::Open || self.snd_una >= l.high_seq;
        if new_episode {
            self.linux.prior_cwnd = self.cwnd;
            self.linux.prior_ssthresh = self.ssthresh;
            self.ssthresh = self
                .cc
                .ssthresh_after_loss(self.cwnd, self.cwnd.floor(), now);
            self.linux.retrans_stamp = None;
        }
        self.linux.frto = l.state != State::Recovery;
        self.linux.state = State::Loss;
        self.linux.high_seq = self.snd_max();
        self.linux.send_new = false;
        self.board.mark_all_lost();
    }
}
