//! The sender's record of the segments in flight: when each was sent (for RTT samples and the
//! timer) and, for Linux's loss recovery (`Recovery::Linux`), what the SACK blocks said of it.
//!
//! Loss marking is RACK's (RFC 8985, as Linux does it by default) on a path that does not
//! reorder: a segment not yet (s)acknowledged is lost once a segment transmitted after it has
//! been delivered. Linux waits a reordering window of a quarter of the least RTT before it
//! calls a segment lost, but sets it to zero in recovery and once three segments are SACKed
//! without reordering seen (`tcp_rack_reo_wnd`), which is when this is asked. The model's path
//! is FIFO (queues, ARQ in order, delays that do not reorder), so "transmitted after" is the
//! order of transmissions, counted here, rather than a clock with a window.
use cellperf_link::Nanos;
use std::collections::VecDeque;

/// One segment in flight.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    /// First transmission.
    pub sent: Nanos,
    /// Latest transmission (the per-segment timer runs from here).
    pub last_sent: Nanos,
    /// Whether its ACK may time it (Karn).
    pub timed: bool,
    /// Order of its first and of its latest transmission among all the sender's.
    first_xmit: u64,
    xmit: u64,
    sacked: bool,
    lost: bool,
    /// A retransmission of it is in flight (not yet deemed lost).
    retrans: bool,
    retransmitted: bool,
}

/// What one ACK delivered (cumulatively acknowledged or newly SACKed), in segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Newly acknowledged cumulatively (SACKed before or not).
    pub acked: u64,
    /// Newly delivered: acknowledged without having been SACKed, or newly SACKed (PRR's
    /// `newly_acked_sacked`).
    pub delivered: u64,
    pub newly_sacked: u64,
    /// The lowest segment never retransmitted that was delivered (F-RTO's test, Linux's
    /// FLAG_ORIG_SACK_ACKED when below `high_seq`).
    pub original: Option<u64>,
    /// A retransmission was delivered (Linux's FLAG_RETRANS_DATA_ACKED).
    pub retransmission: bool,
}

#[derive(Debug, Default)]
pub struct Scoreboard {
    una: u64,
    segs: VecDeque<Segment>,
    xmits: u64,
    sacked_out: u64,
    lost_out: u64,
    retrans_out: u64,
    /// RACK: the latest transmission (by order) known delivered.
    rack_xmit: Option<u64>,
    /// First segment whose first transmission is not yet compared with `rack_xmit`.
    scan: u64,
    /// Retransmissions in the order sent: (order, segment).
    rexmits: VecDeque<(u64, u64)>,
    /// Lowest segment that may be lost and not yet retransmitted.
    hint: u64,
}

impl Scoreboard {
    /// One past the highest segment sent.
    pub fn end(&self) -> u64 {
        self.una + self.segs.len() as u64
    }

    pub fn get(&self, seq: u64) -> &Segment {
        &self.segs[(seq - self.una) as usize]
    }

    pub fn oldest(&self) -> Option<&Segment> {
        self.segs.front()
    }

    /// No ACK may time a segment now in flight (a loss is being repaired: their ACKs may
    /// wait for the hole).
    pub fn untime_all(&mut self) {
        for s in &mut self.segs {
            s.timed = false;
        }
    }

    /// Records a transmission of `seq` (new when `seq == end()`); true for a retransmission.
    pub fn sent(&mut self, seq: u64, now: Nanos) -> bool {
        let order = self.xmits;
        self.xmits += 1;
        if seq == self.end() {
            self.segs.push_back(Segment {
                sent: now,
                last_sent: now,
                timed: true,
                first_xmit: order,
                xmit: order,
                sacked: false,
                lost: false,
                retrans: false,
                retransmitted: false,
            });
            return false;
        }
        let i = (seq - self.una) as usize;
        let s = &mut self.segs[i];
        s.timed = false;
        s.last_sent = now;
        s.xmit = order;
        s.retransmitted = true;
        if !s.retrans {
            s.retrans = true;
            self.retrans_out += 1;
        }
        self.rexmits.push_back((order, seq));
        true
    }

    /// Segments in flight as Linux counts them (`tcp_packets_in_flight`): sent, neither
    /// (s)acknowledged nor deemed lost, plus retransmissions in flight.
    pub fn in_flight(&self) -> u64 {
        self.segs.len() as u64 - self.sacked_out - self.lost_out + self.retrans_out
    }

    pub fn sacked_out(&self) -> u64 {
        self.sacked_out
    }

    pub fn lost_out(&self) -> u64 {
        self.lost_out
    }

    /// A delivered segment advances RACK, unless it is a retransmission whose ACK came sooner
    /// than the least RTT after it: that ACK was for the first transmission (RFC 8985 §6.2 step 2).
    fn delivered(
        &mut self,
        seq: u64,
        s: Segment,
        now: Nanos,
        min_rtt: Option<Nanos>,
        d: &mut Delivery,
    ) {
        d.delivered += 1;
        if s.retransmitted {
            d.retransmission = true;
            if min_rtt.is_some_and(|m| now - s.last_sent < m) {
                return;
            }
        } else {
            d.original = Some(d.original.map_or(seq, |o| o.min(seq)));
        }
        self.rack_xmit = Some(self.rack_xmit.map_or(s.xmit, |x| x.max(s.xmit)));
    }

    /// Removes the segments below `next` (a cumulative ACK); returns what it delivered and
    /// the newest segment it acknowledged (for the RTT sample).
    pub fn ack(
        &mut self,
        next: u64,
        now: Nanos,
        min_rtt: Option<Nanos>,
    ) -> (Delivery, Option<Segment>) {
        let mut d = Delivery::default();
        let mut newest = None;
        while self.una < next {
            let s = self.segs.pop_front().expect("next <= end()");
            let seq = self.una;
            self.una += 1;
            d.acked += 1;
            if s.sacked {
                self.sacked_out -= 1;
            } else {
                self.delivered(seq, s, now, min_rtt, &mut d);
            }
            if s.lost {
                self.lost_out -= 1;
            }
            if s.retrans {
                self.retrans_out -= 1;
            }
            newest = Some(s);
        }
        while self.rexmits.front().is_some_and(|&(_, seq)| seq < self.una) {
            self.rexmits.pop_front();
        }
        self.scan = self.scan.max(self.una);
        self.hint = self.hint.max(self.una);
        (d, newest)
    }

    /// Marks the segments of SACK blocks [start, end); adds what that delivered to `d`.
    pub fn sack(
        &mut self,
        blocks: &[(u64, u64)],
        now: Nanos,
        min_rtt: Option<Nanos>,
        d: &mut Delivery,
    ) {
        for &(start, end) in blocks {
            for seq in start.max(self.una)..end.min(self.end()) {
                let i = (seq - self.una) as usize;
                let s = self.segs[i];
                if s.sacked {
                    continue;
                }
                self.segs[i].sacked = true;
                self.sacked_out += 1;
                if s.lost {
                    self.segs[i].lost = false;
                    self.lost_out -= 1;
                }
                if s.retrans {
                    self.segs[i].retrans = false;
                    self.retrans_out -= 1;
                }
                d.newly_sacked += 1;
                self.delivered(seq, s, now, min_rtt, d);
            }
        }
    }

    /// Deems segment `i` lost (a retransmission of it in flight too); true if that is news.
    fn mark(&mut self, i: usize) -> bool {
        let s = &mut self.segs[i];
        if s.sacked || (s.lost && !s.retrans) {
            return false;
        }
        if s.retrans {
            s.retrans = false;
            self.retrans_out -= 1;
        }
        if !s.lost {
            s.lost = true;
            self.lost_out += 1;
        }
        self.hint = self.hint.min(self.una + i as u64);
        true
    }

    /// RACK with a zero reordering window: every segment not (s)acknowledged whose latest
    /// transmission came before the latest delivered one is lost; returns how many were
    /// newly marked (first transmissions and lost retransmissions).
    pub fn mark_lost(&mut self) -> u64 {
        let Some(rack) = self.rack_xmit else {
            return 0;
        };
        let mut marked = 0;
        while self.scan < self.end() {
            let i = (self.scan - self.una) as usize;
            let s = self.segs[i];
            if s.first_xmit >= rack {
                break;
            }
            if !s.retransmitted && self.mark(i) {
                marked += 1;
            }
            self.scan += 1;
        }
        while let Some(&(order, seq)) = self.rexmits.front() {
            if order >= rack {
                break;
            }
            self.rexmits.pop_front();
            if seq >= self.una
                && self.get(seq).xmit == order
                && self.mark((seq - self.una) as usize)
            {
                marked += 1;
            }
        }
        marked
    }

    /// A retransmission timeout: everything not SACKed is lost, retransmissions in flight
    /// included (Linux's `tcp_enter_loss`).
    pub fn mark_all_lost(&mut self) {
        for i in 0..self.segs.len() {
            self.mark(i);
        }
        self.rexmits.clear();
        self.scan = self.end();
        self.hint = self.una;
    }

    /// The timeout was spurious: nothing is lost after all (Linux's `tcp_undo_cwnd_reduction`
    /// with `unmark_loss`).
    pub fn clear_lost(&mut self) {
        for s in &mut self.segs {
            s.lost = false;
        }
        self.lost_out = 0;
        self.scan = self.una; // what was sent before may still be found lost
    }

    /// The lowest segment deemed lost and not retransmitted since.
    pub fn next_lost(&mut self) -> Option<u64> {
        if self.lost_out == 0 {
            return None;
        }
        while self.hint < self.end() {
            let s = self.get(self.hint);
            if s.lost && !s.retrans {
                return Some(self.hint);
            }
            self.hint += 1;
        }
        None
    }
}
