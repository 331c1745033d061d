//! UDP GSO frames: several probe datagrams captured as one.
//!
//! A sender behind its schedule may hand the kernel several equal datagrams in one send
//! (`UDP_SEGMENT`; cellperf's agent does, as fast tools do to reach line rate). The
//! kernel cuts them apart only where the path needs it: a capture on the sending host,
//! or on a veth path that carries the whole buffer to the receiver, records one frame
//! whose UDP payload holds every datagram, each with its own probe header. Read as one
//! datagram, all but the first look lost. Such a frame is taken apart here, as the
//! kernel would: equal segments, each the next IPv4 id.
//!
//! Only probe streams are split (the first segment begins with a cellperf header, and so
//! does every later one, each numbered one more than the one before): other payloads
//! give no sure sign of where one datagram ends.

use std::sync::LazyLock;

use cellperf_capture::probe_header::{parse_cellperf, ProbeHeader, CELLPERF_ECHO_MAGIC, CELLPERF_HEADER_LEN, CELLPERF_MAGIC};
use cellperf_capture::UdpInfo;
use memchr::memmem::Finder;

static PROBE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(&CELLPERF_MAGIC));
static ECHO: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(&CELLPERF_ECHO_MAGIC));

/// The size of each datagram in `u` when its payload is several probe datagrams of one
/// size, `None` when it is one datagram (or its captured bytes cannot show more).
///
/// Every probe datagram goes through here, so the common case is one vectorised search
/// of its padding for a second header (none: the agent pads with zeros); each header
/// found is a candidate size, taken when it divides the payload and every part is the
/// next probe.
#[inline]
pub fn probe_segment_size(u: &UdpInfo<'_>) -> Option<usize> {
    let first = parse_cellperf(u.payload)?;
    let len = u.payload.len();
    if len as u32 != u.payload_len || len < 2 * CELLPERF_HEADER_LEN {
        return None;
    }
    let magic = if first.echo { &*ECHO } else { &*PROBE };
    magic
        .find_iter(&u.payload[CELLPERF_HEADER_LEN..])
        .map(|at| at + CELLPERF_HEADER_LEN)
        .find(|&size| len % size == 0 && consecutive(u.payload, size, first))
}

/// Each `size`-byte part of `payload` is the probe after the one before.
fn consecutive(payload: &[u8], size: usize, first: ProbeHeader) -> bool {
    payload.chunks(size).enumerate().all(|(i, part)| {
        parse_cellperf(part).is_some_and(|h| h.echo == first.echo && h.seq == first.seq.wrapping_add(i as u64))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellperf_capture::probe_header::write_cellperf;

    fn udp(payload: &[u8]) -> UdpInfo<'_> {
        UdpInfo { src_port: 1, dst_port: 2, payload_len: payload.len() as u32, payload }
    }

    fn datagrams(seqs: &[u64], size: usize) -> Vec<u8> {
        let mut buf = vec![0u8; seqs.len() * size];
        for (chunk, &seq) in buf.chunks_mut(size).zip(seqs) {
            write_cellperf(chunk, seq, 1_000 + seq as i64, false);
        }
        buf
    }

    #[test]
    fn a_frame_of_consecutive_probes_is_cut_at_their_size() {
        assert_eq!(probe_segment_size(&udp(&datagrams(&[266, 267], 1460))), Some(1460));
        assert_eq!(probe_segment_size(&udp(&datagrams(&[7, 8, 9, 10, 11, 12], 172))), Some(172));
        // Padding that happens to hold the magic before the real boundary.
        let mut odd = datagrams(&[3, 4], 1460);
        odd[100..104].copy_from_slice(&CELLPERF_MAGIC);
        assert_eq!(probe_segment_size(&udp(&odd)), Some(1460));
    }

    #[test]
    fn one_datagram_or_anything_unlike_a_batch_is_left_whole() {
        assert_eq!(probe_segment_size(&udp(&datagrams(&[5], 1460))), None);
        // The second header is not the next sequence number.
        assert_eq!(probe_segment_size(&udp(&datagrams(&[5, 7], 700))), None);
        // Not a probe.
        assert_eq!(probe_segment_size(&udp(&[0u8; 2920])), None);
        // Cut short by the snapshot length: the later headers are not there to see.
        let whole = datagrams(&[1, 2], 1460);
        let cut = UdpInfo { payload_len: 2920, ..udp(&whole[..96]) };
        assert_eq!(probe_segment_size(&cut), None);
    }
}
