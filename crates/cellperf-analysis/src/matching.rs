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

    /// Takes the oldest item; `None` when that leaves the queue empty.
    fn pop(self) -> (T, Option<Queue<T>>) {
        match self {
            Queue::One(x) => (x, None),
            Queue::Many(mut q) => {
                let x = q.pop_front().expect("a queue holds an item");
                (x, (!q.is_empty()).then_some(Queue::Many(q)))
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

/// Pairs the copies of packets seen at two captures while both are read in step: a
/// streaming hash join on content keys. One capture's copies are *slots* (the sender's
/// data segments, say, waiting to learn when they arrived) and the other's are *answers*
/// (their arrivals). Equal keys pair in order, the k-th slot with the k-th answer, as in
/// [`match_in_order`]. Answers that nothing asked for within the window are dropped by
/// [`Pairing::expire_answers`]; the owner of the slots retires unanswered ones with
/// [`Pairing::forget_slot`]. Memory is what waits inside the window, not the capture.
pub struct Pairing<K> {
    waiting: AHashMap<K, Waiting>,
    /// Answers waiting, oldest first: (virtual time, key).
    answers_by_age: VecDeque<(i64, K)>,
    /// Answers dropped unasked (duplicates, or copies the asking capture missed).
    pub unmatched_answers: u64,
}

impl<K> Default for Pairing<K> {
    fn default() -> Self {
        Pairing { waiting: AHashMap::new(), answers_by_age: VecDeque::new(), unmatched_answers: 0 }
    }
}

impl<K: Hash + Eq + Copy> Pairing<K> {
    /// A copy at the asking capture, numbered `index`: the capture time of its answer if
    /// one waits, else it waits for one.
    #[inline]
    pub fn slot(&mut self, key: K, index: u64) -> Option<i64> {
        match self.waiting.entry(key) {
            Entry::Vacant(e) => {
                e.insert(Waiting::Slots(Queue::One(index)));
                None
            }
            Entry::Occupied(mut e) => match e.get_mut() {
                Waiting::Slots(q) => {
                    q.push(index);
                    None
                }
                Waiting::Answers(Queue::Many(q)) if q.len() > 1 => q.pop_front().map(|(ts, _)| ts),
                Waiting::Answers(q) => {
                    let ts = q.front().map(|(ts, _)| ts);
                    e.remove();
                    ts
                }
            },
        }
    }

    /// A copy at the answering capture, at capture time `ts` and virtual time `v`: the
    /// index of the slot it answers if one waits, else it waits for one.
    #[inline]
    pub fn answer(&mut self, key: K, ts: i64, v: i64) -> Option<u64> {
        match self.waiting.entry(key) {
            Entry::Vacant(e) => {
                e.insert(Waiting::Answers(Queue::One((ts, v))));
                self.answers_by_age.push_back((v, key));
                None
            }
            Entry::Occupied(mut e) => match e.get_mut() {
                Waiting::Answers(q) => {
                    q.push((ts, v));
                    self.answers_by_age.push_back((v, key));
                    None
                }
                Waiting::Slots(Queue::Many(q)) if q.len() > 1 => q.pop_front(),
                Waiting::Slots(q) => {
                    let index = q.front();
                    e.remove();
                    index
                }
            },
        }
    }

    /// Retires slot `index` of `key`, unanswered (the oldest slot of its key: slots retire
    /// in the order they came).
    pub fn forget_slot(&mut self, key: K, index: u64) {
        if let Some(Waiting::Slots(q)) = self.waiting.remove(&key) {
            if q.front() == Some(index) {
                if let (_, Some(rest)) = q.pop() {
                    self.waiting.insert(key, Waiting::Slots(rest));
                }
            } else {
                self.waiting.insert(key, Waiting::Slots(q));
            }
        }
    }

    /// Drops the answers that came before virtual time `before` and still wait.
    pub fn expire_answers(&mut self, before: i64) {
        while let Some(&(v, key)) = self.answers_by_age.front() {
            if v >= before {
                break;
            }
            self.answers_by_age.pop_front();
            if let Some(Waiting::Answers(q)) = self.waiting.remove(&key) {
                match q.front() {
                    Some((_, first)) if first <= v => {
                        self.unmatched_answers += 1;
                        if let (_, Some(rest)) = q.pop() {
                            self.waiting.insert(key, Waiting::Answers(rest));
                        }
                    }
                    _ => {
                        self.waiting.insert(key, Waiting::Answers(q));
                    }
                }
            }
        }
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
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
}
