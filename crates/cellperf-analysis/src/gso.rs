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

use cellperf_capture::decode::UdpInfo;
use cellperf_capture::probe_header::{parse_cellperf, CELLPERF_HEADER_LEN};

/// Most datagrams in one GSO send (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: u32 = 128;

/// The size of each datagram in `u` when its payload is several probe datagrams of one
/// size, `None` when it is one datagram (or its captured bytes cannot show more).
#[inline]
pub fn probe_segment_size(u: &UdpInfo<'_>) -> Option<usize> {
    let first = parse_cellperf(u.payload)?;
    let len = u.payload_len;
    if u.payload.len() as u32 != len || len < 2 * CELLPERF_HEADER_LEN as u32 {
        return None;
    }
    (2..=MAX_SEGMENTS.min(len / CELLPERF_HEADER_LEN as u32)).filter(|n| len % n == 0).map(|n| (len / n) as usize).find(
        |&size| {
            u.payload.chunks(size).enumerate().all(|(i, chunk)| {
                parse_cellperf(chunk).is_some_and(|h| h.echo == first.echo && h.seq == first.seq.wrapping_add(i as u64))
            })
        },
    )
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
