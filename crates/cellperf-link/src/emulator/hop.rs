//! What a router does to a packet it forwards: IPv4 TTL or IPv6 hop limit minus one.
//!
//! The analysis tells uplink from downlink in a two-sided capture by comparing the TTL of
//! the same packet at both ends, so the emulated link must behave like one router hop.

/// Outcome of forwarding one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    Forwarded,
    /// TTL / hop limit would reach 0: a router discards the packet.
    Expired,
    /// Not an IPv4/IPv6 packet this code can read: passed on unchanged.
    Unknown,
}

pub fn decrement_hop_limit(packet: &mut [u8]) -> Hop {
    match packet.first().map(|b| b >> 4) {
        Some(4) if packet.len() >= 20 => {
            let ttl = packet[8];
            if ttl <= 1 {
                return Hop::Expired;
            }
            // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m the 16-bit word holding TTL and protocol.
            let old_word = u16::from_be_bytes([packet[8], packet[9]]);
            packet[8] = ttl - 1;
            let new_word = u16::from_be_bytes([packet[8], packet[9]]);
            let hc = u16::from_be_bytes([packet[10], packet[11]]);
            let mut sum = (!hc) as u32 + (!old_word) as u32 + new_word as u32;
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            packet[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            Hop::Forwarded
        }
        Some(6) if packet.len() >= 40 => {
            if packet[7] <= 1 {
                return Hop::Expired;
            }
            packet[7] -= 1;
            Hop::Forwarded
        }
        _ => Hop::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h
            .chunks(2)
            .enumerate()
            .filter(|(i, _)| *i != 5)
            .map(|(_, w)| u16::from_be_bytes([w[0], w[1]]) as u32)
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    // IPv4 header of a UDP packet 10.0.0.1 → 10.0.0.2, TTL 64, checksum 0x26b6.
    static IPV4: [u8; 20] = [
        0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        0, 2,
    ];

    #[test]
    fn ipv4_ttl_and_checksum() {
        let mut p = IPV4;
        let c = header_checksum(&p);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        for ttl in (2..=64u8).rev() {
            assert_eq!(p[8], ttl);
            assert_eq!(decrement_hop_limit(&mut p), Hop::Forwarded);
            assert_eq!(
                u16::from_be_bytes([p[10], p[11]]),
                header_checksum(&p),
                "ttl {ttl}"
            );
        }
        assert_eq!(p[8], 1);
        assert_eq!(decrement_hop_limit(&mut p), Hop::Expired);
    }

    #[test]
    fn ipv6_hop_limit_and_others() {
        let mut p = [0u8; 40];
        p[0] = 0x60;
        p[7] = 64;
        assert_eq!(decrement_hop_limit(&mut p), Hop::Forwarded);
        assert_eq!(p[7], 63);
        p[7] = 1;
        assert_eq!(decrement_hop_limit(&mut p), Hop::Expired);
        assert_eq!(decrement_hop_limit(&mut [0x45, 0, 0]), Hop::Unknown);
        assert_eq!(decrement_hop_limit(&mut []), Hop::Unknown);
    }
}
