//! Pairing flows across a NAT. A cellular MN almost always sits behind the operator's
//! NAT, so the MN's capture shows its private address and port where the CN's shows the
//! public ones: the two captures hold the same connection under two 5-tuples.
//!
//! A connection's opening is recognisable on both sides of a NAT: a TCP SYN keeps its
//! initial sequence number (32 random bits), and a UDP datagram keeps its payload. While
//! the MN's capture is read, the opening of each flow is indexed: the SYN's sequence
//! number, and the payload hashes of the first [`UDP_OPENING`] datagrams. While the CN's
//! capture is read, a 5-tuple the MN's capture never had is looked up by its first
//! packet; it is the same flow when the signature matches a flow that has no counterpart
//! at the CN yet and one end (the one the NAT did not touch) is identical.
//!
//! Limits: a TCP connection whose SYN is not in both captures, or a UDP flow whose first
//! datagram at the CN is not among the MN's first [`UDP_OPENING`], stays two one-sided
//! flows; a NAT that rewrites sequence numbers or payloads defeats the pairing (and the
//! content matching of the two-sided analysis with it).

use ahash::AHashMap;

use crate::flows::{Dir, FlowKey, PROTO_TCP, PROTO_UDP};

/// Datagrams at the start of each UDP flow whose payloads are indexed.
pub const UDP_OPENING: usize = 16;

/// What identifies a packet on both sides of a NAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature {
    proto: u8,
    value: u64,
    len: u32,
}

impl Signature {
    /// A TCP SYN (without ACK): its sequence number.
    pub fn syn(seq: u32) -> Signature {
        Signature { proto: PROTO_TCP, value: seq as u64, len: 0 }
    }

    /// A UDP datagram: the hash of its first bytes and its length.
    pub fn datagram(payload_hash: u64, payload_len: u32) -> Signature {
        Signature { proto: PROTO_UDP, value: payload_hash, len: payload_len }
    }
}

/// Openings of the flows of the MN's capture.
#[derive(Default)]
pub struct NatPairing {
    openings: AHashMap<Signature, (u32, Dir)>,
}

impl NatPairing {
    /// Records that flow `id` (MN's capture) had a packet with `sig` going `dir`.
    /// The first flow with a signature keeps it.
    pub fn note(&mut self, sig: Signature, id: u32, dir: Dir) {
        self.openings.entry(sig).or_insert((id, dir));
    }

    /// The MN-side flow that a new CN-side 5-tuple `key` is, given its first packet's
    /// signature and direction: `(id, flip)` with `flip` set when `key` names the flow's
    /// ends in the opposite order. `paired(id)` says whether that flow already has a
    /// counterpart at the CN.
    pub fn find(
        &self,
        key: &FlowKey,
        sig: Signature,
        dir: Dir,
        flow_key: impl Fn(u32) -> FlowKey,
        paired: impl Fn(u32) -> bool,
    ) -> Option<(u32, bool)> {
        let &(id, mn_dir) = self.openings.get(&sig)?;
        if paired(id) {
            return None;
        }
        let mn_key = flow_key(id);
        let flip = mn_dir != dir;
        // The end the NAT left alone: `a` (or `b`) of the MN's key, wherever it is in `key`.
        let (ka, kb) = if flip { (key.b, key.a) } else { (key.a, key.b) };
        let one_end_kept = (ka == mn_key.a) != (kb == mn_key.b);
        (mn_key.proto == key.proto && one_end_kept).then_some((id, flip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::Endpoint;

    fn ends() -> (Endpoint, Endpoint, Endpoint) {
        let private = Endpoint { addr: 0x0a00_0002, port: 40000 };
        let public = Endpoint { addr: 0xc633_6401, port: 61000 };
        let server = Endpoint { addr: 0x0a00_0101, port: 5201 };
        (private, public, server)
    }

    #[test]
    fn a_translated_syn_finds_its_flow_with_the_orientation() {
        let (private, public, server) = ends();
        let (mn_key, mn_dir) = FlowKey::new(PROTO_TCP, private, server);
        let (cn_key, cn_dir) = FlowKey::new(PROTO_TCP, public, server);
        let mut nat = NatPairing::default();
        nat.note(Signature::syn(12345), 7, mn_dir);
        let found = nat.find(&cn_key, Signature::syn(12345), cn_dir, |_| mn_key, |_| false);
        // mn_key has the MN first, cn_key the server first: the alias is flipped.
        assert_eq!(found, Some((7, true)));
        // Another ISN, or a flow already paired, finds nothing.
        assert_eq!(nat.find(&cn_key, Signature::syn(12346), cn_dir, |_| mn_key, |_| false), None);
        assert_eq!(nat.find(&cn_key, Signature::syn(12345), cn_dir, |_| mn_key, |_| true), None);
    }

    #[test]
    fn both_ends_changed_is_not_a_nat_pair() {
        let (private, public, server) = ends();
        let (mn_key, mn_dir) = FlowKey::new(PROTO_UDP, private, server);
        let mut nat = NatPairing::default();
        let sig = Signature::datagram(0xfeed, 100);
        nat.note(sig, 0, mn_dir);
        let elsewhere = Endpoint { addr: 0x0a00_0909, port: 9 };
        let (both_changed, d) = FlowKey::new(PROTO_UDP, public, elsewhere);
        assert_eq!(nat.find(&both_changed, sig, d, |_| mn_key, |_| false), None);
        let (translated, d) = FlowKey::new(PROTO_UDP, public, server);
        assert_eq!(nat.find(&translated, sig, d, |_| mn_key, |_| false).map(|x| x.0), Some(0));
        // The same length but another payload is another datagram.
        let other = Signature::datagram(0xbeef, 100);
        assert_eq!(nat.find(&translated, other, d, |_| mn_key, |_| false), None);
    }
}
