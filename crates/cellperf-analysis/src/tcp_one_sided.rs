//! TCP analysis from one capture, streaming: each packet updates a small per-direction
//! state, so memory is the flow state, not the capture.
//!
//! Retransmissions are classified with the sender-side heuristics Wireshark uses
//! (docs/methods.md §4, one-capture fallback): a segment resending bytes already seen is a
//! retransmission; it is *spurious* when the bytes were already acknowledged at the
//! capture point or a D-SACK later reports them as duplicate, *fast* when three duplicate
//! ACKs for its sequence number preceded it, and *RTO* otherwise. New bytes that fill a
//! hole within [`OUT_OF_ORDER_NS`] of the hole's appearance are out-of-order, not
//! retransmitted. RTT samples follow Karn's rule. A retransmission that re-segments the
//! data (seed 004 §V.B 2.2) covers parts of two or more original segments (*merged*) or only
//! part of one (*split*), against the first transmissions' boundaries still unacknowledged.

use std::collections::{BTreeMap, VecDeque};

use ahash::AHashMap;
use cellperf_capture::decode::tcp_flags::{ACK, FIN, RST, SYN};
use serde::Serialize;

use crate::flows::Dir;
use crate::record::TcpRec;
use crate::seq::Unwrapper;
use crate::stats::Sketch;
use crate::MAX_INTERVALS;

/// A hole filled sooner than this after it opened is reordering, not loss recovery
/// (Wireshark's default threshold for "out-of-order").
pub const OUT_OF_ORDER_NS: i64 = 3_000_000;
/// Ranges known sent from ACKs alone that are remembered per direction (a capture that
/// drops packets all along makes one per drop; the oldest are forgotten).
const MAX_UNSEEN_RANGES: usize = 256;
/// Duplicate ACKs that trigger fast retransmission (RFC 5681).
pub const DUPACK_THRESHOLD: u32 = 3;
/// First transmissions whose boundaries are remembered per direction until acknowledged
/// (a capture without the ACKs would otherwise keep every one; the oldest are forgotten).
const MAX_ORIGINALS: usize = 1 << 16;

/// How a retransmission's bytes lie against the first transmissions of those bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resegmented {
    /// It covers parts of two or more original segments.
    Merged,
    /// It lies inside one original segment and is shorter.
    Split,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OneSidedClass {
    Fast,
    Rto,
    Spurious,
}

/// One retransmitted segment as seen at this capture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retransmission {
    pub ts_ns: i64,
    pub dir: Dir,
    /// Offset of its first byte from the direction's first byte (ISN + 1, or the first
    /// data byte seen when the capture missed the handshake).
    pub rel_seq: u64,
    pub len: u32,
    pub class: OneSidedClass,
    /// The same bytes were retransmitted before (exponential backoff).
    pub serial: bool,
    /// Boundaries unlike the original segments' (`None`: the same, or originals unknown).
    pub resegmented: Option<Resegmented>,
}

#[derive(Debug, Default, Clone)]
struct DirState {
    seq_space: Unwrapper,
    started: bool,
    /// Sequence position of the direction's first byte.
    base: u64,
    max_end: u64,
    holes: Vec<(u64, u64, i64)>,
    unique_bytes: u64,
    data_packets: u64,
    payload_bytes: u64,
    retx_times: AHashMap<u64, u32>,
    out_of_order: u64,
    /// The SYN's sequence number, once seen; a SYN that repeats it is a resend.
    isn: Option<u64>,
    syn_retransmissions: u64,
    /// Resends of bytes whose original the capture missed (see `sent_before`).
    original_not_captured: u64,
    /// Ranges known to have been sent only from the peer's ACKs and SACKs, or from this
    /// direction's own pure ACKs.
    unseen: Vec<(u64, u64)>,
    /// The highest sequence number this direction's pure ACKs carried: its sender had sent
    /// every byte below it (tshark takes it for the next sequence number too).
    own_edge: SentEdge,
    // As the receiver of the opposite direction's data (acks it sends):
    highest_ack: u64,
    /// Highest ACK or SACK edge it sent, as of a moment (see `SentEdge`).
    sent_edge: SentEdge,
    last_ack_raw: Option<u32>,
    last_window: u16,
    dupack_run: u32,
    dup_acks: u64,
    zero_windows: u64,
    window_scale: Option<u8>,
    // Outstanding segments for RTT: (end, send time, retransmitted).
    outstanding: VecDeque<(u64, i64, bool)>,
    /// First transmissions not yet acknowledged, start → end of their payload.
    originals: BTreeMap<u64, u64>,
    rtt_ns: Sketch,
    mss: Option<u16>,
    /// Unique payload bytes per interval since the flow's first packet.
    interval_bytes: Vec<u64>,
}

/// Streaming state of one TCP connection at one capture.
#[derive(Debug, Clone)]
pub struct TcpOneSided {
    dirs: [DirState; 2],
    t0: i64,
    bins: IntervalClock,
    retransmissions: Vec<Retransmission>,
    /// Index of a retransmission in `retransmissions` by (direction, start), for D-SACK.
    by_start: AHashMap<(u8, u64), usize>,
    keep_rtt_samples: bool,
    rtt_samples: Vec<(i64, Dir, f64)>,
    /// Data packets later than [`MAX_INTERVALS`] intervals after `t0`, not in the series.
    past_series: u64,
}

/// The interval a timestamp falls in, counted from `t0`. It remembers the last interval's
/// span: packets come in time order, so nearly all of them skip a 64-bit division.
#[derive(Debug, Clone)]
struct IntervalClock {
    t0: i64,
    interval_ns: i64,
    /// The last interval: its index and [start, end).
    last: (usize, i64, i64),
}

impl IntervalClock {
    fn new(t0: i64, interval_ns: i64) -> Self {
        let interval_ns = interval_ns.max(1);
        IntervalClock { t0, interval_ns, last: (0, t0, t0.saturating_add(interval_ns)) }
    }

    /// Interval index of `ts` (0 for anything before `t0`).
    fn index(&mut self, ts: i64) -> usize {
        let (i, start, end) = self.last;
        if ts >= start && ts < end {
            return i;
        }
        let i = ts.saturating_sub(self.t0).max(0) / self.interval_ns;
        let start = self.t0.saturating_add(i.saturating_mul(self.interval_ns));
        self.last = (i as usize, start, start.saturating_add(self.interval_ns));
        i as usize
    }
}

/// Results of one direction of data.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DirSummary {
    pub data_packets: u64,
    pub payload_bytes: u64,
    pub unique_bytes: u64,
    pub retransmissions: u64,
    pub fast: u64,
    pub rto: u64,
    pub spurious: u64,
    pub serial: u64,
    /// Retransmissions that re-segmented the data (see [`Resegmented`]).
    pub merged: u64,
    pub split: u64,
    pub out_of_order: u64,
    /// Duplicate ACKs the receiver of this data sent.
    pub dup_acks: u64,
    /// Zero-window advertisements by the receiver of this data.
    pub zero_windows: u64,
    pub mss: Option<u16>,
    /// Resends of this direction's SYN (or SYN/ACK), with any data they carry, apart from
    /// data retransmissions.
    pub syn_retransmissions: u64,
    /// Retransmissions whose original the capture did not hold: an ACK or SACK from the
    /// peer showed the bytes had been sent before.
    pub original_not_captured: u64,
}

impl TcpOneSided {
    pub fn new(t0: i64, interval_ns: i64, keep_rtt_samples: bool) -> Self {
        TcpOneSided {
            dirs: [DirState::default(), DirState::default()],
            t0,
            bins: IntervalClock::new(t0, interval_ns),
            retransmissions: Vec::new(),
            by_start: AHashMap::new(),
            keep_rtt_samples,
            rtt_samples: Vec::new(),
            past_series: 0,
        }
    }

    /// Takes the flow's next packet, with its SACK blocks.
    pub fn push(&mut self, r: &TcpRec, sack: &[(u32, u32)]) {
        let d = r.dir.index();
        let o = r.dir.reverse().index();
        let mut syn_resend = false;
        if r.has(SYN) {
            let st = &mut self.dirs[d];
            let isn = st.seq_space.unwrap(r.seq);
            // A resent SYN is a setup resend, the data it may carry included (not a data
            // retransmission: see `DirSummary::syn_retransmissions`).
            syn_resend = st.isn == Some(isn);
            st.syn_retransmissions += syn_resend as u64;
            st.isn = Some(isn);
            st.started = true;
            st.base = isn + 1;
            st.max_end = st.max_end.max(isn + 1);
            st.mss = r.mss.or(st.mss);
            st.window_scale = r.window_scale;
        }
        if r.has(ACK) {
            self.on_ack(r, sack, d, o);
        }
        if (r.payload_len > 0 && !syn_resend) || (r.has(FIN) && !r.has(SYN)) {
            self.on_data(r, d, o);
        }
    }

    fn on_ack(&mut self, r: &TcpRec, sack: &[(u32, u32)], d: usize, o: usize) {
        let ack = self.dirs[o].seq_space.unwrap(r.ack);
        let is_pure = r.payload_len == 0 && !r.has(SYN) && !r.has(FIN) && !r.has(RST);
        if r.window == 0 && !r.has(RST) && !r.has(SYN) {
            self.dirs[d].zero_windows += 1;
        }
        if is_pure {
            let me = &mut self.dirs[d];
            let next = me.seq_space.unwrap(r.seq);
            me.own_edge.raise(next, r.ts_ns);
        }
        // Duplicate ACK: same ack and window, no data, with data outstanding.
        {
            let (me, peer) = two(&mut self.dirs, d, o);
            let outstanding = peer.max_end > ack;
            if is_pure && me.last_ack_raw == Some(r.ack) && me.last_window == r.window && outstanding {
                me.dupack_run += 1;
                me.dup_acks += 1;
            } else if me.last_ack_raw != Some(r.ack) {
                me.dupack_run = 0;
            }
            me.last_ack_raw = Some(r.ack);
            me.last_window = r.window;
        }
        // D-SACK (RFC 2883): a first SACK block below the cumulative ACK, or inside the
        // second block, reports duplicate data, i.e. a spurious retransmission.
        if let Some(&(l, rr)) = sack.first() {
            let left = self.dirs[o].seq_space.peek(l);
            let right = self.dirs[o].seq_space.peek(rr);
            let inside_second = sack.len() > 1 && {
                let (l2, r2) = sack[1];
                left >= self.dirs[o].seq_space.peek(l2) && right <= self.dirs[o].seq_space.peek(r2)
            };
            let dsack = right <= ack || inside_second;
            if !dsack {
                let space = self.dirs[o].seq_space;
                let edge = sack.iter().map(|&(_, rr)| space.peek(rr)).max().unwrap_or(0);
                self.dirs[d].sent_edge.raise(edge, r.ts_ns);
            }
            if dsack {
                if let Some(&i) = self.by_start.get(&(o as u8, left)) {
                    let rx = &mut self.retransmissions[i];
                    if rx.class != OneSidedClass::Spurious {
                        rx.class = OneSidedClass::Spurious;
                    }
                }
            }
        }
        if ack > self.dirs[d].highest_ack {
            self.dirs[d].highest_ack = ack;
            self.dirs[d].sent_edge.raise(ack, r.ts_ns);
            // Karn: sample only from the newest segment this ACK covers, never a resent one.
            let originals = &mut self.dirs[o].originals;
            while originals.first_key_value().is_some_and(|(_, &end)| end <= ack) {
                originals.pop_first();
            }
            let out = &mut self.dirs[o].outstanding;
            let mut last = None;
            while let Some(&(end, ts, retx)) = out.front() {
                if end > ack {
                    break;
                }
                last = Some((end, ts, retx));
                out.pop_front();
            }
            if let Some((_, ts, false)) = last {
                let rtt = (r.ts_ns - ts) as f64;
                if rtt >= 0.0 {
                    self.dirs[o].rtt_ns.add(rtt);
                    if self.keep_rtt_samples {
                        self.rtt_samples.push((r.ts_ns, Dir::from_index(o), rtt / 1e6));
                    }
                }
            }
        }
    }

    fn on_data(&mut self, r: &TcpRec, d: usize, o: usize) {
        let len = r.payload_len as u64 + (r.has(FIN) as u64);
        let acked_by_peer = self.dirs[o].highest_ack;
        // Bytes below the peer's highest ACK or SACK edge, or below the sequence number of
        // one of the sender's own pure ACKs, were sent before, even when the capture did not
        // see them (it began mid-connection, or dropped them). Only edges recorded a
        // reordering window earlier count: see `SentEdge`.
        let recorded_before = r.ts_ns - OUT_OF_ORDER_NS;
        let acked_before = self.dirs[o].sent_edge.as_of(recorded_before);
        let sent_before = acked_before.max(self.dirs[d].own_edge.as_of(recorded_before));
        let peer_dupacks = self.dirs[o].dupack_run;
        let peer_last_ack = self.dirs[o].last_ack_raw;
        let st = &mut self.dirs[d];
        let start = st.seq_space.unwrap(r.data_seq());
        let end = start + len;
        if !st.started {
            st.started = true;
            st.base = start;
            st.max_end = start;
        }
        if start < sent_before && sent_before > st.max_end {
            if st.unseen.len() >= MAX_UNSEEN_RANGES {
                st.unseen.remove(0);
            }
            st.unseen.push((st.max_end, sent_before));
            st.max_end = sent_before;
        }
        if r.payload_len > 0 {
            st.data_packets += 1;
            st.payload_bytes += r.payload_len as u64;
        }
        let mut new_bytes;
        let mut seen_before = false;
        let mut in_hole_since = None;
        if start >= st.max_end {
            if start > st.max_end {
                st.holes.push((st.max_end, start, r.ts_ns));
            }
            new_bytes = end - start;
            st.max_end = end;
        } else {
            // Bytes below max_end: new only where they fall in a hole.
            let mut covered_new = 0u64;
            let mut i = 0;
            while i < st.holes.len() {
                let (hl, hr, hts) = st.holes[i];
                let (l, rr) = (start.max(hl), end.min(hr));
                if l < rr {
                    covered_new += rr - l;
                    in_hole_since = Some(in_hole_since.map_or(hts, |x: i64| x.min(hts)));
                    st.holes.remove(i);
                    if hl < l {
                        st.holes.insert(i, (hl, l, hts));
                        i += 1;
                    }
                    if rr < hr {
                        st.holes.insert(i, (rr, hr, hts));
                        i += 1;
                    }
                } else {
                    i += 1;
                }
            }
            let below = end.min(st.max_end) - start;
            seen_before = covered_new < below;
            if end > st.max_end {
                covered_new += end - st.max_end;
                st.max_end = end;
            }
            new_bytes = covered_new;
        }
        // The FIN takes one sequence number but carries no data: goodput counts payload only.
        if r.has(FIN) && new_bytes > 0 {
            new_bytes -= 1;
        }
        st.unique_bytes += new_bytes;
        let bin = self.bins.index(r.ts_ns);
        if bin < MAX_INTERVALS {
            if st.interval_bytes.len() <= bin {
                st.interval_bytes.resize(bin + 1, 0);
            }
            st.interval_bytes[bin] += new_bytes;
        } else {
            self.past_series += 1;
        }

        let filled_hole_late = in_hole_since.is_some_and(|since| r.ts_ns - since >= OUT_OF_ORDER_NS);
        let is_retx = seen_before || filled_hole_late;
        if !is_retx && in_hole_since.is_some() {
            st.out_of_order += 1;
        }
        if is_retx {
            st.original_not_captured += take_range(&mut st.unseen, start, end) as u64;
            let times = st.retx_times.entry(start).or_insert(0);
            *times += 1;
            let serial = *times > 1;
            let class = if end <= acked_by_peer {
                OneSidedClass::Spurious
            } else if peer_dupacks >= DUPACK_THRESHOLD && peer_last_ack == Some(r.seq) {
                OneSidedClass::Fast
            } else {
                OneSidedClass::Rto
            };
            for seg in st.outstanding.iter_mut() {
                if seg.0 > start {
                    seg.2 = true;
                }
            }
            let resegmented = resegmentation(&st.originals, start, start + r.payload_len as u64);
            self.by_start.insert((d as u8, start), self.retransmissions.len());
            self.retransmissions.push(Retransmission {
                ts_ns: r.ts_ns,
                dir: r.dir,
                rel_seq: start - st.base.min(start),
                len: r.payload_len,
                class,
                serial,
                resegmented,
            });
        } else if new_bytes > 0 {
            st.outstanding.push_back((end, r.ts_ns, false));
            if r.payload_len > 0 {
                if st.originals.len() >= MAX_ORIGINALS {
                    st.originals.pop_first();
                }
                st.originals.insert(start, start + r.payload_len as u64);
            }
        }
    }

    pub fn summary(&self, dir: Dir) -> DirSummary {
        let st = &self.dirs[dir.index()];
        let rcv = &self.dirs[dir.reverse().index()];
        let mut s = DirSummary {
            data_packets: st.data_packets,
            payload_bytes: st.payload_bytes,
            unique_bytes: st.unique_bytes,
            out_of_order: st.out_of_order,
            dup_acks: rcv.dup_acks,
            zero_windows: rcv.zero_windows,
            mss: st.mss,
            syn_retransmissions: st.syn_retransmissions,
            original_not_captured: st.original_not_captured,
            ..Default::default()
        };
        for rx in self.retransmissions.iter().filter(|x| x.dir == dir) {
            s.retransmissions += 1;
            s.serial += rx.serial as u64;
            s.merged += (rx.resegmented == Some(Resegmented::Merged)) as u64;
            s.split += (rx.resegmented == Some(Resegmented::Split)) as u64;
            match rx.class {
                OneSidedClass::Fast => s.fast += 1,
                OneSidedClass::Rto => s.rto += 1,
                OneSidedClass::Spurious => s.spurious += 1,
            }
        }
        s
    }

    /// Start of the interval series (the flow's first packet at this capture).
    pub fn t0(&self) -> i64 {
        self.t0
    }

    /// RTT samples of data sent in `dir`, measured at this capture (ns).
    pub fn rtt(&self, dir: Dir) -> &Sketch {
        &self.dirs[dir.index()].rtt_ns
    }

    /// Data packets left out of the interval series (see [`MAX_INTERVALS`]).
    pub fn packets_past_series(&self) -> u64 {
        self.past_series
    }

    pub fn interval_bytes(&self, dir: Dir) -> &[u64] {
        &self.dirs[dir.index()].interval_bytes
    }

    pub fn retransmissions(&self) -> &[Retransmission] {
        &self.retransmissions
    }

    /// (time, direction of the data, RTT ms) when samples were kept.
    pub fn rtt_samples(&self) -> &[(i64, Dir, f64)] {
        &self.rtt_samples
    }
}

/// The highest ACK or SACK edge a receiver sent, as of a moment: bytes below it were sent
/// before, even if the capture never saw them. A capture may record the ACK a segment caused
/// a little before the segment itself (tcpdump at a receiver on Linux did, by 40-60 us, for
/// one segment in 20 of a window-limited download through the emulator), so a segment is
/// judged against the edges recorded at least a reordering window (`OUT_OF_ORDER_NS`)
/// before it: the resend of bytes a capture missed comes an RTT or a timeout after the ACK.
#[derive(Debug, Default, Clone)]
struct SentEdge {
    /// The highest edge recorded before every one in `recent`.
    settled: u64,
    /// Recent rises, oldest first: (edge, time recorded). A full ring settles its oldest.
    recent: [(u64, i64); SentEdge::RECENT],
    len: usize,
}

impl SentEdge {
    const RECENT: usize = 4;

    fn raise(&mut self, edge: u64, ts_ns: i64) {
        let latest = if self.len > 0 { self.recent[self.len - 1].0 } else { self.settled };
        if edge <= latest {
            return;
        }
        if self.len == Self::RECENT {
            self.settle(1);
        }
        self.recent[self.len] = (edge, ts_ns);
        self.len += 1;
    }

    /// The highest edge recorded at or before `ts_ns`.
    fn as_of(&mut self, ts_ns: i64) -> u64 {
        let n = self.recent[..self.len].iter().take_while(|&&(_, t)| t <= ts_ns).count();
        self.settle(n);
        self.settled
    }

    fn settle(&mut self, n: usize) {
        if n > 0 {
            self.settled = self.settled.max(self.recent[n - 1].0);
            self.recent.copy_within(n..self.len, 0);
            self.len -= n;
        }
    }
}

/// Whether `start..end` overlaps one of `ranges`; removes the overlap if so.
/// How the resend of payload [start, end) lies against the first transmissions (`originals`,
/// start → end, not overlapping): merged over two or more, split inside one, or `None`.
fn resegmentation(originals: &BTreeMap<u64, u64>, start: u64, end: u64) -> Option<Resegmented> {
    if end <= start {
        return None;
    }
    // Originals do not overlap, so those overlapping [start, end) are the last ones
    // starting before `end`, back to the first that ends after `start`.
    let mut hit = originals.range(..end).rev().take_while(|(_, &e)| e > start);
    let (&s0, &e0) = hit.next()?;
    if hit.next().is_some() {
        Some(Resegmented::Merged)
    } else if start >= s0 && end <= e0 && (start, end) != (s0, e0) {
        Some(Resegmented::Split)
    } else {
        None
    }
}

fn take_range(ranges: &mut Vec<(u64, u64)>, start: u64, end: u64) -> bool {
    let Some(i) = ranges.iter().position(|&(l, r)| start < r && end > l) else { return false };
    let (l, r) = ranges.swap_remove(i);
    ranges.extend([(l, start), (end, r)].into_iter().filter(|(a, b)| a < b));
    true
}

fn two<T>(v: &mut [T; 2], a: usize, b: usize) -> (&mut T, &mut T) {
    let (x, y) = v.split_at_mut(1);
    if a == 0 && b == 1 {
        (&mut x[0], &mut y[0])
    } else {
        (&mut y[0], &mut x[0])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn interval_clock_agrees_with_division_in_any_order() {
        let (t0, iv) = (1_000, 300);
        let mut c = IntervalClock::new(t0, iv);
        for ts in [1_000, 1_299, 1_300, 2_000, 1_100, 0, 999, 1_599, 1_600, 1 << 62] {
            assert_eq!(c.index(ts), ((ts - t0).max(0) / iv) as usize, "ts {ts}");
        }
        // An interval longer than the clock's range saturates instead of overflowing.
        let mut c = IntervalClock::new(5, i64::MAX);
        assert_eq!((c.index(5), c.index(1 << 62), c.index(0)), (0, 0, 0));
    }

    pub fn seg(ts_ms: i64, dir: Dir, seq: u32, len: u32, ack: u32, flags: u16) -> TcpRec {
        TcpRec {
            ts_ns: ts_ms * 1_000_000,
            dir,
            ip_id: None,
            seq,
            ack,
            payload_len: len,
            flags,
            window: 1000,
            tsval: None,
            sack_at: 0,
            sack_count: 0,
            mss: None,
            window_scale: None,
        }
    }

    const A: Dir = Dir::AtoB;
    const B: Dir = Dir::BtoA;

    fn run(recs: &[TcpRec]) -> TcpOneSided {
        let mut t = TcpOneSided::new(0, 1_000_000_000, true);
        for r in recs {
            t.push(r, &[]);
        }
        t
    }

    #[test]
    fn clean_transfer_has_no_retransmissions_and_rtt_samples() {
        let t = run(&[
            seg(0, A, 100, 0, 0, SYN),
            seg(50, B, 900, 0, 101, SYN | ACK),
            seg(100, A, 101, 0, 901, ACK),
            seg(100, A, 101, 1000, 901, ACK),
            seg(101, A, 1101, 1000, 901, ACK),
            seg(150, B, 901, 0, 1101, ACK),
            seg(151, B, 901, 0, 2101, ACK),
        ]);
        let s = t.summary(A);
        assert_eq!((s.data_packets, s.unique_bytes, s.retransmissions), (2, 2000, 0));
        assert_eq!(t.rtt(A).count(), 2);
        assert!((t.rtt(A).quantile(0.0).unwrap() - 50e6).abs() < 1.0);
    }

    #[test]
    fn resends_that_merge_or_split_original_segments_are_counted() {
        let recs = [
            seg(0, A, 100, 0, 0, SYN),
            seg(50, B, 900, 0, 101, SYN | ACK),
            seg(100, A, 101, 0, 901, ACK),
            // Six 100-byte segments: 101.., 201.., ..., 601..701.
            seg(100, A, 101, 100, 901, ACK),
            seg(101, A, 201, 100, 901, ACK),
            seg(102, A, 301, 100, 901, ACK),
            seg(103, A, 401, 100, 901, ACK),
            seg(104, A, 501, 100, 901, ACK),
            seg(105, A, 601, 100, 901, ACK),
            // The first is acknowledged, then nothing: timeouts resend the rest.
            seg(150, B, 901, 0, 201, ACK),
            seg(400, A, 201, 200, 901, ACK), // one resend over two originals: merged
            seg(401, A, 401, 100, 901, ACK), // the same boundaries: not re-segmented
            seg(402, A, 501, 50, 901, ACK),  // one original sent as two: split, twice
            seg(403, A, 551, 50, 901, ACK),
            seg(404, A, 601, 100, 901, ACK),
            seg(450, B, 901, 0, 701, ACK),
            // Bytes acknowledged before are forgotten: a spurious resend is not judged.
            seg(500, A, 101, 200, 901, ACK),
        ];
        let t = run(&recs);
        let s = t.summary(A);
        assert_eq!((s.retransmissions, s.merged, s.split), (6, 1, 2));
        let kinds: Vec<_> = t.retransmissions().iter().map(|x| x.resegmented).collect();
        use Resegmented::{Merged, Split};
        assert_eq!(kinds, [Some(Merged), None, Some(Split), Some(Split), None, None]);
    }

    #[test]
    fn resegmentation_against_originals() {
        let o: BTreeMap<u64, u64> = [(0, 100), (100, 200), (300, 400)].into_iter().collect();
        assert_eq!(resegmentation(&o, 0, 100), None);
        assert_eq!(resegmentation(&o, 50, 150), Some(Resegmented::Merged));
        assert_eq!(resegmentation(&o, 0, 400), Some(Resegmented::Merged));
        assert_eq!(resegmentation(&o, 10, 20), Some(Resegmented::Split));
        assert_eq!(resegmentation(&o, 200, 300), None, "bytes never seen sent");
        assert_eq!(resegmentation(&o, 350, 450), None, "one original and unseen bytes");
        assert_eq!(resegmentation(&o, 5, 5), None);
    }

    #[test]
    fn fast_rto_spurious_serial_and_karn() {
        let mut recs = vec![seg(0, A, 0, 0, 0, SYN), seg(10, B, 0, 0, 1, SYN | ACK)];
        for i in 0..5u32 {
            recs.push(seg(20 + i as i64, A, 1 + i * 100, 100, 1, ACK));
        }
        // Segment 1 (seq 1) lost: three duplicate acks for 1, then a fast retransmission.
        for k in 0..3 {
            recs.push(seg(40 + k, B, 1, 0, 1, ACK));
        }
        recs.push(seg(45, A, 1, 100, 1, ACK)); // fast retransmission
        recs.push(seg(60, B, 1, 0, 501, ACK)); // everything acked (no RTT sample: Karn)
        recs.push(seg(70, A, 501, 100, 1, ACK));
        recs.push(seg(400, A, 501, 100, 1, ACK)); // RTO
        recs.push(seg(1000, A, 501, 100, 1, ACK)); // serial RTO
        recs.push(seg(1010, B, 1, 0, 601, ACK));
        recs.push(seg(1020, A, 501, 100, 1, ACK)); // already acked: spurious
        let t = run(&recs);
        let s = t.summary(A);
        assert_eq!(s.retransmissions, 4);
        assert_eq!((s.fast, s.rto, s.spurious, s.serial), (1, 2, 1, 2));
        assert_eq!(s.dup_acks, 3);
        assert_eq!(s.unique_bytes, 600);
        assert_eq!(t.rtt(A).count(), 0, "every covering ack spans a retransmitted segment");
        // Offsets from the first byte after the SYN (ISN 0): seq 1 → 0, seq 501 → 500.
        let offsets: Vec<u64> = t.retransmissions().iter().map(|x| x.rel_seq).collect();
        assert_eq!(offsets, vec![0, 500, 500, 500]);
    }

    #[test]
    fn quick_hole_fill_is_reordering_and_late_fill_is_retransmission() {
        let t = run(&[
            seg(0, A, 1, 100, 0, ACK),
            seg(1, A, 201, 100, 0, ACK),
            seg(2, A, 101, 100, 0, ACK), // fills the hole 1 ms later
            seg(3, A, 401, 100, 0, ACK),
            seg(500, A, 301, 100, 0, ACK), // fills the hole 497 ms later
        ]);
        let s = t.summary(A);
        assert_eq!(s.out_of_order, 1);
        assert_eq!(s.retransmissions, 1);
        assert_eq!(s.unique_bytes, 500);
    }

    #[test]
    fn dsack_marks_retransmission_spurious() {
        let mut t = run(&[seg(0, A, 1, 100, 0, ACK), seg(300, A, 1, 100, 0, ACK)]);
        t.push(&seg(310, B, 0, 0, 101, ACK), &[(1, 101)]);
        let s = t.summary(A);
        assert_eq!((s.retransmissions, s.spurious, s.rto), (1, 1, 0));
    }

    #[test]
    fn data_on_a_syn_is_new_data_and_a_repeated_syn_a_setup_resend() {
        // TCP Fast Open: the SYN carries 50 bytes, sent once; the SYN/ACK is sent twice.
        let t = run(&[
            seg(0, A, 1000, 50, 0, SYN),
            seg(10, B, 7000, 0, 1051, SYN | ACK),
            seg(1010, B, 7000, 0, 1051, SYN | ACK),
            seg(1020, A, 1051, 100, 7001, ACK),
            seg(1030, B, 7001, 0, 1151, ACK),
        ]);
        let (a, b) = (t.summary(A), t.summary(B));
        assert_eq!((a.unique_bytes, a.retransmissions, a.syn_retransmissions), (150, 0, 0));
        assert_eq!((b.retransmissions, b.syn_retransmissions), (0, 1));
        // A SYN sent three times counts two resends.
        let t = run(&[seg(0, A, 5, 0, 0, SYN), seg(1000, A, 5, 0, 0, SYN), seg(3000, A, 5, 0, 0, SYN)]);
        assert_eq!((t.summary(A).syn_retransmissions, t.summary(A).retransmissions), (2, 0));
    }

    #[test]
    fn a_resent_syn_with_data_is_a_setup_resend_only() {
        let t = run(&[seg(0, A, 1000, 50, 0, SYN), seg(1000, A, 1000, 50, 0, SYN), seg(1010, B, 7000, 0, 1051, SYN | ACK)]);
        let a = t.summary(A);
        assert_eq!((a.syn_retransmissions, a.retransmissions, a.unique_bytes), (1, 0, 50));
    }

    #[test]
    fn bytes_below_the_senders_own_pure_ack_were_sent_before() {
        // The capture begins mid-connection: A's pure ACK says its next byte is 5001; the
        // resend of 3001.. later is a retransmission whose original the capture missed.
        let t = run(&[seg(0, B, 7001, 100, 2001, ACK), seg(10, A, 5001, 0, 7101, ACK), seg(300, A, 3001, 1000, 7101, ACK)]);
        let s = t.summary(A);
        assert_eq!((s.retransmissions, s.original_not_captured), (1, 1));
    }

    #[test]
    fn resends_of_bytes_the_capture_never_saw_are_known_by_the_acks() {
        // The capture starts mid-connection: the receiver acknowledges up to 5001 and SACKs
        // up to 7001 before any data is seen; then 3001.., 5001.. and 7001.. arrive.
        let mut t = run(&[seg(0, B, 1, 0, 5001, ACK)]);
        t.push(&seg(1, B, 1, 0, 5001, ACK), &[(6001, 7001)]);
        for r in [seg(20, A, 3001, 1000, 1, ACK), seg(21, A, 5001, 1000, 1, ACK), seg(22, A, 7001, 1000, 1, ACK)] {
            t.push(&r, &[]);
        }
        let s = t.summary(A);
        assert_eq!((s.retransmissions, s.spurious, s.rto, s.original_not_captured), (2, 1, 1, 2));
        assert_eq!(s.unique_bytes, 1000, "only 7001.. is new");
    }

    #[test]
    fn an_ack_recorded_just_before_the_segment_it_acknowledges_is_capture_order() {
        // tcpdump at a receiver recorded ACK 7301 40 us before the segment 7241..7301 it
        // acknowledges, then ACK 10197 before 8749.. and 10197..: all new data, none resent.
        let us = |t: i64, mut r: TcpRec| {
            r.ts_ns = t * 1000;
            r
        };
        let mut t = run(&[us(0, seg(0, A, 1, 7240, 1, ACK)), us(100, seg(0, B, 1, 0, 7241, ACK))]);
        for r in [us(500, seg(0, B, 1, 0, 7301, ACK)), us(540, seg(0, A, 7241, 60, 1, ACK)),
                  us(90_000, seg(0, A, 7301, 1448, 1, ACK)), us(95_000, seg(0, B, 1, 0, 10197, ACK)),
                  us(95_060, seg(0, A, 8749, 1448, 1, ACK)), us(95_100, seg(0, A, 10197, 1448, 1, ACK))] {
            t.push(&r, &[]);
        }
        let s = t.summary(A);
        assert_eq!((s.unique_bytes, s.retransmissions, s.original_not_captured), (7240 + 60 + 3 * 1448, 0, 0));
        // The same segment 10 ms after that ACK is a resend whose original the capture missed.
        let mut t = run(&[us(0, seg(0, A, 1, 7240, 1, ACK)), us(500, seg(0, B, 1, 0, 7301, ACK))]);
        t.push(&us(10_500, seg(0, A, 7241, 60, 1, ACK)), &[]);
        let s = t.summary(A);
        assert_eq!((s.unique_bytes, s.retransmissions, s.original_not_captured), (7240, 1, 1));
    }

    #[test]
    fn fin_is_not_payload() {
        let t = run(&[seg(0, A, 1, 100, 0, ACK), seg(1, A, 101, 50, 0, ACK | FIN)]);
        assert_eq!(t.summary(A).unique_bytes, 150);
    }

    #[test]
    fn a_packet_decades_ahead_is_left_out_of_the_series() {
        let far = (crate::MAX_INTERVALS as i64 + 5) * 1000; // ms, with 1 s intervals
        let t = run(&[seg(0, A, 1, 100, 0, ACK), seg(far, A, 101, 100, 0, ACK)]);
        assert_eq!(t.interval_bytes(A), &[100]);
        assert_eq!(t.packets_past_series(), 1);
        assert_eq!(t.summary(A).unique_bytes, 200);
    }

    #[test]
    fn zero_window_and_interval_bytes() {
        let mut z = seg(1500, B, 0, 0, 101, ACK);
        z.window = 0;
        let t = run(&[seg(0, A, 1, 100, 0, ACK), seg(1200, A, 101, 300, 0, ACK), z]);
        assert_eq!(t.summary(A).zero_windows, 1);
        assert_eq!(t.interval_bytes(A), &[100, 300]);
    }
}
