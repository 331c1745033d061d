//! The link-layer types cellperf decodes (docs/methods.md §4), with their LINKTYPE_ numbers
//! from the tcpdump.org registry. Anything else is refused when the capture is opened,
//! so the user learns about it once, not once per packet.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkType {
    /// BSD loopback: 4-byte address family in the capturing host's byte order.
    Null,
    /// Ethernet II, with optional 802.1Q / QinQ tags.
    Ethernet,
    /// Raw IP, version read from the first nibble.
    Raw,
    /// OpenBSD loopback: 4-byte address family in network byte order.
    Loop,
    /// Linux cooked capture v1 (`tcpdump -i any` on older libpcap).
    LinuxSll,
    /// Linux cooked capture v2 (`tcpdump -i any` on libpcap ≥ 1.10).
    LinuxSll2,
    Ipv4,
    Ipv6,
}

impl LinkType {
    pub fn from_number(n: u32) -> Option<LinkType> {
        Some(match n {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            // 101 is the registry's LINKTYPE_RAW; 12 and 14 are DLT_RAW on some BSDs.
            101 | 12 | 14 => LinkType::Raw,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            LinkType::Null => "null",
            LinkType::Ethernet => "ethernet",
            LinkType::Raw => "raw",
            LinkType::Loop => "loop",
            LinkType::LinuxSll => "linux-sll",
            LinkType::LinuxSll2 => "linux-sll2",
            LinkType::Ipv4 => "ipv4",
            LinkType::Ipv6 => "ipv6",
        }
    }
}
