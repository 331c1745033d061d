//! 32-bit TCP sequence numbers as 64-bit positions, so wrap-around (every 4 GiB, seconds
//! at cellular LTE rates) never looks like a retransmission.

/// Unwraps the sequence space of one direction of a connection. Both the sender's `seq`
/// and the peer's `ack` of that space go through the same unwrapper.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unwrapper {
    last: Option<u64>,
}

impl Unwrapper {
    /// Start of the space: 2³² so that values slightly below the first one stay positive.
    const ORIGIN: u64 = 1 << 32;

    pub fn unwrap(&mut self, x: u32) -> u64 {
        let v = match self.last {
            None => Self::ORIGIN + x as u64,
            Some(last) => {
                let delta = x.wrapping_sub(last as u32) as i32 as i64;
                (last as i64 + delta).max(0) as u64
            }
        };
        self.last = Some(v);
        v
    }

    /// Unwraps without moving the reference (for values that may be far from recent ones,
    /// such as SACK edges).
    pub fn peek(&self, x: u32) -> u64 {
        match self.last {
            None => Self::ORIGIN + x as u64,
            Some(last) => (last as i64 + x.wrapping_sub(last as u32) as i32 as i64).max(0) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_forward_and_back() {
        let mut u = Unwrapper::default();
        let a = u.unwrap(u32::MAX - 10);
        let b = u.unwrap(5);
        assert_eq!(b - a, 16);
        let c = u.unwrap(u32::MAX - 2);
        assert_eq!(b - c, 8);
        assert_eq!(u.peek(7), c + 10);
    }
}
