//! TCP analysis that needs both captures (METHODS §4): retransmission classes, ACK
//! compression (000 §4.2) and the data segments' one-way delays (METHODS §12, [`crate::owd`]).
//!
//! Packets are matched across the captures by content, never by time, so a clock offset
//! between the two capture hosts changes nothing. **Choice** of keys: a data segment is
//! (sequence number, payload length, IP id, TCP TSval) and an ACK is (ack number, window,
//! sequence number, IP id, TSval); absent fields count as zero. Linux gives every TCP
//! segment of a connection a new IPv4 id and a millisecond TSval, so an original and its
//! retransmission differ. Identical keys (IPv6 without timestamps) are paired in order:
//! the k-th occurrence at one capture with the k-th at the other.
//!
//! Classes of a retransmission, judged on the previous transmission of its first byte:
//! - **normal**: that copy never reached the receiver's capture (data lost);
//! - **unavoidable**: it arrived, the receiver sent ACKs covering it before the
//!   retransmission arrived, and none of them reached the sender's capture (ACKs lost);
//! - **spurious**: it arrived and no covering ACK was lost (one arrived, only late, or the
//!   receiver had none to send yet): neither data nor ACK was lost (000 §4.2);
//! - **serial** is counted beside them: the same bytes retransmitted more than once.

use ahash::AHashMap;
use cellperf_capture::decode::tcp_flags::{ACK, FIN, RST, SYN};
use serde::Serialize;

use crate::flows::Dir;
use crate::matching::match_in_order;
use crate::owd::OwdAccumulator;
use crate::record::{TcpRec, TcpRecords};
use crate::seq::Unwrapper;

/// ΔTr/ΔTs below this marks an ACK as compressed (000 §4.2).
pub const COMPRESSION_RATIO: f64 = 0.75;
/// Consecutive compressed ACKs that make an ACK-compression event.
pub const COMPRESSION_EVENT_ACKS: usize = 3;
/// Covering ACKs scanned per retransmission at most (bounds the work on pathological flows).
const MAX_ACK_SCAN: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetxClass {
    Normal,
    Spurious,
    Unavoidable,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassifiedRetx {
    /// Send time at the sender's capture.
    pub ts_ns: i64,
    /// Sequence offset from the first data byte of the direction.
    pub rel_seq: u64,
    pub len: u32,
    pub class: RetxClass,
    pub serial: bool,
}

/// One ACK seen at both captures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckSpacing {
    /// Time the receiver sent it (receiver's capture clock).
    pub sent_ns: i64,
    /// Time the sender got it (sender's capture clock).
    pub received_ns: i64,
    /// ΔTr/ΔTs against the previous matched ACK.
    pub ratio: f64,
    pub compressed: bool,
    pub in_event: bool,
}

#[derive(Debug, Clone, Default)]
pub struct TwoSided {
    pub data_packets: u64,
    pub retransmissions: Vec<ClassifiedRetx>,
    pub acks: Vec<AckSpacing>,
    /// Data segments of the sender's capture found at the receiver's.
    pub data_matched: u64,
    /// Pure ACKs of the receiver's capture found at the sender's.
    pub acks_matched: u64,
    pub acks_sent: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct ClassCounts {
    pub total: u64,
    pub normal: u64,
    pub spurious: u64,
    pub unavoidable: u64,
    pub serial: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct AckCompression {
    /// ACKs with a ΔTr/ΔTs ratio (matched at both captures, after the first).
    pub acks: u64,
    pub compressed_fraction: f64,
    pub event_fraction: f64,
    pub events: u64,
}

impl TwoSided {
    pub fn counts(&self) -> ClassCounts {
        let mut c = ClassCounts::default();
        for r in &self.retransmissions {
            c.total += 1;
            c.serial += r.serial as u64;
            match r.class {
                RetxClass::Normal => c.normal += 1,
                RetxClass::Spurious => c.spurious += 1,
                RetxClass::Unavoidable => c.unavoidable += 1,
            }
        }
        c
    }

    pub fn ack_compression(&self) -> AckCompression {
        let n = self.acks.len() as u64;
        let compressed = self.acks.iter().filter(|a| a.compressed).count() as u64;
        let inside = self.acks.iter().filter(|a| a.in_event).count() as u64;
        let events = self
            .acks
            .iter()
            .zip(std::iter::once(None).chain(self.acks.iter().map(Some)))
            .filter(|(a, prev)| a.in_event && !prev.is_some_and(|p| p.in_event))
            .count() as u64;
        let frac = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
        AckCompression { acks: n, compressed_fraction: frac(compressed), event_fraction: frac(inside), events }
    }
}

type DataKey = (u32, u32, u16, u32);
type AckKey = (u32, u16, u32, u16, u32);

fn data_key(r: &TcpRec) -> DataKey {
    (r.seq, r.payload_len, r.ip_id.unwrap_or(0), r.tsval.unwrap_or(0))
}

fn ack_key(r: &TcpRec) -> AckKey {
    (r.ack, r.window, r.seq, r.ip_id.unwrap_or(0), r.tsval.unwrap_or(0))
}

fn is_data(r: &TcpRec) -> bool {
    r.payload_len > 0
}

fn is_pure_ack(r: &TcpRec) -> bool {
    r.has(ACK) && r.payload_len == 0 && !r.has(SYN) && !r.has(FIN) && !r.has(RST)
}

/// Analyses data sent in `data_dir`, captured at the sender (`at_sender`) and at the
/// receiver (`at_receiver`); both slices hold all packets of the flow in capture order.
/// Every data segment found at both captures (retransmissions too: each copy is its own)
/// goes to `owd` with its send and arrival times.
pub fn analyze(sender: &TcpRecords, receiver: &TcpRecords, data_dir: Dir, owd: &mut OwdAccumulator) -> TwoSided {
    let (at_sender, at_receiver) = (&sender.recs, &receiver.recs);
    let ack_dir = data_dir.reverse();
    let sent: Vec<&TcpRec> = at_sender.iter().filter(|r| r.dir == data_dir && is_data(r)).collect();
    let Some(first) = sent.first() else {
        return TwoSided::default();
    };
    let sent_keys: Vec<DataKey> = sent.iter().map(|r| data_key(r)).collect();
    let received: Vec<(DataKey, i64)> =
        at_receiver.iter().filter(|r| r.dir == data_dir && is_data(r)).map(|r| (data_key(r), r.ts_ns)).collect();
    let (arrival, _) = match_in_order(&sent_keys, &received);

    // ACKs the receiver sent (any packet carrying an ACK), and which reached the sender.
    // Once all the data is acknowledged, only pure ACKs matter (to ACK compression): the
    // data the other way, each segment carrying an ACK, is left out (a connection with a
    // few bytes one way and a bulk transfer the other would else match the whole transfer
    // as ACKs of the few bytes).
    let anchored = || {
        let mut u = Unwrapper::default();
        u.unwrap(first.data_seq());
        u
    };
    let data_end = {
        let mut space = anchored();
        sent.iter().map(|r| space.unwrap(r.data_seq()) + r.payload_len as u64).max().unwrap_or(0)
    };
    // An ACK of this direction's data, at either capture, that the analysis uses.
    let relevant = |space: &mut Unwrapper, covered: &mut bool, r: &TcpRec| {
        if r.dir != ack_dir || !r.has(ACK) {
            return false;
        }
        let keep = !*covered || is_pure_ack(r);
        *covered |= space.unwrap(r.ack) >= data_end;
        keep
    };
    let (mut rx_space, mut rx_covered) = (anchored(), false);
    let rx_acks: Vec<&TcpRec> = at_receiver.iter().filter(|r| relevant(&mut rx_space, &mut rx_covered, r)).collect();
    let rx_ack_keys: Vec<AckKey> = rx_acks.iter().map(|r| ack_key(r)).collect();
    let mut acks = ReceiverAcks::default();
    let mut space = anchored();
    for r in &rx_acks {
        acks.push(r.ts_ns, space.unwrap(r.ack), receiver.sack(r).iter().map(|(l, rr)| (space.peek(*l), space.peek(*rr))));
    }
    let (mut tx_space, mut tx_covered) = (anchored(), false);
    let ack_arrivals: Vec<(AckKey, i64)> = at_sender
        .iter()
        .filter(|r| relevant(&mut tx_space, &mut tx_covered, r))
        .map(|r| (ack_key(r), r.ts_ns))
        .collect();
    (acks.reached, _) = match_in_order(&rx_ack_keys, &ack_arrivals);

    let mut out = TwoSided { data_packets: sent.len() as u64, ..Default::default() };
    let mut seq_space = Unwrapper::default();
    let base = seq_space.unwrap(first.data_seq());
    let mut snd_max = base;
    // Latest transmission (index into `sent`) by start, and its end.
    let mut latest = LatestBySeq::default();
    let mut times_resent: AHashMap<u64, u32> = AHashMap::new();
    let mut starts = Vec::with_capacity(sent.len());
    for (i, r) in sent.iter().enumerate() {
        let start = seq_space.unwrap(r.data_seq());
        let end = start + r.payload_len as u64;
        starts.push(start);
        if let Some(t) = arrival[i] {
            out.data_matched += 1;
            owd.add(r.ts_ns, t);
        }
        if start < snd_max {
            let earlier = latest.covering(start);
            let resent = times_resent.entry(start).or_insert(0);
            *resent += 1;
            let class = match earlier {
                None => RetxClass::Normal,
                Some(j) => classify(
                    arrival[j],
                    (starts[j], starts[j] + sent[j].payload_len as u64),
                    arrival[i],
                    &acks,
                ),
            };
            out.retransmissions.push(ClassifiedRetx {
                ts_ns: r.ts_ns,
                // Bytes from before the first segment seen count from its start.
                rel_seq: start - base.min(start),
                len: r.payload_len,
                class,
                serial: *resent > 1,
            });
        }
        latest.record(start, end, i);
        snd_max = snd_max.max(end);
    }

    // ACK compression over pure ACKs seen at both ends, in the receiver's sending order.
    let mut prev: Option<(i64, i64)> = None;
    for (i, r) in rx_acks.iter().enumerate() {
        if !is_pure_ack(r) {
            continue;
        }
        out.acks_sent += 1;
        let Some(got) = acks.reached[i] else { continue };
        out.acks_matched += 1;
        if let Some((ps, pr)) = prev {
            let dts = r.ts_ns - ps;
            if dts > 0 {
                let ratio = (got - pr) as f64 / dts as f64;
                out.acks.push(AckSpacing {
                    sent_ns: r.ts_ns,
                    received_ns: got,
                    ratio,
                    compressed: ratio < COMPRESSION_RATIO,
                    in_event: false,
                });
            }
        }
        prev = Some((r.ts_ns, got));
    }
    mark_events(&mut out.acks);
    out
}

/// The latest transmission of each first sequence number, sorted by it. Segments arrive
/// almost always in order, so recording one is a push; a lookup is a binary search (a tree
/// map would cost an allocation-heavy insert per segment).
#[derive(Default)]
struct LatestBySeq {
    /// (start, end, index into the sent segments), sorted by start.
    entries: Vec<(u64, u64, usize)>,
}

impl LatestBySeq {
    fn record(&mut self, start: u64, end: u64, index: usize) {
        match self.entries.last() {
            Some(&(last, _, _)) if last < start => self.entries.push((start, end, index)),
            None => self.entries.push((start, end, index)),
            _ => match self.entries.binary_search_by_key(&start, |e| e.0) {
                Ok(at) => self.entries[at] = (start, end, index),
                Err(at) => self.entries.insert(at, (start, end, index)),
            },
        }
    }

    /// The latest transmission whose first byte is at or before `seq` and which covers it.
    fn covering(&self, seq: u64) -> Option<usize> {
        let at = self.entries.partition_point(|e| e.0 <= seq).checked_sub(1)?;
        let (_, end, index) = self.entries[at];
        (end > seq).then_some(index)
    }
}

/// The ACKs the receiver sent, in its order: when, what they acknowledged (sequence
/// positions unwrapped) and when each reached the sender's capture.
#[derive(Default)]
struct ReceiverAcks {
    times: Vec<i64>,
    cumulative: Vec<u64>,
    /// Where each ACK's SACK blocks start in `sack_blocks`, and how many.
    sack_at: Vec<(u32, u8)>,
    sack_blocks: Vec<(u64, u64)>,
    reached: Vec<Option<i64>>,
}

impl ReceiverAcks {
    fn push(&mut self, ts_ns: i64, cumulative: u64, sack: impl Iterator<Item = (u64, u64)>) {
        let at = self.sack_blocks.len();
        self.sack_blocks.extend(sack);
        self.sack_at.push((at as u32, (self.sack_blocks.len() - at) as u8));
        self.times.push(ts_ns);
        self.cumulative.push(cumulative);
    }

    /// ACK `i` acknowledges all of `start..end`, cumulatively or by SACK.
    fn covers(&self, i: usize, start: u64, end: u64) -> bool {
        let (at, n) = self.sack_at[i];
        self.cumulative[i] >= end
            || self.sack_blocks[at as usize..at as usize + n as usize].iter().any(|(l, r)| *l <= start && *r >= end)
    }
}

fn classify(
    earlier_arrival: Option<i64>,
    (start, end): (u64, u64),
    retx_arrival: Option<i64>,
    acks: &ReceiverAcks,
) -> RetxClass {
    let Some(arrived) = earlier_arrival else {
        return RetxClass::Normal;
    };
    let until = retx_arrival.unwrap_or(i64::MAX);
    let from = acks.times.partition_point(|t| *t < arrived);
    let mut covering = false;
    for i in (from..acks.times.len()).take(MAX_ACK_SCAN) {
        if acks.times[i] >= until {
            break;
        }
        if acks.covers(i, start, end) {
            if acks.reached[i].is_some() {
                return RetxClass::Spurious;
            }
            covering = true;
        }
    }
    if covering {
        RetxClass::Unavoidable
    } else {
        RetxClass::Spurious
    }
}

fn mark_events(acks: &mut [AckSpacing]) {
    let mut i = 0;
    while i < acks.len() {
        if !acks[i].compressed {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < acks.len() && acks[j].compressed {
            j += 1;
        }
        if j - i >= COMPRESSION_EVENT_ACKS {
            for a in &mut acks[i..j] {
                a.in_event = true;
            }
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_one_sided::tests::seg;

    const D: Dir = Dir::AtoB;
    const U: Dir = Dir::BtoA;

    fn with_id(mut r: TcpRec, id: u16) -> TcpRec {
        r.ip_id = Some(id);
        r
    }

    fn records(recs: &[TcpRec]) -> TcpRecords {
        recs.iter().copied().collect()
    }

    /// Sender at 0 ms sends seq 1..101 (id 1) and 101..201 (id 2); the receiver's clock is
    /// 5 s ahead, which matching must ignore.
    const SKEW: i64 = 5_000;

    #[test]
    fn normal_retransmission_when_data_lost() {
        let s = [
            with_id(seg(0, D, 1, 100, 1, ACK), 1),
            with_id(seg(300, D, 1, 100, 1, ACK), 2),
            with_id(seg(400, U, 1, 0, 101, ACK), 50),
        ];
        let r = [with_id(seg(SKEW + 350, D, 1, 100, 1, ACK), 2), with_id(seg(SKEW + 351, U, 1, 0, 101, ACK), 50)];
        let t = analyze(&records(&s), &records(&r), D, &mut OwdAccumulator::default());
        assert_eq!(t.counts(), ClassCounts { total: 1, normal: 1, spurious: 0, unavoidable: 0, serial: 0 });
        assert_eq!(t.data_matched, 1);
    }

    #[test]
    fn unavoidable_when_every_covering_ack_lost() {
        let s = [with_id(seg(0, D, 1, 100, 1, ACK), 1), with_id(seg(300, D, 1, 100, 1, ACK), 2)];
        let r = [
            with_id(seg(SKEW + 50, D, 1, 100, 1, ACK), 1),
            with_id(seg(SKEW + 51, U, 1, 0, 101, ACK), 50), // lost on the way back
            with_id(seg(SKEW + 350, D, 1, 100, 1, ACK), 2),
        ];
        assert_eq!(analyze(&records(&s), &records(&r), D, &mut OwdAccumulator::default()).counts().unavoidable, 1);
    }

    #[test]
    fn spurious_when_ack_arrives_late_and_serial_counted() {
        let s = [
            with_id(seg(0, D, 1, 100, 1, ACK), 1),
            with_id(seg(300, D, 1, 100, 1, ACK), 2),
            with_id(seg(900, D, 1, 100, 1, ACK), 3),
            with_id(seg(1000, U, 1, 0, 101, ACK), 50), // the ack of the first copy, late
        ];
        let r = [
            with_id(seg(SKEW + 50, D, 1, 100, 1, ACK), 1),
            with_id(seg(SKEW + 51, U, 1, 0, 101, ACK), 50),
            with_id(seg(SKEW + 350, D, 1, 100, 1, ACK), 2),
            with_id(seg(SKEW + 950, D, 1, 100, 1, ACK), 3),
        ];
        let c = analyze(&records(&s), &records(&r), D, &mut OwdAccumulator::default()).counts();
        assert_eq!((c.total, c.spurious, c.serial), (2, 2, 1));
    }

    #[test]
    fn resent_bytes_before_the_first_segment_seen_do_not_underflow() {
        // Found by cargo fuzz: the capture starts mid-flow, then bytes older than its first
        // segment are sent again.
        let s = [with_id(seg(0, D, 101, 100, 1, ACK), 1), with_id(seg(300, D, 1, 100, 1, ACK), 2)];
        let t = analyze(&records(&s), &records(&[]), D, &mut OwdAccumulator::default());
        assert_eq!(t.retransmissions.len(), 1);
        assert_eq!((t.retransmissions[0].rel_seq, t.retransmissions[0].class), (0, RetxClass::Normal));
    }

    #[test]
    fn sack_covers_and_lost_sack_is_unavoidable() {
        // Segment 1 lost; segment 2 arrives and is SACKed, but that ACK is lost; then
        // segment 2 is retransmitted: unavoidable (its ACK was lost).
        let s = [
            with_id(seg(0, D, 1, 100, 1, ACK), 1),
            with_id(seg(1, D, 101, 100, 1, ACK), 2),
            with_id(seg(300, D, 1, 100, 1, ACK), 3),
            with_id(seg(301, D, 101, 100, 1, ACK), 4),
        ];
        let mut r: TcpRecords = [with_id(seg(SKEW + 51, D, 101, 100, 1, ACK), 2)].into_iter().collect();
        r.push(with_id(seg(SKEW + 51, U, 1, 0, 1, ACK), 50), &[(101, 201)]);
        let t = analyze(&records(&s), &r, D, &mut OwdAccumulator::default());
        let classes: Vec<_> = t.retransmissions.iter().map(|x| x.class).collect();
        assert_eq!(classes, vec![RetxClass::Normal, RetxClass::Unavoidable]);
    }

    #[test]
    fn every_matched_data_segment_gives_its_one_way_delay() {
        // Three segments, the second lost and resent; delays 40, 70 (the resend), 55 ms on
        // a receiver clock SKEW ahead: excess 0, 30, 15.
        let s = [
            with_id(seg(0, D, 1, 100, 1, ACK), 1),
            with_id(seg(10, D, 101, 100, 1, ACK), 2),
            with_id(seg(20, D, 201, 100, 1, ACK), 3),
            with_id(seg(300, D, 101, 100, 1, ACK), 4),
        ];
        let r = [
            with_id(seg(SKEW + 40, D, 1, 100, 1, ACK), 1),
            with_id(seg(SKEW + 75, D, 201, 100, 1, ACK), 3),
            with_id(seg(SKEW + 370, D, 101, 100, 1, ACK), 4),
        ];
        let mut owd = OwdAccumulator::new(0, 1_000_000_000_000);
        let t = analyze(&records(&s), &records(&r), D, &mut owd);
        assert_eq!(t.data_matched, 3);
        let (sum, _) = owd.finish(crate::udp_stream::OwdKind::Excess);
        let sum = sum.unwrap();
        assert_eq!((sum.samples, sum.min, sum.median, sum.max, sum.mean), (3, 0.0, 15.0, 30.0, 15.0));
        assert!((sum.std - 150.0f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn ack_compression_event_of_three() {
        // Receiver sends ACKs 10 ms apart; the sender gets ACKs 2..5 1 ms apart.
        let sent = [0, 10, 20, 30, 40, 50];
        let got = [100, 110, 111, 112, 113, 140];
        let mut s = vec![with_id(seg(0, D, 1, 1000, 1, ACK), 1)];
        let mut r = vec![with_id(seg(SKEW, D, 1, 1000, 1, ACK), 1)];
        for i in 0..6 {
            r.push(with_id(seg(SKEW + sent[i], U, 1, 0, 2 + i as u32, ACK), 10 + i as u16));
            s.push(with_id(seg(got[i], U, 1, 0, 2 + i as u32, ACK), 10 + i as u16));
        }
        let t = analyze(&records(&s), &records(&r), D, &mut OwdAccumulator::default());
        let ac = t.ack_compression();
        assert_eq!(ac.acks, 5);
        let ratios: Vec<f64> = t.acks.iter().map(|a| a.ratio).collect();
        assert_eq!(ratios, vec![1.0, 0.1, 0.1, 0.1, 2.7]);
        assert!((ac.compressed_fraction - 0.6).abs() < 1e-12);
        assert!((ac.event_fraction - 0.6).abs() < 1e-12);
        assert_eq!(ac.events, 1);
    }
}
