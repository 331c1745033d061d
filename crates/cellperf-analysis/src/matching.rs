//! Pairing the packets of one capture with the same packets in the other: [`Pairing`] as
//! both captures are read in step (TCP, see `tcp_two_sided`), [`match_in_order`] over a
//! flow's whole records (UDP, whose records are kept for their per-packet metrics).
//!
//! In [`match_in_order`], both captures see a direction's packets in nearly the same order (a link is mostly
//! FIFO), so matching is a merge: the next expected arrival is usually the next packet at
//! the receiver. A short look-ahead finds an arrival that came a little out of order, and
//! arrivals jumped over wait in a small map for their own sender packet. A packet not found
//! that way is taken for lost; at the end, such packets are looked up once among the
//! arrivals that matched nothing (what a gap in one capture leaves behind). The work stays
//! linear and cache-resident, where a hash index of every packet costs a memory miss per
//! lookup at these sizes. Equal keys pair in order: the k-th occurrence at one capture with
//! the k-th at the other.

use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::hash::Hash;

use ahash::AHashMap;

/// Arrivals looked at past the expected one before a packet is taken for lost.
const LOOK_AHEAD: usize = 256;

/// For each key of `sent` (in sending order), the time of its arrival in `received`
/// (in arrival order), if it arrived; and how many arrivals matched nothing sent
/// (duplicates, or packets the sender's capture missed).
pub fn match_in_order<K: Hash + Eq + Copy>(sent: &[K], received: &[(K, i64)]) -> (Vec<Option<i64>>, u64) {
    let n = received.len();
    let mut taken = vec![false; n];
    let mut waiting = vec![false; n];
    let mut pending: AHashMap<K, VecDeque<usize>> = AHashMap::new();
    let mut lost_candidates = Vec::new();
    let mut next = 0usize;
    let mut out = Vec::with_capacity(sent.len());
    for (i, key) in sent.iter().enumerate() {
        while next < n && (taken[next] || waiting[next]) {
            next += 1;
        }
        let found = if next < n && received[next].0 == *key {
            Some(next)
        } else if let Some(q) = pending.get_mut(key).and_then(|q| q.pop_front()) {
            Some(q)
        } else {
            let end = (next + 1 + LOOK_AHEAD).min(n);
            let near = (next + 1..end).find(|&p| !taken[p] && !waiting[p] && received[p].0 == *key);
            if let Some(p) = near {
                for q in next..p {
                    if !taken[q] && !waiting[q] {
                        pending.entry(received[q].0).or_default().push_back(q);
                        waiting[q] = true;
                    }
                }
                next = p + 1;
            }
            near
        };
        match found {
            Some(q) => {
                taken[q] = true;
                out.push(Some(received[q].1));
            }
            None => {
                lost_candidates.push(i);
                out.push(None);
            }
        }
    }
    // Packets taken for lost, against the arrivals nothing matched.
    if !lost_candidates.is_empty() {
        let mut left: AHashMap<K, VecDeque<usize>> = AHashMap::new();
        for (q, (k, _)) in received.iter().enumerate() {
            if !taken[q] {
                left.entry(*k).or_default().push_back(q);
            }
        }
        if !left.is_empty() {
            for i in lost_candidates {
                if let Some(q) = left.get_mut(&sent[i]).and_then(|v| v.pop_front()) {
                    taken[q] = true;
                    out[i] = Some(received[q].1);
                }
            }
        }
    }
    let unmatched = taken.iter().filter(|t| !**t).count() as u64;
    (out, unmatched)
}

/// A small FIFO: one item inline (the common case: keys are nearly always unique), more
/// in a deque.
enum Queue<T> {
    One(T),
    Many(VecDeque<T>),
}

impl<T: Copy> Queue<T> {
    fn push(&mut self, x: T) {
        match self {
            Queue::One(first) => *self = Queue::Many(VecDeque::from([*first, x])),
            Queue::Many(q) => q.push_back(x),
        }
    }

    fn front(&self) -> Option<T> {
        match self {
            Queue::One(x) => Some(*x),
            Queue::Many(q) => q.front().copied(),
        }
    }

    /// Takes the oldest item, and says whether that left the queue empty (its owner then
    /// removes it).
    fn take_front(&mut self) -> (T, bool) {
        match self {
            Queue::One(x) => (*x, true),
            Queue::Many(q) => {
                let x = q.pop_front().expect("a queue holds an item");
                (x, q.is_empty())
            }
        }
    }
}

/// What waits under one key: copies seen at the capture that asks (`slot`), or at the one
/// that answers (`answer`), never both (a new copy first takes a waiting one of the other
/// kind).
enum Waiting {
    /// Slots: indices the asking side gave its copies.
    Slots(Queue<u64>),
    /// Answers: (capture time, virtual time) of copies at the answering capture.
    Answers(Queue<(i64, i64)>),
}

/// A copy waiting to be paired: a slot's index, or an answer's (capture time, virtual time).
#[derive(Clone, Copy)]
enum Seen {
    Slot(u64),
    Answer(i64, i64),
}

impl Seen {
    fn is_slot(self) -> bool {
        matches!(self, Seen::Slot(_))
    }
}

/// Pairs the copies of packets seen at two captures while both are read in step: a
/// streaming hash join on content keys. One capture's copies are *slots* (the sender's
/// data segments, say, waiting to learn when they arrived) and the other's are *answers*
/// (their arrivals). Equal keys pair in order, the k-th slot with the k-th answer, as in
/// [`match_in_order`]. Answers that nothing asked for within the window are dropped by
/// [`Pairing::expire_answers`]; the owner of the slots retires unanswered ones with
/// [`Pairing::forget_slot`]. Memory is what waits inside the window, not the capture.
///
/// Both captures see a direction's packets in nearly the same order, so most copies pair
/// in order: those of the capture that is ahead wait in a FIFO (`fresh`), and a copy from
/// the other pairs with the FIFO's oldest when their keys are equal, without hashing. The
/// map takes what comes out of order: a copy that does not pair with the oldest moves the
/// FIFO into the map first (each copy at most once). Invariant: everything in `fresh` came
/// after everything in `waiting`, is of one kind, and has a key `waiting` does not hold, so
/// the FIFO's oldest is the oldest copy of its key.
pub struct Pairing<K> {
    waiting: AHashMap<K, Waiting>,
    /// Answers waiting in the map, oldest first: (virtual time, key).
    answers_by_age: VecDeque<(i64, K)>,
    fresh: VecDeque<(K, Seen)>,
    /// Answers dropped unasked (duplicates, or copies the asking capture missed).
    pub unmatched_answers: u64,
}

impl<K> Default for Pairing<K> {
    fn default() -> Self {
        Pairing { waiting: AHashMap::new(), answers_by_age: VecDeque::new(), fresh: VecDeque::new(), unmatched_answers: 0 }
    }
}

impl<K: Hash + Eq + Copy> Pairing<K> {
    /// A copy at the asking capture, numbered `index`: the capture time of its answer if
    /// one waits, else it waits for one.
    #[inline]
    pub fn slot(&mut self, key: K, index: u64) -> Option<i64> {
        match self.arrive(key, Seen::Slot(index)) {
            Some(Seen::Answer(ts, _)) => Some(ts),
            _ => None,
        }
    }

    /// A copy at the answering capture, at capture time `ts` and virtual time `v`: the
    /// index of the slot it answers if one waits, else it waits for one.
    #[inline]
    pub fn answer(&mut self, key: K, ts: i64, v: i64) -> Option<u64> {
        match self.arrive(key, Seen::Answer(ts, v)) {
            Some(Seen::Slot(index)) => Some(index),
            _ => None,
        }
    }

    /// The copy of the other kind `copy` pairs with, taken; or `copy` left waiting.
    #[inline]
    fn arrive(&mut self, key: K, copy: Seen) -> Option<Seen> {
        let fresh_other = self.fresh.front().map(|&(_, c)| c.is_slot() != copy.is_slot());
        if let Some(&(k, c)) = self.fresh.front() {
            if k == key && c.is_slot() != copy.is_slot() {
                self.fresh.pop_front();
                return Some(c);
            }
        }
        if !self.waiting.is_empty() {
            if let Some(found) = self.pair_in_map(key, copy) {
                return found;
            }
        }
        if fresh_other == Some(true) {
            // Out of order: the key may wait further back in the FIFO.
            self.flush();
            if let Some(found) = self.pair_in_map(key, copy) {
                return found;
            }
        }
        self.fresh.push_back((key, copy));
        None
    }

    /// When `key` is in the map: `Some(the copy of the other kind taken)`, or `Some(None)`
    /// with `copy` queued behind the copies of its own kind. `None` when the map lacks it.
    fn pair_in_map(&mut self, key: K, copy: Seen) -> Option<Option<Seen>> {
        let Entry::Occupied(mut e) = self.waiting.entry(key) else { return None };
        let taken = match (e.get_mut(), copy) {
            (Waiting::Slots(q), Seen::Answer(..)) => {
                let (index, empty) = q.take_front();
                if empty {
                    e.remove();
                }
                Some(Seen::Slot(index))
            }
            (Waiting::Answers(q), Seen::Slot(_)) => {
                let ((ts, v), empty) = q.take_front();
                if empty {
                    e.remove();
                }
                Some(Seen::Answer(ts, v))
            }
            _ => {
                // A copy of the same kind waits: this one queues behind it (the FIFO's
                // copies first, which are older).
                self.flush();
                self.insert(key, copy);
                None
            }
        };
        Some(taken)
    }

    /// Moves the FIFO into the map, oldest first.
    fn flush(&mut self) {
        while let Some((key, copy)) = self.fresh.pop_front() {
            self.insert(key, copy);
        }
    }

    fn insert(&mut self, key: K, copy: Seen) {
        match copy {
            Seen::Slot(index) => match self.waiting.entry(key) {
                Entry::Vacant(e) => {
                    e.insert(Waiting::Slots(Queue::One(index)));
                }
                Entry::Occupied(mut e) => match e.get_mut() {
                    Waiting::Slots(q) => q.push(index),
                    Waiting::Answers(_) => unreachable!("a slot is inserted only where no answer waits"),
                },
            },
            Seen::Answer(ts, v) => {
                match self.waiting.entry(key) {
                    Entry::Vacant(e) => {
                        e.insert(Waiting::Answers(Queue::One((ts, v))));
                    }
                    Entry::Occupied(mut e) => match e.get_mut() {
                        Waiting::Answers(q) => q.push((ts, v)),
                        Waiting::Slots(_) => unreachable!("an answer is inserted only where no slot waits"),
                    },
                }
                self.answers_by_age.push_back((v, key));
            }
        }
    }

    /// Retires slot `index` of `key`, unanswered (the oldest slot of its key: slots retire
    /// in the order they came).
    pub fn forget_slot(&mut self, key: K, index: u64) {
        if let Some(&(k, Seen::Slot(i))) = self.fresh.front() {
            if (k, i) == (key, index) {
                self.fresh.pop_front();
                return;
            }
        }
        let Entry::Occupied(mut e) = self.waiting.entry(key) else { return };
        let Waiting::Slots(q) = e.get_mut() else { return };
        if q.front() == Some(index) && q.take_front().1 {
            e.remove();
        }
    }

    /// Drops the answers that came before virtual time `before` and still wait.
    pub fn expire_answers(&mut self, before: i64) {
        while let Some(&(v, key)) = self.answers_by_age.front() {
            if v >= before {
                break;
            }
            self.answers_by_age.pop_front();
            // The key's oldest answer, if it is this one (it may have been paired since,
            // and slots of the key may wait now: they stay).
            let Entry::Occupied(mut e) = self.waiting.entry(key) else { continue };
            let Waiting::Answers(q) = e.get_mut() else { continue };
            if q.front().is_some_and(|(_, first)| first <= v) {
                self.unmatched_answers += 1;
                if q.take_front().1 {
                    e.remove();
                }
            }
        }
        // The FIFO's answers are newer than the map's, oldest first.
        while let Some(&(_, Seen::Answer(_, v))) = self.fresh.front() {
            if v >= before {
                break;
            }
            self.fresh.pop_front();
            self.unmatched_answers += 1;
        }
    }

    /// Whether nothing waits (the tests' check that memory is given back).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.fresh.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(keys: &[u32]) -> Vec<(u32, i64)> {
        keys.iter().map(|k| (*k, *k as i64 * 10)).collect()
    }

    #[test]
    fn in_order_with_loss_reordering_and_duplicates() {
        let sent = [1, 2, 3, 4, 5, 6];
        // 3 lost, 5 before 4, 6 twice.
        let (t, extra) = match_in_order(&sent, &recv(&[1, 2, 5, 4, 6, 6]));
        assert_eq!(t, vec![Some(10), Some(20), None, Some(40), Some(50), Some(60)]);
        assert_eq!(extra, 1);
    }

    #[test]
    fn equal_keys_pair_in_order() {
        let sent = [7, 7, 7];
        let r = vec![(7, 1), (7, 2)];
        assert_eq!(match_in_order(&sent, &r).0, vec![Some(1), Some(2), None]);
    }

    #[test]
    fn a_gap_longer_than_the_look_ahead_is_reconciled() {
        // The receiver's capture holds 1000 arrivals the sender's capture missed first.
        let sent: Vec<u32> = (5000..5010).collect();
        let mut r: Vec<(u32, i64)> = (0..1000).map(|k| (k, 0)).collect();
        r.extend((5000..5010).map(|k| (k, k as i64)));
        let (t, extra) = match_in_order(&sent, &r);
        assert!(t.iter().all(|x| x.is_some()));
        assert_eq!(extra, 1000);
        assert_eq!(t[9], Some(5009));
    }

    #[test]
    fn nothing_received() {
        assert_eq!(match_in_order(&[1u32, 2], &[]), (vec![None, None], 0));
    }
    #[test]
    fn pairing_pairs_in_order_either_side_first_and_expires() {
        let mut p: Pairing<u32> = Pairing::default();
        // Slot first, then its answer.
        assert_eq!(p.slot(1, 0), None);
        assert_eq!(p.answer(1, 100, 5), Some(0));
        // Answer first (the answering capture is ahead), then the slot.
        assert_eq!(p.answer(2, 200, 6), None);
        assert_eq!(p.slot(2, 1), Some(200));
        // Equal keys pair in order.
        assert_eq!(p.slot(7, 2), None);
        assert_eq!(p.slot(7, 3), None);
        assert_eq!(p.answer(7, 300, 7), Some(2));
        p.forget_slot(7, 3);
        assert!(p.is_empty());
        // An answer nobody asks for is dropped once out of the window.
        assert_eq!(p.answer(9, 400, 8), None);
        p.expire_answers(8);
        assert_eq!(p.unmatched_answers, 0);
        p.expire_answers(9);
        assert_eq!(p.unmatched_answers, 1);
        assert!(p.is_empty());
        assert_eq!(p.slot(9, 4), None);
    }

    /// Per key: whether slots wait (else answers), and their (index, capture time, virtual time).
    type ModelQueue = (bool, VecDeque<(u64, i64, i64)>);

    /// The reference: per key, a FIFO of slots or of answers; answers expire by age.
    #[derive(Default)]
    struct Model {
        waiting: std::collections::HashMap<u32, ModelQueue>,
        unmatched: u64,
    }

    impl Model {
        fn arrive(&mut self, key: u32, is_slot: bool, x: (u64, i64, i64)) -> Option<(u64, i64, i64)> {
            let e = self.waiting.entry(key).or_insert((is_slot, VecDeque::new()));
            if e.1.is_empty() {
                e.0 = is_slot;
            }
            if e.0 != is_slot {
                return e.1.pop_front();
            }
            e.1.push_back(x);
            None
        }
        fn forget_slot(&mut self, key: u32, index: u64) {
            if let Some((true, q)) = self.waiting.get_mut(&key) {
                if q.front().map(|x| x.0) == Some(index) {
                    q.pop_front();
                }
            }
        }
        fn expire(&mut self, before: i64) {
            for (is_slot, q) in self.waiting.values_mut() {
                while !*is_slot && q.front().is_some_and(|x| x.2 < before) {
                    q.pop_front();
                    self.unmatched += 1;
                }
            }
        }
    }

    #[test]
    fn pairing_agrees_with_a_plain_fifo_per_key_on_random_streams() {
        // Two captures of one stream of keys (a few equal), each copy lost with some
        // probability, reordered a little, either capture ahead; slots retired and answers
        // expired as the owner does, in order.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let n = 50 + rnd(400) as usize;
            let keys: Vec<u32> = (0..n).map(|i| if rnd(20) == 0 { rnd(5) as u32 } else { 100 + i as u32 }).collect();
            let lead = rnd(40) as i64 - 20; // answers' virtual-time shift: either side first
            let mut events: Vec<(i64, bool, u32, u64)> = Vec::new(); // (v, is_slot, key, index)
            for (i, &k) in keys.iter().enumerate() {
                let v = 10 * i as i64;
                if rnd(10) != 0 {
                    events.push((v, true, k, i as u64));
                }
                if rnd(10) != 0 {
                    events.push((v + lead + rnd(25) as i64, false, k, i as u64));
                }
            }
            events.sort_by_key(|e| e.0);
            let (mut p, mut m) = (Pairing::<u32>::default(), Model::default());
            let mut slots_open: VecDeque<(u32, u64, i64)> = VecDeque::new();
            for &(v, is_slot, k, i) in &events {
                // The owner's retirements and expiries, a window (60) behind.
                while slots_open.front().is_some_and(|s| s.2 < v - 60) {
                    let (k, i, _) = slots_open.pop_front().unwrap();
                    p.forget_slot(k, i);
                    m.forget_slot(k, i);
                }
                p.expire_answers(v - 60);
                m.expire(v - 60);
                assert_eq!(p.unmatched_answers, m.unmatched, "round {round} at v {v} ({is_slot} {k} {i})");
                if is_slot {
                    slots_open.push_back((k, i, v));
                    let got = p.slot(k, i);
                    assert_eq!(got, m.arrive(k, true, (i, 1000 + v, v)).map(|x| x.1), "round {round} slot {i}");
                } else {
                    let got = p.answer(k, 1000 + v, v);
                    assert_eq!(got, m.arrive(k, false, (i, 1000 + v, v)).map(|x| x.0), "round {round} answer {i}");
                }
            }
            p.expire_answers(i64::MAX);
            m.expire(i64::MAX);
            assert_eq!(p.unmatched_answers, m.unmatched, "round {round}");
        }
    }
}
