//! The one interface every link element implements, and the pipeline that chains them.
//!
//! Time is a plain count of nanoseconds on whatever clock drives the model: the emulator
//! passes CLOCK_MONOTONIC readings, a simulator passes virtual time. Elements never read a
//! clock themselves, so the same code runs in both.
//!
//! A packet carries the time it reached the element holding it. When an element releases a
//! packet it stamps the packet with the time it was *due* (not the time `release` happened to
//! be called), so a chain of elements is exact however late the caller polls.

use crate::frame_errors::FrameTally;
use std::collections::VecDeque;

/// Nanoseconds on the clock that drives the model.
pub type Nanos = u64;

pub const NANOS_PER_SEC: f64 = 1e9;

/// Converts seconds (as users write them) to nanoseconds, rounding to the nearest.
pub fn secs_to_nanos(secs: f64) -> Nanos {
    (secs * NANOS_PER_SEC).round().max(0.0) as Nanos
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The whole IP packet.
    pub data: Vec<u8>,
    /// When the packet reached the element that holds it; once released, when it was due.
    pub time: Nanos,
}

impl Packet {
    pub fn new(data: Vec<u8>, time: Nanos) -> Self {
        Packet { data, time }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// What an element has thrown away so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drops {
    pub packets: u64,
    pub bytes: u64,
}

impl Drops {
    pub fn add(&mut self, bytes: usize) {
        self.packets += 1;
        self.bytes += bytes as u64;
    }

    pub fn merge(self, other: Drops) -> Drops {
        Drops {
            packets: self.packets + other.packets,
            bytes: self.bytes + other.bytes,
        }
    }
}

/// What happened at a bottleneck, for event logs in mahimahi's format (`emulator::mahimahi_log`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// A packet of `bytes` reached the queue.
    Arrival { at: Nanos, bytes: usize },
    /// A packet that arrived at `arrived` had its last byte sent at `at`.
    Departure {
        at: Nanos,
        bytes: usize,
        arrived: Nanos,
    },
    /// Packets thrown away at `at` (queue full, CoDel, an outage in drop mode).
    Drop { at: Nanos, packets: u64, bytes: u64 },
}

/// One effect of the link (rate, delay, loss, ...), as in mahimahi's packet queues:
/// take a packet, give back the packets that are due, say when the next one will be.
pub trait Element: Send {
    /// Takes a packet that reached this element at `packet.time`. Calls come in
    /// non-decreasing `packet.time` order and never before the last `release` time.
    fn accept(&mut self, packet: Packet);
    /// Appends to `out`, in order, every packet due at or before `now`, each stamped with
    /// its due time.
    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>);
    /// The earliest time a packet will be due, if the element holds any.
    fn next_event(&self) -> Option<Nanos>;
    /// Packets this element dropped so far (queue overflow, loss, outage).
    fn drops(&self) -> Drops {
        Drops::default()
    }
    /// Moves the events recorded so far to `out` (only a bottleneck asked to record them has any).
    /// A departure may be recorded before it is due: it is known once its service starts.
    fn take_events(&mut self, _out: &mut Vec<LinkEvent>) {}
    /// Starts counting the radio frames this element sends, in bins of `bin`, and hands the
    /// tally out (the ARQ element, for the radio log's frame error rate); None from the
    /// elements that send no frames.
    fn count_frames(&mut self, _bin: Nanos) -> Option<FrameTally> {
        None
    }
    /// A fault in the element's input found while it runs (a replay's heavy series parsed
    /// as the replay reaches it: `replay_heavy`), once: the run ends with it. None from the
    /// elements whose input is all read at the build.
    fn take_fault(&mut self) -> Option<crate::error::LinkError> {
        None
    }
}

/// Packets whose release times are already decided, in release order: the tail of every
/// element that delays without reordering (delay, loss, ARQ, uplink frames, a cell's users).
#[derive(Debug, Default)]
pub struct DueQueue(VecDeque<Packet>);

impl DueQueue {
    /// Queues `packet` to leave at `packet.time`, which is no earlier than those queued.
    pub fn push(&mut self, packet: Packet) {
        debug_assert!(
            self.0.back().is_none_or(|b| b.time <= packet.time),
            "release times go backwards"
        );
        self.0.push_back(packet);
    }

    /// Queues `packet` to leave at `packet.time`, or with the packet ahead if that leaves
    /// later: a radio link delivers in order (RLC), so a shorter delay bunches packets but
    /// never reorders them. (A packet already released left no later than this one's arrival.)
    pub fn push_in_order(&mut self, mut packet: Packet) {
        if let Some(back) = self.0.back() {
            packet.time = packet.time.max(back.time);
        }
        self.0.push_back(packet);
    }

    /// Moves the packets due by `now` to `out`, in order.
    pub fn release_into(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        while self.0.front().is_some_and(|p| p.time <= now) {
            out.push(self.0.pop_front().expect("checked"));
        }
    }

    /// The packets due by `now`, in order (for a caller that hands them on one by one).
    pub fn pop_due(&mut self, now: Nanos) -> Option<Packet> {
        if self.0.front().is_some_and(|p| p.time <= now) {
            self.0.pop_front()
        } else {
            None
        }
    }

    /// When the next packet is due.
    pub fn next_due(&self) -> Option<Nanos> {
        self.0.front().map(|p| p.time)
    }
}

/// Elements in series: packets released by one are accepted by the next at their due time.
pub struct Pipeline {
    elements: Vec<Box<dyn Element>>,
    carry: Vec<Packet>,
    next_carry: Vec<Packet>,
}

impl Pipeline {
    pub fn new(elements: Vec<Box<dyn Element>>) -> Self {
        Pipeline {
            elements,
            carry: Vec::new(),
            next_carry: Vec::new(),
        }
    }
}

impl Element for Pipeline {
    fn accept(&mut self, packet: Packet) {
        match self.elements.first_mut() {
            Some(first) => first.accept(packet),
            None => self.carry.push(packet),
        }
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        if self.elements.is_empty() {
            out.append(&mut self.carry);
            return;
        }
        let last = self.elements.len() - 1;
        for i in 0..=last {
            for p in self.carry.drain(..) {
                self.elements[i].accept(p);
            }
            if i == last {
                self.elements[i].release(now, out);
            } else {
                self.elements[i].release(now, &mut self.next_carry);
                std::mem::swap(&mut self.carry, &mut self.next_carry);
            }
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        let own = self.carry.first().map(|p| p.time);
        self.elements
            .iter()
            .filter_map(|e| e.next_event())
            .chain(own)
            .min()
    }

    fn drops(&self) -> Drops {
        self.elements
            .iter()
            .fold(Drops::default(), |acc, e| acc.merge(e.drops()))
    }

    fn take_events(&mut self, out: &mut Vec<LinkEvent>) {
        for e in &mut self.elements {
            e.take_events(out);
        }
    }

    fn count_frames(&mut self, bin: Nanos) -> Option<FrameTally> {
        self.elements.iter_mut().find_map(|e| e.count_frames(bin))
    }

    fn take_fault(&mut self) -> Option<crate::error::LinkError> {
        self.elements.iter_mut().find_map(|e| e.take_fault())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    pub fn packet(len: usize, time: Nanos) -> Packet {
        Packet::new(vec![0u8; len], time)
    }

    /// Feeds `arrivals` (time, size) and polls at `poll_every` until `end`, as a clock
    /// would; returns (due time, size) of everything released.
    pub fn run(
        element: &mut dyn Element,
        arrivals: &[(Nanos, usize)],
        poll_every: Nanos,
        end: Nanos,
    ) -> Vec<(Nanos, usize)> {
        let mut out = Vec::new();
        let mut next = 0;
        let mut now = 0;
        while now <= end {
            while next < arrivals.len() && arrivals[next].0 <= now {
                element.release(arrivals[next].0, &mut out);
                element.accept(packet(arrivals[next].1, arrivals[next].0));
                next += 1;
            }
            element.release(now, &mut out);
            now += poll_every;
        }
        out.into_iter().map(|p| (p.time, p.len())).collect()
    }
}
