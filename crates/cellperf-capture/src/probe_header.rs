//! Headers that traffic generators put at the start of each UDP payload, so that a capture
//! at the receiver alone still yields loss (by sequence number) and one-way delay (by
//! send timestamp).
//!
//! - **cellperf probe** (`cellperf probe`, documented in `docs/formats.md`): the 4 bytes
//!   `CPF1`, sequence number (u64, big-endian), send time in ns since the Unix epoch on the
//!   sender's clock (u64, big-endian); 20 bytes. An echo (`cellperf server` answering a
//!   voip, min-delay or ping-sweep test) starts `CPE1` instead and keeps the request's
//!   sequence number, so that one capture tells an echoed flow from two streams sent each
//!   way, which can carry the same numbers and sizes at the same instants.
//! - **iperf3 UDP**: seconds (u32), microseconds (u32), sequence (u32), all big-endian,
//!   as `iperf3 -u` writes them (without `--udp-counters-64bit`). iperf3 has no magic number
//!   and may stamp packets from a monotonic clock, so a single header proves nothing: the
//!   analysis accepts iperf3 headers only for a stream whose sequence numbers run on.

/// Magic bytes of the cellperf probe header.
pub const CELLPERF_MAGIC: [u8; 4] = *b"CPF1";
/// Magic bytes of the same header on an echo.
pub const CELLPERF_ECHO_MAGIC: [u8; 4] = *b"CPE1";
/// Length of the cellperf probe header.
pub const CELLPERF_HEADER_LEN: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderKind {
    Cellperf,
    Iperf3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeHeader {
    pub kind: HeaderKind,
    pub seq: u64,
    /// Send time on the sender's clock, ns since the Unix epoch.
    pub send_ns: i64,
    /// An echo of the request with the same sequence number (cellperf headers only).
    pub echo: bool,
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Reads a cellperf probe header, a request's or an echo's.
pub fn parse_cellperf(payload: &[u8]) -> Option<ProbeHeader> {
    let magic = payload.get(0..4)?;
    let echo = magic == CELLPERF_ECHO_MAGIC;
    if !echo && magic != CELLPERF_MAGIC {
        return None;
    }
    Some(ProbeHeader {
        kind: HeaderKind::Cellperf,
        seq: be_u64(payload, 4)?,
        send_ns: i64::try_from(be_u64(payload, 12)?).ok()?,
        echo,
    })
}

/// Writes a cellperf probe header (an echo's with `echo`) into the first
/// [`CELLPERF_HEADER_LEN`] bytes of `buf`. Returns `false` (and writes nothing) if `buf` is
/// shorter than that.
pub fn write_cellperf(buf: &mut [u8], seq: u64, send_ns: i64, echo: bool) -> bool {
    if buf.len() < CELLPERF_HEADER_LEN {
        return false;
    }
    buf[0..4].copy_from_slice(if echo { &CELLPERF_ECHO_MAGIC } else { &CELLPERF_MAGIC });
    buf[4..12].copy_from_slice(&seq.to_be_bytes());
    buf[12..20].copy_from_slice(&(send_ns.max(0) as u64).to_be_bytes());
    true
}

/// Reads what would be an iperf3 UDP header (microseconds must be below 10⁶).
pub fn parse_iperf3(payload: &[u8]) -> Option<ProbeHeader> {
    let sec = be_u32(payload, 0)? as i64;
    let usec = be_u32(payload, 4)? as i64;
    let seq = be_u32(payload, 8)? as u64;
    if usec >= 1_000_000 {
        return None;
    }
    Some(ProbeHeader { kind: HeaderKind::Iperf3, seq, send_ns: sec * 1_000_000_000 + usec * 1000, echo: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cellperf_round_trip() {
        let mut buf = [0u8; 64];
        assert!(write_cellperf(&mut buf, 42, 1_700_000_000_123_456_789, false));
        let h = parse_cellperf(&buf).unwrap();
        assert_eq!((h.seq, h.send_ns, h.kind, h.echo), (42, 1_700_000_000_123_456_789, HeaderKind::Cellperf, false));
        assert!(parse_cellperf(&buf[..19]).is_none());
        assert!(!write_cellperf(&mut [0u8; 10], 1, 1, false));
        assert!(write_cellperf(&mut buf, 43, 7, true));
        assert_eq!(&buf[..4], b"CPE1");
        let h = parse_cellperf(&buf).unwrap();
        assert_eq!((h.seq, h.send_ns, h.echo), (43, 7, true));
        assert!(parse_cellperf(b"XXXX0123456789abcdef").is_none());
    }

    #[test]
    fn iperf3_header() {
        let mut p = Vec::new();
        p.extend(1688u32.to_be_bytes()); // iperf3 3.12 stamps from the monotonic clock
        p.extend(250_000u32.to_be_bytes());
        p.extend(7u32.to_be_bytes());
        let h = parse_iperf3(&p).unwrap();
        assert_eq!((h.seq, h.send_ns), (7, 1_688_250_000_000));
        p[4..8].copy_from_slice(&2_000_000u32.to_be_bytes());
        assert!(parse_iperf3(&p).is_none());
        assert!(parse_iperf3(&p[..11]).is_none());
    }
}
