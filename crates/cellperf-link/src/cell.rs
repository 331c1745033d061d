//! Links with several users: independent per-user pipelines, or a shared cell where one
//! slotted scheduler (PF or RR, `cellperf_channel::SlotScheduler`, docs/methods.md §8) serves one
//! user per slot, each user with its own queue and channel.
use crate::capacity::CapacityMeter;
use crate::element::{Drops, DueQueue, Element, LinkEvent, Nanos, Packet, Pipeline, NANOS_PER_SEC};
use crate::outage::HandoffSchedule;
use crate::queue::Queue;
use cellperf_channel::SlotScheduler;

/// One direction of the link for every user: packets carry the user they belong to.
pub trait MultiUserLink: Send {
    fn accept(&mut self, user: usize, packet: Packet);
    fn release(&mut self, now: Nanos, out: &mut Vec<(usize, Packet)>);
    fn next_event(&self) -> Option<Nanos>;
    fn drops(&self) -> Drops;
    /// The bottleneck events recorded so far (see `Element::take_events`); a shared cell
    /// records none.
    fn take_events(&mut self, _out: &mut Vec<LinkEvent>) {}
    /// A fault found while running (`Element::take_fault`); a shared cell has none (it
    /// replays nothing).
    fn take_fault(&mut self) -> Option<crate::error::LinkError> {
        None
    }
}

/// Users that do not share anything (the uplinks; the downlinks without `--users`).
pub struct Independent {
    links: Vec<Pipeline>,
    scratch: Vec<Packet>,
}

impl Independent {
    pub fn new(links: Vec<Pipeline>) -> Self {
        Independent {
            links,
            scratch: Vec::new(),
        }
    }
}

impl MultiUserLink for Independent {
    fn accept(&mut self, user: usize, packet: Packet) {
        self.links[user].accept(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<(usize, Packet)>) {
        for (user, link) in self.links.iter_mut().enumerate() {
            link.release(now, &mut self.scratch);
            out.extend(self.scratch.drain(..).map(|p| (user, p)));
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        self.links.iter().filter_map(|l| l.next_event()).min()
    }

    fn drops(&self) -> Drops {
        self.links
            .iter()
            .fold(Drops::default(), |a, l| a.merge(l.drops()))
    }

    fn take_events(&mut self, out: &mut Vec<LinkEvent>) {
        for link in &mut self.links {
            link.take_events(out);
        }
    }

    fn take_fault(&mut self) -> Option<crate::error::LinkError> {
        self.links.iter_mut().find_map(|l| l.take_fault())
    }
}

/// A cell user: its queue at the base station, its channel, and what follows the air
/// interface (loss, delay).
pub struct CellUser {
    pub channel: CapacityMeter,
    pub queue: Queue,
    pub after: Pipeline,
    /// The packet on the air and the bytes of it still to send.
    sending: Option<(Packet, f64)>,
    /// Packets whose last byte is scheduled but not yet due.
    sent: DueQueue,
}

impl CellUser {
    pub fn new(channel: CapacityMeter, queue: Queue, after: Pipeline) -> Self {
        CellUser {
            channel,
            queue,
            after,
            sending: None,
            sent: DueQueue::default(),
        }
    }
}

pub struct SharedCell {
    users: Vec<CellUser>,
    scheduler: SlotScheduler,
    slot_ns: f64,
    /// The next slot to schedule.
    slot: u64,
    /// The users all move together, so a handoff resets every user's PF average (002 §6).
    handoffs: Option<HandoffSchedule>,
    next_handoff: Option<Nanos>,
    rates: Vec<f64>,
    bytes: Vec<f64>,
    backlogged: Vec<bool>,
    served_slots: Vec<u64>,
    scratch: Vec<Packet>,
    /// The scheduler decides from the channel reports alone (see [`Self::channel_only`]).
    channel_only: bool,
    all_backlogged: Vec<bool>,
}

impl SharedCell {
    pub fn new(
        users: Vec<CellUser>,
        scheduler: SlotScheduler,
        slot_secs: f64,
        mut handoffs: Option<HandoffSchedule>,
    ) -> Self {
        let n = users.len();
        let next_handoff = handoffs
            .as_mut()
            .and_then(|h| h.next_handoff())
            .map(|h| h.at);
        SharedCell {
            users,
            scheduler,
            slot_ns: slot_secs * NANOS_PER_SEC,
            slot: 0,
            handoffs,
            next_handoff,
            rates: vec![0.0; n],
            bytes: vec![0.0; n],
            backlogged: vec![false; n],
            served_slots: vec![0; n],
            scratch: Vec::new(),
            channel_only: false,
            all_backlogged: vec![true; n],
        }
    }

    /// A scheduler that decides from the users' channel reports alone, as under full buffer:
    /// a user with nothing queued can still be given the slot, which then carries nothing,
    /// and PF's average grows by the user's reported (DRC) rate whether or not data went out.
    /// Off (the default): users with empty queues are skipped and PF averages what was carried.
    pub fn channel_only(mut self, on: bool) -> Self {
        self.channel_only = on;
        self
    }

    /// Slots that carried data to each user so far (a slot a channel-only scheduler gave a
    /// user with nothing queued is not counted).
    pub fn served_slots(&self) -> &[u64] {
        &self.served_slots
    }

    fn bound(&self, slot: u64) -> Nanos {
        (slot as f64 * self.slot_ns).round() as Nanos
    }

    /// Schedules every slot that starts at or before `t`. The decision for a slot is taken at
    /// its start with the packets queued by then and the rates the users report for it.
    fn advance(&mut self, t: Nanos) {
        while self.bound(self.slot) <= t {
            let (s, e) = (self.bound(self.slot), self.bound(self.slot + 1));
            while self.next_handoff.is_some_and(|h| h <= s) {
                for u in 0..self.users.len() {
                    self.scheduler.reset_user(u);
                }
                self.next_handoff = self
                    .handoffs
                    .as_mut()
                    .and_then(|hs| hs.next_handoff())
                    .map(|h| h.at);
            }
            let slot_secs = (e - s) as f64 / NANOS_PER_SEC;
            for (i, u) in self.users.iter_mut().enumerate() {
                self.bytes[i] = u.channel.offered_until(e);
                self.rates[i] = self.bytes[i] * 8.0 / slot_secs;
                self.backlogged[i] =
                    u.sending.is_some() || u.queue.head_time().is_some_and(|h| h <= s);
            }
            let eligible = if self.channel_only {
                &self.all_backlogged
            } else {
                &self.backlogged
            };
            let chosen = self.scheduler.choose(&self.rates, eligible);
            let mut served = None;
            if let Some(i) = chosen {
                let budget = self.bytes[i];
                let mut carried = 0.0;
                let u = &mut self.users[i];
                while carried < budget {
                    if u.sending.is_none() {
                        if u.queue.head_time().is_none_or(|h| h > s) {
                            break;
                        }
                        match u.queue.dequeue(s) {
                            Some(p) => {
                                let len = p.len() as f64;
                                u.sending = Some((p, len));
                            }
                            None => break,
                        }
                    }
                    let (_, left) = u.sending.as_mut().expect("set above");
                    let take = left.min(budget - carried);
                    *left -= take;
                    carried += take;
                    if *left <= 1e-9 {
                        let (mut p, _) = u.sending.take().expect("set above");
                        p.time = s + ((carried / budget) * (e - s) as f64).ceil() as Nanos;
                        u.sent.push(p);
                    }
                }
                if carried > 0.0 {
                    self.served_slots[i] += 1;
                }
                let rate = if self.channel_only {
                    self.rates[i]
                } else {
                    carried * 8.0 / slot_secs
                };
                served = Some((i, rate));
            }
            self.scheduler.advance(served);
            self.slot += 1;
        }
    }

    fn any_backlog(&self) -> bool {
        self.users
            .iter()
            .any(|u| u.sending.is_some() || !u.queue.is_empty())
    }
}

impl MultiUserLink for SharedCell {
    fn accept(&mut self, user: usize, packet: Packet) {
        self.advance(packet.time);
        self.users[user].queue.enqueue(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<(usize, Packet)>) {
        self.advance(now);
        for (i, u) in self.users.iter_mut().enumerate() {
            while let Some(p) = u.sent.pop_due(now) {
                u.after.accept(p);
            }
            u.after.release(now, &mut self.scratch);
            out.extend(self.scratch.drain(..).map(|p| (i, p)));
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        let slot = self.any_backlog().then(|| self.bound(self.slot));
        self.users
            .iter()
            .flat_map(|u| [u.sent.next_due(), u.after.next_event()])
            .flatten()
            .chain(slot)
            .min()
    }

    fn drops(&self) -> Drops {
        self.users.iter().fold(Drops::default(), |a, u| {
            a.merge(u.queue.drops()).merge(u.after.drops())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::SlotRates;
    use crate::queue::QueueSpec;
    use cellperf_channel::{Discipline, DEFAULT_ALPHA};

    /// A cell of users with per-slot rate traces (bit/s, looped) and unbounded queues.
    fn test_cell(slot: f64, rates: Vec<Vec<f64>>, discipline: Discipline) -> SharedCell {
        let n = rates.len();
        let users = rates
            .into_iter()
            .map(|r| {
                CellUser::new(
                    CapacityMeter::new(Box::new(SlotRates::new(slot, r, "t").unwrap())),
                    Queue::new(QueueSpec::Unbounded),
                    Pipeline::new(vec![]),
                )
            })
            .collect();
        SharedCell::new(
            users,
            SlotScheduler::new(discipline, n).unwrap(),
            slot,
            None,
        )
    }

    /// Two full-buffer users on anti-correlated two-state channels (Good 1 Mb/s / Bad 100 kb/s,
    /// each state held for 60 slots): bytes delivered to each in 60 s.
    fn delivered(discipline: Discipline) -> Vec<f64> {
        let slot = 1.0 / 600.0;
        let a: Vec<f64> = (0..120).map(|i| if i < 60 { 1e6 } else { 1e5 }).collect();
        let b: Vec<f64> = (0..120).map(|i| if i < 60 { 1e5 } else { 1e6 }).collect();
        let mut cell = test_cell(slot, vec![a, b], discipline);
        let mut got = vec![0.0; 2];
        let mut out = Vec::new();
        let ms = 1_000_000u64;
        for t in (0..60_000).map(|k| k * ms) {
            // Keep both queues full.
            for u in 0..2 {
                while cell.users[u].queue.len() < 50 {
                    cell.accept(u, Packet::new(vec![0; 1000], t));
                }
            }
            cell.release(t, &mut out);
            for (u, p) in out.drain(..) {
                got[u] += p.len() as f64;
            }
        }
        got
    }

    /// Two users at a constant 600 kb/s (1000 bit = 125 B per 1/600-s slot); user 0 always
    /// has data, user 1 never. Returns the slots that carried data for each user over the
    /// slots starting before 1 s (600 of them) and PF's averages.
    fn one_idle_user(discipline: Discipline, channel_only: bool) -> (Vec<u64>, Vec<f64>) {
        let slot = 1.0 / 600.0;
        let mut cell = test_cell(slot, vec![vec![600e3]; 2], discipline).channel_only(channel_only);
        let mut out = Vec::new();
        for t in (0..1000).map(|k| k * 1_000_000u64) {
            while cell.users[0].queue.len() < 10 {
                cell.accept(0, Packet::new(vec![0; 125], t));
            }
            cell.release(t, &mut out);
        }
        (
            cell.served_slots().to_vec(),
            cell.scheduler.average_bps().to_vec(),
        )
    }

    #[test]
    fn a_channel_only_scheduler_gives_an_idle_user_its_slots_unused() {
        let pf = Discipline::ProportionalFair {
            alpha: DEFAULT_ALPHA,
        };
        // Slots 0..=599 start at or before 999 ms; slot 0 is decided before the first packet
        // is queued (at 0), so it carries nothing. Skipping empty queues, user 0 gets the
        // other 599.
        let (slots, avg) = one_idle_user(Discipline::RoundRobin, false);
        assert_eq!(slots, vec![599, 0]);
        assert_eq!(avg, vec![0.0, 0.0]);
        let (slots, avg) = one_idle_user(pf, false);
        assert_eq!(slots, vec![599, 0]);
        assert_eq!(avg[1], 0.0);
        // Channel-only RR alternates 0, 1, 0, 1, …: user 0's slots 2, 4, …, 598 carry data
        // (299), user 1's 300 nothing.
        let (slots, _) = one_idle_user(Discipline::RoundRobin, true);
        assert_eq!(slots, vec![299, 0]);
        // Channel-only PF: slot 0 goes to user 0 (tie at A = 0, lower index), slot 1 to user 1
        // (A_1 = 0 is an infinite ratio), then A_1 grows by the reported 600 kb/s as if served
        // and the two alternate as under RR.
        let (slots, avg) = one_idle_user(pf, true);
        assert_eq!(slots, vec![299, 0]);
        // Each average grows by α·600 kb/s every other slot and decays by (1−α) every slot:
        // after 600 slots both are within 1 % of 600 kb/s · (1 − (1−α)^600) / 2.
        let expect = 600e3 * (1.0 - (1.0 - DEFAULT_ALPHA).powi(600)) / 2.0;
        for a in avg {
            assert!((a / expect - 1.0).abs() < 0.01, "{a} vs {expect}");
        }
    }

    #[test]
    fn proportional_fair_beats_round_robin_on_anticorrelated_channels_and_both_are_fair() {
        let pf = delivered(Discipline::ProportionalFair {
            alpha: DEFAULT_ALPHA,
        });
        let rr = delivered(Discipline::RoundRobin);
        let (tpf, trr) = (pf.iter().sum::<f64>(), rr.iter().sum::<f64>());
        // RR: each user half the slots at its mean rate 550 kb/s → 550 kb/s total.
        assert!(
            (trr * 8.0 / 60.0 / 550e3 - 1.0).abs() < 0.02,
            "{}",
            trr * 8.0 / 60.0
        );
        // PF serves whoever is in Good: close to 1 Mb/s total.
        assert!(tpf / trr > 1.6, "{tpf} {trr}");
        for x in [&pf, &rr] {
            let j = cellperf_channel::jain_fairness(x).unwrap();
            assert!(j > 0.99, "{j}");
        }
    }
}
