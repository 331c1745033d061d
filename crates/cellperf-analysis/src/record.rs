//! Compact per-packet records of TCP and UDP, the unit every metric is computed from and
//! the rows of the per-packet Arrow tables.

use cellperf_capture::probe_header::{parse_cellperf, parse_iperf3, ProbeHeader};
use cellperf_capture::decode::tcp_flags::SYN;
use cellperf_capture::{TcpInfo, UdpInfo};

use crate::flows::Dir;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpRec {
    pub ts_ns: i64,
    pub dir: Dir,
    pub ip_id: Option<u16>,
    pub seq: u32,
    pub ack: u32,
    pub payload_len: u32,
    pub flags: u16,
    pub window: u16,
    pub tsval: Option<u32>,
    /// This record's SACK blocks: `sack_count` of them from `sack_at` in the
    /// [`TcpRecords`] that holds it (zero until it is stored there).
    pub sack_at: u32,
    pub sack_count: u8,
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
}

impl TcpRec {
    pub fn new(ts_ns: i64, dir: Dir, ip_id: Option<u16>, t: &TcpInfo) -> TcpRec {
        TcpRec {
            ts_ns,
            dir,
            ip_id,
            seq: t.seq,
            ack: t.ack,
            payload_len: t.payload_len,
            flags: t.flags,
            window: t.window,
            tsval: t.options.timestamp.map(|t| t.0),
            sack_at: 0,
            sack_count: 0,
            mss: t.options.mss,
            window_scale: t.options.window_scale,
        }
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// Sequence number of the first payload byte: a SYN takes one number itself, so data on
    /// a SYN (TCP Fast Open) starts one after it.
    pub fn data_seq(&self) -> u32 {
        self.seq.wrapping_add(self.has(SYN) as u32)
    }
}

/// A flow's TCP records at one capture, kept for the two-capture analysis, with the SACK
/// blocks they refer to. The blocks live apart because few packets carry any, and room
/// for four in every record would make it almost twice as large.
#[derive(Debug, Default, Clone)]
pub struct TcpRecords {
    pub recs: Vec<TcpRec>,
    sack_blocks: Vec<(u32, u32)>,
}

impl TcpRecords {
    pub fn push(&mut self, mut rec: TcpRec, sack: &[(u32, u32)]) {
        rec.sack_at = self.sack_blocks.len() as u32;
        rec.sack_count = sack.len() as u8;
        self.sack_blocks.extend_from_slice(sack);
        self.recs.push(rec);
    }

    /// The SACK blocks of `rec`, one of this flow's records.
    pub fn sack(&self, rec: &TcpRec) -> &[(u32, u32)] {
        let at = rec.sack_at as usize;
        &self.sack_blocks[at..at + rec.sack_count as usize]
    }
}

#[cfg(test)]
impl FromIterator<TcpRec> for TcpRecords {
    /// Records without SACK blocks.
    fn from_iter<I: IntoIterator<Item = TcpRec>>(iter: I) -> Self {
        let mut out = TcpRecords::default();
        for r in iter {
            out.push(r, &[]);
        }
        out
    }
}

/// Bytes of UDP payload that identify a datagram across captures (with the IP id): enough
/// to tell probes apart, short enough to be inside any snapshot length.
pub const UDP_MATCH_BYTES: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpRec {
    pub ts_ns: i64,
    pub dir: Dir,
    pub ip_id: Option<u16>,
    pub payload_len: u32,
    /// Hash of the first [`UDP_MATCH_BYTES`] payload bytes.
    pub payload_hash: u64,
    /// Sequence number and send time from a cellperf (or iperf3) probe header; a flow uses
    /// them only when nearly all its datagrams carry the same kind (see `udp`).
    pub probe: Option<ProbeHeader>,
}

impl UdpRec {
    pub fn new(ts_ns: i64, dir: Dir, ip_id: Option<u16>, u: &UdpInfo<'_>) -> UdpRec {
        UdpRec {
            ts_ns,
            dir,
            ip_id,
            payload_len: u.payload_len,
            payload_hash: payload_hash(u),
            probe: parse_cellperf(u.payload).or_else(|| parse_iperf3(u.payload)),
        }
    }
}

/// Hash of a datagram's first [`UDP_MATCH_BYTES`] payload bytes.
pub fn payload_hash(u: &UdpInfo<'_>) -> u64 {
    hash_bytes(&u.payload[..u.payload.len().min(UDP_MATCH_BYTES)])
}

/// FNV-1a: stable across runs and platforms (the match keys are never persisted, but
/// stable hashes make failures reproducible).
pub fn hash_bytes(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A probe stream's per-packet result (`udp_stream`), in sending order: below the delay
/// spikes (`spikes`) and the per-packet table, which read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacketResult {
    pub seq: u64,
    pub send_ns: Option<i64>,
    pub recv_ns: Option<i64>,
    pub bytes: u32,
    pub owd_ms: Option<f64>,
    /// Signed jitter against the previous packet in arrival order (ms).
    pub jitter_ms: Option<f64>,
}
