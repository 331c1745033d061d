//! TCP analysis that needs both captures (docs/methods.md §4): retransmission classes, ACK
//! compression (000 §4.2) and the data segments' one-way delays (docs/methods.md §12, [`crate::owd`]).
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
//!
//! **Streaming.** [`TcpPairing`] takes the packets of both captures as they are read in
//! step (merged on a *virtual time*: each capture's clock, the CN's shifted by the offset
//! estimated at the start, see `report`), pairs the copies of each packet with a
//! [`Pairing`] and forgets them once decided, so memory is bounded by the packets inside
//! the matching *window*, not by the captures. A copy is awaited for one window: the
//! larger of [`MIN_WINDOW_NS`] and twice the longest gap between two copies of a packet
//! seen so far plus [`WINDOW_MARGIN_NS`] (the window grows with a queue that grows; a
//! delay that jumps by more than a window at once makes its packets count as lost). A
//! segment's arrival is decided one window after it was sent, a retransmission is
//! classified two windows after, when every ACK that could cover its earlier copy has been
//! seen at both captures. The sender's state (latest transmission of each byte range) is
//! kept until the sender's capture sees it acknowledged.
//!
//! Which capture holds a direction's sender follows from which end is the MN, decided per
//! flow by the rule of `report` (`--mn-addr`, TTL, initiator) once the flow has been seen
//! at both captures (its packets wait until then, for one window at most), and kept.

use std::collections::VecDeque;

use ahash::AHashMap;
use cellperf_capture::decode::tcp_flags::{ACK, FIN, RST, SYN};
use serde::Serialize;

use crate::flows::{Dir, FlowKey};
use crate::matching::Pairing;
use crate::owd::OwdAccumulator;
use crate::record::{TcpRec, TcpRecords};
use crate::side::{mn_direction, Evidence, Side};
use crate::seq::Unwrapper;

/// ΔTr/ΔTs below this marks an ACK as compressed (000 §4.2).
pub const COMPRESSION_RATIO: f64 = 0.75;
/// Consecutive compressed ACKs that make an ACK-compression event.
pub const COMPRESSION_EVENT_ACKS: usize = 3;
/// Covering ACKs scanned per retransmission at most (bounds the work on pathological flows).
const MAX_ACK_SCAN: usize = 100_000;
/// Shortest time a packet's copy is awaited at the other capture (virtual time).
pub const MIN_WINDOW_NS: i64 = 2_000_000_000;
/// Added to twice the longest gap between two copies of a packet to make the window.
pub const WINDOW_MARGIN_NS: i64 = 500_000_000;
/// How often (virtual time) decided packets are handed on and forgotten.
const SWEEP_NS: i64 = 20_000_000;

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

/// What both captures tell of the data one direction of a connection carried.
#[derive(Debug, Clone, Default)]
pub struct TwoSided {
    pub data_packets: u64,
    /// Each retransmission (kept only when rows are wanted; [`TwoSided::counts`] always).
    pub retransmissions: Vec<ClassifiedRetx>,
    /// Each pure ACK's spacing (kept only when rows are wanted).
    pub acks: Vec<AckSpacing>,
    /// Data segments of the sender's capture found at the receiver's.
    pub data_matched: u64,
    /// Pure ACKs of the receiver's capture found at the sender's.
    pub acks_matched: u64,
    pub acks_sent: u64,
    counts: ClassCounts,
    compression: CompressionCounts,
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

/// ACK spacings counted as they come: runs of compressed ACKs become events at their end.
#[derive(Debug, Clone, Copy, Default)]
struct CompressionCounts {
    ratios: u64,
    compressed: u64,
    in_events: u64,
    events: u64,
    run: u64,
}

impl CompressionCounts {
    /// Counts one spacing; returns the length of a run of compressed ACKs it ended that
    /// makes an event (the rows before it are marked by the caller).
    fn add(&mut self, compressed: bool) -> u64 {
        self.ratios += 1;
        if compressed {
            self.compressed += 1;
            self.run += 1;
            return 0;
        }
        self.end_run()
    }

    fn end_run(&mut self) -> u64 {
        let run = std::mem::take(&mut self.run);
        if run as usize >= COMPRESSION_EVENT_ACKS {
            self.in_events += run;
            self.events += 1;
            run
        } else {
            0
        }
    }
}

impl TwoSided {
    pub fn counts(&self) -> ClassCounts {
        self.counts
    }

    pub fn ack_compression(&self) -> AckCompression {
        let c = self.compression;
        let frac = |x: u64| if c.ratios == 0 { 0.0 } else { x as f64 / c.ratios as f64 };
        AckCompression {
            acks: c.ratios,
            compressed_fraction: frac(c.compressed),
            event_fraction: frac(c.in_events),
            events: c.events,
        }
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

fn is_pure_ack(r: &TcpRec) -> bool {
    r.has(ACK) && r.payload_len == 0 && !r.has(SYN) && !r.has(FIN) && !r.has(RST)
}

/// Both captures' TCP packets, paired as they are read (see the module docs).
pub struct TcpPairing {
    env: Env,
    mn_addr: Option<cellperf_capture::Addr>,
    flows: Vec<Option<PairedFlow>>,
    /// Flows with packets still waiting for a decision.
    active: Vec<u32>,
    window: i64,
    clock: i64,
    next_sweep: i64,
}

/// One connection's two-sided state.
struct PairedFlow {
    key: FlowKey,
    evidence: [Option<Evidence>; 2],
    /// First packet of the flow at each capture (the receiver's series start there).
    first_ts: [Option<i64>; 2],
    first_v: i64,
    /// Which way is uplink, and on what basis, once decided.
    roles: Option<(Dir, &'static str)>,
    /// Packets that came before the roles were decided: (capture, virtual time) each.
    held: TcpRecords,
    held_at: Vec<(u8, i64)>,
    /// Per data direction (index: [`Dir::index`]).
    dirs: [Option<DirPairing>; 2],
    active: bool,
    /// Each direction's initial sequence number at each capture ([capture][direction]),
    /// and what capture 1's sequence numbers add to capture 0's (see [`SeqShift`]).
    isn: [[Option<u32>; 2]; 2],
    shift: SeqShift,
}

/// What a middlebox that rewrites sequence numbers (a firewall randomising them) adds to
/// each direction's sequence numbers between the captures, learned from the SYNs both
/// captures hold: capture 1's packets are taken back to capture 0's numbering before they
/// are paired, so that copies pair and no resend is invented. Zero for nearly every flow.
#[derive(Clone, Copy, Default, PartialEq)]
struct SeqShift([u32; 2]);

impl SeqShift {
    fn active(&self) -> bool {
        self.0 != [0, 0]
    }

    /// `rec` (and its SACK blocks, into `blocks`) in capture 0's numbering.
    fn undo<'b>(&self, rec: &TcpRec, sack: &[(u32, u32)], blocks: &'b mut [(u32, u32); 4]) -> (TcpRec, &'b [(u32, u32)]) {
        let own = self.0[rec.dir.index()];
        let peer = self.0[rec.dir.reverse().index()];
        let mut r = *rec;
        r.seq = r.seq.wrapping_sub(own);
        if r.has(ACK) {
            r.ack = r.ack.wrapping_sub(peer);
        }
        let n = sack.len().min(4);
        for (b, &(l, e)) in blocks.iter_mut().zip(sack) {
            *b = (l.wrapping_sub(peer), e.wrapping_sub(peer));
        }
        (r, &blocks[..n])
    }
}

/// The result for one flow: its roles, and per data direction what both captures tell
/// with the data's one-way delays.
pub struct PairedResult {
    pub roles: Option<(Dir, &'static str)>,
    pub dirs: [Option<(TwoSided, OwdAccumulator)>; 2],
}

impl TcpPairing {
    /// `window`: the matching window to start with (see the module docs).
    pub fn new(
        sides: [Side; 2],
        mn_addr: Option<cellperf_capture::Addr>,
        interval_ns: i64,
        keep_rows: bool,
        window: i64,
    ) -> Self {
        TcpPairing {
            env: Env { sides, interval_ns, keep_rows },
            mn_addr,
            flows: Vec::new(),
            active: Vec::new(),
            window: window.max(MIN_WINDOW_NS),
            clock: i64::MIN,
            next_sweep: i64::MIN,
        }
    }

    /// One TCP packet of flow `id` (`key`), with its SACK blocks, as `at` saw it.
    pub fn push(&mut self, at: SeenAt, id: u32, key: &FlowKey, rec: &TcpRec, sack: &[(u32, u32)]) {
        let SeenAt { capture, v, ttl } = at;
        self.clock = self.clock.max(v);
        // What was due before this packet is decided first: a copy later than the window
        // finds its original already judged lost.
        if v >= self.next_sweep {
            self.next_sweep = v + SWEEP_NS;
            self.sweep(v);
        }
        if self.flows.len() <= id as usize {
            self.flows.resize_with(id as usize + 1, || None);
        }
        let f = self.flows[id as usize].get_or_insert_with(|| PairedFlow {
            key: *key,
            evidence: [None, None],
            first_ts: [None, None],
            first_v: v,
            roles: None,
            held: TcpRecords::default(),
            held_at: Vec::new(),
            dirs: [None, None],
            active: false,
            isn: [[None; 2]; 2],
            shift: SeqShift::default(),
        });
        if rec.has(SYN) {
            f.learn_isn(capture, rec);
        }
        f.first_ts[capture].get_or_insert(rec.ts_ns);
        let e = f.evidence[capture].get_or_insert(Evidence { max_ttl: [0; 2], syn_dir: None, first_dir: rec.dir });
        e.max_ttl[rec.dir.index()] = e.max_ttl[rec.dir.index()].max(ttl);
        if rec.has(SYN) && !rec.has(ACK) {
            e.syn_dir.get_or_insert(rec.dir);
        }
        if !f.active {
            f.active = true;
            self.active.push(id);
        }
        let lag = if capture == 1 && f.shift.active() {
            f.take_shifted(capture, v, rec, sack, &self.env, self.mn_addr)
        } else {
            f.take(capture, v, rec, sack, &self.env, self.mn_addr)
        };
        self.widen(lag);
    }

    /// Widens the window for a gap of `lag` met between two copies of a packet.
    fn widen(&mut self, lag: i64) {
        if lag > 0 {
            self.window = self.window.max(2 * lag + WINDOW_MARGIN_NS);
        }
    }

    /// Hands on what is decided at virtual time `now` and forgets it.
    fn sweep(&mut self, now: i64) {
        let (env, window, mn_addr) = (&self.env, self.window, self.mn_addr);
        let flows = &mut self.flows;
        let mut lag = 0;
        self.active.retain(|&id| {
            let Some(f) = flows[id as usize].as_mut() else { return false };
            if f.roles.is_none() && now - f.first_v > window {
                let roles = mn_direction(&f.key, &f.sides_evidence(&env.sides), mn_addr);
                lag = lag.max(f.decide(roles, env));
            }
            let mut waiting = f.roles.is_none();
            for d in f.dirs.iter_mut().flatten() {
                let t0 = f.first_ts[1 - d.sender].unwrap_or(0);
                waiting |= d.advance(now, window, env, t0);
            }
            f.active = waiting;
            waiting
        });
        self.widen(lag);
    }

    /// Decides everything still waiting (the captures have ended) and gives each flow's result.
    pub fn finish(mut self) -> Vec<Option<PairedResult>> {
        self.sweep(i64::MAX);
        let env = self.env;
        self.flows
            .into_iter()
            .map(|f| {
                f.map(|f| PairedResult {
                    roles: f.roles,
                    dirs: f.dirs.map(|d| {
                        d.map(|d| {
                            let t0 = f.first_ts[1 - d.sender].unwrap_or(0);
                            d.finish(&env, t0)
                        })
                    }),
                })
            })
            .collect()
    }
}

/// Where and when a packet was seen: its capture, the virtual time it was read at (never
/// less than the previous packet's), and its TTL there.
#[derive(Debug, Clone, Copy)]
pub struct SeenAt {
    pub capture: usize,
    pub v: i64,
    pub ttl: u8,
}

/// What every flow's state needs to know of the run.
#[derive(Clone, Copy)]
struct Env {
    /// Side of each capture (index 0 and 1, as given to the analysis).
    sides: [Side; 2],
    interval_ns: i64,
    /// Keep each retransmission and ACK spacing (for the per-packet tables).
    keep_rows: bool,
}

impl PairedFlow {
    /// Notes a SYN's sequence number at `capture`; once both captures hold the same
    /// direction's, their difference is that direction's [`SeqShift`].
    #[cold]
    fn learn_isn(&mut self, capture: usize, rec: &TcpRec) {
        let d = rec.dir.index();
        self.isn[capture][d].get_or_insert(rec.seq);
        if let (Some(a), Some(b)) = (self.isn[0][d], self.isn[1][d]) {
            self.shift.0[d] = b.wrapping_sub(a);
        }
    }

    /// What each capture has shown, in capture order (as `report` gives it).
    fn sides_evidence(&self, sides: &[Side; 2]) -> Vec<(Side, Evidence)> {
        (0..2).filter_map(|c| self.evidence[c].map(|e| (sides[c], e))).collect()
    }

    /// The roles, if what both captures have shown so far settles them.
    fn conclusive_roles(&self, mn_addr: Option<cellperf_capture::Addr>, sides: &[Side; 2]) -> Option<(Dir, &'static str)> {
        let named = mn_addr.is_some_and(|a| self.key.a.addr == a || self.key.b.addr == a);
        let (Some(e0), Some(e1)) = (self.evidence[0], self.evidence[1]) else {
            return named.then(|| mn_direction(&self.key, &self.sides_evidence(sides), mn_addr));
        };
        let both = |d: usize| e0.max_ttl[d] > 0 && e1.max_ttl[d] > 0;
        let settled = named || (0..2).any(|d| both(d) && e0.max_ttl[d] != e1.max_ttl[d]) || (both(0) && both(1));
        settled.then(|| mn_direction(&self.key, &self.sides_evidence(sides), mn_addr))
    }

    /// Holds a packet of `capture` until the flow's roles are decided, or routes it;
    /// returns the longest gap between two copies met.
    #[inline(always)]
    fn take(
        &mut self,
        capture: usize,
        v: i64,
        rec: &TcpRec,
        sack: &[(u32, u32)],
        env: &Env,
        mn_addr: Option<cellperf_capture::Addr>,
    ) -> i64 {
        if self.roles.is_some() {
            return self.route(capture, v, rec, sack, env);
        }
        self.held.push(*rec, sack);
        self.held_at.push((capture as u8, v));
        match self.conclusive_roles(mn_addr, &env.sides) {
            Some(roles) => self.decide(roles, env),
            None => 0,
        }
    }

    /// [`Self::take`] of a packet of capture 1 taken back to capture 0's numbering first
    /// (see [`SeqShift`]).
    #[cold]
    #[inline(never)]
    fn take_shifted(
        &mut self,
        capture: usize,
        v: i64,
        rec: &TcpRec,
        sack: &[(u32, u32)],
        env: &Env,
        mn_addr: Option<cellperf_capture::Addr>,
    ) -> i64 {
        let mut blocks = [(0, 0); 4];
        let (rec, sack) = self.shift.undo(rec, sack, &mut blocks);
        self.take(capture, v, &rec, sack, env, mn_addr)
    }

    /// Fixes the roles and replays the packets held until now; returns the longest gap
    /// between two copies met.
    fn decide(&mut self, roles: (Dir, &'static str), env: &Env) -> i64 {
        self.roles = Some(roles);
        let held = std::mem::take(&mut self.held);
        let at = std::mem::take(&mut self.held_at);
        let mut lag = 0;
        for (rec, &(capture, v)) in held.recs.iter().zip(&at) {
            lag = lag.max(self.route(capture as usize, v, rec, held.sack(rec), env));
        }
        lag
    }

    /// Gives a packet to the state of the direction(s) it concerns: its data to its own
    /// direction's, its ACK to the other's. Returns the gap to its other copy, if paired now.
    fn route(&mut self, capture: usize, v: i64, rec: &TcpRec, sack: &[(u32, u32)], env: &Env) -> i64 {
        let (mn_dir, _) = self.roles.expect("routed after the roles are decided");
        let sender_of = |d: Dir| {
            let side = if d == mn_dir { Side::Mn } else { Side::Cn };
            (0..2).find(|&c| env.sides[c] == side).unwrap_or(0)
        };
        let mut lag = 0;
        if rec.payload_len > 0 {
            let d = self.dirs[rec.dir.index()].get_or_insert_with(|| DirPairing::new(sender_of(rec.dir)));
            if !(rec.has(SYN) && d.syn_resent(capture, rec.seq)) {
                lag = d.data(capture, v, rec);
            }
        }
        if rec.has(ACK) {
            let other = rec.dir.reverse();
            let d = self.dirs[other.index()].get_or_insert_with(|| DirPairing::new(sender_of(other)));
            lag = lag.max(d.ack(capture, v, rec, sack));
        }
        lag
    }
}

/// A data segment at the sender's capture, or an ACK that reached it, in its order.
enum SenderItem {
    Data { v: i64, ts: i64, seq: u32, len: u32, key: DataKey, arrival: Option<i64> },
    Ack { v: i64, ack: u32 },
}

impl SenderItem {
    fn v(&self) -> i64 {
        match self {
            SenderItem::Data { v, .. } | SenderItem::Ack { v, .. } => *v,
        }
    }
}

/// An ACK the receiver sent, waiting to learn whether it reached the sender.
struct RxAck {
    v: i64,
    ts: i64,
    ack: u32,
    sack: [(u32, u32); 4],
    sack_len: u8,
    pure: bool,
    key: AckKey,
    reached: Option<i64>,
}

/// A FIFO whose items keep the index they were given when pushed. It holds a window's
/// packets (131,000 of a 40,000-packet/s bulk flow), in blocks of [`Numbered::BLOCK`]
/// items: its memory follows what it holds, where one `VecDeque` doubles (7.3 MB at
/// 131,072 items, 14.7 MB at one more), and a block emptied at the front is reused at the
/// back.
struct Numbered<T> {
    /// Oldest first. Every block but the first and the last holds `BLOCK` items.
    blocks: VecDeque<VecDeque<T>>,
    spare: Option<VecDeque<T>>,
    /// Index of the oldest item.
    first: u64,
}

impl<T> Numbered<T> {
    const BLOCK: usize = 4096;

    fn new() -> Self {
        Numbered { blocks: VecDeque::new(), spare: None, first: 0 }
    }

    fn push(&mut self, x: T) -> u64 {
        match self.blocks.back_mut() {
            Some(last) if last.len() < Self::BLOCK => last.push_back(x),
            _ => {
                let mut block = self.spare.take().unwrap_or_else(|| VecDeque::with_capacity(Self::BLOCK));
                block.push_back(x);
                self.blocks.push_back(block);
            }
        }
        self.first + self.len() as u64 - 1
    }

    fn get_mut(&mut self, index: u64) -> Option<&mut T> {
        let at = usize::try_from(index.checked_sub(self.first)?).ok()?;
        let in_first = self.blocks.front()?.len();
        if at < in_first {
            return self.blocks[0].get_mut(at);
        }
        let rest = at - in_first;
        self.blocks.get_mut(1 + rest / Self::BLOCK)?.get_mut(rest % Self::BLOCK)
    }

    fn front(&self) -> Option<&T> {
        self.blocks.front()?.front()
    }

    fn len(&self) -> usize {
        match (self.blocks.front(), self.blocks.back()) {
            (Some(first), Some(last)) if self.blocks.len() > 1 => {
                first.len() + (self.blocks.len() - 2) * Self::BLOCK + last.len()
            }
            (Some(only), _) => only.len(),
            _ => 0,
        }
    }

    fn pop_if(&mut self, due: impl Fn(&T) -> bool) -> Option<(u64, T)> {
        if !due(self.front()?) {
            return None;
        }
        let oldest = self.blocks.front_mut()?;
        let x = oldest.pop_front()?;
        if oldest.is_empty() {
            let emptied = self.blocks.pop_front();
            self.spare = self.spare.take().or(emptied);
        }
        self.first += 1;
        Some((self.first - 1, x))
    }
}

/// The data one direction carried, with the ACKs of it, while both captures are read.
struct DirPairing {
    /// The capture of the data's sender.
    sender: usize,
    data: Pairing<DataKey>,
    acks: Pairing<AckKey>,
    sender_items: Numbered<SenderItem>,
    rx_acks: Numbered<RxAck>,
    /// Data seen so far at either capture (for which ACKs matter, see [`DirPairing::ack`]).
    seen_space: Unwrapper,
    seen_end: Option<u64>,
    /// Highest ACK number handed to the sender's state so far.
    sender_acked: Option<u64>,
    judge: Judge,
    /// The sequence number of the data-carrying SYN each capture saw first.
    syn_seq: [Option<u32>; 2],
}

impl DirPairing {
    fn new(sender: usize) -> Self {
        DirPairing {
            sender,
            data: Pairing::default(),
            acks: Pairing::default(),
            sender_items: Numbered::new(),
            rx_acks: Numbered::new(),
            seen_space: Unwrapper::default(),
            seen_end: None,
            sender_acked: None,
            judge: Judge::default(),
            syn_seq: [None; 2],
        }
    }

    /// Whether a SYN carrying data repeats the one `capture` saw first: a setup resend,
    /// counted apart (`syn_retransmissions`), its data no retransmission.
    fn syn_resent(&mut self, capture: usize, seq: u32) -> bool {
        match self.syn_seq[capture] {
            Some(first) => first == seq,
            None => {
                self.syn_seq[capture] = Some(seq);
                false
            }
        }
    }

    /// A data segment at either capture; returns the gap to its other copy if paired now.
    fn data(&mut self, capture: usize, v: i64, rec: &TcpRec) -> i64 {
        self.judge.anchor(rec.data_seq());
        let end = self.seen_space.unwrap(rec.data_seq()) + rec.payload_len as u64;
        self.seen_end = Some(self.seen_end.map_or(end, |e| e.max(end)));
        let key = data_key(rec);
        if capture == self.sender {
            let item = SenderItem::Data { v, ts: rec.ts_ns, seq: rec.data_seq(), len: rec.payload_len, key, arrival: None };
            let index = self.sender_items.push(item);
            // An arrival read first (the receiver's capture ahead in virtual time) is
            // paired here; the gap is then within the window already.
            if let Some(ts) = self.data.slot(key, index) {
                self.set_arrival(index, ts);
            }
            0
        } else {
            match self.data.answer(key, rec.ts_ns, v) {
                Some(index) => {
                    let sent_v = self.set_arrival(index, rec.ts_ns);
                    (v - sent_v).abs()
                }
                None => 0,
            }
        }
    }

    fn set_arrival(&mut self, index: u64, ts: i64) -> i64 {
        match self.sender_items.get_mut(index) {
            Some(SenderItem::Data { arrival, v, .. }) => {
                *arrival = Some(ts);
                *v
            }
            _ => 0,
        }
    }

    /// A packet acknowledging this direction's data, at either capture. At the sender's it
    /// moves the sender's acknowledged point; pure ACKs, and piggybacked ones while data
    /// of this direction is outstanding (a bulk transfer the other way would otherwise be
    /// paired twice), are paired across the captures.
    fn ack(&mut self, capture: usize, v: i64, rec: &TcpRec, sack: &[(u32, u32)]) -> i64 {
        let pure = is_pure_ack(rec);
        let relevant = pure || self.seen_end.is_some_and(|end| self.seen_space.peek(rec.ack) < end);
        if capture == self.sender {
            // Only an ACK that moves the acknowledged point matters to the sender's state
            // (and before any data there is nothing to acknowledge): a bulk transfer the
            // other way repeats one ACK number in every segment.
            let at = self.seen_space.peek(rec.ack);
            if self.seen_end.is_some() && self.sender_acked.is_none_or(|a| at > a) {
                self.sender_acked = Some(at);
                self.sender_items.push(SenderItem::Ack { v, ack: rec.ack });
            }
            if !relevant {
                return 0;
            }
            match self.acks.answer(ack_key(rec), rec.ts_ns, v) {
                Some(i) => match self.rx_acks.get_mut(i) {
                    Some(a) => {
                        a.reached = Some(rec.ts_ns);
                        (v - a.v).abs()
                    }
                    None => 0,
                },
                None => 0,
            }
        } else {
            if !relevant {
                return 0;
            }
            let mut blocks = [(0, 0); 4];
            let n = sack.len().min(4);
            blocks[..n].copy_from_slice(&sack[..n]);
            let key = ack_key(rec);
            let item = RxAck { v, ts: rec.ts_ns, ack: rec.ack, sack: blocks, sack_len: n as u8, pure, key, reached: None };
            let index = self.rx_acks.push(item);
            if let Some(ts) = self.acks.slot(key, index) {
                if let Some(a) = self.rx_acks.get_mut(index) {
                    a.reached = Some(ts);
                }
            }
            0
        }
    }

    /// Hands on what is decided at virtual time `now`: ACKs one window after they were
    /// sent, sender items two windows after (`t0`: where the receiver's series starts).
    /// Returns whether anything still waits.
    fn advance(&mut self, now: i64, window: i64, env: &Env, t0: i64) -> bool {
        let acks_due = now.saturating_sub(window);
        while let Some((index, a)) = self.rx_acks.pop_if(|a| a.v < acks_due) {
            if a.reached.is_none() {
                self.acks.forget_slot(a.key, index);
            }
            self.judge.receiver_ack(&a, env.keep_rows);
        }
        self.acks.expire_answers(acks_due);
        self.data.expire_answers(acks_due);
        let data_due = now.saturating_sub(2 * window);
        while let Some((index, item)) = self.sender_items.pop_if(|x| x.v() < data_due) {
            match item {
                SenderItem::Data { ts, seq, len, key, arrival, .. } => {
                    if arrival.is_none() {
                        self.data.forget_slot(key, index);
                    }
                    self.judge.sent(ts, seq, len, arrival, t0, env);
                }
                SenderItem::Ack { ack, .. } => self.judge.acknowledged(ack),
            }
        }
        let oldest_unjudged = self.sender_items.front().map_or(data_due, SenderItem::v);
        self.judge.forget_acked(oldest_unjudged.saturating_sub(window));
        self.sender_items.len() + self.rx_acks.len() > 0
    }

    fn finish(mut self, env: &Env, t0: i64) -> (TwoSided, OwdAccumulator) {
        self.advance(i64::MAX, 0, env, t0);
        self.judge.finish(t0, env.interval_ns)
    }
}

/// Judges one direction's data in the sender's order, once each segment's arrival and
/// every ACK that could cover it are decided: retransmission classes, ACK compression,
/// one-way delays.
#[derive(Default)]
struct Judge {
    /// First sequence number seen of this direction, at either capture: both sequence
    /// spaces below (the sender's and the receiver's ACKs) are unwrapped from it.
    anchor: Option<u32>,
    space: Unwrapper,
    /// First data byte of the sender's capture.
    base: Option<u64>,
    snd_max: u64,
    /// Highest cumulative ACK that reached the sender's capture.
    acked: u64,
    latest: LatestBySeq,
    times_resent: AHashMap<u64, u32>,
    ack_space: Unwrapper,
    acks: ReceiverAcks,
    prev_ack: Option<(i64, i64)>,
    owd: Option<OwdAccumulator>,
    out: TwoSided,
}

impl Judge {
    fn anchor(&mut self, seq: u32) {
        if self.anchor.is_none() {
            self.anchor = Some(seq);
            self.space.unwrap(seq);
            self.ack_space.unwrap(seq);
        }
    }

    /// A data segment of the sender's capture, with its arrival at the receiver's, if any
    /// (`t0`: where the receiver's series starts).
    fn sent(&mut self, ts: i64, seq: u32, len: u32, arrival: Option<i64>, t0: i64, env: &Env) {
        self.anchor(seq);
        let start = self.space.unwrap(seq);
        let end = start + len as u64;
        let base = *self.base.get_or_insert(start);
        self.out.data_packets += 1;
        if let Some(t) = arrival {
            self.out.data_matched += 1;
            self.owd.get_or_insert_with(|| OwdAccumulator::new(t0, env.interval_ns)).add(ts, t);
        }
        if start < self.snd_max {
            let resent = self.times_resent.entry(start).or_insert(0);
            *resent += 1;
            let serial = *resent > 1;
            let class = match self.latest.covering(start) {
                None => RetxClass::Normal,
                Some((s, e, earlier)) => classify(earlier, (s, e), arrival, &self.acks),
            };
            let c = &mut self.out.counts;
            c.total += 1;
            c.serial += serial as u64;
            match class {
                RetxClass::Normal => c.normal += 1,
                RetxClass::Spurious => c.spurious += 1,
                RetxClass::Unavoidable => c.unavoidable += 1,
            }
            if env.keep_rows {
                // Bytes from before the first segment seen count from its start.
                let rel_seq = start - base.min(start);
                self.out.retransmissions.push(ClassifiedRetx { ts_ns: ts, rel_seq, len, class, serial });
            }
        }
        self.latest.record(start, end, arrival);
        self.snd_max = self.snd_max.max(end);
    }

    /// An ACK that reached the sender's capture.
    fn acknowledged(&mut self, ack: u32) {
        if self.anchor.is_some() {
            self.acked = self.acked.max(self.space.peek(ack));
        }
    }

    /// An ACK the receiver sent, with whether (and when) it reached the sender's capture.
    fn receiver_ack(&mut self, a: &RxAck, keep_rows: bool) {
        if self.anchor.is_some() {
            let cumulative = self.ack_space.unwrap(a.ack);
            let space = self.ack_space;
            let sack = a.sack[..a.sack_len as usize].iter().map(|(l, r)| (space.peek(*l), space.peek(*r)));
            self.acks.push(a.ts, a.v, cumulative, sack, a.reached);
        }
        // ACK compression over pure ACKs seen at both ends, in the receiver's sending order.
        if !a.pure {
            return;
        }
        self.out.acks_sent += 1;
        let Some(got) = a.reached else { return };
        self.out.acks_matched += 1;
        if let Some((ps, pr)) = self.prev_ack {
            let dts = a.ts - ps;
            if dts > 0 {
                let ratio = (got - pr) as f64 / dts as f64;
                let compressed = ratio < COMPRESSION_RATIO;
                let run = self.out.compression.add(compressed);
                if keep_rows {
                    let row = AckSpacing { sent_ns: a.ts, received_ns: got, ratio, compressed, in_event: false };
                    self.out.acks.push(row);
                    let before = self.out.acks.len() - 1;
                    self.mark_event(before, run);
                }
            }
        }
        self.prev_ack = Some((a.ts, got));
    }

    /// Marks the `run` rows before row `end` as inside an ACK-compression event.
    fn mark_event(&mut self, end: usize, run: u64) {
        let from = end.saturating_sub(run as usize);
        for a in &mut self.out.acks[from..end] {
            a.in_event = true;
        }
    }

    /// Forgets what no retransmission can ask for any more: transmissions the sender's
    /// capture saw acknowledged (a sender never resends below its acknowledged point), and
    /// receiver ACKs older than every remembered arrival and than `horizon_v` (virtual
    /// time before which no segment still to be judged can have arrived).
    fn forget_acked(&mut self, horizon_v: i64) {
        self.latest.forget_below(self.acked);
        if self.times_resent.len() > 64 {
            let acked = self.acked;
            self.times_resent.retain(|start, _| *start >= acked);
        }
        let oldest_arrival = self.latest.entries.iter().filter_map(|e| e.2).min();
        self.acks.forget(|ts, v| v < horizon_v && oldest_arrival.is_none_or(|a| ts < a));
    }

    fn finish(mut self, t0: i64, interval_ns: i64) -> (TwoSided, OwdAccumulator) {
        let run = self.out.compression.end_run();
        self.mark_event(self.out.acks.len(), run);
        let owd = self.owd.take().unwrap_or_else(|| OwdAccumulator::new(t0, interval_ns));
        (self.out, owd)
    }
}

/// The latest transmission of each first sequence number, sorted by it, with its arrival.
/// Segments arrive almost always in order, so recording one is a push; a lookup is a
/// binary search (a tree map would cost an allocation-heavy insert per segment).
#[derive(Default)]
struct LatestBySeq {
    /// (start, end, arrival at the receiver's capture), sorted by start.
    entries: VecDeque<(u64, u64, Option<i64>)>,
}

impl LatestBySeq {
    fn record(&mut self, start: u64, end: u64, arrival: Option<i64>) {
        match self.entries.back() {
            Some(&(last, _, _)) if last < start => self.entries.push_back((start, end, arrival)),
            None => self.entries.push_back((start, end, arrival)),
            _ => match self.entries.binary_search_by_key(&start, |e| e.0) {
                Ok(at) => self.entries[at] = (start, end, arrival),
                Err(at) => self.entries.insert(at, (start, end, arrival)),
            },
        }
    }

    /// The latest transmission whose first byte is at or before `seq` and which covers it.
    fn covering(&self, seq: u64) -> Option<(u64, u64, Option<i64>)> {
        let at = self.entries.partition_point(|e| e.0 <= seq).checked_sub(1)?;
        let e = self.entries[at];
        (e.1 > seq).then_some(e)
    }

    /// Forgets the transmissions that end at or before `acked`, from the lowest up.
    fn forget_below(&mut self, acked: u64) {
        while self.entries.front().is_some_and(|e| e.1 <= acked) {
            self.entries.pop_front();
        }
    }
}

/// One ACK the receiver sent: when (its capture's clock, and virtual time), what it
/// acknowledged (sequence positions unwrapped) and when it reached the sender's capture.
struct ReceivedAck {
    ts: i64,
    v: i64,
    cumulative: u64,
    sack: [(u64, u64); 4],
    sack_len: u8,
    reached: Option<i64>,
}

/// The receiver's ACKs in its order, from the oldest one still needed.
#[derive(Default)]
struct ReceiverAcks {
    acks: VecDeque<ReceivedAck>,
}

impl ReceiverAcks {
    fn push(&mut self, ts: i64, v: i64, cumulative: u64, sack: impl Iterator<Item = (u64, u64)>, reached: Option<i64>) {
        let mut a = ReceivedAck { ts, v, cumulative, sack: [(0, 0); 4], sack_len: 0, reached };
        for (slot, b) in a.sack.iter_mut().zip(sack) {
            *slot = b;
            a.sack_len += 1;
        }
        self.acks.push_back(a);
    }

    fn forget(&mut self, old: impl Fn(i64, i64) -> bool) {
        while self.acks.front().is_some_and(|a| old(a.ts, a.v)) {
            self.acks.pop_front();
        }
    }
}

impl ReceivedAck {
    /// Whether it acknowledges all of `start..end`, cumulatively or by SACK.
    fn covers(&self, start: u64, end: u64) -> bool {
        self.cumulative >= end || self.sack[..self.sack_len as usize].iter().any(|(l, r)| *l <= start && *r >= end)
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
    let from = acks.acks.partition_point(|a| a.ts < arrived);
    let mut covering = false;
    for a in acks.acks.range(from..).take(MAX_ACK_SCAN) {
        if a.ts >= until {
            break;
        }
        if a.covers(start, end) {
            if a.reached.is_some() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_one_sided::tests::seg;

    #[test]
    fn numbered_items_keep_their_index_across_blocks() {
        let mut q = Numbered::new();
        let n = 3 * Numbered::<u64>::BLOCK as u64 + 5;
        for i in 0..n {
            assert_eq!(q.push(i * 10), i);
        }
        for i in 0..Numbered::<u64>::BLOCK as u64 + 7 {
            assert_eq!(q.pop_if(|_| true), Some((i, i * 10)));
        }
        assert_eq!(q.pop_if(|&x| x < 5), None);
        for i in [0, 100, Numbered::<u64>::BLOCK as u64 + 6] {
            assert!(q.get_mut(i).is_none(), "{i} was popped");
        }
        for i in Numbered::<u64>::BLOCK as u64 + 7..n {
            assert_eq!(q.get_mut(i).copied(), Some(i * 10), "{i}");
        }
        assert!(q.get_mut(n).is_none());
        assert_eq!((q.push(7), q.len()), (n, (n + 1 - Numbered::<u64>::BLOCK as u64 - 7) as usize));
        assert!(q.spare.is_some(), "the emptied block is kept");
        for _ in 0..Numbered::<u64>::BLOCK {
            q.push(0);
        }
        assert!(q.spare.is_none() && q.blocks.len() == 4, "and reused for the next block");
    }

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

    /// The sender's capture (the MN's, capture 0) and the receiver's (capture 1), read in
    /// step with the receiver's clock taken `offset_ms` ahead, as `analyze` does; the
    /// result for data sent `D` (the flow's first packet goes `D`: its initiator).
    fn pair_with(sender: &TcpRecords, receiver: &TcpRecords, offset_ms: i64) -> (TwoSided, OwdAccumulator) {
        let key = FlowKey::new(
            crate::flows::PROTO_TCP,
            crate::flows::Endpoint { addr: 1, port: 1 },
            crate::flows::Endpoint { addr: 2, port: 2 },
        )
        .0;
        let mut all: Vec<(SeenAt, &TcpRec, &TcpRecords)> = Vec::new();
        let at = |capture, v| SeenAt { capture, v, ttl: 64 };
        all.extend(sender.recs.iter().map(|r| (at(0, r.ts_ns), r, sender)));
        all.extend(receiver.recs.iter().map(|r| (at(1, r.ts_ns - offset_ms * 1_000_000), r, receiver)));
        all.sort_by_key(|x| (x.0.v, x.0.capture));
        let mut p = TcpPairing::new([Side::Mn, Side::Cn], None, 1_000_000_000_000, true, 0);
        for (at, r, recs) in all {
            p.push(at, 0, &key, r, recs.sack(r));
        }
        let mut flows = p.finish();
        let result = flows.pop().flatten().expect("the flow");
        assert_eq!(result.roles.map(|r| r.0), Some(D));
        let [a, _] = result.dirs;
        a.unwrap_or_else(|| (TwoSided::default(), OwdAccumulator::default()))
    }

    fn analyze(sender: &TcpRecords, receiver: &TcpRecords, _dir: Dir, owd: &mut OwdAccumulator) -> TwoSided {
        let (two, o) = pair_with(sender, receiver, SKEW);
        *owd = o;
        two
    }

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

    #[test]
    fn the_same_classes_whichever_capture_is_read_first() {
        // The receiver's copies read a second before the sender's (an offset estimate that
        // puts the receiver ahead): answers wait for their slots, results do not change.
        let s = [
            with_id(seg(0, D, 1, 100, 1, ACK), 1),
            with_id(seg(300, D, 1, 100, 1, ACK), 2),
            with_id(seg(900, D, 1, 100, 1, ACK), 3),
            with_id(seg(1000, U, 1, 0, 101, ACK), 50),
        ];
        let r = [
            with_id(seg(SKEW + 50, D, 1, 100, 1, ACK), 1),
            with_id(seg(SKEW + 51, U, 1, 0, 101, ACK), 50),
            with_id(seg(SKEW + 350, D, 1, 100, 1, ACK), 2),
            with_id(seg(SKEW + 950, D, 1, 100, 1, ACK), 3),
        ];
        for offset in [SKEW, SKEW + 1_000, SKEW - 1_000] {
            let (t, _) = pair_with(&records(&s), &records(&r), offset);
            assert_eq!((t.counts().total, t.counts().spurious, t.counts().serial, t.data_matched), (2, 2, 1, 3));
        }
    }

    #[test]
    fn memory_is_the_window_not_the_flow_and_late_copies_are_lost() {
        // 200 s of segments 1 ms apart, each arriving 30 ms later, ACKed at once; then one
        // segment whose copy comes 10 s later (beyond the window): lost, its copy unmatched.
        let key = FlowKey::new(
            crate::flows::PROTO_TCP,
            crate::flows::Endpoint { addr: 1, port: 1 },
            crate::flows::Endpoint { addr: 2, port: 2 },
        )
        .0;
        let mut p = TcpPairing::new([Side::Mn, Side::Cn], None, 1_000_000_000_000, false, 0);
        let n = 200_000u32;
        let mut most_waiting = [0; 2];
        let push = |p: &mut TcpPairing, capture, v_ms: i64, r: TcpRec| {
            p.push(SeenAt { capture, v: v_ms * 1_000_000, ttl: 64 }, 0, &key, &r, &[]);
        };
        for i in 0..n {
            let (t, seq, id) = (i as i64, 1 + i * 100, i as u16);
            push(&mut p, 0, t, with_id(seg(t, D, seq, 100, 1, ACK), id));
            push(&mut p, 1, t + 30, with_id(seg(t + 30 + SKEW, D, seq, 100, 1, ACK), id));
            push(&mut p, 1, t + 30, with_id(seg(t + 30 + SKEW, U, 1, 0, seq + 100, ACK), id));
            push(&mut p, 0, t + 60, with_id(seg(t + 60, U, 1, 0, seq + 100, ACK), id));
            let f = p.flows[0].as_ref().unwrap();
            let waiting: usize = f.dirs.iter().flatten().map(|d| d.sender_items.len() + d.rx_acks.len()).sum();
            let half = (i >= n / 2) as usize;
            most_waiting[half] = most_waiting[half].max(waiting);
        }
        let late = 1 + n * 100;
        let t = n as i64;
        push(&mut p, 0, t, with_id(seg(t, D, late, 100, 1, ACK), 7));
        push(&mut p, 1, t + 10_000, with_id(seg(t + 10_000 + SKEW, D, late, 100, 1, ACK), 7));
        // Waiting: two windows of 2 s of segments and of the ACKs reaching the sender (4,000
        // each), one window of the receiver's ACKs (2,000); as many in the flow's second half
        // as in its first.
        assert!(most_waiting[0] <= 10_100, "{most_waiting:?}");
        assert!(most_waiting[1] <= most_waiting[0], "{most_waiting:?}");
        let result = p.finish().pop().flatten().unwrap();
        let (two, _) = result.dirs[D.index()].clone().unwrap();
        assert_eq!((two.data_packets, two.data_matched), (n as u64 + 1, n as u64));
        assert_eq!(two.acks_matched, n as u64);
    }
}
