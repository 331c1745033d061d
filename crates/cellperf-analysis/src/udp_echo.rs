//! Requests and their echoes in one capture: the round trips of an echoed UDP flow
//! (cellperf's `voip`, `min-delay` and `ping-sweep` tests, or any UDP echo service), so
//! that one capture gives the RTT and the half-RTT one-way delay of docs/methods.md §1 and §5.
//!
//! **What an echo looks like on the wire.** `cellperf server` returns each probe datagram
//! on the same 5-tuple with the ports swapped, the same length and the same bytes, except
//! the probe header's magic, `CPE1` instead of `CPF1` (the echo mark), and its send time,
//! which it rewrites with its own clock (so the returning stream's one-way delay and
//! jitter can be measured too). The sequence number survives. A classic echo service
//! returns the payload unchanged.
//!
//! **Matching key.** For a flow whose two directions are cellperf probe streams, the
//! header's sequence number and the datagram's length ([`MatchBy::CellperfSeq`]);
//! otherwise the hash of the first payload bytes and the length ([`MatchBy::Payload`]).
//! Never timestamps.
//!
//! **When a flow is an echo.** One direction (the requests) and the other (the echoes) are
//! told apart by the data alone: at least [`ECHO_SHARE`] of the returning datagrams' keys
//! were seen earlier going the other way, no key is seen returning before it went out
//! (an echo cannot precede its request on one capture's clock, while two independent
//! streams that happen to share keys interleave), nearly every request is distinct (at
//! most 1 − [`ECHO_SHARE`] repeats: a flow of identical keepalives is no echo test), there
//! are not more than twice as many echoes as requests, and at least one request was
//! answered (two with payload keys, where a single identical datagram each way proves
//! little). A plain bidirectional flow fails the first test: its two directions carry
//! different payloads. Cellperf probe streams must also carry the echo mark one way (the
//! echoes, nearly all marked) and not the other: two streams sent each way on one 5-tuple
//! (`udp-cbr --direction both`) carry the same sequence numbers and sizes, and at the MN
//! every returning *k* may come after the outgoing *k*, so no timing of one capture could
//! tell them from an echo; the mark does.
//!
//! **Vantage.** At the requester (the MN in cellperf's tests), echo time − request time
//! is the round trip, and a request without echo is a round-trip loss. At the echoer, the
//! same difference is only the echoer's turnaround, and an echo's fate after it left is
//! unknown; [`EchoSummary`] reports each as what it is.

use std::collections::hash_map::Entry;

use ahash::AHashMap;
use serde::Serialize;

use crate::flows::Dir;
use crate::record::UdpRec;
use crate::stats::Summary;
use crate::udp_stream::{OwdKind, OwdSummary};

/// Share of the returning datagrams that must answer an earlier request, and of the
/// requests that must be distinct, for a flow to be an echo.
pub const ECHO_SHARE: f64 = 0.9;

/// What pairs an echo with its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatchBy {
    /// The cellperf probe header's sequence number, and the length.
    CellperfSeq,
    /// The hash of the first payload bytes, and the length.
    Payload,
}

/// Where the capture was taken, relative to the echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vantage {
    /// At the host that sent the requests: echo − request is the round trip.
    Requester,
    /// At the host that echoed them: echo − request is its turnaround.
    Echoer,
}

/// One distinct request and its echo, at the capture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EchoPair {
    /// First copy of the request.
    pub request_ns: i64,
    /// First copy of its echo.
    pub echo_ns: Option<i64>,
    /// UDP payload bytes.
    pub bytes: u32,
}

impl EchoPair {
    /// Echo minus request time (ms): the round trip at the requester, the turnaround at
    /// the echoer.
    pub fn delta_ms(&self) -> Option<f64> {
        Some(self.echo_ns?.saturating_sub(self.request_ns) as f64 / 1e6)
    }
}

/// An echoed flow as one capture saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoFlow {
    /// The direction of the flow key the requests go.
    pub request_dir: Dir,
    pub matched_by: MatchBy,
    /// One per distinct request, in the order of their first copies.
    pub pairs: Vec<EchoPair>,
    /// Requests left out at the end: unanswered, and their echo was due (request plus the
    /// median echo delay) after the capture ended, so neither answered nor lost.
    pub after_capture: u64,
    /// Extra copies of requests, and of echoes.
    pub duplicate_requests: u64,
    pub duplicate_echoes: u64,
    /// Distinct returning datagrams that answer no request of the capture (a request sent
    /// before it started, or a datagram that is no echo).
    pub unmatched: u64,
}

/// The figures an echo flow's report carries.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EchoSummary {
    pub vantage: Vantage,
    pub matched_by: MatchBy,
    /// Distinct requests seen (those whose echo was due after the capture ended left out).
    pub requests: u64,
    /// Requests answered.
    pub echoed: u64,
    /// Requests never answered, and their share (requester only: a round-trip loss; the
    /// echoer cannot see what became of its echoes).
    pub lost: Option<u64>,
    pub loss_rate: Option<f64>,
    pub duplicate_requests: u64,
    pub duplicate_echoes: u64,
    pub unmatched_echoes: u64,
    /// Request → first echo at the requester.
    pub rtt_ms: Option<Summary>,
    /// Request in → echo out at the echoer.
    pub turnaround_ms: Option<Summary>,
}

/// First copy of each distinct key in one direction, in capture order.
#[derive(Default)]
struct Firsts {
    index: AHashMap<(u64, u32), usize>,
    /// (time, UDP payload bytes) of each first copy.
    seen: Vec<(i64, u32)>,
    repeats: u64,
}

/// Finds whether `recs` (one flow at one capture, in capture order) is an echoed flow
/// and pairs each request with its echo. `capture_end_ns` is the capture's last timestamp.
pub fn find_echo(recs: &[UdpRec], by: MatchBy, capture_end_ns: i64) -> Option<EchoFlow> {
    let key = |r: &UdpRec| -> Option<(u64, u32)> {
        match by {
            MatchBy::CellperfSeq => r
                .probe
                .filter(|h| h.kind == cellperf_capture::probe_header::HeaderKind::Cellperf)
                .map(|h| (h.seq, r.payload_len)),
            MatchBy::Payload => Some((r.payload_hash, r.payload_len)),
        }
    };
    // Keyed datagrams each way, and those of them carrying cellperf's echo mark.
    let (mut total, mut marked) = ([0u64; 2], [0u64; 2]);
    for r in recs {
        if key(r).is_some() {
            total[r.dir.index()] += 1;
            marked[r.dir.index()] += u64::from(r.probe.is_some_and(|h| h.echo));
        }
    }
    // Orientations still possible: requests going `d`, echoes the other way. A returning
    // datagram with no earlier request is a miss; more misses than the share allows (or
    // far more echoes than requests) rule the orientation out.
    let budget = |n: u64| ((1.0 - ECHO_SHARE) * n as f64).floor() as u64;
    let mut possible = [0usize, 1].map(|d| total[d] > 0 && total[1 - d] > 0 && total[1 - d] <= 2 * total[d]);
    if by == MatchBy::CellperfSeq {
        // Echoes go the marked way (nearly all marked), requests the other (nearly none).
        for d in 0..2 {
            possible[d] &= marked[1 - d] as f64 >= ECHO_SHARE * total[1 - d] as f64 && marked[d] <= budget(total[d]);
        }
    }
    if !possible.iter().any(|p| *p) {
        return None;
    }
    // In time order: a capture's file order can differ from it (`tcpdump -i any`).
    let by_time: Vec<UdpRec>;
    let recs = if recs.is_sorted_by_key(|r| r.ts_ns) {
        recs
    } else {
        by_time = {
            let mut v = recs.to_vec();
            v.sort_by_key(|r| r.ts_ns);
            v
        };
        &by_time
    };
    let mut misses = [0u64; 2];
    let mut firsts = [Firsts::default(), Firsts::default()];
    let mut opened = [false; 2];
    for r in recs {
        if !possible.iter().any(|p| *p) {
            return None;
        }
        let d = r.dir.index();
        // The requests go the way the flow opened (a cellperf probe's hello, a client's
        // first request), not counting echoes of requests sent before the capture began:
        // a datagram that is neither (no key) going `d` before anything came the other way
        // rules out requests from the other end. Two streams sent each way from the same
        // instant (the server's #k may leave before the probe's #k arrives) would
        // otherwise pass for requests from the far end.
        let Some(k) = key(r) else {
            if !opened[1 - d] {
                possible[1 - d] = false;
            }
            opened[d] = true;
            continue;
        };
        opened[d] = true;
        let own = &mut firsts[d];
        match own.index.entry(k) {
            Entry::Occupied(_) => {
                own.repeats += 1;
                continue;
            }
            Entry::Vacant(v) => {
                v.insert(own.seen.len());
                own.seen.push((r.ts_ns, r.payload_len));
            }
        }
        // The first copy of `k` going `d`: for requests going the other way, an echo if
        // that way already had `k`, else a miss; for requests going `d`, a key already
        // seen returning means an echo came before its request.
        match firsts[1 - d].index.get(&k) {
            Some(_) => possible[d] = false,
            None => {
                misses[1 - d] += 1;
                if misses[1 - d] > budget(total[d]) {
                    possible[1 - d] = false;
                }
            }
        }
    }
    let d = possible.iter().position(|p| *p)?;
    let (requests, echoes) = (&firsts[d], &firsts[1 - d]);
    // Requests nearly all distinct; enough of them answered.
    if requests.repeats as f64 > (1.0 - ECHO_SHARE) * total[d] as f64 {
        return None;
    }
    let mut pairs: Vec<EchoPair> =
        requests.seen.iter().map(|&(ts, bytes)| EchoPair { request_ns: ts, echo_ns: None, bytes }).collect();
    let mut unmatched = 0u64;
    for (k, &i) in &echoes.index {
        match requests.index.get(k) {
            Some(&j) => pairs[j].echo_ns = Some(echoes.seen[i].0),
            None => unmatched += 1,
        }
    }
    let answered = pairs.iter().filter(|p| p.echo_ns.is_some()).count();
    let least = match by {
        MatchBy::CellperfSeq => 1,
        MatchBy::Payload => 2,
    };
    if answered < least {
        return None;
    }
    let after_capture = leave_out_after_capture(&mut pairs, capture_end_ns);
    Some(EchoFlow {
        request_dir: Dir::from_index(d),
        matched_by: by,
        pairs,
        after_capture,
        duplicate_requests: requests.repeats,
        duplicate_echoes: echoes.repeats,
        unmatched,
    })
}

/// Drops the unanswered requests whose echo was due (request time plus the median echo
/// delay of the answered ones) after the capture ended; returns how many.
fn leave_out_after_capture(pairs: &mut Vec<EchoPair>, capture_end_ns: i64) -> u64 {
    let mut deltas: Vec<f64> =
        pairs.iter().filter_map(|p| Some(p.echo_ns?.saturating_sub(p.request_ns) as f64)).collect();
    let Some(median) = Summary::of(&mut deltas).map(|s| s.median as i64) else { return 0 };
    let before = pairs.len();
    pairs.retain(|p| p.echo_ns.is_some() || p.request_ns.saturating_add(median) <= capture_end_ns);
    (before - pairs.len()) as u64
}

impl EchoFlow {
    /// (time of the echo's first copy, echo − request in ms) of every answered request.
    pub fn deltas(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        self.pairs.iter().filter_map(|p| Some((p.echo_ns?, p.delta_ms()?)))
    }

    pub fn summary(&self, vantage: Vantage) -> EchoSummary {
        let mut deltas: Vec<f64> = self.deltas().map(|(_, ms)| ms).collect();
        let requests = self.pairs.len() as u64;
        let echoed = deltas.len() as u64;
        let at_requester = vantage == Vantage::Requester;
        let lost = at_requester.then_some(requests - echoed);
        let delays = Summary::of(&mut deltas);
        EchoSummary {
            vantage,
            matched_by: self.matched_by,
            requests,
            echoed,
            lost,
            loss_rate: lost.filter(|_| requests > 0).map(|l| l as f64 / requests as f64),
            duplicate_requests: self.duplicate_requests,
            duplicate_echoes: self.duplicate_echoes,
            unmatched_echoes: self.unmatched,
            rtt_ms: delays.filter(|_| at_requester),
            turnaround_ms: delays.filter(|_| !at_requester),
        }
    }

    /// Half of each round trip, the one-way delay estimate of unsynchronised clocks
    /// (docs/methods.md §1, §5); meaningful at the requester only.
    pub fn half_rtt(&self) -> Option<OwdSummary> {
        let mut half: Vec<f64> = self.deltas().map(|(_, ms)| ms / 2.0).collect();
        OwdSummary::of(OwdKind::HalfRtt, &mut half)
    }
}

#[cfg(test)]
mod tests {
    use cellperf_capture::probe_header::{HeaderKind, ProbeHeader};

    use super::*;

    const MS: i64 = 1_000_000;
    /// The echoer's clock, an hour ahead: header send times are never used for pairing.
    const ECHOER_CLOCK: i64 = 3_600_000 * MS;

    /// A cellperf probe datagram seen at `at_ms`; `dir` AtoB is the MN's.
    fn cpf(at_ms: i64, dir: Dir, seq: u64, len: u32) -> UdpRec {
        cellperf(at_ms, dir, seq, len, false)
    }

    /// The echo (marked `CPE1`) of request `seq`, seen at `at_ms`.
    fn cpe(at_ms: i64, dir: Dir, seq: u64, len: u32) -> UdpRec {
        cellperf(at_ms, dir, seq, len, true)
    }

    fn cellperf(at_ms: i64, dir: Dir, seq: u64, len: u32, echo: bool) -> UdpRec {
        let send_ns = if dir == Dir::AtoB { at_ms * MS } else { at_ms * MS + ECHOER_CLOCK };
        UdpRec {
            ts_ns: at_ms * MS,
            dir,
            ip_id: None,
            payload_len: len,
            // The echoer rewrites the send time, so the payload hash changes.
            payload_hash: seq ^ send_ns as u64,
            probe: Some(ProbeHeader { kind: HeaderKind::Cellperf, seq, send_ns, echo }),
        }
    }

    fn datagram(at_ms: i64, dir: Dir, hash: u64, len: u32) -> UdpRec {
        UdpRec { ts_ns: at_ms * MS, dir, ip_id: None, payload_len: len, payload_hash: hash, probe: None }
    }

    /// VoIP-like requests every 20 ms from 0, each echoed `rtt_ms[seq]` later (None: no echo).
    fn voip(rtt_ms: &[Option<i64>]) -> Vec<UdpRec> {
        let mut recs: Vec<UdpRec> = Vec::new();
        for (seq, rtt) in rtt_ms.iter().enumerate() {
            recs.push(cpf(seq as i64 * 20, Dir::AtoB, seq as u64, 160));
            if let Some(r) = rtt {
                recs.push(cpe(seq as i64 * 20 + r, Dir::BtoA, seq as u64, 160));
            }
        }
        recs.sort_by_key(|r| r.ts_ns);
        recs
    }

    const END: i64 = i64::MAX;

    #[test]
    fn round_trips_at_the_requester_are_exact() {
        let recs = voip(&[Some(40), Some(41), Some(45), Some(40), Some(60)]);
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!((e.request_dir, e.pairs.len(), e.unmatched, e.after_capture), (Dir::AtoB, 5, 0, 0));
        let rtts: Vec<f64> = e.deltas().map(|(_, ms)| ms).collect();
        assert_eq!(rtts, vec![40.0, 41.0, 45.0, 40.0, 60.0]);
        assert_eq!(e.deltas().next().unwrap().0, 40 * MS);
        let s = e.summary(Vantage::Requester);
        assert_eq!((s.requests, s.echoed, s.lost, s.loss_rate), (5, 5, Some(0), Some(0.0)));
        let rtt = s.rtt_ms.unwrap();
        assert_eq!((rtt.min, rtt.median, rtt.max, rtt.samples), (40.0, 41.0, 60.0, 5));
        assert!(s.turnaround_ms.is_none());
        let h = e.half_rtt().unwrap();
        assert_eq!((h.kind, h.min, h.median, h.max, h.mean), (OwdKind::HalfRtt, 20.0, 20.5, 30.0, 22.6));
        assert_eq!(serde_json::to_value(h.kind).unwrap(), "half_rtt");
        assert_eq!(serde_json::to_value(s.matched_by).unwrap(), "cellperf-seq");
    }

    #[test]
    fn a_request_without_echo_is_a_round_trip_loss_at_the_requester() {
        // #2's request or its echo was lost: the MN's capture cannot tell which.
        let recs = voip(&[Some(40), Some(40), None, Some(40), Some(40)]);
        let s = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap().summary(Vantage::Requester);
        assert_eq!((s.requests, s.echoed, s.lost, s.loss_rate), (5, 4, Some(1), Some(0.2)));
    }

    #[test]
    fn at_the_echoer_a_lost_request_is_never_seen_and_a_lost_echo_still_left() {
        // The CN's capture: requests arrive (BtoA), echoes leave 0.1 ms later (AtoB).
        // #2's request was lost before the CN; #3's echo was lost after it (unseen here).
        let mut recs = Vec::new();
        for seq in [0u64, 1, 3, 4] {
            let t = seq as i64 * 20 * MS;
            recs.push(UdpRec { dir: Dir::BtoA, ..cpf(0, Dir::AtoB, seq, 40) }.at(t));
            recs.push(UdpRec { dir: Dir::AtoB, ..cpe(0, Dir::BtoA, seq, 40) }.at(t + MS / 10));
        }
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!(e.request_dir, Dir::BtoA);
        let s = e.summary(Vantage::Echoer);
        assert_eq!((s.requests, s.echoed, s.lost, s.loss_rate, s.rtt_ms), (4, 4, None, None, None));
        let t = s.turnaround_ms.unwrap();
        assert!((t.median - 0.1).abs() < 1e-12 && t.samples == 4);
    }

    impl UdpRec {
        fn at(mut self, ts_ns: i64) -> UdpRec {
            self.ts_ns = ts_ns;
            self
        }
    }

    #[test]
    fn a_duplicate_echo_is_counted_and_the_first_copy_timed() {
        let mut recs = voip(&[Some(40), Some(40), Some(40)]);
        recs.push(cpe(20 + 52, Dir::BtoA, 1, 160)); // a second copy of #1's echo, 12 ms later
        recs.sort_by_key(|r| r.ts_ns);
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        let s = e.summary(Vantage::Requester);
        assert_eq!((s.requests, s.echoed, s.duplicate_echoes, s.duplicate_requests), (3, 3, 1, 0));
        assert_eq!(s.rtt_ms.unwrap().max, 40.0);
    }

    #[test]
    fn a_duplicate_request_after_its_echo_is_no_reason_to_doubt_the_echo() {
        // At the CN a duplicated request can arrive after the echo of its first copy left.
        let mut recs = voip(&[Some(1); 10]);
        recs.push(cpf(25, Dir::AtoB, 1, 160));
        recs.sort_by_key(|r| r.ts_ns);
        let s = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap().summary(Vantage::Echoer);
        assert_eq!((s.requests, s.echoed, s.duplicate_requests), (10, 10, 1));
    }

    #[test]
    fn echoes_out_of_order_keep_their_own_round_trips() {
        // #1's echo is held up and arrives after #2's.
        let recs = voip(&[Some(40), Some(70), Some(40)]);
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!(e.deltas().map(|(_, ms)| ms).collect::<Vec<_>>(), vec![40.0, 70.0, 40.0]);
    }

    #[test]
    fn a_request_whose_echo_was_due_after_the_capture_is_neither_answered_nor_lost() {
        // Capture ends at 95 ms: #4 (sent at 80, due at 120) could not be answered in it;
        // #1 was due at 60 and is lost.
        let recs: Vec<UdpRec> = voip(&[Some(40), None, Some(40), Some(40), None]);
        let e = find_echo(&recs, MatchBy::CellperfSeq, 95 * MS).unwrap();
        assert_eq!(e.after_capture, 1);
        let s = e.summary(Vantage::Requester);
        assert_eq!((s.requests, s.echoed, s.lost), (4, 3, Some(1)));
    }

    #[test]
    fn payload_echo_service() {
        // An RFC 862 echo: the payload back unchanged, paired by hash and length.
        let mut recs = Vec::new();
        for i in 0..10i64 {
            recs.push(datagram(i * 100, Dir::BtoA, 1000 + i as u64, 64));
            recs.push(datagram(i * 100 + 30 + i, Dir::AtoB, 1000 + i as u64, 64));
        }
        let e = find_echo(&recs, MatchBy::Payload, END).unwrap();
        assert_eq!((e.request_dir, e.matched_by), (Dir::BtoA, MatchBy::Payload));
        assert_eq!(
            e.deltas().map(|(_, ms)| ms).collect::<Vec<_>>(),
            (0..10).map(|i| 30.0 + i as f64).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_plain_bidirectional_flow_is_no_echo() {
        // RTP both ways: every datagram different.
        let recs: Vec<UdpRec> = (0..100i64)
            .flat_map(|i| {
                [datagram(i * 20, Dir::AtoB, 2 * i as u64, 172), datagram(i * 20 + 7, Dir::BtoA, 2 * i as u64 + 1, 172)]
            })
            .collect();
        assert!(find_echo(&recs, MatchBy::Payload, END).is_none());
        // A few coincidences do not make it one either.
        let mut some_equal = recs.clone();
        for r in some_equal.iter_mut().filter(|r| r.dir == Dir::BtoA).take(5) {
            r.payload_hash -= 1;
        }
        assert!(find_echo(&some_equal, MatchBy::Payload, END).is_none());
    }

    /// The probe's hello (no probe header) that opens every cellperf test's data flow.
    fn hello(at_ms: i64) -> UdpRec {
        datagram(at_ms, Dir::AtoB, 0x4350_4831, 20)
    }

    #[test]
    fn cellperf_streams_both_ways_are_no_echo_in_any_order() {
        // `udp-cbr --direction both` at the MN: the server's #k arrives 2 ms after the
        // probe's #k left, every time, as an echo's would. Unmarked, it is no echo.
        let mut mn: Vec<UdpRec> = (0..50u64)
            .flat_map(|k| [cpf(k as i64 * 20, Dir::AtoB, k, 1460), cpf(k as i64 * 20 + 2, Dir::BtoA, k, 1460)])
            .collect();
        mn.push(hello(-10));
        mn.sort_by_key(|r| r.ts_ns);
        assert!(find_echo(&mn, MatchBy::CellperfSeq, END).is_none());
        // The same at the CN, where the server's #k leaves 15 ms before the probe's arrives.
        let mut cn: Vec<UdpRec> = (0..50u64)
            .flat_map(|k| [cpf(k as i64 * 20 + 15, Dir::AtoB, k, 1460), cpf(k as i64 * 20, Dir::BtoA, k, 1460)])
            .collect();
        cn.push(hello(-10));
        cn.sort_by_key(|r| r.ts_ns);
        assert!(find_echo(&cn, MatchBy::CellperfSeq, END).is_none());
        // Marked the same, the MN's returning datagrams are echoes.
        let marked: Vec<UdpRec> = mn.iter().map(|r| if r.dir == Dir::BtoA { cpe(r.ts_ns / MS, r.dir, r.probe.unwrap().seq, 1460) } else { *r }).collect();
        let e = find_echo(&marked, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!((e.request_dir, e.pairs.len()), (Dir::AtoB, 50));
    }

    #[test]
    fn the_mark_says_which_way_the_echoes_go() {
        // Echo marks on both ways, or on the requests' way only: not cellperf's echo test.
        let remark = |echo_dir: Option<Dir>| -> Vec<UdpRec> {
            voip(&[Some(40); 10])
                .iter()
                .map(|r| cellperf(r.ts_ns / MS, r.dir, r.probe.unwrap().seq, 160, echo_dir.is_none_or(|d| d == r.dir)))
                .collect()
        };
        assert!(find_echo(&remark(None), MatchBy::CellperfSeq, END).is_none());
        assert!(find_echo(&remark(Some(Dir::AtoB)), MatchBy::CellperfSeq, END).is_none());
        assert_eq!(find_echo(&remark(Some(Dir::BtoA)), MatchBy::CellperfSeq, END).unwrap().pairs.len(), 10);
        // One echo in ten left unmarked (ECHO_SHARE of them marked) still pairs.
        let mut one_unmarked = voip(&[Some(40); 10]);
        let i = one_unmarked.iter().position(|r| r.dir == Dir::BtoA).unwrap();
        one_unmarked[i] = cpf(one_unmarked[i].ts_ns / MS, Dir::BtoA, one_unmarked[i].probe.unwrap().seq, 160);
        assert_eq!(find_echo(&one_unmarked, MatchBy::CellperfSeq, END).unwrap().pairs.len(), 10);
    }

    #[test]
    fn echoes_of_requests_sent_before_the_capture_began_do_not_hide_the_opener() {
        // The capture starts between #0's request and its echo.
        let recs: Vec<UdpRec> = voip(&[Some(40); 20]).into_iter().filter(|r| r.ts_ns > 0).collect();
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!((e.request_dir, e.pairs.len(), e.unmatched), (Dir::AtoB, 19, 1));
    }

    #[test]
    fn identical_keepalives_and_a_single_identical_pair_are_no_echo() {
        // NAT-T keepalives: one byte 0xFF each way, every 20 s.
        let keepalives: Vec<UdpRec> = (0..10i64)
            .flat_map(|i| [datagram(i * 20_000, Dir::AtoB, 0xff, 1), datagram(i * 20_000 + 30, Dir::BtoA, 0xff, 1)])
            .collect();
        assert!(find_echo(&keepalives, MatchBy::Payload, END).is_none());
        let one = [datagram(0, Dir::AtoB, 7, 1), datagram(30, Dir::BtoA, 7, 1)];
        assert!(find_echo(&one, MatchBy::Payload, END).is_none());
        // One answered cellperf probe (a ping sweep of one packet) is an echo.
        let probe = voip(&[Some(40)]);
        assert_eq!(find_echo(&probe, MatchBy::CellperfSeq, END).unwrap().pairs.len(), 1);
    }

    #[test]
    fn sequence_numbers_starting_over_on_one_flow_are_ambiguous() {
        // Two runs on one 5-tuple, both numbered from 0: which #k answers which?
        let mut recs = voip(&[Some(40); 10]);
        recs.extend(voip(&[Some(40); 10]).into_iter().map(|r| r.at(r.ts_ns + 1000 * MS)));
        assert!(find_echo(&recs, MatchBy::CellperfSeq, END).is_none());
    }

    #[test]
    fn sequence_numbers_far_up_and_an_echo_at_the_same_instant() {
        let base = u64::MAX - 3;
        let recs: Vec<UdpRec> = (0..3u64)
            .flat_map(|i| [cpf(i as i64, Dir::AtoB, base + i, 40), cpe(i as i64 + i as i64, Dir::BtoA, base + i, 40)])
            .collect();
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!(e.deltas().map(|(_, ms)| ms).collect::<Vec<_>>(), vec![0.0, 1.0, 2.0]);
    }

    #[test]
    fn capture_file_order_differs_from_time_order() {
        // `tcpdump -i any` can write a packet after one captured later on another interface:
        // #1's echo is in the file before its request, with a later time.
        let mut recs = voip(&[Some(40), Some(40), Some(40)]);
        let echo1 = recs.iter().position(|r| r.dir == Dir::BtoA && r.probe.unwrap().seq == 1).unwrap();
        let req1 = recs.iter().position(|r| r.dir == Dir::AtoB && r.probe.unwrap().seq == 1).unwrap();
        recs.swap(echo1, req1);
        let e = find_echo(&recs, MatchBy::CellperfSeq, END).unwrap();
        assert_eq!(e.deltas().map(|(_, ms)| ms).collect::<Vec<_>>(), vec![40.0, 40.0, 40.0]);
    }

    #[test]
    fn a_flow_one_way_or_with_far_more_replies_is_no_echo() {
        let one_way: Vec<UdpRec> = (0..10).map(|i| cpf(i * 20, Dir::AtoB, i as u64, 160)).collect();
        assert!(find_echo(&one_way, MatchBy::CellperfSeq, END).is_none());
        // Three copies of every echo: not more than twice as many echoes as requests.
        let mut storm = voip(&[Some(40); 5]);
        let echoes: Vec<UdpRec> = storm.iter().filter(|r| r.dir == Dir::BtoA).copied().collect();
        storm.extend(echoes.iter().map(|r| r.at(r.ts_ns + MS)));
        storm.extend(echoes.iter().map(|r| r.at(r.ts_ns + 2 * MS)));
        storm.sort_by_key(|r| r.ts_ns);
        assert!(find_echo(&storm, MatchBy::CellperfSeq, END).is_none());
    }
}
