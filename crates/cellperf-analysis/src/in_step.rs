//! Reading a run's two captures in step, so that the packets of one can be paired with
//! their copies in the other as they come, and forgotten (see `tcp_two_sided`).
//!
//! The captures are merged on a *virtual time*: the first capture's clock, and the
//! second's shifted by an estimate of how far its clock is ahead. The estimate comes from
//! the first [`OFFSET_PREFIX`] packets of each: among the packets found in both (by
//! content), the lowest difference of capture times (the 1st percentile, against stray
//! pairs), less [`OFFSET_MARGIN_NS`]. That difference is the clock offset less the
//! longest one-way delay from the second capture's host to the first's, so every packet
//! is read at the first capture no later (in virtual time) than at the second: the MN's
//! capture comes first, and the openings a NAT pairing needs (see `nat`) are indexed
//! before the CN's packets are looked up. With no packet in common in the prefixes, the
//! captures are aligned on their first packets and the matching window is widened to
//! cover the difference.
//!
//! The passes hand their TCP packets, in reading order, to the TCP work of `tcp_feed`.

use ahash::AHashMap;
use cellperf_capture::{Capture, CaptureError, Packet, Transport};

use crate::pass::{Scan, Shared};
use crate::record::payload_hash;
use crate::tcp_two_sided::{MIN_WINDOW_NS, WINDOW_MARGIN_NS};
use crate::{PacketStream, PassCounts};

/// Packets at the start of each capture looked at to estimate the clock offset.
pub const OFFSET_PREFIX: usize = 20_000;
/// Subtracted from the estimate, so a packet a little faster than those of the prefix is
/// still read at the first capture first.
pub const OFFSET_MARGIN_NS: i64 = 10_000_000;

/// Reads both captures in step into their passes (`scans`); returns each capture's counts
/// and what ended its reading early, if anything.
pub(crate) fn read_in_step(
    captures: &[Capture],
    offset: i64,
    scans: &mut [Scan],
    sh: &mut Shared,
) -> Vec<(PassCounts, Option<CaptureError>)> {
    let mut streams = [PacketStream::new(&captures[0]), PacketStream::new(&captures[1])];
    let mut next = [streams[0].next_packet(), streams[1].next_packet()];
    let virtual_time = |c: usize, ts: i64| if c == 0 { ts } else { ts.saturating_sub(offset) };
    let mut clock = i64::MIN;
    loop {
        let c = match (&next[0], &next[1]) {
            (Some(a), Some(b)) => usize::from(virtual_time(0, a.ts_ns) > virtual_time(1, b.ts_ns)),
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (None, None) => break,
        };
        // Read where it lies (a packet is a few hundred bytes: moving it out costs a copy).
        let Some(p) = next[c].as_ref() else { break };
        // Virtual time never goes back (a capture's timestamps may, a little).
        clock = clock.max(virtual_time(c, p.ts_ns));
        scans[c].packet(p, sh, clock);
        next[c] = streams[c].next_packet();
    }
    streams.into_iter().map(PacketStream::finish).collect()
}

/// How far the second capture's clock is ahead of the first's, for reading in step (see
/// the module docs), and the matching window that estimate calls for.
pub(crate) fn clock_offset(first: &Capture, second: &Capture) -> (i64, i64) {
    let hasher = ahash::RandomState::with_seeds(1, 2, 3, 4);
    let mut times: AHashMap<u64, i64> = AHashMap::new();
    let mut packets = PacketStream::prefix(first);
    let mut first_ts = None;
    for _ in 0..OFFSET_PREFIX {
        let Some(p) = packets.next_packet() else { break };
        first_ts.get_or_insert(p.ts_ns);
        if let Some(k) = copy_key(&hasher, &p) {
            times.entry(k).or_insert(p.ts_ns);
        }
    }
    let mut diffs = Vec::new();
    let mut packets = PacketStream::prefix(second);
    let mut second_ts = None;
    for _ in 0..OFFSET_PREFIX {
        let Some(p) = packets.next_packet() else { break };
        second_ts.get_or_insert(p.ts_ns);
        if let Some(t) = copy_key(&hasher, &p).and_then(|k| times.get(&k)) {
            diffs.push(p.ts_ns.saturating_sub(*t));
        }
    }
    if diffs.is_empty() {
        let start = second_ts.unwrap_or(0).saturating_sub(first_ts.unwrap_or(0));
        let window = MIN_WINDOW_NS.max(start.saturating_abs().saturating_mul(2).saturating_add(WINDOW_MARGIN_NS));
        return (start, window);
    }
    diffs.sort_unstable();
    (diffs[diffs.len() / 100].saturating_sub(OFFSET_MARGIN_NS), MIN_WINDOW_NS)
}

/// What identifies a packet's copy at the other capture, hashed: a TCP segment's numbers
/// and IP id, a datagram's payload and IP id. NAT leaves them alone.
fn copy_key(hasher: &ahash::RandomState, p: &Packet<'_>) -> Option<u64> {
    let id = p.ip.ip_id.unwrap_or(0);
    match &p.transport {
        Transport::Tcp(t) => Some(hasher.hash_one((t.seq, t.ack, t.payload_len, t.flags, id, t.options.timestamp))),
        Transport::Udp(u) => Some(hasher.hash_one((payload_hash(u), u.payload_len, id))),
        Transport::Other(_) => None,
    }
}
