//! Where packets wait for the rate server: unbounded, drop-tail (packets or bytes) or CoDel.
use crate::element::{Drops, Nanos, Packet};
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueSpec {
    Unbounded,
    DropTailPackets(usize),
    DropTailBytes(usize),
    /// RFC 8289 CoDel with an overall packet limit.
    CoDel {
        target: Nanos,
        interval: Nanos,
        limit_packets: usize,
    },
}

/// A FIFO with an admission rule and, for CoDel, a dequeue-time drop rule.
pub struct Queue {
    spec: QueueSpec,
    packets: VecDeque<Packet>,
    bytes: usize,
    drops: Drops,
    codel: CoDelState,
}

#[derive(Default)]
struct CoDelState {
    first_above_time: Option<Nanos>,
    drop_next: Nanos,
    count: u32,
    last_count: u32,
    dropping: bool,
}

/// CoDel stops dropping when less than one MTU is queued (RFC 8289 §5.5).
const CODEL_MTU: usize = 1500;

impl Queue {
    pub fn new(spec: QueueSpec) -> Self {
        Queue {
            spec,
            packets: VecDeque::new(),
            bytes: 0,
            drops: Drops::default(),
            codel: CoDelState::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.packets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn drops(&self) -> Drops {
        self.drops
    }

    /// Arrival time of the packet at the head.
    pub fn head_time(&self) -> Option<Nanos> {
        self.packets.front().map(|p| p.time)
    }

    /// Admits the packet (stamped with its arrival time) or drops it.
    pub fn enqueue(&mut self, packet: Packet) {
        let fits = match self.spec {
            QueueSpec::Unbounded => true,
            QueueSpec::DropTailPackets(n) => self.packets.len() < n,
            QueueSpec::DropTailBytes(n) => self.bytes + packet.len() <= n,
            QueueSpec::CoDel { limit_packets, .. } => self.packets.len() < limit_packets,
        };
        if fits {
            self.bytes += packet.len();
            self.packets.push_back(packet);
        } else {
            self.drops.add(packet.len());
        }
    }

    fn pop(&mut self) -> Option<Packet> {
        let p = self.packets.pop_front()?;
        self.bytes -= p.len();
        Some(p)
    }

    /// The next packet to serve when service can start at `now`.
    pub fn dequeue(&mut self, now: Nanos) -> Option<Packet> {
        match self.spec {
            QueueSpec::CoDel {
                target, interval, ..
            } => self.codel_dequeue(now, target, interval),
            _ => self.pop(),
        }
    }

    /// RFC 8289 §5: returns the head and whether its sojourn has been above target for an interval.
    fn codel_pop(&mut self, now: Nanos, target: Nanos, interval: Nanos) -> (Option<Packet>, bool) {
        let Some(p) = self.pop() else {
            self.codel.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_sub(p.time);
        let mut ok_to_drop = false;
        if sojourn < target || self.bytes <= CODEL_MTU {
            self.codel.first_above_time = None;
        } else {
            match self.codel.first_above_time {
                None => self.codel.first_above_time = Some(now + interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(p), ok_to_drop)
    }

    fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
        t + (interval as f64 / (count.max(1) as f64).sqrt()) as Nanos
    }

    fn codel_dequeue(&mut self, now: Nanos, target: Nanos, interval: Nanos) -> Option<Packet> {
        let (mut p, mut ok_to_drop) = self.codel_pop(now, target, interval);
        if p.is_none() {
            self.codel.dropping = false;
            return None;
        }
        if self.codel.dropping {
            if !ok_to_drop {
                self.codel.dropping = false;
            }
            while self.codel.dropping && now >= self.codel.drop_next {
                let dropped = p.take().expect("a packet in hand while dropping");
                self.drops.add(dropped.len());
                self.codel.count += 1;
                (p, ok_to_drop) = self.codel_pop(now, target, interval);
                if !ok_to_drop || p.is_none() {
                    self.codel.dropping = false;
                } else {
                    self.codel.drop_next =
                        Self::control_law(self.codel.drop_next, interval, self.codel.count);
                }
            }
        } else if ok_to_drop {
            let dropped = p.take().expect("a packet in hand");
            self.drops.add(dropped.len());
            (p, _) = self.codel_pop(now, target, interval);
            self.codel.dropping = true;
            let delta = self.codel.count.saturating_sub(self.codel.last_count);
            self.codel.count =
                if delta > 1 && now.saturating_sub(self.codel.drop_next) < 16 * interval {
                    delta
                } else {
                    1
                };
            self.codel.drop_next = Self::control_law(now, interval, self.codel.count);
            self.codel.last_count = self.codel.count;
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::packet;

    #[test]
    fn drop_tail_limits() {
        let mut q = Queue::new(QueueSpec::DropTailPackets(2));
        for t in 0..5 {
            q.enqueue(packet(100, t));
        }
        assert_eq!((q.len(), q.drops().packets), (2, 3));
        let mut q = Queue::new(QueueSpec::DropTailBytes(2500));
        for (t, len) in [(0, 1000), (1, 1000), (2, 1000), (3, 500)] {
            q.enqueue(packet(len, t));
        }
        assert_eq!((q.len(), q.bytes(), q.drops().bytes), (3, 2500, 1000));
    }

    #[test]
    fn codel_drops_follow_the_control_law() {
        let ms = 1_000_000;
        let mut q = Queue::new(QueueSpec::CoDel {
            target: 5 * ms,
            interval: 100 * ms,
            limit_packets: 10_000,
        });
        // A standing queue: 1000 packets arrive at t=0 and one is served every ms.
        for _ in 0..1000 {
            q.enqueue(packet(1500, 0));
        }
        let mut drop_times = Vec::new();
        for t in 0..400 {
            let before = q.drops().packets;
            assert!(q.dequeue(t * ms).is_some());
            if q.drops().packets > before {
                drop_times.push(t);
            }
        }
        // Sojourn reaches the 5 ms target at 5 ms; the first drop comes one interval later,
        // then at drop_next += 100 ms / sqrt(count): 205, 275.7, 333.4, 383.4 ms.
        assert_eq!(drop_times, vec![105, 205, 276, 334, 384]);
    }

    #[test]
    fn codel_leaves_a_short_queue_alone() {
        let ms = 1_000_000;
        let mut q = Queue::new(QueueSpec::CoDel {
            target: 5 * ms,
            interval: 100 * ms,
            limit_packets: 100,
        });
        for t in 0..10_000u64 {
            q.enqueue(packet(1500, t * ms));
            q.dequeue(t * ms + 2 * ms);
        }
        assert_eq!(q.drops().packets, 0);
    }
}
