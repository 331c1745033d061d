//! Uplink scheduling in frames and grants.
//!
//! A cellular uplink does not send whenever a packet is ready: the terminal transmits in the
//! frames or TTIs the base station grants it (EV-DO reverse-link frames of 26.67 ms, split in
//! 6.67 ms sub-frames from Rev. A; UMTS DCH and HSUPA TTIs of 10 or 2 ms; WiBro's 5 ms TDD
//! frame). A terminal with nothing queued must first ask (a request, then a grant), so a packet
//! arriving to an empty queue waits a request-grant delay; and a frame carries at most what the
//! grant allows. TCP's ACKs, sent as data arrives, therefore leave in bunches at frame
//! boundaries: the ACK compression seed 000 §4.2 measures on every network (docs/methods.md §4, §11).
//!
//! A packet is delivered at the end of the frame that carries it (the frame's transmission
//! completes then), so every release time is a frame boundary.
use crate::element::{DueQueue, Element, Nanos, Packet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameParams {
    /// Frame (TTI) length.
    pub frame: Nanos,
    /// Bytes one frame may carry (0: no limit).
    pub frame_bytes: usize,
    /// Wait of a packet that finds nothing queued: scheduling request to grant.
    pub grant_delay: Nanos,
}

pub struct UplinkFrames {
    params: FrameParams,
    /// Start of the frame being filled, and the bytes it carries so far.
    filling: Nanos,
    used: usize,
    /// When the last packet accepted leaves (while later than an arrival, the grant holds).
    last_due: Nanos,
    held: DueQueue,
}

impl UplinkFrames {
    pub fn new(params: FrameParams) -> Self {
        assert!(
            params.frame > 0,
            "frame length must be positive (checked by the spec)"
        );
        UplinkFrames {
            params,
            filling: 0,
            used: 0,
            last_due: 0,
            held: DueQueue::default(),
        }
    }

    fn frame_at_or_after(&self, t: Nanos) -> Nanos {
        t.div_ceil(self.params.frame) * self.params.frame
    }
}

impl Element for UplinkFrames {
    fn accept(&mut self, mut packet: Packet) {
        let FrameParams {
            frame,
            frame_bytes,
            grant_delay,
        } = self.params;
        // Nothing queued at the terminal when this packet comes: it must ask for a grant.
        let idle = self.last_due <= packet.time;
        let ready = packet.time + if idle { grant_delay } else { 0 };
        let mut start = self.frame_at_or_after(ready).max(self.filling);
        if start == self.filling
            && frame_bytes > 0
            && self.used > 0
            && self.used + packet.len() > frame_bytes
        {
            start += frame; // this frame is full: the next one
        }
        if start != self.filling {
            self.filling = start;
            self.used = 0;
        }
        self.used += packet.len();
        packet.time = start + frame;
        self.last_due = packet.time;
        self.held.push(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.held.release_into(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.held.next_due()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::run;

    const MS: Nanos = 1_000_000;

    #[test]
    fn releases_fall_only_on_frame_boundaries() {
        let p = FrameParams {
            frame: 10 * MS,
            frame_bytes: 0,
            grant_delay: 0,
        };
        let mut f = UplinkFrames::new(p);
        // Packets at 1, 3, 12, 35 ms: the first two in the frame from 10 ms, out at 20 ms.
        let out = run(
            &mut f,
            &[(MS, 40), (3 * MS, 40), (12 * MS, 40), (35 * MS, 40)],
            MS / 4,
            100 * MS,
        );
        assert_eq!(
            out,
            vec![(20 * MS, 40), (20 * MS, 40), (30 * MS, 40), (50 * MS, 40)]
        );
        assert!(out.iter().all(|o| o.0 % (10 * MS) == 0));
    }

    #[test]
    fn an_idle_terminal_waits_for_its_grant_and_a_busy_one_does_not() {
        let p = FrameParams {
            frame: 5 * MS,
            frame_bytes: 0,
            grant_delay: 12 * MS,
        };
        let mut f = UplinkFrames::new(p);
        // 0 ms: idle, ready at 12 ms, frame 15-20 ms. 16 ms: the first is still queued (leaves
        // at 20 ms), so no new request: frame 20-25 ms. 60 ms: idle again: 72 → 75-80 ms.
        let out = run(
            &mut f,
            &[(0, 40), (16 * MS, 40), (60 * MS, 40)],
            MS / 4,
            100 * MS,
        );
        assert_eq!(out, vec![(20 * MS, 40), (25 * MS, 40), (80 * MS, 40)]);
    }

    #[test]
    fn a_frame_carries_up_to_its_capacity() {
        let p = FrameParams {
            frame: 10 * MS,
            frame_bytes: 100,
            grant_delay: 0,
        };
        let mut f = UplinkFrames::new(p);
        // Five 40-byte ACKs at once: two per frame (80 B; a third would make 120 B).
        let arrivals: Vec<(Nanos, usize)> = (0..5).map(|_| (MS, 40)).collect();
        let out = run(&mut f, &arrivals, MS, 100 * MS);
        assert_eq!(
            out.iter().map(|o| o.0 / MS).collect::<Vec<_>>(),
            vec![20, 20, 30, 30, 40]
        );
    }
}
