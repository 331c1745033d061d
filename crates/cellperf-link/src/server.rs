//! The bottleneck: a queue in front of a server that sends bytes as the capacity allows.
//!
//! Byte-accounted like mahimahi's link queue: a packet leaves when the capacity stream has
//! offered as many bytes as the packet has, counted from when service could start (its arrival,
//! or the previous packet's departure). Bytes left over in an instant opportunity serve the next
//! packet if it was already waiting; unused capacity is lost, as on a radio link.
use crate::capacity::{fluid_bytes, fluid_nanos, Capacity, Segment};
use crate::element::{Drops, Element, LinkEvent, Nanos, Packet};
use crate::outage::{OutageMode, OutagePlan};
use crate::queue::Queue;
use std::collections::VecDeque;

pub struct RateServer {
    capacity: Box<dyn Capacity>,
    queue: Queue,
    /// Present in drop mode: arrivals inside an outage window are lost.
    drop_during: Option<OutagePlan>,
    outage_drops: Drops,
    /// The segment being consumed and, for an instant, the bytes it still offers.
    segment: Segment,
    left_in_instant: f64,
    /// Service done up to here: capacity before it is used or wasted.
    cursor: Nanos,
    in_service: Option<Packet>,
    done: VecDeque<Packet>,
    /// Arrivals, departures and drops, when asked for (`record_events`).
    events: Option<Vec<LinkEvent>>,
}

impl RateServer {
    /// `capacity` should already be outage-clipped; `outages` + `mode` decide the fate of
    /// packets arriving inside a window.
    pub fn new(
        mut capacity: Box<dyn Capacity>,
        queue: Queue,
        outages: Option<(OutagePlan, OutageMode)>,
    ) -> Self {
        let segment = capacity.next_segment();
        let left_in_instant = match segment {
            Segment::Instant { bytes, .. } => bytes,
            Segment::Fluid { .. } => 0.0,
        };
        let drop_during = match outages {
            Some((plan, OutageMode::Drop)) => Some(plan),
            _ => None,
        };
        RateServer {
            capacity,
            queue,
            drop_during,
            outage_drops: Drops::default(),
            segment,
            left_in_instant,
            cursor: 0,
            in_service: None,
            done: VecDeque::new(),
            events: None,
        }
    }

    /// Records every arrival, departure and drop for `take_events`.
    pub fn record_events(mut self) -> Self {
        self.events = Some(Vec::new());
        self
    }

    fn log(&mut self, event: LinkEvent) {
        if let Some(events) = &mut self.events {
            events.push(event);
        }
    }

    /// Logs what the queue dropped since it had dropped `before`.
    fn log_queue_drops(&mut self, at: Nanos, before: Drops) {
        let now = self.queue.drops();
        if now.packets > before.packets {
            self.log(LinkEvent::Drop {
                at,
                packets: now.packets - before.packets,
                bytes: now.bytes - before.bytes,
            });
        }
    }

    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }

    fn next_segment(&mut self) {
        self.segment = self.capacity.next_segment();
        if let Segment::Instant { bytes, .. } = self.segment {
            self.left_in_instant = bytes;
        }
    }

    /// Consumes capacity for `bytes` starting at `start`; returns when the last byte is out.
    fn serve(&mut self, start: Nanos, bytes: f64) -> Nanos {
        let mut need = bytes;
        loop {
            match self.segment {
                Segment::Instant { at, .. } => {
                    if at < start || self.left_in_instant <= 0.0 {
                        self.next_segment();
                        continue;
                    }
                    let take = self.left_in_instant.min(need);
                    self.left_in_instant -= take;
                    need -= take;
                    if need <= 1e-9 {
                        return at;
                    }
                }
                Segment::Fluid {
                    start: s,
                    end,
                    bits_per_sec,
                } => {
                    // A partly used segment has had its start moved to where service stopped.
                    let begin = s.max(start);
                    if begin >= end {
                        self.next_segment();
                        continue;
                    }
                    let available = fluid_bytes(bits_per_sec, end - begin);
                    if available >= need {
                        let finish = (begin + fluid_nanos(bits_per_sec, need)).min(end);
                        self.segment = Segment::Fluid {
                            start: finish,
                            end,
                            bits_per_sec,
                        };
                        return finish;
                    }
                    need -= available;
                    self.next_segment();
                }
            }
        }
    }

    /// Moves the server forward to `t`: finishes and starts services due by then.
    fn advance(&mut self, t: Nanos) {
        loop {
            if let Some(p) = &self.in_service {
                if p.time > t {
                    return;
                }
                let p = self.in_service.take().expect("checked");
                self.done.push_back(p);
            }
            let Some(head) = self.queue.head_time() else {
                return;
            };
            let start = self.cursor.max(head);
            if start > t {
                return;
            }
            let before = self.queue.drops();
            let dequeued = self.queue.dequeue(start);
            self.log_queue_drops(start, before);
            let Some(mut p) = dequeued else { return };
            let finish = self.serve(start, p.len() as f64);
            self.cursor = finish;
            self.log(LinkEvent::Departure {
                at: finish,
                bytes: p.len(),
                arrived: p.time,
            });
            p.time = finish;
            self.in_service = Some(p);
        }
    }
}

impl Element for RateServer {
    fn accept(&mut self, packet: Packet) {
        self.advance(packet.time);
        let (t, len) = (packet.time, packet.len());
        self.log(LinkEvent::Arrival { at: t, bytes: len });
        if let Some(plan) = &mut self.drop_during {
            if plan.in_outage(t) {
                self.outage_drops.add(len);
                self.log(LinkEvent::Drop {
                    at: t,
                    packets: 1,
                    bytes: len as u64,
                });
                return;
            }
        }
        let before = self.queue.drops();
        self.queue.enqueue(packet);
        self.log_queue_drops(t, before);
        self.advance(t);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.advance(now);
        out.extend(self.done.drain(..));
    }

    fn next_event(&self) -> Option<Nanos> {
        self.done
            .front()
            .or(self.in_service.as_ref())
            .map(|p| p.time)
    }

    fn drops(&self) -> Drops {
        self.queue.drops().merge(self.outage_drops)
    }

    fn take_events(&mut self, out: &mut Vec<LinkEvent>) {
        if let Some(events) = &mut self.events {
            out.append(events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{MahimahiTrace, SlotRates};
    use crate::element::testing::run;
    use crate::outage::{OutageClipped, OutagePlan};
    use crate::queue::QueueSpec;

    const MS: Nanos = 1_000_000;

    fn server(cap: Box<dyn Capacity>, q: QueueSpec) -> RateServer {
        RateServer::new(cap, Queue::new(q), None)
    }

    #[test]
    fn constant_rate_releases_at_exact_transmission_times() {
        // 12 Mb/s: 1500 bytes take exactly 1 ms, 100 bytes 66.667 us.
        let mut s = server(
            Box::new(SlotRates::constant(12e6).unwrap()),
            QueueSpec::Unbounded,
        );
        let out = run(
            &mut s,
            &[(0, 1500), (0, 1500), (5 * MS, 100), (20 * MS + 7, 1500)],
            250_000,
            30 * MS,
        );
        assert_eq!(
            out,
            vec![
                (MS, 1500),
                (2 * MS, 1500),
                (5 * MS + 66_667, 100),
                (21 * MS + 7, 1500)
            ]
        );
    }

    #[test]
    fn polling_granularity_does_not_change_release_times() {
        let arrivals: Vec<(Nanos, usize)> = (0..200)
            .map(|i| (i * 300_000, 200 + (i as usize * 37) % 1300))
            .collect();
        let trace = MahimahiTrace::parse("1\n1\n2\n4\n4\n4\n9\n", "t").unwrap();
        let a = run(
            &mut server(Box::new(trace.clone()), QueueSpec::Unbounded),
            &arrivals,
            1000,
            200 * MS,
        );
        let b = run(
            &mut server(Box::new(trace), QueueSpec::Unbounded),
            &arrivals,
            3 * MS,
            200 * MS,
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 200);
    }

    #[test]
    fn mahimahi_opportunities_are_byte_accounted() {
        // Opportunities of 1500 bytes at 1, 2, 3 ms (period 3 ms).
        let trace = MahimahiTrace::parse("1\n2\n3\n", "t").unwrap();
        let mut s = server(Box::new(trace), QueueSpec::Unbounded);
        // Three 500-byte packets share the 1 ms opportunity; a 2000-byte one needs the 2 ms one
        // and 500 bytes of the 3 ms one, whose last 1000 bytes carry the next packet.
        let out = run(
            &mut s,
            &[(0, 500), (0, 500), (0, 500), (0, 2000), (0, 1000), (0, 1)],
            100_000,
            10 * MS,
        );
        assert_eq!(
            out,
            vec![
                (MS, 500),
                (MS, 500),
                (MS, 500),
                (3 * MS, 2000),
                (3 * MS, 1000),
                (4 * MS, 1)
            ]
        );
    }

    #[test]
    fn unused_opportunities_are_lost() {
        let trace = MahimahiTrace::parse("1\n2\n3\n4\n", "t").unwrap();
        let mut s = server(Box::new(trace), QueueSpec::Unbounded);
        // Arrives at 2.5 ms: the 1 and 2 ms opportunities are gone, served at 3 ms.
        let out = run(
            &mut s,
            &[(2_500_000, 1500), (2_500_000, 1500)],
            100_000,
            10 * MS,
        );
        assert_eq!(out, vec![(3 * MS, 1500), (4 * MS, 1500)]);
    }

    #[test]
    fn slot_rates_serve_across_slot_boundaries() {
        // 1 ms slots at 8 Mb/s (1000 bytes per slot) then 4 Mb/s (500 bytes per slot).
        let rates = SlotRates::new(0.001, vec![8e6, 4e6], "s").unwrap();
        let mut s = server(Box::new(rates), QueueSpec::Unbounded);
        let out = run(&mut s, &[(0, 1250)], 100_000, 10 * MS);
        // 1000 bytes in slot 0, the last 250 bytes take half of slot 1.
        assert_eq!(out, vec![(1_500_000, 1250)]);
    }

    #[test]
    fn drop_tail_queue_bounds_the_queueing_delay() {
        // 1.2 Mb/s = 1500 bytes per 10 ms; a 10-packet buffer; 100 packets at once.
        let mut s = server(
            Box::new(SlotRates::constant(1.2e6).unwrap()),
            QueueSpec::DropTailPackets(10),
        );
        let arrivals: Vec<(Nanos, usize)> = (0..100).map(|_| (0, 1500)).collect();
        let out = run(&mut s, &arrivals, MS, 500 * MS);
        // One in service plus ten queued get through; the last leaves after 11 transmissions.
        assert_eq!(out.len(), 11);
        assert_eq!(out.last().unwrap().0, 110 * MS);
        assert_eq!(s.drops().packets, 89);
    }

    #[test]
    fn buffering_outage_delays_and_drop_outage_loses() {
        let plan = OutagePlan::new(&[(10 * MS, 50 * MS)], None, None);
        let cap = || {
            Box::new(OutageClipped::new(
                Box::new(SlotRates::constant(12e6).unwrap()),
                plan.clone(),
            ))
        };
        let arrivals: Vec<(Nanos, usize)> = (0..100).map(|i| (i * MS, 1500)).collect();

        let mut buffered = RateServer::new(
            cap(),
            Queue::new(QueueSpec::Unbounded),
            Some((plan.clone(), OutageMode::Buffer)),
        );
        let out = run(&mut buffered, &arrivals, 100_000, 300 * MS);
        assert_eq!(out.len(), 100);
        // Nothing leaves inside [10, 60) ms; the backlog then drains at 1 packet per ms.
        assert!(out.iter().all(|&(t, _)| t <= 10 * MS || t >= 60 * MS));
        assert_eq!(out[10], (61 * MS, 1500));

        let mut dropping = RateServer::new(
            cap(),
            Queue::new(QueueSpec::Unbounded),
            Some((plan, OutageMode::Drop)),
        );
        let out = run(&mut dropping, &arrivals, 100_000, 300 * MS);
        assert_eq!(dropping.drops().packets, 50);
        assert_eq!(out.len(), 50);
    }

    #[test]
    fn recorded_events_account_for_every_packet() {
        // A dropping outage over [10, 60) ms at 12 Mb/s; one 1500-byte packet per ms.
        let plan = OutagePlan::new(&[(10 * MS, 50 * MS)], None, None);
        let cap = Box::new(OutageClipped::new(
            Box::new(SlotRates::constant(12e6).unwrap()),
            plan.clone(),
        ));
        let mut s = RateServer::new(
            cap,
            Queue::new(QueueSpec::Unbounded),
            Some((plan, OutageMode::Drop)),
        )
        .record_events();
        let arrivals: Vec<(Nanos, usize)> = (0..100).map(|i| (i * MS, 1500)).collect();
        let out = run(&mut s, &arrivals, 100_000, 300 * MS);
        let mut events = Vec::new();
        s.take_events(&mut events);
        let arrived: Vec<Nanos> = events
            .iter()
            .filter(|e| matches!(e, LinkEvent::Arrival { bytes: 1500, .. }))
            .map(e_time)
            .collect();
        assert_eq!(arrived, (0..100).map(|i| i * MS).collect::<Vec<_>>());
        let dropped: Vec<Nanos> = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    LinkEvent::Drop {
                        packets: 1,
                        bytes: 1500,
                        ..
                    }
                )
            })
            .map(e_time)
            .collect();
        assert_eq!(dropped, (10..60).map(|i| i * MS).collect::<Vec<_>>());
        // Departures are the released packets, at their release times, 1 ms after arrival.
        let departed: Vec<(Nanos, usize)> = events
            .iter()
            .filter_map(|e| match *e {
                LinkEvent::Departure { at, bytes, arrived } => {
                    assert_eq!(at, arrived + MS);
                    Some((at, bytes))
                }
                _ => None,
            })
            .collect();
        assert_eq!(departed, out);
    }

    fn e_time(e: &LinkEvent) -> Nanos {
        match *e {
            LinkEvent::Arrival { at, .. }
            | LinkEvent::Departure { at, .. }
            | LinkEvent::Drop { at, .. } => at,
        }
    }
}
