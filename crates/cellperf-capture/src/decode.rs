//! Decoding a captured frame into the header fields cellperf analyses.
//!
//! IPv4 and IPv6 headers (with IPv6 extension-header chains) are sliced by `etherparse`'s
//! zero-copy views, which check every length once; link layers and the fixed-offset TCP and
//! UDP headers are read here through the small views below, in the style of smoltcp's
//! `wire` module (`mod field` offsets, one check of the length, then plain reads). That keeps
//! the per-packet path free of the large composite structures a generic decoder builds, which
//! matters at millions of packets per second. The parsed, high-level form ([`Packet`]) is
//! kept apart from the byte views. Lengths come from the IP headers, not from the captured
//! bytes, so a capture cut by a short snapshot length (`tcpdump -s 96`) still yields true
//! payload sizes.

use etherparse::{IpNumber, Ipv4HeaderSlice, Ipv6ExtensionSlice, Ipv6ExtensionsSlice, Ipv6HeaderSlice};

use crate::linktype::LinkType;
use crate::reader::Frame;

/// An IP address as 128 bits; IPv4 addresses are IPv4-mapped (`::ffff:a.b.c.d`) so that
/// flow keys of both families hash and compare the same way.
pub type Addr = u128;

/// Maps an IPv4 address into [`Addr`].
pub fn addr_v4(a: [u8; 4]) -> Addr {
    0xffff_0000_0000u128 | u32::from_be_bytes(a) as u128
}

/// Renders an [`Addr`] the way a user writes it (dotted quad for IPv4).
pub fn addr_to_string(a: Addr) -> String {
    let v6 = std::net::Ipv6Addr::from(a);
    match v6.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => v6.to_string(),
    }
}

/// Parses an address as a user writes it.
pub fn addr_from_str(s: &str) -> Option<Addr> {
    match s.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(v4) => Some(addr_v4(v4.octets())),
        std::net::IpAddr::V6(v6) => Some(u128::from(v6)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpInfo {
    pub version: u8,
    pub src: Addr,
    pub dst: Addr,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// IPv4 identification; `None` for IPv6.
    pub ip_id: Option<u16>,
    /// Length of the IP packet on the wire (header + payload).
    pub len: u32,
    /// The packet carries IPv4 options or IPv6 extension headers.
    pub has_options: bool,
    pub fragment: Fragmentation,
    /// The datagram a fragment belongs to: the IPv4 identification, or the IPv6 fragment
    /// header's (0 when not a fragment).
    pub fragment_id: u32,
}

/// Where a packet stands in IP fragmentation. (One byte: with it [`IpInfo`] keeps the
/// size it had before fragments were followed, and the decoded packet its path through
/// registers; two more fields cost 10 % more instructions per packet.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragmentation {
    /// A whole datagram.
    Whole,
    /// The first fragment (more-fragments set, offset 0): it holds the transport header.
    First,
    /// A middle fragment (more-fragments set, non-zero offset) of the datagram
    /// [`IpInfo::fragment_id`] names; no transport header.
    Later,
    /// The last fragment (more-fragments clear, non-zero offset): the end of its datagram.
    Last,
}

impl Fragmentation {
    fn of(more_fragments: bool, offset: u16) -> Fragmentation {
        match (more_fragments, offset) {
            (false, 0) => Fragmentation::Whole,
            (true, 0) => Fragmentation::First,
            (true, _) => Fragmentation::Later,
            (false, _) => Fragmentation::Last,
        }
    }

    /// A fragment after the first (middle or last): it holds no transport header.
    pub fn after_first(self) -> bool {
        matches!(self, Fragmentation::Later | Fragmentation::Last)
    }
}

impl IpInfo {
    /// The packet is a fragment (more-fragments set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.fragment != Fragmentation::Whole
    }
}

/// TCP flag bits as in the header's flags byte, plus NS in bit 8.
pub mod tcp_flags {
    pub const FIN: u16 = 0x01;
    pub const SYN: u16 = 0x02;
    pub const RST: u16 = 0x04;
    pub const PSH: u16 = 0x08;
    pub const ACK: u16 = 0x10;
    pub const URG: u16 = 0x20;
    pub const ECE: u16 = 0x40;
    pub const CWR: u16 = 0x80;
    pub const NS: u16 = 0x100;
}

/// The options of one TCP segment. SACK blocks stay as the option's bytes until asked for
/// ([`TcpOptions::sack_blocks`]): few segments carry any, and without an array to fill the
/// decoder builds the rest in registers (filling one in memory cost ~10 % of the analysis
/// loop in store-forwarding stalls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions<'a> {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// The SACK option's blocks, 8 bytes each, at most four.
    sack: &'a [u8],
}

impl TcpOptions<'_> {
    /// The SACK blocks (left edge, right edge), decoded.
    pub fn sack_blocks(&self) -> SackBlocks {
        let mut out = SackBlocks::default();
        for (slot, e) in out.blocks.iter_mut().zip(self.sack.chunks_exact(8)) {
            *slot = (u32::from_be_bytes([e[0], e[1], e[2], e[3]]), u32::from_be_bytes([e[4], e[5], e[6], e[7]]));
            out.len += 1;
        }
        out
    }
}

/// Up to four SACK blocks of one segment; reads as a slice of (left edge, right edge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SackBlocks {
    blocks: [(u32, u32); 4],
    len: u8,
}

impl std::ops::Deref for SackBlocks {
    type Target = [(u32, u32)];

    fn deref(&self) -> &[(u32, u32)] {
        &self.blocks[..self.len as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpInfo<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    /// Window field as sent (not yet scaled).
    pub window: u16,
    /// TCP payload length on the wire.
    pub payload_len: u32,
    pub options: TcpOptions<'a>,
    /// The payload bytes captured (possibly cut by the snapshot length).
    pub payload: &'a [u8],
}

impl TcpInfo<'_> {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpInfo<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// UDP payload length on the wire.
    pub payload_len: u32,
    /// The captured part of the payload.
    pub payload: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport<'a> {
    Tcp(TcpInfo<'a>),
    Udp(UdpInfo<'a>),
    /// Another protocol, or a fragment whose transport header is not in this packet.
    Other(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    pub ts_ns: i64,
    pub ip: IpInfo,
    pub transport: Transport<'a>,
}

/// Why a frame produced no [`Packet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// ARP, LLDP, ... : nothing for cellperf.
    NotIp,
    /// IP or transport headers cut short or inconsistent.
    Malformed,
}

/// Byte offsets of the fixed headers read directly.
mod field {
    pub type Field = std::ops::Range<usize>;
    pub const ETHER_TYPE: Field = 12..14;
    pub const ETHER_HEADER: usize = 14;
    pub const VLAN_TAG: usize = 4;
    pub const SLL_PROTOCOL: Field = 14..16;
    pub const SLL_HEADER: usize = 16;
    pub const SLL2_PROTOCOL: Field = 0..2;
    pub const SLL2_HEADER: usize = 20;
    pub const NULL_HEADER: usize = 4;
    pub const TCP_SRC_PORT: Field = 0..2;
    pub const TCP_DST_PORT: Field = 2..4;
    pub const TCP_SEQ: Field = 4..8;
    pub const TCP_ACK: Field = 8..12;
    pub const TCP_DATA_OFFSET: usize = 12;
    pub const TCP_FLAGS: usize = 13;
    pub const TCP_WINDOW: Field = 14..16;
    pub const TCP_HEADER: usize = 20;
    pub const UDP_SRC_PORT: Field = 0..2;
    pub const UDP_DST_PORT: Field = 2..4;
    pub const UDP_LENGTH: Field = 4..6;
    pub const UDP_HEADER: usize = 8;
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1Q, 802.1ad (QinQ) and the older QinQ tag.
const ETHERTYPE_VLANS: [u16; 3] = [0x8100, 0x88a8, 0x9100];

fn be16(b: &[u8], f: field::Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

fn be32(b: &[u8], f: field::Field) -> u32 {
    u32::from_be_bytes([b[f.start], b[f.start + 1], b[f.start + 2], b[f.start + 3]])
}

/// Decodes one frame. Never panics, whatever the bytes.
#[inline]
pub fn decode_frame<'a>(frame: &Frame<'a>) -> Result<Packet<'a>, Skip> {
    let data = frame.data;
    let (ether_type, start) = match frame.linktype {
        LinkType::Ethernet => {
            if data.len() < field::ETHER_HEADER {
                return Err(Skip::Malformed);
            }
            let mut at = 0;
            let mut ether_type = be16(data, field::ETHER_TYPE);
            while ETHERTYPE_VLANS.contains(&ether_type) {
                at += field::VLAN_TAG;
                if data.len() < at + field::ETHER_HEADER {
                    return Err(Skip::Malformed);
                }
                ether_type = be16(&data[at..], field::ETHER_TYPE);
            }
            (ether_type, at + field::ETHER_HEADER)
        }
        LinkType::Raw => match data.first().map(|b| b >> 4) {
            Some(4) => (ETHERTYPE_IPV4, 0),
            Some(6) => (ETHERTYPE_IPV6, 0),
            Some(_) => return Err(Skip::NotIp),
            None => return Err(Skip::Malformed),
        },
        LinkType::Ipv4 => (ETHERTYPE_IPV4, 0),
        LinkType::Ipv6 => (ETHERTYPE_IPV6, 0),
        LinkType::Null | LinkType::Loop => {
            let fam = data.get(0..field::NULL_HEADER).ok_or(Skip::Malformed)?;
            let fam = [fam[0], fam[1], fam[2], fam[3]];
            let family = if frame.linktype == LinkType::Loop {
                u32::from_be_bytes(fam)
            } else if u32::from_le_bytes(fam) < 256 {
                // DLT_NULL uses the capturing host's byte order; families are small numbers.
                u32::from_le_bytes(fam)
            } else {
                u32::from_be_bytes(fam)
            };
            // AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24, 28 or 30 (BSDs, macOS).
            match family {
                2 => (ETHERTYPE_IPV4, field::NULL_HEADER),
                10 | 24 | 28 | 30 => (ETHERTYPE_IPV6, field::NULL_HEADER),
                _ => return Err(Skip::NotIp),
            }
        }
        LinkType::LinuxSll => {
            if data.len() < field::SLL_HEADER {
                return Err(Skip::Malformed);
            }
            (be16(data, field::SLL_PROTOCOL), field::SLL_HEADER)
        }
        LinkType::LinuxSll2 => {
            if data.len() < field::SLL2_HEADER {
                return Err(Skip::Malformed);
            }
            (be16(data, field::SLL2_PROTOCOL), field::SLL2_HEADER)
        }
    };
    let bytes = &data[start..];
    // Length on the wire of everything from the IP header on, for packets whose IP length
    // field is zero (segmentation offload seen on the sending host, jumbograms).
    let wire_len = frame.orig_len.saturating_sub(start as u32);
    match ether_type {
        ETHERTYPE_IPV4 => decode_ipv4(frame.ts_ns, bytes, wire_len),
        ETHERTYPE_IPV6 => decode_ipv6(frame.ts_ns, bytes, wire_len),
        _ => Err(Skip::NotIp),
    }
}

#[inline]
fn decode_ipv4(ts_ns: i64, bytes: &[u8], wire_len: u32) -> Result<Packet<'_>, Skip> {
    let h = Ipv4HeaderSlice::from_slice(bytes).map_err(|_| Skip::Malformed)?;
    let hdr_len = h.ihl() as u32 * 4;
    let total = h.total_len() as u32;
    // A zero total length (segmentation offload seen at the sender): take the frame's
    // length, never less than the header. Any other length below the header's is damage.
    let len = match total {
        0 => wire_len.max(hdr_len),
        t if t < hdr_len => return Err(Skip::Malformed),
        t => t,
    };
    let offset = h.fragments_offset().value();
    let ip = IpInfo {
        version: 4,
        src: addr_v4(h.source()),
        dst: addr_v4(h.destination()),
        ttl: h.ttl(),
        ip_id: Some(h.identification()),
        len,
        has_options: hdr_len > 20,
        fragment: Fragmentation::of(h.more_fragments(), offset),
        fragment_id: h.identification() as u32,
    };
    let proto = h.protocol().0;
    if offset != 0 {
        // A later fragment: its bytes are the middle of a transport payload.
        return Ok(Packet { ts_ns, ip, transport: Transport::Other(proto) });
    }
    // Ethernet pads short frames: the payload ends where the IP length says.
    let end = (len as usize).clamp(hdr_len as usize, bytes.len());
    let payload = &bytes[hdr_len as usize..end];
    let transport = decode_transport(proto, payload, len - hdr_len, ip.is_fragment())?;
    Ok(Packet { ts_ns, ip, transport })
}

#[inline]
fn decode_ipv6(ts_ns: i64, bytes: &[u8], wire_len: u32) -> Result<Packet<'_>, Skip> {
    let h = Ipv6HeaderSlice::from_slice(bytes).map_err(|_| Skip::Malformed)?;
    let plen = h.payload_length() as u32;
    let len = if plen > 0 { 40 + plen } else { wire_len.max(40) };
    let end = (len as usize).min(bytes.len());
    let (exts, proto, payload) =
        Ipv6ExtensionsSlice::from_slice(h.next_header(), &bytes[40..end]).map_err(|_| Skip::Malformed)?;
    let ext_len = exts.slice().len() as u32;
    let fragment = exts.is_fragmenting_payload();
    let (mut position, mut fragment_id) = (Fragmentation::Whole, 0);
    if fragment {
        for ext in exts {
            if let Ipv6ExtensionSlice::Fragment(f) = ext {
                position = Fragmentation::of(f.more_fragments(), f.fragment_offset().value());
                fragment_id = f.identification();
            }
        }
    }
    let ip = IpInfo {
        version: 6,
        src: u128::from_be_bytes(h.source()),
        dst: u128::from_be_bytes(h.destination()),
        ttl: h.hop_limit(),
        ip_id: None,
        len,
        has_options: ext_len > 0,
        fragment: position,
        fragment_id,
    };
    if position.after_first() {
        return Ok(Packet { ts_ns, ip, transport: Transport::Other(proto.0) });
    }
    let l4_len = len.saturating_sub(40 + ext_len);
    let transport = decode_transport(proto.0, payload, l4_len, fragment)?;
    Ok(Packet { ts_ns, ip, transport })
}

/// TCP or UDP from an IP payload of `l4_len` bytes on the wire, `bytes` of it captured.
// Inlined into the decoders so that its result is built in registers, not returned
// through memory (a store-forwarding stall that cost ~10 % of the analysis loop).
#[inline(always)]
fn decode_transport(proto: u8, bytes: &[u8], l4_len: u32, fragment: bool) -> Result<Transport<'_>, Skip> {
    match IpNumber(proto) {
        IpNumber::TCP if bytes.len() >= field::TCP_HEADER => {
            let header_len = (bytes[field::TCP_DATA_OFFSET] >> 4) as usize * 4;
            if header_len < field::TCP_HEADER {
                return Err(Skip::Malformed);
            }
            // Options cut by the snapshot length are read as far as they were captured.
            let options = &bytes[field::TCP_HEADER..header_len.min(bytes.len())];
            let flags = bytes[field::TCP_FLAGS] as u16 | ((bytes[field::TCP_DATA_OFFSET] as u16 & 1) << 8);
            Ok(Transport::Tcp(TcpInfo {
                src_port: be16(bytes, field::TCP_SRC_PORT),
                dst_port: be16(bytes, field::TCP_DST_PORT),
                seq: be32(bytes, field::TCP_SEQ),
                ack: be32(bytes, field::TCP_ACK),
                flags,
                window: be16(bytes, field::TCP_WINDOW),
                payload_len: l4_len.saturating_sub(header_len as u32),
                options: parse_tcp_options(options),
                payload: &bytes[header_len.min(bytes.len())..],
            }))
        }
        IpNumber::UDP if bytes.len() >= field::UDP_HEADER => {
            // The first fragment of a datagram holds only part of it: its UDP header's
            // length field says how long the whole datagram is.
            let udp_len = if fragment { be16(bytes, field::UDP_LENGTH) as u32 } else { l4_len };
            Ok(Transport::Udp(UdpInfo {
                src_port: be16(bytes, field::UDP_SRC_PORT),
                dst_port: be16(bytes, field::UDP_DST_PORT),
                payload_len: udp_len.saturating_sub(field::UDP_HEADER as u32),
                payload: &bytes[field::UDP_HEADER..],
            }))
        }
        // TCP or UDP whose header is missing in a first fragment or cut short.
        IpNumber::TCP | IpNumber::UDP if !fragment => Err(Skip::Malformed),
        other => Ok(Transport::Other(other.0)),
    }
}

/// TCP options (RFC 9293 §3.1, RFC 7323, RFC 2018). Parsing stops at end-of-list or at the
/// first malformed option; what came before stays valid.
#[inline(always)]
fn parse_tcp_options(mut b: &[u8]) -> TcpOptions<'_> {
    const END: u8 = 0;
    const NOP: u8 = 1;
    const MSS: u8 = 2;
    const WINDOW_SCALE: u8 = 3;
    const SACK_PERMITTED: u8 = 4;
    const SACK: u8 = 5;
    const TIMESTAMP: u8 = 8;
    let mut o = TcpOptions::default();
    while let Some(&kind) = b.first() {
        match kind {
            END => break,
            NOP => {
                b = &b[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = b.get(1) else { break };
        let len = len as usize;
        if len < 2 || len > b.len() {
            break;
        }
        let v = &b[2..len];
        match (kind, v.len()) {
            (MSS, 2) => o.mss = Some(u16::from_be_bytes([v[0], v[1]])),
            (WINDOW_SCALE, 1) => o.window_scale = Some(v[0]),
            (SACK_PERMITTED, 0) => o.sack_permitted = true,
            (SACK, n) if n % 8 == 0 && n > 0 => o.sack = &v[..n.min(32)],
            (TIMESTAMP, 8) => {
                o.timestamp = Some((u32::from_be_bytes([v[0], v[1], v[2], v[3]]), u32::from_be_bytes([v[4], v[5], v[6], v[7]])))
            }
            _ => {}
        }
        b = &b[len..];
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(linktype: LinkType, data: &[u8]) -> Frame<'_> {
        Frame { ts_ns: 5, linktype, data, orig_len: data.len() as u32, offset: 0, interface: 0 }
    }

    /// IPv4 (id 0x1234, TTL 63, DF) + TCP 10.0.0.1:5001 → 10.0.0.2:80, seq 1000, ack 2000,
    /// flags ACK|PSH, window 502, options NOP NOP TS(7, 9) + SACK(3000-4000), 10 bytes of data.
    static IPV4_TCP: [u8; 74] = [
        0x45, 0x00, 0x00, 0x4a, 0x12, 0x34, 0x40, 0x00, 0x3f, 0x06, 0x00, 0x00, // ip
        10, 0, 0, 1, 10, 0, 0, 2, //
        0x13, 0x89, 0x00, 0x50, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x07, 0xd0, // tcp
        0xb0, 0x18, 0x01, 0xf6, 0x00, 0x00, 0x00, 0x00, // data offset 11 words
        0x01, 0x01, 0x08, 0x0a, 0, 0, 0, 7, 0, 0, 0, 9, // NOP NOP TS
        0x01, 0x01, 0x05, 0x0a, 0, 0, 0x0b, 0xb8, 0, 0, 0x0f, 0xa0, // NOP NOP SACK
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, // payload
    ];

    fn check_ipv4_tcp(p: &Packet<'_>) {
        assert_eq!(p.ip.version, 4);
        assert_eq!(addr_to_string(p.ip.src), "10.0.0.1");
        assert_eq!(addr_to_string(p.ip.dst), "10.0.0.2");
        assert_eq!(p.ip.ttl, 63);
        assert_eq!(p.ip.ip_id, Some(0x1234));
        assert_eq!(p.ip.len, 74);
        assert!(!p.ip.is_fragment());
        let Transport::Tcp(t) = p.transport else { panic!("not tcp: {p:?}") };
        assert_eq!((t.src_port, t.dst_port, t.seq, t.ack), (5001, 80, 1000, 2000));
        assert!(t.has(tcp_flags::ACK) && t.has(tcp_flags::PSH) && !t.has(tcp_flags::SYN));
        assert_eq!(t.window, 502);
        assert_eq!(t.payload_len, 10);
        assert_eq!(t.options.timestamp, Some((7, 9)));
        assert_eq!(*t.options.sack_blocks(), [(3000, 4000)]);
    }

    #[test]
    fn raw_ipv4_tcp_with_timestamps_and_sack() {
        check_ipv4_tcp(&decode_frame(&frame(LinkType::Raw, &IPV4_TCP)).unwrap());
    }

    #[test]
    fn ethernet_with_vlan() {
        let mut f = vec![0u8; 12];
        f.extend([0x81, 0x00, 0x00, 0x05, 0x08, 0x00]);
        f.extend(IPV4_TCP);
        check_ipv4_tcp(&decode_frame(&frame(LinkType::Ethernet, &f)).unwrap());
    }

    #[test]
    fn linux_sll_and_sll2() {
        let mut f = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        f.extend(IPV4_TCP);
        check_ipv4_tcp(&decode_frame(&frame(LinkType::LinuxSll, &f)).unwrap());
        let mut f = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0];
        f.extend(IPV4_TCP);
        check_ipv4_tcp(&decode_frame(&frame(LinkType::LinuxSll2, &f)).unwrap());
    }

    #[test]
    fn null_and_loop() {
        let mut f = 2u32.to_le_bytes().to_vec();
        f.extend(IPV4_TCP);
        check_ipv4_tcp(&decode_frame(&frame(LinkType::Null, &f)).unwrap());
        let mut f = 2u32.to_be_bytes().to_vec();
        f.extend(IPV4_TCP);
        check_ipv4_tcp(&decode_frame(&frame(LinkType::Null, &f)).unwrap());
        check_ipv4_tcp(&decode_frame(&frame(LinkType::Loop, &f)).unwrap());
        let mut f = 99u32.to_be_bytes().to_vec();
        f.extend(IPV4_TCP);
        assert_eq!(decode_frame(&frame(LinkType::Loop, &f)), Err(Skip::NotIp));
    }

    #[test]
    fn snaplen_cut_keeps_true_payload_length() {
        let cut = &IPV4_TCP[..64];
        let f = Frame { ts_ns: 0, linktype: LinkType::Raw, data: cut, orig_len: 74, offset: 0, interface: 0 };
        let p = decode_frame(&f).unwrap();
        let Transport::Tcp(t) = p.transport else { panic!() };
        assert_eq!(t.payload_len, 10);
    }

    #[test]
    fn zero_total_length_takes_the_original_length_never_less_than_the_header() {
        // Found by cargo fuzz: IP total length 0 (as with segmentation offload) and a
        // record whose original length is shorter than the IP header it holds.
        let mut p = IPV4_TCP;
        p[2..4].copy_from_slice(&[0, 0]);
        // The IP packet is then the bare header: no room for TCP.
        let f = Frame { ts_ns: 0, linktype: LinkType::Raw, data: &p, orig_len: 12, offset: 0, interface: 0 };
        assert_eq!(decode_frame(&f), Err(Skip::Malformed));
        // With the true original length, the frame decodes as the packet it is.
        let f = Frame { orig_len: 74, ..f };
        let Transport::Tcp(t) = decode_frame(&f).unwrap().transport else { panic!() };
        assert_eq!(t.payload_len, 10);
    }

    #[test]
    fn total_length_below_the_header_length_is_malformed() {
        // Found in public captures: total length 10 with a 20-byte header became a flow.
        let mut p = IPV4_TCP;
        p[2..4].copy_from_slice(&[0, 10]);
        let f = Frame { ts_ns: 0, linktype: LinkType::Raw, data: &p, orig_len: 74, offset: 0, interface: 0 };
        assert_eq!(decode_frame(&f), Err(Skip::Malformed));
    }

    #[test]
    fn options_cut_by_snaplen_keep_the_header() {
        // 20 IP + 20 TCP + 6 option bytes captured: NOP NOP and a timestamp cut short.
        let cut = &IPV4_TCP[..46];
        let f = Frame { ts_ns: 0, linktype: LinkType::Raw, data: cut, orig_len: 74, offset: 0, interface: 0 };
        let Transport::Tcp(t) = decode_frame(&f).unwrap().transport else { panic!() };
        assert_eq!((t.seq, t.payload_len, t.options.timestamp), (1000, 10, None));
    }

    #[test]
    fn ipv4_with_options_and_fragment_flagged() {
        // IHL 6 (one option word: NOP NOP NOP EOL), MF set, UDP inside.
        let mut p = vec![0x46, 0, 0, 36, 0, 7, 0x20, 0x00, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 0];
        p.extend([0x1f, 0x90, 0x1f, 0x91, 0, 12, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert!(d.ip.has_options);
        assert!(d.ip.is_fragment());
        assert_eq!(d.ip.ip_id, Some(7));
    }

    #[test]
    fn fragments_carry_their_datagram_id_and_the_first_its_full_udp_length() {
        // First fragment: MF, offset 0; UDP length field 1008 (a 1000-byte payload), but
        // only 16 bytes of the datagram in this fragment.
        let mut p = vec![0x45, 0, 0, 36, 0x12, 0x34, 0x20, 0x00, 64, 17, 0xab, 0xcd, 1, 1, 1, 1, 2, 2, 2, 2];
        p.extend([0x1f, 0x90, 0x1f, 0x91, 0x03, 0xf0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert_eq!(d.ip.fragment, Fragmentation::First);
        assert_eq!((d.ip.fragment_id, d.ip.len), (0x1234, 36));
        let Transport::Udp(u) = d.transport else { panic!("{d:?}") };
        assert_eq!(u.payload_len, 1000);
        // A later fragment (offset 2 units): no ports, only its datagram's id; the last
        // when more-fragments is clear.
        p[6..8].copy_from_slice(&[0x20, 0x02]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert_eq!(d.ip.fragment, Fragmentation::Later);
        assert_eq!((d.transport, d.ip.fragment_id), (Transport::Other(17), 0x1234));
        p[6..8].copy_from_slice(&[0x00, 0x02]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert_eq!(d.ip.fragment, Fragmentation::Last);
        assert_eq!((d.transport, d.ip.fragment_id), (Transport::Other(17), 0x1234));
    }

    #[test]
    fn ipv6_later_fragment_is_not_read_as_udp() {
        let mut p = vec![0x60, 0, 0, 0, 0, 24, 44, 64]; // payload 24, next header fragment
        p.extend([0u8; 15]);
        p.push(1);
        p.extend([0u8; 15]);
        p.push(2);
        // Fragment header: next UDP, offset 185 (×8 bytes), M set, id 0xdeadbeef.
        p.extend([17, 0, 0x05, 0xc9, 0xde, 0xad, 0xbe, 0xef]);
        p.extend([0x30u8; 16]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert_eq!(d.ip.fragment, Fragmentation::Later);
        assert_eq!((d.transport, d.ip.fragment_id, d.ip.len), (Transport::Other(17), 0xdead_beef, 64));
        // The first fragment (offset 0) still decodes its UDP header.
        p[42..44].copy_from_slice(&[0x00, 0x01]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert_eq!(d.ip.fragment, Fragmentation::First);
        assert!(matches!(d.transport, Transport::Udp(_)), "{d:?}");
    }

    #[test]
    fn ipv6_udp_with_extension_header() {
        let mut p = vec![0x60, 0, 0, 0, 0, 20, 0, 64]; // payload len 20, next header hop-by-hop, hop limit 64
        p.extend([0u8; 15]);
        p.push(1); // src ::1
        p.extend([0x20, 0x01, 0x0d, 0xb8]);
        p.extend([0u8; 11]);
        p.push(2); // dst 2001:db8::2
        p.extend([17, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop: next UDP, len 0 (8 bytes), PadN
        p.extend([0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0, 9, 8, 7, 6]); // UDP 12345 → 53, 4 bytes
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert_eq!(d.ip.version, 6);
        assert_eq!(addr_to_string(d.ip.src), "::1");
        assert_eq!(addr_to_string(d.ip.dst), "2001:db8::2");
        assert!(d.ip.has_options);
        assert_eq!(d.ip.ttl, 64);
        let Transport::Udp(u) = d.transport else { panic!("{d:?}") };
        assert_eq!((u.src_port, u.dst_port, u.payload_len), (12345, 53, 4));
        assert_eq!(u.payload, &[9u8, 8, 7, 6][..]);
    }

    #[test]
    fn tcp_syn_options() {
        let mut p = vec![0x45, 0, 0, 60, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        p.extend([0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        // MSS 1460, SACK permitted, TS(1,0), NOP, WS 7
        p.extend([2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        let Transport::Tcp(t) = d.transport else { panic!() };
        assert!(t.has(tcp_flags::SYN));
        assert_eq!(t.options.mss, Some(1460));
        assert!(t.options.sack_permitted);
        assert_eq!(t.options.window_scale, Some(7));
        assert_eq!(t.options.timestamp, Some((1, 0)));
        assert_eq!(t.payload_len, 0);
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x9e37_79b9u32;
        for len in 0..200usize {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            for lt in [LinkType::Ethernet, LinkType::Raw, LinkType::Null, LinkType::LinuxSll, LinkType::LinuxSll2] {
                let _ = decode_frame(&frame(lt, &bytes));
            }
        }
        assert_eq!(decode_frame(&frame(LinkType::LinuxSll2, &[0x08, 0x00])), Err(Skip::Malformed));
        assert_eq!(decode_frame(&frame(LinkType::Raw, &IPV4_TCP[..30])), Err(Skip::Malformed));
    }
}
