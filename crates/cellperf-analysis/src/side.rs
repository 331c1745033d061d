//! Which end of a flow is the MN: where each capture was taken ([`Side`]), what a capture
//! shows of it ([`Evidence`]) and the decision ([`mn_direction`], see the crate docs). Below
//! the passes, the TCP pairing and the report, which all ask.

use cellperf_capture::Addr;
use serde::Serialize;

use crate::flows::{Dir, FlowKey};

/// Where a capture was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Mn,
    Cn,
}

impl Side {
    pub(crate) fn other(self) -> Side {
        match self {
            Side::Mn => Side::Cn,
            Side::Cn => Side::Mn,
        }
    }
}

/// What a capture shows of which end of a flow it sits at (see [`mn_direction`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Evidence {
    /// Highest TTL of each direction's packets (0: none seen).
    pub max_ttl: [u8; 2],
    /// Direction of the first SYN (without ACK), and of the first packet.
    pub syn_dir: Option<Dir>,
    pub first_dir: Dir,
}

/// Which direction of `key` is uplink (MN→CN), and on what basis (see the crate docs),
/// from what each capture holding the flow shows of it (`at`: in capture order).
pub(crate) fn mn_direction(key: &FlowKey, at: &[(Side, Evidence)], mn_addr: Option<Addr>) -> (Dir, &'static str) {
    if let Some(mn) = mn_addr {
        if key.a.addr == mn {
            return (Dir::AtoB, "mn-addr");
        }
        if key.b.addr == mn {
            return (Dir::BtoA, "mn-addr");
        }
    }
    let side_of = |s: Side| at.iter().find(|(x, _)| *x == s).map(|(_, f)| *f);
    match (side_of(Side::Mn), side_of(Side::Cn)) {
        (Some(mn), Some(cn)) => {
            // A direction's packets keep their highest TTL at the sender's capture.
            for d in [Dir::AtoB, Dir::BtoA] {
                let (tm, tc) = (mn.max_ttl[d.index()], cn.max_ttl[d.index()]);
                if tm > 0 && tc > 0 && tm != tc {
                    let from_mn = tm > tc;
                    return (if from_mn { d } else { d.reverse() }, "ttl");
                }
            }
        }
        _ => {
            // One capture: the capturing host's own packets leave with the higher TTL.
            let (side, f) = at[0];
            let (ta, tb) = (f.max_ttl[0], f.max_ttl[1]);
            if ta > 0 && tb > 0 && ta != tb {
                let local = if ta > tb { Dir::AtoB } else { Dir::BtoA };
                return (if side == Side::Mn { local } else { local.reverse() }, "ttl");
            }
        }
    }
    let f = at[0].1;
    (f.syn_dir.unwrap_or(f.first_dir), "initiator")
}
