//! Compact per-packet records of TCP and UDP, the unit every metric is computed from and
//! the rows of the per-packet Arrow tables.

use cellperf_capture::probe_header::{parse_cellperf, parse_iperf3, ProbeHeader};
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
    pub sack: [(u32, u32); 4],
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
            sack: t.options.sack,
            sack_count: t.options.sack_count,
            mss: t.options.mss,
            window_scale: t.options.window_scale,
        }
    }

    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.sack_count as usize]
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
