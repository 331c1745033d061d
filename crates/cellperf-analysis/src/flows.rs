//! Flow identity: a bidirectional 5-tuple with its two directions, shared by every capture
//! of a run so that the same connection seen at the MN and at the CN is one flow.

use ahash::AHashMap;
use cellperf_capture::Addr;

pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// One end of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub addr: Addr,
    pub port: u16,
}

/// A flow's key with its endpoints in canonical order (`a` ≤ `b`), so both directions of a
/// connection map to one key; [`Dir`] says which way a packet went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub proto: u8,
    pub a: Endpoint,
    pub b: Endpoint,
}

/// Direction of a packet within its flow: `AtoB` is from the key's `a` to its `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    AtoB = 0,
    BtoA = 1,
}

impl Dir {
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn reverse(self) -> Dir {
        match self {
            Dir::AtoB => Dir::BtoA,
            Dir::BtoA => Dir::AtoB,
        }
    }

    pub fn from_index(i: usize) -> Dir {
        if i == 0 {
            Dir::AtoB
        } else {
            Dir::BtoA
        }
    }
}

impl FlowKey {
    pub fn new(proto: u8, src: Endpoint, dst: Endpoint) -> (FlowKey, Dir) {
        if src <= dst {
            (FlowKey { proto, a: src, b: dst }, Dir::AtoB)
        } else {
            (FlowKey { proto, a: dst, b: src }, Dir::BtoA)
        }
    }

    /// (source, destination) of a packet going `dir`.
    pub fn ends(&self, dir: Dir) -> (Endpoint, Endpoint) {
        match dir {
            Dir::AtoB => (self.a, self.b),
            Dir::BtoA => (self.b, self.a),
        }
    }
}

/// Dense flow ids in order of first appearance. A flow can also be reached by an alias:
/// the key the same connection has at the other capture when a NAT rewrote one end
/// (see `nat`), with `flip` set when the alias's `a` is the flow's `b`.
#[derive(Default)]
pub struct FlowTable {
    ids: AHashMap<FlowKey, (u32, bool)>,
    keys: Vec<FlowKey>,
    aliases: Vec<Option<FlowKey>>,
    /// The last lookup: captures come in runs of one flow (a window of segments, then
    /// its ACKs), so most packets skip hashing their 5-tuple.
    last: Option<(FlowKey, (u32, bool))>,
}

impl FlowTable {
    /// The flow `key` belongs to, and whether `key` is the flow's alias with its ends
    /// swapped (a packet's [`Dir`] must then be reversed).
    #[inline(always)]
    pub fn get(&mut self, key: &FlowKey) -> Option<(u32, bool)> {
        if let Some((k, found)) = self.last {
            if k == *key {
                return Some(found);
            }
        }
        let found = *self.ids.get(key)?;
        self.last = Some((*key, found));
        Some(found)
    }

    /// A new flow for `key` (which must not be known yet); returns its id.
    pub fn insert(&mut self, key: FlowKey) -> u32 {
        let id = self.keys.len() as u32;
        self.ids.insert(key, (id, false));
        self.keys.push(key);
        self.aliases.push(None);
        id
    }

    /// Makes `key` (not known yet) another name of flow `id`.
    pub fn alias(&mut self, key: FlowKey, id: u32, flip: bool) {
        self.ids.insert(key, (id, flip));
        self.aliases[id as usize] = Some(if flip { FlowKey { proto: key.proto, a: key.b, b: key.a } } else { key });
    }

    pub fn key(&self, id: u32) -> FlowKey {
        self.keys[id as usize]
    }

    /// The flow's alias, oriented like its key (`a` of the alias is `a` of the key, translated).
    pub fn alias_of(&self, id: u32) -> Option<FlowKey> {
        self.aliases[id as usize]
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_share_a_key() {
        let x = Endpoint { addr: 1, port: 80 };
        let y = Endpoint { addr: 2, port: 5000 };
        let (k1, d1) = FlowKey::new(PROTO_TCP, x, y);
        let (k2, d2) = FlowKey::new(PROTO_TCP, y, x);
        assert_eq!(k1, k2);
        assert_ne!(d1, d2);
        assert_eq!(k1.ends(d2), (y, x));
        let mut t = FlowTable::default();
        assert_eq!(t.get(&k1), None);
        assert_eq!(t.insert(k1), 0);
        assert_eq!(t.get(&k2), Some((0, false)));
        let (k3, _) = FlowKey::new(PROTO_UDP, x, y);
        assert_eq!(t.get(&k3), None);
        assert_eq!(t.insert(k3), 1);
        assert_eq!(t.get(&k1), Some((0, false)));
    }

    #[test]
    fn an_alias_names_the_same_flow_with_its_orientation() {
        let mn = Endpoint { addr: 0x0a00_0002, port: 40000 };
        let public = Endpoint { addr: 0xc633_6401, port: 61000 };
        let server = Endpoint { addr: 0x0a00_0101, port: 5201 };
        let (private_key, _) = FlowKey::new(PROTO_TCP, mn, server);
        let (public_key, public_dir) = FlowKey::new(PROTO_TCP, public, server);
        let mut t = FlowTable::default();
        let id = t.insert(private_key);
        // The private key orders mn before server; the public key orders server first.
        assert_eq!((private_key.a, public_key.a), (mn, server));
        assert_eq!(public_dir, Dir::BtoA);
        t.alias(public_key, id, true);
        assert_eq!(t.get(&public_key), Some((id, true)));
        let alias = t.alias_of(id).unwrap();
        assert_eq!((alias.a, alias.b), (public, server));
        assert_eq!(t.len(), 1);
    }
}
