//! Decoding a captured frame into the header fields cellperf analyses.
//!
//! Header slicing is done by `etherparse` (zero-copy views with length checks, in the
//! style of smoltcp's `wire` module); this module maps each link type onto it and keeps
//! the parsed, high-level form ([`Packet`]) apart from the byte views. Lengths come from
//! the IP headers, not from the captured bytes, so a capture cut by a short snapshot
//! length (`tcpdump -s 96`) still yields true payload sizes.

use etherparse::{
    EtherType, LaxNetSlice, LaxSlicedPacket, TcpOptionElement, TransportSlice,
};

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
    /// The packet is a fragment (more-fragments set or a non-zero offset).
    pub fragment: bool,
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// SACK blocks (left edge, right edge), `sack_count` of them valid.
    pub sack: [(u32, u32); 4],
    pub sack_count: u8,
    /// (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
}

impl TcpOptions {
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.sack_count as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpInfo {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u16,
    /// Window field as sent (not yet scaled).
    pub window: u16,
    /// TCP payload length on the wire.
    pub payload_len: u32,
    pub options: TcpOptions,
}

impl TcpInfo {
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
    Tcp(TcpInfo),
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

/// Decodes one frame. Never panics, whatever the bytes.
pub fn decode_frame<'a>(frame: &Frame<'a>) -> Result<Packet<'a>, Skip> {
    let data = frame.data;
    let sliced = match frame.linktype {
        LinkType::Ethernet => LaxSlicedPacket::from_ethernet(data).map_err(|_| Skip::Malformed)?,
        LinkType::Raw | LinkType::Ipv4 | LinkType::Ipv6 => {
            LaxSlicedPacket::from_ip(data).map_err(|_| Skip::Malformed)?
        }
        LinkType::Null | LinkType::Loop => {
            let fam = data.get(0..4).ok_or(Skip::Malformed)?;
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
                2 | 10 | 24 | 28 | 30 => LaxSlicedPacket::from_ip(&data[4..]).map_err(|_| Skip::Malformed)?,
                _ => return Err(Skip::NotIp),
            }
        }
        LinkType::LinuxSll => {
            let proto = data.get(14..16).ok_or(Skip::Malformed)?;
            let ether_type = EtherType(u16::from_be_bytes([proto[0], proto[1]]));
            LaxSlicedPacket::from_ether_type(ether_type, &data[16..])
        }
        LinkType::LinuxSll2 => {
            let proto = data.get(0..2).ok_or(Skip::Malformed)?;
            if data.len() < 20 {
                return Err(Skip::Malformed);
            }
            let ether_type = EtherType(u16::from_be_bytes([proto[0], proto[1]]));
            LaxSlicedPacket::from_ether_type(ether_type, &data[20..])
        }
    };
    packet_from_slices(frame, &sliced)
}

fn packet_from_slices<'a>(frame: &Frame<'a>, s: &LaxSlicedPacket<'a>) -> Result<Packet<'a>, Skip> {
    let net = match &s.net {
        Some(n) => n,
        None => {
            return Err(if s.stop_err.is_some() && looks_like_ip(s) { Skip::Malformed } else { Skip::NotIp })
        }
    };
    let (ip, header_len, ip_payload) = match net {
        LaxNetSlice::Ipv4(v4) => {
            let h = v4.header();
            let hdr_len = h.ihl() as u32 * 4;
            let frag = h.more_fragments() || h.fragments_offset().value() != 0;
            let start = h.slice().as_ptr() as usize - frame.data.as_ptr() as usize;
            let total = h.total_len() as u32;
            // total_len 0 or short: a segmentation-offloaded packet seen on the sending host.
            let len = if total >= hdr_len { total } else { frame.orig_len.saturating_sub(start as u32) };
            let ip = IpInfo {
                version: 4,
                src: addr_v4(h.source()),
                dst: addr_v4(h.destination()),
                ttl: h.ttl(),
                ip_id: Some(h.identification()),
                len,
                has_options: hdr_len > 20,
                fragment: frag,
            };
            (ip, hdr_len, v4.payload())
        }
        LaxNetSlice::Ipv6(v6) => {
            let h = v6.header();
            let ext_len = v6.extensions().slice().len() as u32;
            let start = h.slice().as_ptr() as usize - frame.data.as_ptr() as usize;
            let plen = h.payload_length() as u32;
            let len = if plen > 0 { 40 + plen } else { frame.orig_len.saturating_sub(start as u32) };
            let ip = IpInfo {
                version: 6,
                src: u128::from_be_bytes(h.source()),
                dst: u128::from_be_bytes(h.destination()),
                ttl: h.hop_limit(),
                ip_id: None,
                len,
                has_options: ext_len > 0,
                fragment: v6.is_payload_fragmented(),
            };
            (ip, 40 + ext_len, v6.payload())
        }
        LaxNetSlice::Arp(_) => return Err(Skip::NotIp),
    };
    let l4_len = ip.len.saturating_sub(header_len);
    let transport = match &s.transport {
        Some(TransportSlice::Tcp(tcp)) => {
            let tcp_hdr = tcp.data_offset() as u32 * 4;
            let mut options = TcpOptions::default();
            for opt in tcp.options_iterator() {
                match opt {
                    Ok(TcpOptionElement::MaximumSegmentSize(m)) => options.mss = Some(m),
                    Ok(TcpOptionElement::WindowScale(w)) => options.window_scale = Some(w),
                    Ok(TcpOptionElement::SelectiveAcknowledgementPermitted) => options.sack_permitted = true,
                    Ok(TcpOptionElement::SelectiveAcknowledgement(first, rest)) => {
                        options.sack[0] = first;
                        let mut n = 1;
                        for b in rest.into_iter().flatten() {
                            options.sack[n] = b;
                            n += 1;
                        }
                        options.sack_count = n as u8;
                    }
                    Ok(TcpOptionElement::Timestamp(v, e)) => options.timestamp = Some((v, e)),
                    Ok(TcpOptionElement::Noop) => {}
                    // A malformed option ends option parsing; the header fields stay valid.
                    Err(_) => break,
                }
            }
            let flags = (tcp.slice()[13] as u16) | if tcp.ns() { tcp_flags::NS } else { 0 };
            Transport::Tcp(TcpInfo {
                src_port: tcp.source_port(),
                dst_port: tcp.destination_port(),
                seq: tcp.sequence_number(),
                ack: tcp.acknowledgment_number(),
                flags,
                window: tcp.window_size(),
                payload_len: l4_len.saturating_sub(tcp_hdr),
                options,
            })
        }
        Some(TransportSlice::Udp(udp)) => Transport::Udp(UdpInfo {
            src_port: udp.source_port(),
            dst_port: udp.destination_port(),
            payload_len: l4_len.saturating_sub(8),
            payload: udp.payload(),
        }),
        Some(_) => Transport::Other(ip_payload.ip_number.0),
        None => {
            let proto = ip_payload.ip_number.0;
            // TCP (6) or UDP (17) whose header is missing in a first fragment or cut short.
            if !ip.fragment && (proto == 6 || proto == 17) {
                return Err(Skip::Malformed);
            }
            Transport::Other(proto)
        }
    };
    Ok(Packet { ts_ns: frame.ts_ns, ip, transport })
}

fn looks_like_ip(s: &LaxSlicedPacket<'_>) -> bool {
    use etherparse::err::Layer;
    matches!(
        s.stop_err,
        Some((_, Layer::Ipv4Header | Layer::Ipv6Header | Layer::IpHeader | Layer::Ipv4Packet | Layer::Ipv6Packet))
    )
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
        assert!(!p.ip.fragment);
        let Transport::Tcp(t) = p.transport else { panic!("not tcp: {p:?}") };
        assert_eq!((t.src_port, t.dst_port, t.seq, t.ack), (5001, 80, 1000, 2000));
        assert!(t.has(tcp_flags::ACK) && t.has(tcp_flags::PSH) && !t.has(tcp_flags::SYN));
        assert_eq!(t.window, 502);
        assert_eq!(t.payload_len, 10);
        assert_eq!(t.options.timestamp, Some((7, 9)));
        assert_eq!(t.options.sack_blocks(), &[(3000, 4000)]);
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
    fn ipv4_with_options_and_fragment_flagged() {
        // IHL 6 (one option word: NOP NOP NOP EOL), MF set, UDP inside.
        let mut p = vec![0x46, 0, 0, 36, 0, 7, 0x20, 0x00, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 0];
        p.extend([0x1f, 0x90, 0x1f, 0x91, 0, 12, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
        let d = decode_frame(&frame(LinkType::Raw, &p)).unwrap();
        assert!(d.ip.has_options);
        assert!(d.ip.fragment);
        assert_eq!(d.ip.ip_id, Some(7));
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
