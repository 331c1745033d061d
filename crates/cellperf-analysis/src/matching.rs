//! Pairing the packets of one capture with the same packets in the other.
//!
//! Both captures see a direction's packets in nearly the same order (a link is mostly
//! FIFO), so matching is a merge: the next expected arrival is usually the next packet at
//! the receiver. A short look-ahead finds an arrival that came a little out of order, and
//! arrivals jumped over wait in a small map for their own sender packet. A packet not found
//! that way is taken for lost; at the end, such packets are looked up once among the
//! arrivals that matched nothing (what a gap in one capture leaves behind). The work stays
//! linear and cache-resident, where a hash index of every packet costs a memory miss per
//! lookup at these sizes. Equal keys pair in order: the k-th occurrence at one capture with
//! the k-th at the other.

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
}
