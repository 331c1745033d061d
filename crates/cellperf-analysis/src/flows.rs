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

/// Dense flow ids in order of first appearance.
#[derive(Default)]
pub struct FlowTable {
    ids: AHashMap<FlowKey, u32>,
    keys: Vec<FlowKey>,
    /// The last id looked up: captures come in runs of one flow (a window of segments,
    /// then its ACKs), so most packets skip hashing their 5-tuple.
    last: Option<(FlowKey, u32)>,
}

impl FlowTable {
    /// The id of `key`, and whether it is new.
    pub fn id(&mut self, key: FlowKey) -> (u32, bool) {
        if let Some((k, id)) = self.last {
            if k == key {
                return (id, false);
            }
        }
        let (id, new) = match self.ids.get(&key) {
            Some(id) => (*id, false),
            None => {
                let id = self.keys.len() as u32;
                self.ids.insert(key, id);
                self.keys.push(key);
                (id, true)
            }
        };
        self.last = Some((key, id));
        (id, new)
    }

    pub fn key(&self, id: u32) -> FlowKey {
        self.keys[id as usize]
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
        assert_eq!(t.id(k1), (0, true));
        assert_eq!(t.id(k2), (0, false));
        let (k3, _) = FlowKey::new(PROTO_UDP, x, y);
        assert_eq!(t.id(k3), (1, true));
    }
}
