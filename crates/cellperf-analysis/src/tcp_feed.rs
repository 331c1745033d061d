//! The TCP work of a run's captures: each capture's [`TcpOneSided`] state of each flow and,
//! of two captures read in step, the [`TcpPairing`] of their packets. With more than one
//! core it runs on a second thread, fed in reading order ([`TcpFeed`]): the reading thread
//! decodes the files, merges them and keeps the flows, duplicates, fragments and UDP
//! records. One capture's TCP states are kept on that thread the same way.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::flows::FlowKey;
use crate::record::TcpRec;
use crate::tcp_one_sided::TcpOneSided;
use crate::tcp_two_sided::{PairedResult, SeenAt, TcpPairing};

/// The environment variable that bounds the threads of one analysis: `1` keeps all of it
/// on the calling thread. A corpus import's workers set it (docs/scale.md): their
/// parallelism is across runs, one run per core, as `RAYON_NUM_THREADS` does for a library.
pub const THREADS_VAR: &str = "CELLPERF_ANALYSIS_THREADS";

/// The threads an analysis may use: [`THREADS_VAR`] if set to a number, else the cores.
fn analysis_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::env::var(THREADS_VAR).ok().and_then(|v| v.trim().parse::<usize>().ok()).map_or(cores, |n| n.clamp(1, cores))
}

/// TCP packets handed to the TCP thread in one batch.
const BATCH: usize = 4096;
/// Batches on their way to the TCP thread at most (the reading waits beyond it: memory
/// stays bounded when the TCP work is the slower).
const BATCHES_IN_FLIGHT: usize = 3;
/// Batches there are at most: those in flight, the one being filled and the one being
/// taken. They are reused, so memory is the same for any capture.
const BATCHES: usize = BATCHES_IN_FLIGHT + 2;

/// A TCP packet for [`TcpWork`]: where it was seen (capture, virtual time, TTL), its
/// flow, where that flow's series start at its capture, and the packet, whose SACK blocks
/// are in its batch's `sacks` (`rec.sack_at`, `rec.sack_count`). Compact on purpose: every
/// TCP packet is written here by one core and read by the other (72 bytes; with the
/// blocks inline and a `SeenAt` it was 120).
#[derive(Clone, Copy)]
struct TcpItem {
    v: i64,
    t0: i64,
    rec: TcpRec,
    id: u32,
    capture: u8,
    ttl: u8,
}

const _: () = assert!(std::mem::size_of::<TcpItem>() == 72);

impl TcpItem {
    fn at(&self) -> SeenAt {
        SeenAt { capture: self.capture as usize, v: self.v, ttl: self.ttl }
    }
}

/// One batch of TCP packets, in reading order, with the keys of the flows that first
/// appear in it and the SACK blocks of its packets (few carry any).
struct Batch {
    keys: Vec<(u32, FlowKey)>,
    packets: Vec<TcpItem>,
    sacks: Vec<(u32, u32)>,
}

impl Batch {
    fn new() -> Self {
        Batch { keys: Vec::new(), packets: Vec::with_capacity(BATCH), sacks: Vec::new() }
    }

    /// The SACK blocks of `item`, one of this batch's packets.
    fn sack(&self, item: &TcpItem) -> &[(u32, u32)] {
        &self.sacks[item.rec.sack_at as usize..][..item.rec.sack_count as usize]
    }
}

/// The per-packet TCP work of a run's captures: each capture's own state of each flow
/// ([`TcpOneSided`]), and, of two captures read in step, the pairing of the packets
/// across them ([`TcpPairing`]).
pub(crate) struct TcpWork {
    pairing: Option<TcpPairing>,
    one_sided: [Vec<Option<TcpOneSided>>; 2],
    interval_ns: i64,
    keep_samples: bool,
}

/// What [`TcpWork`] gives at the end: each flow's pairing result, and each capture's own
/// state of each flow (indexed by capture, then flow).
pub(crate) type TcpDone = (Vec<Option<PairedResult>>, [Vec<Option<TcpOneSided>>; 2]);

impl TcpWork {
    pub fn new(pairing: Option<TcpPairing>, interval_ns: i64, keep_samples: bool) -> Self {
        TcpWork { pairing, one_sided: [Vec::new(), Vec::new()], interval_ns, keep_samples }
    }

    #[inline(always)]
    fn take(&mut self, item: &TcpItem, sack: &[(u32, u32)], key: &FlowKey) {
        let (id, at) = (item.id as usize, item.at());
        let flows = &mut self.one_sided[at.capture];
        if flows.len() <= id {
            flows.resize_with(id + 1, || None);
        }
        let (interval_ns, keep_samples, t0) = (self.interval_ns, self.keep_samples, item.t0);
        flows[id].get_or_insert_with(|| TcpOneSided::new(t0, interval_ns, keep_samples)).push(&item.rec, sack);
        if let Some(pairing) = self.pairing.as_mut() {
            pairing.push(at, item.id, key, &item.rec, sack);
        }
    }

    fn finish(self) -> TcpDone {
        (self.pairing.map(TcpPairing::finish).unwrap_or_default(), self.one_sided)
    }
}

/// The TCP work of a run's captures ([`TcpWork`]), on a thread of its own: the
/// reading (decoding, flows, the capture duplicates and fragments, UDP) hands it every TCP
/// packet in batches over a bounded channel, in the order it reads them, so it sees the
/// same packets in the same order as on the reading thread and gives the same result.
/// On one core, or where no thread can be started, the work is done inline.
pub(crate) enum TcpFeed {
    Inline(TcpWork),
    Threaded(Box<Feed>),
}

pub(crate) struct Feed {
    batch: Batch,
    to: Option<SyncSender<Batch>>,
    /// Batches made so far (at most [`BATCHES`]).
    made: usize,
    /// Batches the TCP thread emptied, for reuse (no allocation per batch).
    back: Receiver<Batch>,
    /// Flows whose key the TCP thread has.
    told: Vec<bool>,
    thread: Option<JoinHandle<TcpDone>>,
}

impl TcpFeed {
    /// The work `make` makes, on a thread of its own if there is more than one core, the
    /// analysis may use more than one thread ([`THREADS_VAR`]) and a thread can be started.
    pub fn new(make: impl FnOnce() -> TcpWork + Send + Clone + 'static) -> Self {
        if analysis_threads() < 2 {
            return TcpFeed::Inline(make());
        }
        let (to, from) = sync_channel::<Batch>(BATCHES_IN_FLIGHT);
        let (give_back, back) = sync_channel::<Batch>(BATCHES);
        let make_here = make.clone();
        let spawned = std::thread::Builder::new().name("cellperf-tcp".into()).spawn(move || {
            let mut work = make();
            let mut keys: Vec<Option<FlowKey>> = Vec::new();
            for mut batch in from {
                for (id, key) in batch.keys.drain(..) {
                    if keys.len() <= id as usize {
                        keys.resize(id as usize + 1, None);
                    }
                    keys[id as usize] = Some(key);
                }
                for item in &batch.packets {
                    let key = keys[item.id as usize].expect("a flow's key comes with its first packet");
                    work.take(item, batch.sack(item), &key);
                }
                batch.packets.clear();
                batch.sacks.clear();
                // Never more than `BATCHES`: there is room.
                let _ = give_back.try_send(batch);
            }
            work.finish()
        });
        match spawned {
            Ok(thread) => TcpFeed::Threaded(Box::new(Feed {
                batch: Batch::new(),
                made: 1,
                to: Some(to),
                back,
                told: Vec::new(),
                thread: Some(thread),
            })),
            Err(_) => TcpFeed::Inline(make_here()),
        }
    }

    /// One TCP packet of flow `id` (whose key `key` gives) as `at` saw it, the flow's
    /// first packet at that capture at `t0`.
    #[inline(always)]
    pub fn push(&mut self, at: SeenAt, id: u32, key: impl FnOnce() -> FlowKey, t0: i64, rec: &TcpRec, sack: &[(u32, u32)]) {
        let item = |rec: TcpRec| TcpItem { v: at.v, t0, rec, id, capture: at.capture as u8, ttl: at.ttl };
        match self {
            TcpFeed::Inline(work) => work.take(&item(*rec), sack, &key()),
            TcpFeed::Threaded(feed) => {
                let i = id as usize;
                if feed.told.len() <= i {
                    feed.told.resize(i + 1, false);
                }
                if !feed.told[i] {
                    feed.told[i] = true;
                    feed.batch.keys.push((id, key()));
                }
                let batch = &mut feed.batch;
                let rec = TcpRec { sack_at: batch.sacks.len() as u32, sack_count: sack.len() as u8, ..*rec };
                batch.sacks.extend_from_slice(sack);
                batch.packets.push(item(rec));
                if batch.packets.len() >= BATCH {
                    feed.send();
                }
            }
        }
    }

    /// The results, once every packet is taken and the rest decided.
    pub fn finish(self) -> TcpDone {
        match self {
            TcpFeed::Inline(work) => work.finish(),
            TcpFeed::Threaded(mut feed) => {
                feed.send();
                feed.to = None;
                match feed.thread.take().map(JoinHandle::join) {
                    Some(Ok(done)) => done,
                    Some(Err(panic)) => std::panic::resume_unwind(panic),
                    None => unreachable!("the thread is joined once"),
                }
            }
        }
    }
}

impl Feed {
    /// Hands the batch on (if the TCP thread is gone, `finish` shows why).
    fn send(&mut self) {
        let next = match self.back.try_recv() {
            Ok(batch) => batch,
            Err(_) if self.made < BATCHES || self.to.is_none() => {
                self.made += 1;
                Batch::new()
            }
            // All made: the next one the TCP thread empties (or a new one if it is gone).
            Err(_) => self.back.recv().unwrap_or_else(|_| Batch::new()),
        };
        let full = std::mem::replace(&mut self.batch, next);
        if let Some(to) = &self.to {
            if to.send(full).is_err() {
                self.to = None;
            }
        }
    }
}

impl Drop for Feed {
    /// A reading that panics stops the thread too.
    fn drop(&mut self) {
        self.to = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::{Dir, Endpoint, PROTO_TCP};
    use crate::side::Side;
    use crate::tcp_one_sided::tests::seg;
    use cellperf_capture::decode::tcp_flags::ACK;

    /// What the TCP work of `feed` gives for two flows of 5,000 segments each, with losses,
    /// resends and ACKs (several batches' worth, read in step as `analyze` does), as text.
    fn outcome(mut feed: TcpFeed) -> String {
        let keys: Vec<FlowKey> = (0..2u16)
            .map(|i| FlowKey::new(PROTO_TCP, Endpoint { addr: 1, port: 1000 + i }, Endpoint { addr: 2, port: 80 }).0)
            .collect();
        let mut packets = Vec::new();
        for i in 0..5_000u32 {
            for (id, lossy) in [(0u32, 7), (1, 11)] {
                let (t, seq) = (i as i64, 1 + i * 100);
                let mut rec = seg(t, Dir::AtoB, seq, 100, 1, ACK);
                rec.ip_id = Some((i * 2 + id) as u16);
                packets.push((0, t, id, rec));
                if i % lossy != 0 {
                    packets.push((1, t + 30, id, TcpRec { ts_ns: rec.ts_ns + 30_000_000, ..rec }));
                } else {
                    // Resent 100 ms later, and that copy arrives.
                    let again = TcpRec { ts_ns: rec.ts_ns + 100_000_000, ip_id: Some(60_000 + id as u16), ..rec };
                    packets.push((0, t + 100, id, again));
                    packets.push((1, t + 130, id, TcpRec { ts_ns: again.ts_ns + 30_000_000, ..again }));
                }
                let mut ack = seg(t + 31, Dir::BtoA, 1, 0, seq + 100, ACK);
                ack.ip_id = Some(i as u16);
                packets.push((1, t + 31, id, ack));
                if i % 13 != 0 {
                    packets.push((0, t + 61, id, TcpRec { ts_ns: ack.ts_ns + 30_000_000, ..ack }));
                }
            }
        }
        packets.sort_by_key(|p| (p.1, p.0));
        for (capture, v_ms, id, rec) in packets {
            let at = SeenAt { capture, v: v_ms * 1_000_000, ttl: 64 - capture as u8 };
            feed.push(at, id, || keys[id as usize], 0, &rec, &[]);
        }
        let (paired, one_sided) = feed.finish();
        let mut out = String::new();
        for f in paired.iter().flatten() {
            out += &format!("{:?}\n", f.roles);
            for (two, _) in f.dirs.iter().flatten() {
                out += &format!("{two:?} {:?}\n", two.counts());
            }
        }
        for t in one_sided.iter().flatten().flatten() {
            out += &format!("{:?} {:?}\n", t.summary(Dir::AtoB), t.summary(Dir::BtoA));
        }
        out
    }

    fn work() -> TcpWork {
        TcpWork::new(Some(TcpPairing::new([Side::Mn, Side::Cn], None, 1_000_000_000, true, 0)), 1_000_000_000, true)
    }

    #[test]
    fn the_tcp_thread_gives_what_the_work_gives_inline() {
        let threaded = TcpFeed::new(work);
        if analysis_threads() >= 2 {
            assert!(matches!(threaded, TcpFeed::Threaded(_)));
        }
        let (inline, threaded) = (outcome(TcpFeed::Inline(work())), outcome(threaded));
        assert!(inline.contains("normal: 715"), "{inline}");
        assert_eq!(inline, threaded);
    }

    #[test]
    fn one_captures_tcp_states_on_the_thread_are_those_kept_inline() {
        let one = || TcpWork::new(None, 1_000_000_000, true);
        let threaded = TcpFeed::new(one);
        if analysis_threads() >= 2 {
            assert!(matches!(threaded, TcpFeed::Threaded(_)));
        }
        let (inline, threaded) = (outcome(TcpFeed::Inline(one())), outcome(threaded));
        // No pairing: only each capture's own states, each flow's with its resends (one
        // segment in 7 and in 11 of 5,000), at both captures.
        assert!(!inline.contains("normal"), "{inline}");
        assert_eq!(inline.matches("retransmissions: 715,").count(), 2, "{inline}");
        assert_eq!(inline.matches("retransmissions: 455,").count(), 2, "{inline}");
        assert_eq!(inline, threaded);
    }
}
