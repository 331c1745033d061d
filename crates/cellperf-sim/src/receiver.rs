//! The receiving end of a bulk flow, counted in segments, and what its ACKs carry.
//!
//! The receiver acknowledges every segment, or with delayed ACKs every second one and after a
//! timeout, and at once when a segment is out of order, fills a hole or is a duplicate
//! (RFC 5681 §4.2). Its advertised window is fixed: the application reads at once. Each ACK
//! echoes a timestamp (RFC 7323 §4.3: TS.Recent, taken from a segment that does not lie beyond
//! the last ACK sent, so a delayed ACK echoes the earlier of its two segments) and, when SACK
//! is on, up to three SACK blocks (RFC 2018 §4: the block holding the segment that caused the
//! ACK first, then the most recently reported ones; three fit beside the timestamp option).
use cellperf_link::Nanos;
use std::collections::BTreeMap;

/// SACK blocks one ACK carries (three fit in TCP's options beside the timestamps).
pub const MAX_SACK_BLOCKS: usize = 3;

/// What an ACK tells the sender.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ack {
    /// The next segment the receiver expects (cumulative).
    pub next: u64,
    /// Segments held above `next`, as [start, end) blocks, the newest first.
    pub sack: Vec<(u64, u64)>,
    /// The echoed timestamp: when the segment it answers was sent (`None`: none seen yet).
    pub echo: Option<Nanos>,
}

impl From<u64> for Ack {
    fn from(next: u64) -> Self {
        Ack {
            next,
            ..Ack::default()
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
    sack: bool,
    rcv_nxt: u64,
    /// Segments held above `rcv_nxt`, as runs start → end (exclusive).
    held: BTreeMap<u64, u64>,
    /// A segment of each block reported, the newest first (blocks merge as holes fill).
    reported: Vec<u64>,
    /// `rcv_nxt` as the last ACK sent it (RFC 7323's Last.ACK.sent).
    last_ack_sent: u64,
    /// RFC 7323's TS.Recent.
    ts_recent: Option<Nanos>,
    /// In-order segments not yet acknowledged (delayed ACKs).
    unacked: u32,
    ack_deadline: Option<Nanos>,
    stats: ReceiverStats,
}

impl Receiver {
    /// `sack`: whether ACKs carry SACK blocks.
    pub fn new(delayed_ack: Option<Nanos>, sack: bool) -> Self {
        Receiver {
            delayed_ack,
            sack,
            rcv_nxt: 0,
            held: BTreeMap::new(),
            reported: Vec::new(),
            last_ack_sent: 0,
            ts_recent: None,
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

    /// The held run [start, end) that holds `seq`, if any.
    fn run_of(&self, seq: u64) -> Option<(u64, u64)> {
        self.held
            .range(..=seq)
            .next_back()
            .map(|(&s, &e)| (s, e))
            .filter(|&(_, e)| seq < e)
    }

    fn hold(&mut self, seq: u64) {
        let mut start = seq;
        let mut end = seq + 1;
        if let Some((s, e)) = self.held.range(..seq).next_back().map(|(&s, &e)| (s, e)) {
            if e == seq {
                self.held.remove(&s);
                start = s;
            }
        }
        if let Some(e) = self.held.remove(&end) {
            end = e;
        }
        self.held.insert(start, end);
    }

    fn ack(&mut self) -> Ack {
        self.unacked = 0;
        self.ack_deadline = None;
        self.stats.acks_sent += 1;
        self.last_ack_sent = self.rcv_nxt;
        let mut sack: Vec<(u64, u64)> = Vec::new();
        if self.sack {
            self.reported.retain(|&s| s >= self.rcv_nxt);
            for &s in &self.reported {
                let run = self.held.range(..=s).next_back().map(|(&a, &b)| (a, b));
                if let Some(block) = run.filter(|&(_, e)| s < e) {
                    if !sack.contains(&block) && sack.len() < MAX_SACK_BLOCKS {
                        sack.push(block);
                    }
                }
            }
            // Keep one segment per block still reportable, in the same order.
            self.reported = sack.iter().map(|&(s, _)| s).collect();
        }
        Ack {
            next: self.rcv_nxt,
            sack,
            echo: self.ts_recent,
        }
    }

    /// Takes segment `seq`, sent at `sent` (its timestamp), arriving at `now`; returns the
    /// ACK to send now, if any.
    pub fn on_segment(&mut self, seq: u64, sent: Nanos, now: Nanos) -> Option<Ack> {
        self.stats.segments_received += 1;
        // RFC 7323 §4.3: a segment at or below the last ACK's edge updates TS.Recent.
        if seq <= self.last_ack_sent && self.ts_recent.is_none_or(|t| sent >= t) {
            self.ts_recent = Some(sent);
        }
        if seq < self.rcv_nxt || self.run_of(seq).is_some() {
            return Some(self.ack()); // a duplicate: tell the sender where we are
        }
        if seq > self.rcv_nxt {
            self.hold(seq);
            self.reported.insert(0, seq);
            return Some(self.ack()); // out of order: a duplicate ACK at once
        }
        let filled_hole = !self.held.is_empty();
        self.rcv_nxt += 1;
        self.stats.segments_delivered += 1;
        if let Some(end) = self.held.remove(&self.rcv_nxt) {
            self.stats.segments_delivered += end - self.rcv_nxt;
            self.rcv_nxt = end;
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
    pub fn on_timer(&mut self, now: Nanos) -> Option<Ack> {
        match self.ack_deadline {
            Some(d) if d <= now => Some(self.ack()),
            _ => None,
        }
    }
}
