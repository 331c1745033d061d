//! One pass over one capture: each TCP or UDP packet goes to its flow's state ([`FlowAt`]),
//! with the flow's id shared by every capture of the run (see `flows`, `nat`).
//!
//! Two things are settled here, before any metric sees a packet:
//! - **Capture duplicates**: the same frame recorded twice (some capture setups do: a
//!   mirror port and the host, `-i any` over a bridge) is one of the last
//!   [`RECENT_PACKETS`] packets of its flow and direction again, with the same IPv4 id,
//!   TTL, length and TCP numbers (within a flow, the same IP header and checksum), within
//!   [`DUPLICATE_WINDOW_NS`]. A sender gives every packet, resends included, a new id, so
//!   such a copy is no retransmission; it is counted apart (`capture_duplicates`) and left
//!   out of every other figure. An id of 0 (a sender that does not number its packets)
//!   proves nothing and is never taken for a duplicate, nor is IPv6 (no id).
//! - **IP fragments**: only a datagram's first fragment carries its ports; the later ones
//!   are given to the flow of the first fragment with the same addresses, protocol and
//!   fragment id, and their IP bytes counted there, also when they came before it. Later
//!   fragments whose first one never comes (or comes after [`MAX_OPEN_DATAGRAMS`] other
//!   fragmented datagrams) are in no flow; a warning counts them. Each flow direction
//!   counts its fragmented datagrams, their fragments, and those incomplete at this capture
//!   ([`Fragments`], seed 004 §II.A).
//! - **GSO frames**: one frame holding several probe datagrams of one UDP GSO send is
//!   taken apart into them, as the kernel cuts it (see `gso`).

use ahash::AHashMap;
use cellperf_capture::decode::tcp_flags::{ACK, SYN};
use cellperf_capture::{Addr, Fragmentation, IpInfo, Packet, Transport, UdpInfo};
use serde::Serialize;

use crate::flows::{Dir, Endpoint, FlowKey, FlowTable, PROTO_TCP, PROTO_UDP};
use crate::gso;
use crate::nat::{self, NatPairing, Signature};
use crate::record::{payload_hash, TcpRec, UdpRec};
use crate::side::Evidence;
use crate::tables::PacketTable;
use crate::tcp_one_sided::TcpOneSided;
use crate::tcp_feed::TcpFeed;
use crate::tcp_two_sided::{PairedResult, SeenAt};

/// Longest gap between a frame and its capture duplicate. Copies made by a capture setup
/// come microseconds apart, or up to a few hundred (a host's every packet recorded twice
/// 100-240 us apart, seen in public captures); a sender gives a resend a new IP id; a copy
/// the network made (a link-layer retransmission, milliseconds later on a radio link) is
/// left to the metrics as a duplicate received (it is one).
pub const DUPLICATE_WINDOW_NS: i64 = 500_000;

/// Packets of each flow direction a capture duplicate is looked for among: a copy made
/// 240 us later comes after the next few packets of a fast sender, not right after its
/// original.
pub const RECENT_PACKETS: usize = 8;

/// Fragmented datagrams whose later fragments are awaited at once; beyond it the table is
/// emptied (bounded memory on a capture of fragments without end).
pub const MAX_OPEN_DATAGRAMS: usize = 1 << 16;

/// One flow as seen at one capture.
pub(crate) struct FlowAt {
    pub first_ts: i64,
    pub last_ts: i64,
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub max_ttl: [u8; 2],
    pub first_dir: Dir,
    pub syn_dir: Option<Dir>,
    pub tcp: Option<TcpOneSided>,
    pub udp_recs: Vec<UdpRec>,
    /// Frames captured twice (see the module docs), per direction.
    pub duplicates: [u64; 2],
    /// Fragmented datagrams, per direction (counted when the capture ends).
    pub fragments: [Fragments; 2],
    /// The flow's first payload was looked at, and it was the hello of cellperf's agents'
    /// control protocol (see [`is_control_hello`]).
    payload_seen: bool,
    pub control: bool,
    /// The first payload was the agents' `data_connection` frame: a test's data connection
    /// opened to the server's control port beside its request (see [`is_data_connection`]).
    pub data_connection: bool,
    /// The last packets of each direction (a ring; an id of 0 is an empty slot).
    recent: [[Fingerprint; RECENT_PACKETS]; 2],
    /// Where each direction's next packet goes in `recent`.
    next: [u8; 2],
}

impl FlowAt {
    fn new(ts: i64, dir: Dir) -> FlowAt {
        FlowAt {
            first_ts: ts,
            last_ts: ts,
            packets: [0; 2],
            bytes: [0; 2],
            max_ttl: [0; 2],
            first_dir: dir,
            syn_dir: None,
            tcp: None,
            udp_recs: Vec::new(),
            duplicates: [0; 2],
            fragments: [Fragments::default(); 2],
            payload_seen: false,
            control: false,
            data_connection: false,
            recent: [[Fingerprint::EMPTY; RECENT_PACKETS]; 2],
            next: [0; 2],
        }
    }

    /// Counts `packets` packets of `bytes` IP bytes in all, the first at `ts`.
    fn count(&mut self, ts: i64, dir: Dir, ttl: u8, packets: u64, bytes: u64) {
        let d = dir.index();
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
        self.packets[d] += packets;
        self.bytes[d] += bytes;
        self.max_ttl[d] = self.max_ttl[d].max(ttl);
    }

    /// What this capture shows of which end of the flow it sits at.
    pub fn evidence(&self) -> Evidence {
        Evidence { max_ttl: self.max_ttl, syn_dir: self.syn_dir, first_dir: self.first_dir }
    }

    pub fn duration_s(&self) -> f64 {
        (self.last_ts - self.first_ts) as f64 / 1e9
    }

    /// Whether `p` is a capture duplicate of one of this direction's last packets; remembers
    /// it if not.
    #[inline(always)]
    fn is_duplicate(&mut self, p: &Packet<'_>, dir: Dir) -> bool {
        let Some(id) = p.ip.ip_id.filter(|id| *id != 0) else { return false };
        // The IP header's fields that differ between packets of a flow (id, length, TTL)
        // and where the segment sits, or a datagram's content: a sender may give two
        // datagrams of one flow the same id (Linux did, to CBR datagrams 3 ms apart, which an
        // ARQ flush then delivered 6 µs apart), so their length alone does not tell them.
        let content = match &p.transport {
            Transport::Tcp(t) => (t.seq, t.ack),
            Transport::Udp(u) => (u.payload_len, payload_hash(u) as u32),
            Transport::Other(_) => return false,
        };
        let now = Fingerprint { ts: p.ts_ns, id, ttl: p.ip.ttl, len: p.ip.len, content };
        let d = dir.index();
        let dup = self.recent[d].iter().any(|earlier| now.repeats(earlier));
        if dup {
            self.duplicates[d] += 1;
        } else {
            let i = self.next[d] as usize;
            self.recent[d][i] = now;
            self.next[d] = ((i + 1) % RECENT_PACKETS) as u8;
        }
        dup
    }
}

/// What tells a frame captured twice: its time and the fields a resend would change.
#[derive(Clone, Copy)]
struct Fingerprint {
    ts: i64,
    id: u16,
    ttl: u8,
    len: u32,
    /// A TCP segment's sequence and ACK numbers; a datagram's payload length and hash.
    content: (u32, u32),
}

impl Fingerprint {
    /// An empty slot: no packet taken for a copy has id 0.
    const EMPTY: Fingerprint = Fingerprint { ts: 0, id: 0, ttl: 0, len: 0, content: (0, 0) };

    fn repeats(&self, earlier: &Fingerprint) -> bool {
        (self.id, self.ttl, self.len, self.content) == (earlier.id, earlier.ttl, earlier.len, earlier.content)
            && (0..=DUPLICATE_WINDOW_NS).contains(&(self.ts - earlier.ts))
    }
}

/// A datagram's fragments: source, destination, protocol and fragment id.
type DatagramKey = (Addr, Addr, u8, u32);

/// What is known of a fragmented datagram.
#[derive(Clone, Copy)]
enum Datagram {
    /// Its first fragment was seen: the flow and direction its fragments go to.
    Flow(u32, Dir, Parts),
    /// Only later fragments so far: how many, their IP bytes, earliest time, highest TTL.
    Pending { packets: u64, bytes: u64, ts: i64, ttl: u8, parts: Parts },
}

/// A flow direction's fragmented datagrams at one capture (seed 004 §II.A): how many, their
/// fragments, and how many are *incomplete* (a reassembly would fail): the last fragment
/// never came, or (IPv4 UDP without IP options, whose first fragment's UDP length gives the
/// datagram's size) the fragments' bytes fall short of it. A datagram whose first fragment
/// never came belongs to no flow (the capture's orphan fragments).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Fragments {
    pub datagrams: u64,
    pub fragments: u64,
    pub incomplete: u64,
}

/// The fragments of one datagram seen so far.
#[derive(Clone, Copy, Default)]
struct Parts {
    fragments: u32,
    last: bool,
    /// Payload bytes of the fragments (IPv4 without options: IP length − 20).
    bytes: u64,
    /// The whole datagram's payload size, when known (see [`Fragments`]).
    expected: Option<u64>,
}

impl Parts {
    fn add(&mut self, ip: &IpInfo) {
        self.fragments += 1;
        self.last |= ip.fragment == Fragmentation::Last;
        self.bytes += ip.len.saturating_sub(20) as u64;
    }

    fn complete(&self) -> bool {
        self.last && self.expected.is_none_or(|n| self.bytes >= n)
    }
}

/// What the passes over a run's captures share: flow identities, the NAT pairing, the
/// per-packet rows, and the TCP work: each capture's TCP state and (two captures) the TCP
/// packets paired across the captures, on a thread of its own (see `tcp_feed`); set up
/// before the pass, taken at its end.
#[derive(Default)]
pub(crate) struct Shared {
    pub table: FlowTable,
    pub nat: NatPairing,
    /// Per-packet rows, when the tables are wanted.
    pub packet_table: Option<PacketTable>,
    pub tcp: Option<TcpFeed>,
    /// Each flow's TCP packets paired across the captures, once both are read.
    pub paired: Vec<Option<PairedResult>>,
}

/// The state one capture's pass builds.
pub(crate) struct Scan {
    /// Index of the capture among the run's (0: the MN's, or the only one).
    pub capture: usize,
    pub two_sided: bool,
    pub flows: Vec<Option<FlowAt>>,
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// The fragmented datagrams seen.
    datagrams: AHashMap<DatagramKey, Datagram>,
    /// Later fragments held as pending, and those dropped with the table.
    pending_fragments: u64,
    orphaned: u64,
    pub duplicates: u64,
}

impl Scan {
    pub fn new(capture: usize, two_sided: bool) -> Self {
        Scan {
            capture,
            two_sided,
            flows: Vec::new(),
            first_ts: None,
            last_ts: None,
            datagrams: AHashMap::new(),
            pending_fragments: 0,
            orphaned: 0,
            duplicates: 0,
        }
    }

    /// Takes the capture's next TCP or UDP packet (or later fragment of one), at virtual
    /// time `v` (two captures read in step: see `tcp_two_sided`).
    // Inlined into the reading loop, so that the decoded packet stays in registers (a call
    // took it through memory: +10 % instructions per packet, measured with callgrind).
    #[inline(always)]
    pub fn packet(&mut self, p: &Packet<'_>, sh: &mut Shared, v: i64) {
        if let (Transport::Udp(u), false) = (&p.transport, p.ip.is_fragment()) {
            if let Some(size) = gso::probe_segment_size(u) {
                return self.gso_frame(p, u, size, sh, v);
            }
        }
        self.datagram(p, sh, v)
    }

    /// A frame of several probe datagrams sent as one (see `gso`): each datagram as the
    /// kernel cuts it, with the frame's time and the next IPv4 id.
    #[inline(never)]
    fn gso_frame(&mut self, p: &Packet<'_>, u: &UdpInfo<'_>, size: usize, sh: &mut Shared, v: i64) {
        let headers = p.ip.len.saturating_sub(u.payload_len);
        for (i, payload) in u.payload.chunks(size).enumerate() {
            let ip = IpInfo {
                len: headers + payload.len() as u32,
                ip_id: p.ip.ip_id.map(|id| id.wrapping_add(i as u16)),
                ..p.ip
            };
            let udp = UdpInfo { payload_len: payload.len() as u32, payload, ..*u };
            self.datagram(&Packet { ts_ns: p.ts_ns, ip, transport: Transport::Udp(udp) }, sh, v);
        }
    }

    /// One TCP segment or UDP datagram (or later fragment of one).
    #[inline(always)]
    fn datagram(&mut self, p: &Packet<'_>, sh: &mut Shared, v: i64) {
        self.first_ts = Some(self.first_ts.map_or(p.ts_ns, |t| t.min(p.ts_ns)));
        self.last_ts = Some(self.last_ts.map_or(p.ts_ns, |t| t.max(p.ts_ns)));
        let (proto, sport, dport) = match &p.transport {
            Transport::Tcp(t) => (PROTO_TCP, t.src_port, t.dst_port),
            Transport::Udp(u) => (PROTO_UDP, u.src_port, u.dst_port),
            Transport::Other(proto) => {
                let key = (p.ip.src, p.ip.dst, *proto, p.ip.fragment_id);
                return self.later_fragment(key, p);
            }
        };
        let (key, dir) =
            FlowKey::new(proto, Endpoint { addr: p.ip.src, port: sport }, Endpoint { addr: p.ip.dst, port: dport });
        let (id, flip) = self.flow_of(&key, dir, &p.transport, sh);
        let dir = if flip { dir.reverse() } else { dir };
        if self.flows.len() <= id as usize {
            self.flows.resize_with(id as usize + 1, || None);
        }
        let f = self.flows[id as usize].get_or_insert_with(|| FlowAt::new(p.ts_ns, dir));
        if f.is_duplicate(p, dir) {
            self.duplicates += 1;
            return;
        }
        f.count(p.ts_ns, dir, p.ip.ttl, 1, p.ip.len as u64);
        let mut parts = Parts::default();
        if p.ip.is_fragment() {
            let key = (p.ip.src, p.ip.dst, proto, p.ip.fragment_id);
            if let Some(Datagram::Pending { packets, bytes, ts, ttl, parts: before }) = self.datagrams.get(&key).copied() {
                // Later fragments that came first.
                f.count(ts, dir, ttl, packets, bytes);
                self.pending_fragments -= packets;
                parts = before;
            }
            parts.add(&p.ip);
            if let (Transport::Udp(u), 4, false) = (&p.transport, p.ip.version, p.ip.has_options) {
                parts.expected = Some(u.payload_len as u64 + 8);
            }
        }
        // The openings of the MN's flows (a SYN; a UDP flow's first datagrams), which
        // pair flows seen behind a NAT at the CN (see `nat`).
        if self.two_sided && self.capture == 0 && f.udp_recs.len() < nat::UDP_OPENING {
            if let Some(sig) = opening_signature(&p.transport) {
                sh.nat.note(sig, id, dir);
            }
        }
        let mut probe_seq = None;
        match &p.transport {
            Transport::Tcp(t) => {
                if t.payload_len > 0 && !f.payload_seen {
                    f.payload_seen = true;
                    f.control = is_control_hello(t.payload);
                    f.data_connection = is_data_connection(t.payload);
                }
                let rec = TcpRec::new(p.ts_ns, dir, p.ip.ip_id, t);
                if rec.has(SYN) && !rec.has(ACK) {
                    f.syn_dir.get_or_insert(dir);
                }
                // The flow's TCP state is kept by the TCP work, on a thread of its own when
                // there are cores for it (see `tcp_feed`).
                let work = sh.tcp.as_mut().expect("the TCP work is set up before the pass");
                let at = SeenAt { capture: self.capture, v, ttl: p.ip.ttl };
                let table = &sh.table;
                work.push(at, id, || table.key(id), f.first_ts, &rec, &t.options.sack_blocks());
            }
            Transport::Udp(u) => {
                let rec = UdpRec::new(p.ts_ns, dir, p.ip.ip_id, u);
                probe_seq = rec.probe.map(|h| h.seq);
                f.udp_recs.push(rec);
            }
            Transport::Other(_) => {}
        }
        if let Some(rows) = sh.packet_table.as_mut() {
            rows.push(self.capture as u8, id, dir as u8, p, probe_seq);
        }
        if p.ip.is_fragment() {
            self.open_datagram((p.ip.src, p.ip.dst, proto, p.ip.fragment_id), Datagram::Flow(id, dir, parts));
        }
    }

    /// The flow `key` belongs to.
    #[inline(always)]
    fn flow_of(&mut self, key: &FlowKey, dir: Dir, transport: &Transport<'_>, sh: &mut Shared) -> (u32, bool) {
        match sh.table.get(key) {
            Some(found) => found,
            None => self.new_flow(key, dir, opening_signature(transport), sh),
        }
    }

    /// A new flow for `key`, unless a NAT hides a known flow behind it. (Out of line, and
    /// given no reference into the packet: one would keep the decoded packet in memory.)
    #[cold]
    #[inline(never)]
    fn new_flow(&mut self, key: &FlowKey, dir: Dir, opening: Option<Signature>, sh: &mut Shared) -> (u32, bool) {
        // A 5-tuple new to the CN's capture may be an MN flow behind a NAT.
        let flows = &self.flows;
        let table = &sh.table;
        let translated = match (self.capture, opening) {
            (1, Some(sig)) => sh.nat.find(key, sig, dir, |i| table.key(i), |i| {
                flows.get(i as usize).is_some_and(|f| f.is_some())
            }),
            _ => None,
        };
        match translated {
            Some((id, flip)) => {
                sh.table.alias(*key, id, flip);
                (id, flip)
            }
            None => (sh.table.insert(*key), false),
        }
    }

    /// A fragment after the first (of `len` IP bytes, at `at`, with TTL `hops`): its bytes
    /// go to its datagram's flow, now or when the first fragment comes.
    #[cold]
    #[inline(never)]
    fn later_fragment(&mut self, key: DatagramKey, p: &Packet<'_>) {
        let (at, hops, len) = (p.ts_ns, p.ip.ttl, p.ip.len);
        match self.datagrams.get_mut(&key) {
            Some(Datagram::Flow(id, dir, parts)) => {
                parts.add(&p.ip);
                if let Some(Some(f)) = self.flows.get_mut(*id as usize) {
                    f.count(at, *dir, hops, 1, len as u64);
                }
            }
            Some(Datagram::Pending { packets, bytes, ts, ttl, parts }) => {
                *packets += 1;
                *bytes += len as u64;
                *ts = (*ts).min(at);
                *ttl = (*ttl).max(hops);
                parts.add(&p.ip);
                self.pending_fragments += 1;
            }
            None => {
                let mut parts = Parts::default();
                parts.add(&p.ip);
                let pending = Datagram::Pending { packets: 1, bytes: len as u64, ts: at, ttl: hops, parts };
                self.open_datagram(key, pending);
                self.pending_fragments += 1;
            }
        }
    }

    fn open_datagram(&mut self, key: DatagramKey, d: Datagram) {
        if self.datagrams.len() >= MAX_OPEN_DATAGRAMS && !self.datagrams.contains_key(&key) {
            self.orphaned += self.pending_fragments;
            self.pending_fragments = 0;
            self.finish_fragments();
        }
        // The same id again (a sender's 16-bit ids wrap): the earlier datagram is done.
        if let Some(earlier) = self.datagrams.insert(key, d) {
            self.settle(earlier);
        }
    }

    /// Counts every open datagram into its flow (the capture ended, or the table is full).
    pub fn finish_fragments(&mut self) {
        let open: Vec<Datagram> = self.datagrams.drain().map(|(_, d)| d).collect();
        for d in open {
            self.settle(d);
        }
    }

    fn settle(&mut self, d: Datagram) {
        if let Datagram::Flow(id, dir, parts) = d {
            if let Some(Some(f)) = self.flows.get_mut(id as usize) {
                let c = &mut f.fragments[dir.index()];
                c.datagrams += 1;
                c.fragments += parts.fragments as u64;
                c.incomplete += !parts.complete() as u64;
            }
        }
    }

    /// Later fragments whose first fragment never came (or came after the table was
    /// emptied): their bytes are in no flow.
    pub fn orphan_fragments(&self) -> u64 {
        self.orphaned + self.pending_fragments
    }
}

/// Whether a TCP connection's first payload is the hello of the control protocol between
/// `cellperf probe` and `cellperf server` (`cellperf-agent`'s `wire`): a frame's 4-byte
/// length, the message tag 1 and the JSON `{"type":"hello"`. The control connection is
/// then known on any port, and kept out of the competition among data flows.
fn is_control_hello(payload: &[u8]) -> bool {
    opens_with_message(payload, b"hello")
}

/// Whether a TCP connection's first payload is the agents' `data_connection` frame (protocol
/// version 4): a test's data connection opened to the server's control port, so that the
/// port alone does not tell a control connection (one opened with `resume` has no hello).
fn is_data_connection(payload: &[u8]) -> bool {
    opens_with_message(payload, b"data_connection")
}

/// Whether `payload` begins with an agents' frame (4-byte length, tag 1) whose JSON message
/// is of type `kind`.
fn opens_with_message(payload: &[u8], kind: &[u8]) -> bool {
    const TYPE: &[u8] = b"\x01{\"type\":\"";
    let Some(rest) = payload.get(4..).and_then(|p| p.strip_prefix(TYPE)) else {
        return false;
    };
    rest.strip_prefix(kind).is_some_and(|r| r.first() == Some(&b'"'))
}

/// What a flow's first packet at the CN must match at the MN to be the same flow behind a
/// NAT: a SYN's sequence number, or a datagram's payload.
#[inline(always)]
fn opening_signature(t: &Transport<'_>) -> Option<Signature> {
    match t {
        Transport::Tcp(t) if t.has(SYN) && !t.has(ACK) => Some(Signature::syn(t.seq)),
        Transport::Udp(u) => Some(Signature::datagram(payload_hash(u), u.payload_len)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first payloads of a probe's connections as a capture holds them (frame length,
    /// tag 1, JSON): a hello marks control, `data_connection` a data connection to the control
    /// port, a `resume` neither; a type that only begins like one is neither.
    #[test]
    fn a_connections_first_frame_says_control_or_data_connection() {
        let frame = |json: &str| [&[0, 0, 0, 0x5b, 1][..], json.as_bytes()].concat();
        let hello = frame(r#"{"type":"hello","version":4}"#);
        let data = frame(r#"{"type":"data_connection","cookie":"3617"}"#);
        let resume = frame(r#"{"type":"resume","version":4}"#);
        let longer = frame(r#"{"type":"hellos"}"#);
        assert!(is_control_hello(&hello) && !is_data_connection(&hello));
        assert!(is_data_connection(&data) && !is_control_hello(&data));
        assert!(!is_control_hello(&resume) && !is_data_connection(&resume));
        assert!(!is_control_hello(&longer));
        assert!(!is_control_hello(&hello[..8]) && !is_data_connection(b""));
    }
}
