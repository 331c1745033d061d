//! Replay of a recorded link (a [`Bundle`]): one direction as one element.
//!
//! Mode `full` (CellReplay's idea, cellperf's rule): a packet that reaches an idle link starts
//! a *light train*: the recorded train sent last at or before that moment of the recording (in
//! a long gap of the series, the trains before it in turn; before the first, the first
//! stretch's in turn) gives its base delay (linear between trains) and its delivery
//! opportunities (PDOs), placed from the packet's arrival.
//! Packets that follow use those opportunities while any are ahead of them; a flow that wants
//! more than the train had while the link is busy with it goes on with a longer recorded
//! train's, then with the saturator's (*heavy*) opportunities, from where the light ones
//! stopped, for as long as it keeps the link busy.
//! The link is idle again once it has sent everything and the train's last opportunity has
//! passed, or it has sent everything and idled as long as before a light train (`on_arrival`);
//! the next packet starts a new train if the link has been idle at all (downlink) or about as
//! long as before a recorded train (uplink), else a busy period on the heavy
//! opportunities, the next one moved to the packet's arrival when that falls in a gap of the
//! saturator's trace (a lone packet on an idle link does not wait for the saturator's next
//! delivery). A heavy opportunity carries 1500 bytes, a light one a recorded train packet's,
//! consumed first come first served as in the rate server (`server.rs`); a packet leaves a
//! light train once it has had a recorded packet's bytes (`serve`). A packet that comes while
//! the packet ahead would still be waiting to leave on the live link (its base delay over the
//! least one nearby: the uplink's request for a grant) takes the next opportunity after that
//! one's, not after its own arrival (`joins`). A packet is
//! delivered at its opportunity + the base delay (the train's; in a heavy stretch the series'
//! value at that moment) + the latency offset of its size; never before the packet ahead, nor
//! before a recorded train's first packet that a fade held (a base delay above both
//! neighbours', taken out of the series) when it comes after it.
//! Before that, a packet is dropped with its recording window's loss rate (seeded) and meets
//! the recorded outages: buffered until the outage ends, or dropped (the outage modes of
//! `outage.rs`).
//!
//! Where CellReplay (`cellular_queue.cc`) differs: it starts a new light train when a packet's
//! delivery at base delay would fall after the last delivery plus a timer (default 0), in whole
//! milliseconds from the first packet; it delays first and sends the overflow through a heavy
//! queue whose opportunities are counted from the first packet; it neither drops nor stops.
//! cellperf decides in nanoseconds on the bottleneck's own state (queue empty and train over),
//! so a back-to-back burst is one train however the host schedules it; the heavy stretch
//! continues the light one instead of restarting a separate queue; time 0 is the emulator's
//! start, so the downlink and uplink replay the same moment of the recording; and losses and
//! outages are replayed.
//!
//! Mode `heavy` (the mahimahi way, the baseline): the saturator's opportunities from time 0
//! and the smallest recorded base delay as a fixed delay; no losses, outages or size offset.
//!
//! A replay longer than the recording loops, as mahimahi does: every series repeats with the
//! recording's duration as its period.
use crate::capacity::{MahimahiTrace, MAHIMAHI_OPPORTUNITY_BYTES};
use crate::element::{Drops, DueQueue, Element, Nanos, Packet};
use crate::error::LinkError;
use crate::outage::OutageMode;
use crate::queue::QueueSpec;
use crate::random::SeededRng;
use crate::replay_bundle::{Bundle, DirectionTrace};
use crate::replay_heavy::HeavySeries;
use crate::replay_light::{LightSeries, Train};
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayMode {
    Full,
    Heavy,
}

impl ReplayMode {
    pub fn parse(name: &str) -> Result<Self, LinkError> {
        match name {
            "full" => Ok(ReplayMode::Full),
            "heavy" => Ok(ReplayMode::Heavy),
            other => Err(LinkError::spec(format!(
                "replay mode {other:?} is not full or heavy"
            ))),
        }
    }
}

const MS_NANOS: Nanos = 1_000_000;

fn ms_to_nanos(ms: f64) -> Nanos {
    (ms * 1e6).round().max(0.0) as Nanos
}

/// The light train in use: its recorded PDOs placed from `start`.
struct LightTrain {
    start: Nanos,
    pdo: Vec<Nanos>,
    next: usize,
    base: Nanos,
    /// The recorded train the PDOs are from (its index in the light series).
    recorded: usize,
}

impl LightTrain {
    fn last_opportunity(&self) -> Nanos {
        self.start + self.pdo.last().copied().unwrap_or(0)
    }
}

/// Where the opportunity being consumed came from.
#[derive(Clone, Copy)]
enum Source {
    Light,
    Heavy,
}

pub struct Replay {
    mode: ReplayMode,
    trace: DirectionTrace,
    period: Nanos,
    /// One period's heavy opportunities, ms, parsed as the replay reaches them
    /// (`replay_heavy`: a long recording's are millions).
    heavy: HeavySeries,
    /// The next unused heavy opportunity: (loop, index).
    heavy_next: (u64, usize),
    /// Full mode: how much earlier than recorded the heavy opportunities of the link's
    /// current busy period are used (`anchor_heavy`).
    heavy_shift: Nanos,
    /// Heavy mode's fixed delay: the smallest recorded base delay.
    fixed_delay: Nanos,
    /// Full mode: how long the link must have been idle for a packet to start a light train.
    light_idle: Nanos,
    /// Full mode: whether a packet that finds the link idle starts a light train however
    /// short the idle was (the downlink: `Replay::downlink`).
    trains_after_short_idle: bool,
    /// The light series' lines not parsed yet: `trace.light` holds the trains parsed so far,
    /// as far as the replay has reached and `replay_light::AHEAD_TRAINS` more.
    light_rest: LightSeries,
    /// Full mode: a gap in the light series at least this long (ms; a saturate phase's, when
    /// no trains were sent) is filled with the trains before it, repeated; 0: none is.
    light_gap_ms: f64,
    /// Per recorded train, the first train of its stretch (trains less than `light_gap_ms`
    /// apart), found once rather than walked back for every packet in a gap; from the first
    /// of two packets or more once there is one. The sizes phase's one-packet lines before
    /// the first trains phase say nothing of a burst's opportunities: in a stretch that began
    /// with them (10 s of the 20 before `bench/replay.py`'s first saturate gap), every burst
    /// replayed there took the first train's opportunities.
    stretch_first: Vec<usize>,
    /// The recorded trains whose opportunities a light train replays: those of two packets
    /// or more (every one when the series has none: `every_train`); a light train replays
    /// the last of them sent at or before its moment (before the first, `train_at`). The sizes
    /// phase's one-packet lines (every 50 ms, 3.5-14 s at the recording's start) are base
    /// delay samples; replayed as a train, one opportunity, a burst went on with the
    /// saturator's (no longer train within reach), and the gap after the first trains phase
    /// is filled with the stretch before it, the sizes phase included: `bench/replay.py`'s
    /// stationary 10-packet trains replayed in 10.0 ms (median 5.1: a saturated stretch's
    /// bunches) where the link took 15.4 and the recording's own 16.5, and the 100/10 ratio
    /// 0.94x where live it was 1.39-1.55x.
    trains: Vec<usize>,
    every_train: bool,
    /// The bytes a light opportunity carries: the size of the recorded trains' packets.
    light_bytes: f64,
    /// Full mode: the recorded trains whose base delay stood out of both neighbours' (a fade's
    /// or a handoff's held first packet), as (sent, delivered) ms: everything after such a
    /// train's first packet is delivered no earlier than it was (`spike_as_hold`).
    holds: Vec<(f64, f64)>,
    /// The recorded base delays of the last two trains indexed (`index_light`).
    last_bases: [f64; 2],
    outage_mode: OutageMode,
    queue: QueueSpec,
    /// Departure time and size of every packet accepted and not yet sent, for the queue limit.
    queued: VecDeque<(Nanos, usize)>,
    queued_bytes: usize,
    rng: SeededRng,
    drops: Drops,
    train: Option<LightTrain>,
    /// The opportunity being consumed: time, bytes left, source.
    current: Option<(Nanos, f64, Source)>,
    last_departure: Nanos,
    /// Full mode: how long after its opportunity the packet ahead still waited, on the live
    /// link, before it left (its base delay over the floor nearby: `joins`).
    ahead_wait: Nanos,
    held: DueQueue,
}

impl Replay {
    /// One direction of `trace`, looping with `period_ms`.
    pub fn new(
        trace: DirectionTrace,
        period_ms: f64,
        mode: ReplayMode,
        outage_mode: OutageMode,
        queue: QueueSpec,
        seed: u64,
    ) -> Result<Self, LinkError> {
        let mut trace = trace;
        let heavy = HeavySeries::from_times(std::mem::take(&mut trace.heavy_ms));
        let light = LightSeries::parsed();
        Self::with_series(
            trace,
            heavy,
            light,
            period_ms,
            mode,
            outage_mode,
            queue,
            seed,
        )
    }

    /// One direction of `trace` with its heavy series apart (`trace.heavy_ms` unused) and the
    /// light lines `light` not yet parsed onto `trace.light`: a bundle's, opened and parsed as
    /// the replay reaches them. At the build the light series is parsed on to its first
    /// train of two packets or more (or whole, in heavy mode: its smallest base delay); the
    /// train spacing is the median over the trains parsed then.
    #[allow(clippy::too_many_arguments)]
    pub fn with_series(
        trace: DirectionTrace,
        heavy: HeavySeries,
        light: LightSeries,
        period_ms: f64,
        mode: ReplayMode,
        outage_mode: OutageMode,
        queue: QueueSpec,
        seed: u64,
    ) -> Result<Self, LinkError> {
        let mut trace = trace;
        if matches!(queue, QueueSpec::CoDel { .. }) {
            return Err(LinkError::spec(
                "a replay's queue is unbounded or drop-tail (packets=N, bytes=N), not CoDel",
            ));
        }
        let period = ms_to_nanos(period_ms).max(heavy.last_ms() * MS_NANOS);
        let mut light = light;
        let delivers = |t: &Train| t.pdo_ms.len() > 1;
        if mode == ReplayMode::Heavy {
            light.parse_while(&mut trace.light, |_| true);
        } else if !trace.light.iter().any(delivers) {
            light.parse_while(&mut trace.light, |t| !t.last().is_some_and(delivers));
        }
        if let Some(e) = light.take_fault() {
            return Err(e);
        }
        let fixed_delay = ms_to_nanos(
            trace
                .light
                .iter()
                .map(|t| t.base_delay_ms)
                .fold(f64::INFINITY, f64::min),
        );
        let spacing = train_spacing_ms(&trace.light);
        let every_train = !trace.light.iter().any(delivers);
        let light_bytes = trace
            .offset
            .last()
            .map_or(MAHIMAHI_OPPORTUNITY_BYTES, |&(size, _)| size);
        let mut replay = Replay {
            mode,
            trace,
            period,
            heavy,
            heavy_next: (0, 0),
            heavy_shift: 0,
            fixed_delay,
            light_idle: ms_to_nanos(spacing / 4.0),
            trains_after_short_idle: false,
            light_rest: light,
            light_gap_ms: LIGHT_GAP_SPACINGS * spacing,
            stretch_first: Vec::new(),
            trains: Vec::new(),
            every_train,
            light_bytes,
            holds: Vec::new(),
            last_bases: [f64::NAN; 2],
            outage_mode,
            queue,
            queued: VecDeque::new(),
            queued_bytes: 0,
            rng: SeededRng::new(seed),
            drops: Drops::default(),
            train: None,
            current: None,
            last_departure: 0,
            ahead_wait: 0,
            held: DueQueue::default(),
        };
        replay.index_light(0);
        Ok(replay)
    }

    /// Parses the light series on to `AHEAD_TRAINS` trains after `r` ms into the recording
    /// and indexes the new trains.
    fn read_light(&mut self, r: f64) {
        if self.light_rest.complete() {
            return;
        }
        let from = self.trace.light.len();
        self.light_rest.reach(r, &mut self.trace.light);
        self.index_light(from);
    }

    /// Indexes the trains from `from` on: their stretch's first train, whether they
    /// deliver, and the train before the newest taken out of the base delay series as a hold
    /// when its base delay stands out of both neighbours' (`spike_as_hold`).
    fn index_light(&mut self, from: usize) {
        let light = &mut self.trace.light;
        for i in from..light.len() {
            let joins = i > 0 && light[i].at_ms - light[i - 1].at_ms < self.light_gap_ms;
            let first = if joins { self.stretch_first[i - 1] } else { i };
            // One-packet lines before a train (the sizes phase) do not start its stretch.
            let lines_before = light[first].pdo_ms.len() == 1 && light[i].pdo_ms.len() > 1;
            self.stretch_first
                .push(if lines_before { i } else { first });
            if self.every_train || light[i].pdo_ms.len() > 1 {
                self.trains.push(i);
            }
            let base = light[i].base_delay_ms;
            if i >= 2 {
                let [before, middle] = self.last_bases;
                if let Some(hold) = spike_as_hold(&mut light[i - 1], middle, before.max(base)) {
                    self.holds.push(hold);
                }
            }
            self.last_bases = [self.last_bases[1], base];
        }
    }

    /// The downlink's replay: a packet that finds the link idle starts a light train however
    /// short the idle was (CellReplay's rule), where the uplink's takes the saturator's
    /// opportunities after less idle than before a recorded train (`on_arrival`).
    pub fn downlink(mut self) -> Self {
        self.trains_after_short_idle = true;
        self
    }

    /// Time `t` as ms into the recording (the replay loops).
    fn recording_ms(&self, t: Nanos) -> f64 {
        (t % self.period) as f64 / 1e6
    }

    /// The moment of the recording whose light trains and base delay replay at `r` (`light_time`).
    fn light_time(&mut self, r: f64) -> f64 {
        self.read_light(r);
        light_time(
            &self.trace.light,
            &self.stretch_first,
            r,
            self.light_gap_ms,
            self.period as f64 / 1e6,
        )
    }

    /// Whether the queue (packets accepted at `t` and not yet sent) has room for `bytes`.
    fn admits(&mut self, t: Nanos, bytes: usize) -> bool {
        while self.queued.front().is_some_and(|&(d, _)| d <= t) {
            let (_, b) = self.queued.pop_front().expect("checked");
            self.queued_bytes -= b;
        }
        match self.queue {
            QueueSpec::DropTailPackets(n) => self.queued.len() < n,
            QueueSpec::DropTailBytes(n) => self.queued_bytes + bytes <= n,
            _ => true,
        }
    }

    /// A heavy opportunity's time: loop `k`, index `i`.
    fn heavy_at(&self, (k, i): (u64, usize)) -> Nanos {
        k * self.period + self.heavy.parsed()[i] * MS_NANOS
    }

    /// The first heavy opportunity at or after `t` not used yet: (loop, index).
    fn unused_heavy(&mut self, t: Nanos) -> (u64, usize) {
        if self.heavy_at(self.heavy_next) >= t {
            return self.heavy_next;
        }
        let mut k = t / self.period;
        let within = t - k * self.period;
        // Parsed past `within` (or whole): the search's end is the series' end.
        let heavy = self.heavy.reach(within.div_ceil(MS_NANOS));
        let mut i = heavy.partition_point(|&h| h * MS_NANOS < within);
        if i == heavy.len() {
            k += 1;
            i = 0;
        }
        // Never go back to an opportunity already used.
        (k, i).max(self.heavy_next)
    }

    /// The first heavy opportunity at or after `t` not used yet, used `heavy_shift` earlier
    /// than recorded; marks it used.
    fn take_heavy(&mut self, t: Nanos) -> Nanos {
        let (k, i) = self.unused_heavy(t + self.heavy_shift);
        self.heavy_next = if self.heavy.get(i + 1).is_none() {
            (k + 1, 0)
        } else {
            (k, i + 1)
        };
        self.heavy_at((k, i)) - self.heavy_shift
    }

    /// Full mode: a packet that finds the link idle at `t` (and starts no light train) waits
    /// for no gap of the saturator's trace: the busy period it starts uses the heavy
    /// opportunities from the next unused one on, moved earlier by as much as its arrival lies
    /// in the gap before it (never to before the gap's start, so a flow over the trace's rate
    /// still gets the trace's rate, at most one gap ahead). The saturator's deliveries come in
    /// bunches (an ARQ's in-order release, the uplink's grants: on `bench/replay.py`'s mobile
    /// uplink 90 % of them in the same ms as the one before, gaps up to 225 ms), and a lone
    /// packet (a page's request, a TCP ACK) waited for the next bunch, 26 ms on average there,
    /// on top of a base delay that already holds the wait of a packet after idle: its page
    /// loads' uplink one-way delay was 66 ms (median) where the live link's was 45.
    fn anchor_heavy(&mut self, t: Nanos) {
        let (k, i) = self.unused_heavy(t);
        let next = self.heavy_at((k, i));
        // The last opportunity recorded before the next one's moment (the gap's start).
        let heavy = self.heavy.parsed();
        let j = heavy.partition_point(|&h| h < heavy[i]);
        let gap_start = match (j, k) {
            (0, 0) => 0,
            // The last line's time (the previous loop's last opportunity).
            (0, k) => (k - 1) * self.period + self.heavy.last_ms() * MS_NANOS,
            (j, k) => self.heavy_at((k, j - 1)),
        };
        self.heavy_shift = next - t.max(gap_start);
    }

    /// The next opportunity at or after `t`: the light train's while it has any, then heavy.
    /// A packet that finds the train's opportunities used up while the link is still busy
    /// with it (`busy`: it came before the packet ahead, sent on the train, left; the flow
    /// wants more than the recorded train carried) goes on with a
    /// longer recorded train's (`longer_train`), from the same place in it and at its
    /// spacing; heavy ones only after the longest. A 100-packet burst replayed on a recorded
    /// 10-packet train went on with the saturator's opportunities after the tenth packet: on
    /// `bench/replay.py`'s stationary recording 6.3 Mb/s where its 100-packet trains had 8.8.
    /// Its opportunities come no sooner after the burst's start than after its own train's
    /// first: a longer train that an ARQ stall held after its fifth packet (65 ms, then the
    /// other 95 within 0.1 ms, `bench/replay.py`'s mobile downlink) lent a burst only its
    /// release, and 100-packet bursts replayed in 20-27 ms where the live link took 66-232.
    fn next_opportunity(&mut self, t: Nanos, busy: bool) -> (Nanos, Source) {
        while let Some(train) = &mut self.train {
            while train.next < train.pdo.len() {
                let at = train.start + train.pdo[train.next];
                train.next += 1;
                if at >= t {
                    return (at, Source::Light);
                }
            }
            let Some(j) = busy
                .then(|| longer_train(&self.trace.light, train.recorded, train.pdo.len()))
                .flatten()
            else {
                break;
            };
            let n = train.pdo.len();
            let pdo: Vec<Nanos> = self.trace.light[j]
                .pdo_ms
                .iter()
                .map(|&ms| ms_to_nanos(ms))
                .collect();
            // The longer train's (n+1)th opportunity follows the last used one as it followed
            // its own nth, and comes no sooner after the burst's start than it came after its
            // own train's.
            train.start = train
                .start
                .max((train.start + train.pdo[n - 1]).saturating_sub(pdo[n - 1]));
            train.pdo = pdo;
            train.recorded = j;
        }
        (self.take_heavy(t), Source::Heavy)
    }

    /// Sends `bytes` from `start` on; returns when it went and on what: when its last byte
    /// went, or on a light train once it has had a recorded packet's bytes (`light_bytes`).
    /// The rest of a packet larger than the trains' (a 1500-byte TCP segment on 1428-byte
    /// train packets) comes out of the next opportunity, as a debt the rate keeps: a burst's
    /// first segment took the second opportunity, as late as a fade had held the recorded
    /// train's second packet (8.5 ms, every burst for 0.5 s of `bench/replay.py`'s stationary
    /// recording), where the live link sent it at once. `behind`: the packet came while the
    /// packet ahead was still waiting to leave on the live link (`joins`), as one that came
    /// before it left.
    fn serve(&mut self, start: Nanos, bytes: f64, behind: bool) -> (Nanos, Source) {
        // Still on the light train: the packet ahead was sent on it and has not left yet.
        let busy = (start < self.last_departure || behind)
            && matches!(self.current, Some((_, _, Source::Light)));
        let start = start.max(self.last_departure);
        let mut need = bytes;
        let mut went = None;
        loop {
            if let Some((at, left, source)) = self.current {
                if at >= start && left > 0.0 {
                    let take = left.min(need);
                    need -= take;
                    self.current = Some((at, left - take, source));
                    if went.is_none()
                        && matches!(source, Source::Light)
                        && bytes - need >= self.light_bytes - 1e-9
                    {
                        went = Some((at, source));
                    }
                    if need <= 1e-9 {
                        return went.unwrap_or((at, source));
                    }
                }
            }
            let (at, source) = self.next_opportunity(start, busy);
            let carries = match source {
                Source::Light => self.light_bytes,
                Source::Heavy => MAHIMAHI_OPPORTUNITY_BYTES,
            };
            self.current = Some((at, carries, source));
        }
    }

    /// Full mode, a packet reaching the link at `t`: starts a new light train if the link has
    /// been idle for `light_idle` then. A burst that follows the last one sooner (a TCP flow's
    /// next window, a call's next packet) goes on with heavy opportunities (`anchor_heavy`):
    /// the light trains say how the link delivers after idling as long as between the recorded
    /// trains, and restarting one at every short gap replayed a train's back-to-back
    /// deliveries (packets an ARQ had held and released together) again and again: a 10-MB
    /// download took 0.85 s where the link took 8.5.
    /// On the downlink a packet that finds the link idle starts a light train however short
    /// the idle (`Replay::downlink`): the base station sends a burst that finds its queue
    /// empty at the link's rate then, which the recorded trains are, and the saturator's
    /// bunches and ARQ stalls gave a light flow's packets either none of the serialisation
    /// (a TCP response's full-size packets 28.0 ms one-way, median, where the live link gave
    /// 34.3 and now 33.9: `bench/replay.py`'s stationary link, 10- and 100-KB downloads) or
    /// the rest of a stall (a 10-KB response 42-45 ms where live gave 15-25, mobile). The
    /// uplink's recorded trains begin with the UE's request for grants after 500 ms of idle,
    /// which a packet a few ms behind the last does not wait for: light trains there gave
    /// uplink ACKs 53 ms where the live link gave 40.5 (46 as before).
    /// A packet after the link has sent everything and idled `light_idle` starts a train even
    /// while the last train's opportunities go on: the link idled as long as before a
    /// recorded train, and the recorded train's later opportunities were for packets sent
    /// with its first. The uplink's 100-packet trains last up to 600 ms (a 1.8-Mb/s state,
    /// grants in bunches): pings 200 ms apart on `bench/replay.py`'s mobile recording waited
    /// for the next bunch of the train the ping before had started, on top of a base delay
    /// that holds a grant's wait, 4-11 ms slower than live (median).
    fn on_arrival(&mut self, t: Nanos) {
        if let Some(tr) = &self.train {
            let idle_since = self.last_departure.max(tr.last_opportunity());
            let idled = self.light_idle > 0 && t >= self.last_departure + self.light_idle;
            if t <= idle_since && !idled {
                return;
            }
            if t > idle_since && t - idle_since < self.light_idle && !self.trains_after_short_idle {
                self.anchor_heavy(t);
                self.current = None;
                return;
            }
        }
        let raw = self.recording_ms(t);
        let r = self.light_time(raw);
        let index = self.train_at(raw, r);
        let light = &self.trace.light;
        self.train = Some(LightTrain {
            start: t,
            pdo: light[index]
                .pdo_ms
                .iter()
                .map(|&ms| ms_to_nanos(ms))
                .collect(),
            next: 0,
            base: ms_to_nanos(self.trace.base_delay_ms(r)),
            recorded: index,
        });
        // Opportunities of the previous train or the heavy stretch are not carried over; the
        // heavy ones after the train are used at their recorded times.
        self.current = None;
        self.heavy_shift = 0;
    }

    /// The recorded train whose opportunities a light train at `raw` ms into the recording
    /// replays (`r`: the moment `light_time` replays then): the last of `trains` sent at or
    /// before `r`. Before the first (the sizes phase and the saturate phase after it: 11 s of
    /// `bench/replay.py`'s mobile recording), the first stretch of trains repeated from the
    /// recording's start, as a gap repeats the stretch before it. The first train alone stood
    /// for all of it; on that recording a handoff had held its packets after the third for
    /// 271 ms, and every light train of the first 11 s replayed the stall: a ping that came
    /// 200 ms after the one before waited for it, every third of the plan's pings 70 ms slow
    /// (median 7.5 % over live). Repeated with its stretch, such a train stalls once a
    /// stretch, as handoffs do.
    fn train_at(&mut self, raw: f64, r: f64) -> usize {
        let first = self.trains[0];
        if self.every_train || raw >= self.trace.light[first].at_ms {
            let light = &self.trace.light;
            return self.trains[self
                .trains
                .partition_point(|&i| light[i].at_ms <= r)
                .saturating_sub(1)];
        }
        // The first stretch parsed (`AHEAD_TRAINS` after its first train).
        self.read_light(self.trace.light[first].at_ms);
        let light = &self.trace.light;
        let stretch = self
            .trains
            .iter()
            .take_while(|&&i| self.stretch_first[i] == self.stretch_first[first])
            .count();
        let last = self.trains[stretch - 1];
        let span = stretch_end(light, last, self.light_gap_ms) - light[first].at_ms;
        if span <= 0.0 {
            return first;
        }
        let within = light[first].at_ms + raw.rem_euclid(span);
        self.trains[self.trains[..stretch]
            .partition_point(|&i| light[i].at_ms <= within)
            .saturating_sub(1)]
    }

    /// Full mode: whether a packet reaching the link at `t` joins the packet ahead, which
    /// left at its opportunity but would still be waiting on the live link: a base delay
    /// sample is the delay of a packet that found the link idle, the wait for the uplink's
    /// grant (or a fade's end) included, and a packet that comes during that wait leaves
    /// with it (on the next opportunity after that one's, `due_time`), where a replay that
    /// placed the wait after the link gave it all again. On `bench/replay.py`'s stationary
    /// and mobile links the page loads' uplink packets were 6-10 ms slower replayed at the
    /// 10th percentile (37.9 ms against 31.6 live, stationary): the ACKs a live grant carried
    /// together. The wait is the packet ahead's base delay over the least one within
    /// `FLOOR_REACH_MS` (`DirectionTrace::base_floor_ms`): every recorded uplink sample pays
    /// some grant wait, so the joins are fewer than live, never more.
    fn joins(&self, t: Nanos) -> bool {
        self.last_departure <= t && t < self.last_departure + self.ahead_wait
    }

    /// When a packet of `bytes` that reached the link at `t` is delivered, or None if lost.
    fn due_time(&mut self, t: Nanos, bytes: usize) -> Option<Nanos> {
        self.heavy.read_ahead((t % self.period) / MS_NANOS);
        let mut start = t;
        if self.mode == ReplayMode::Full {
            let r = self.recording_ms(t);
            if let Some(end) = self.trace.outage_end_ms(r) {
                if self.outage_mode == OutageMode::Drop {
                    return None;
                }
                start = t + ms_to_nanos(end - r);
            }
            let p = self.trace.loss_probability(r);
            if p > 0.0 && self.rng.next_f64() < p {
                return None;
            }
        }
        if !self.admits(t, bytes) {
            return None;
        }
        let due = match self.mode {
            ReplayMode::Heavy => {
                let (departure, _) = self.serve(start, bytes as f64, false);
                self.last_departure = departure;
                departure + self.fixed_delay
            }
            ReplayMode::Full => {
                let joins = self.joins(start);
                if !joins {
                    self.on_arrival(start);
                }
                let from = if joins { self.last_departure } else { start };
                let (departure, source) = self.serve(from, bytes as f64, joins);
                self.last_departure = departure;
                let r = self.light_time(self.recording_ms(departure));
                let base = match source {
                    Source::Light => self.train.as_ref().map_or(0, |tr| tr.base),
                    Source::Heavy => ms_to_nanos(self.trace.base_delay_ms(r)),
                };
                let floor = ms_to_nanos(self.trace.base_floor_ms(r, FLOOR_REACH_MS));
                self.ahead_wait = base.saturating_sub(floor);
                let offset = self.trace.offset_ms(bytes);
                let total = base as f64 + offset * 1e6;
                let due = departure + total.round().max(0.0) as Nanos;
                // Behind a recorded train's held first packet: not before it was delivered.
                let i = self.holds.partition_point(|&(sent, _)| sent <= r);
                match i.checked_sub(1).map(|i| self.holds[i]) {
                    Some((_, delivered)) if delivered > r => {
                        due.max(departure + ms_to_nanos(delivered - r + offset))
                    }
                    _ => due,
                }
            }
        };
        self.queued.push_back((self.last_departure, bytes));
        self.queued_bytes += bytes;
        Some(due)
    }
}

impl Element for Replay {
    fn accept(&mut self, mut packet: Packet) {
        match self.due_time(packet.time, packet.len()) {
            None => self.drops.add(packet.len()),
            Some(due) => {
                packet.time = due;
                self.held.push_in_order(packet);
            }
        }
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.held.release_into(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.held.next_due()
    }

    fn drops(&self) -> Drops {
        self.drops
    }

    fn take_fault(&mut self) -> Option<LinkError> {
        self.heavy
            .take_fault()
            .or_else(|| self.light_rest.take_fault())
    }
}

/// How far either side of a packet's moment the base delay's floor is looked for (`joins`):
/// a few trains at `cellperf record`'s default period, within which the base delay's wander
/// (seconds) barely moves.
const FLOOR_REACH_MS: f64 = 2000.0;
/// A gap in the light series of this many train spacings or more is filled (`light_time`).
const LIGHT_GAP_SPACINGS: f64 = 4.0;
/// How far `longer_train` looks for a longer train, in trains either side.
const LONGER_WITHIN: usize = 64;

/// The median time between the starts of consecutive recorded trains of two packets or more
/// (a lone packet says nothing of delivery opportunities); 0 without two such trains.
/// A quarter of it is the idle time before a light train replays: the recorded trains came
/// after more idle than that; a flow's next window comes sooner. Half the spacing made pings
/// every 200 ms on a 500-ms recording take heavy opportunities, waiting in the saturator
/// trace's gaps: median RTT 88 ms where the light trains gave 64 and the live link 68.
fn train_spacing_ms(light: &[Train]) -> f64 {
    let starts: Vec<f64> = light
        .iter()
        .filter(|t| t.pdo_ms.len() > 1)
        .map(|t| t.at_ms)
        .collect();
    let mut gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return 0.0;
    }
    gaps.sort_by(f64::total_cmp);
    gaps[gaps.len() / 2]
}

/// The moment of the recording whose light trains and base delay a packet at `r` ms into it
/// replays: `r` itself; but in a gap of the light series at least `gap_ms` long (a saturate
/// phase and its drain: 11-15 s of a 60-s recording, three times), the stretch of trains
/// before the gap, repeated from its first (as the heavy trace fills its own gaps), and its
/// last train's moment for the spacing after it. The last train before the gap replayed for
/// all of it (one 66-ms 100-packet train stood for every 100-packet train of 11 s), and the
/// base delay was drawn linearly across it: a 733-ms sample at a gap's edge (a handoff's
/// held packets, `bench/replay.py` mobile) gave the pings of the next 15 s 100-700 ms.
fn light_time(
    light: &[Train],
    stretch_first: &[usize],
    r: f64,
    gap_ms: f64,
    period_ms: f64,
) -> f64 {
    let last = light.partition_point(|tr| tr.at_ms <= r).saturating_sub(1);
    // After the last train, the gap runs to the end of the recording (the replay loops).
    let next = light.get(last + 1).map_or(period_ms, |tr| tr.at_ms);
    if gap_ms <= 0.0 || r < light[last].at_ms || next - light[last].at_ms < gap_ms {
        return r;
    }
    let first = stretch_first[last];
    let (start, end) = (light[first].at_ms, stretch_end(light, last, gap_ms));
    let within = start + (r - end).rem_euclid(end - start);
    within.min(light[last].at_ms)
}

/// The end of the stretch of trains whose last is `last`: one train spacing after it (a gap
/// of the light series is `gap_ms`, LIGHT_GAP_SPACINGS spacings).
fn stretch_end(light: &[Train], last: usize, gap_ms: f64) -> f64 {
    light[last].at_ms + gap_ms / LIGHT_GAP_SPACINGS
}

/// A recorded train whose base delay (`raw`) stands out of both neighbours' (over the larger
/// of them, `neighbours`) comes out of the base delay series, which gets `neighbours` there,
/// and is returned as a hold (sent, delivered ms): a fade or a handoff held the train's first
/// packet, and an in-order link delivers nothing sent after it sooner. The series is drawn
/// linearly between trains, so one held packet's delay raised the base of every packet for
/// a train period either side: on `bench/replay.py`'s mobile downlink a 143-ms sample among
/// 10-16 ms ones gave 52-92 ms to a page load's packets for a second, where the live link
/// gave 15-25; 4 such trains of 117 added 7 ms to the downlink's mean base delay, about
/// 4 times what packets arriving during those fades lose on the live link.
fn spike_as_hold(train: &mut Train, raw: f64, neighbours: f64) -> Option<(f64, f64)> {
    (raw > neighbours).then(|| {
        train.base_delay_ms = neighbours;
        (train.at_ms, train.at_ms + raw)
    })
}

/// The recorded train nearest to `i` (earlier first at the same distance) with more than `n`
/// delivery opportunities, within LONGER_WITHIN trains; None without one.
fn longer_train(light: &[Train], i: usize, n: usize) -> Option<usize> {
    (1..=LONGER_WITHIN).find_map(|k| {
        [i.checked_sub(k), Some(i + k)]
            .into_iter()
            .flatten()
            .find(|&j| light.get(j).is_some_and(|tr| tr.pdo_ms.len() > n))
    })
}

/// The saturator's opportunities of one direction of a bundle, as a mahimahi trace (the
/// capacity the radio log reports for a replayed link), parsed as it is read.
pub fn heavy_trace(bundle: &str, direction: &str) -> Result<MahimahiTrace, LinkError> {
    Ok(MahimahiTrace::from_series(
        Bundle::open_direction(bundle, direction)?.2,
    ))
}

/// The replay element of a replay link (a `RateSpec::Replay`'s fields) and its heavy trace.
/// The series are parsed once per run but the heavy one, parsed as the replay reaches it
/// (`replay_heavy`); `spec::check_link` checks a replay's bundle without its series.
pub fn replay_link(
    bundle: &str,
    direction: &str,
    mode: &str,
    outage_mode: OutageMode,
    queue: QueueSpec,
    seed: u64,
) -> Result<(Replay, MahimahiTrace), LinkError> {
    let mode = ReplayMode::parse(mode)?;
    let (b, trace, heavy, light) = Bundle::open_direction(bundle, direction)?;
    // The capacity meter reads the file apart, as far as the radio log asks.
    let meter = MahimahiTrace::from_series(heavy.reopen()?);
    let replay = Replay::with_series(
        trace,
        heavy,
        light,
        b.duration_ms,
        mode,
        outage_mode,
        queue,
        seed,
    )?;
    let replay = if direction == "downlink" {
        replay.downlink()
    } else {
        replay
    };
    Ok((replay, meter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::run;
    use crate::replay_bundle::tests::{bundle_with, TestBundle};
    use crate::replay_bundle::LossWindow;

    const MS: Nanos = 1_000_000;

    /// Light trains every 200 ms: the one at 0 ms (base 20 ms) delivered 10 packets 1 ms apart,
    /// the one at 200 ms (base 30 ms) 100 packets 0.5 ms apart. Heavy: an opportunity every
    /// 2 ms. Period 1 s.
    fn crafted() -> DirectionTrace {
        DirectionTrace {
            light: vec![
                Train {
                    at_ms: 0.0,
                    base_delay_ms: 20.0,
                    pdo_ms: (0..10).map(|i| i as f64).collect(),
                },
                Train {
                    at_ms: 200.0,
                    base_delay_ms: 30.0,
                    pdo_ms: (0..100).map(|i| i as f64 * 0.5).collect(),
                },
                Train {
                    at_ms: 400.0,
                    base_delay_ms: 30.0,
                    pdo_ms: vec![0.0],
                },
            ],
            heavy_ms: (1..=500).map(|i| i * 2).collect(),
            ..Default::default()
        }
    }

    fn assert_ms(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{g} != {w} in {got:?}");
        }
    }

    fn replay(trace: DirectionTrace, mode: ReplayMode) -> Replay {
        Replay::new(
            trace,
            1000.0,
            mode,
            OutageMode::Buffer,
            QueueSpec::Unbounded,
            7,
        )
        .unwrap()
    }

    /// Mode `full` on `trace`, looping every `period_ms`.
    fn full_replay(trace: &DirectionTrace, period_ms: f64) -> Replay {
        Replay::new(
            trace.clone(),
            period_ms,
            ReplayMode::Full,
            OutageMode::Buffer,
            QueueSpec::Unbounded,
            7,
        )
        .unwrap()
    }

    /// A sizes phase: `n` one-packet lines every 50 ms from 0, base 20 ms.
    fn sizes_phase(n: usize) -> Vec<Train> {
        (0..n)
            .map(|j| Train {
                at_ms: 50.0 * j as f64,
                base_delay_ms: 20.0,
                pdo_ms: vec![0.0],
            })
            .collect()
    }

    /// `n` back-to-back 1500-byte packets (one opportunity each) at `at`; their delivery
    /// times, ms.
    fn train_delivery(r: &mut Replay, at: Nanos, n: usize) -> Vec<f64> {
        let arrivals: Vec<(Nanos, usize)> = (0..n).map(|_| (at, 1500)).collect();
        run(r, &arrivals, 100_000, at + 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect()
    }

    #[test]
    fn a_10_packet_train_gets_the_light_opportunities_exactly() {
        // At 50 ms: the train of 0 ms, base 20 + (30-20)·50/200 = 22.5 ms, PDOs 0..9 ms.
        let mut r = replay(crafted(), ReplayMode::Full);
        let got = train_delivery(&mut r, 50 * MS, 10);
        let want: Vec<f64> = (0..10).map(|i| 50.0 + i as f64 + 22.5).collect();
        assert_ms(&got, &want);
    }

    #[test]
    fn a_100_packet_train_goes_on_with_a_longer_trains_opportunities_exactly() {
        // At 50 ms the train of 0 ms has 10 light opportunities (50..59 ms). The other 90
        // packets want more: they take the 100-packet train's (of 200 ms) 11th to 100th,
        // 0.5 ms apart from 59 ms as its 10th..100th are from its own 10th (59.5 .. 104 ms),
        // at the first train's base delay (22.5 ms). Before, they took the heavy ones after
        // 59 ms (60, 62, ... 238 ms): 2 ms apart where the recorded long train had 0.5.
        let mut r = replay(crafted(), ReplayMode::Full);
        let got = train_delivery(&mut r, 50 * MS, 100);
        let mut want: Vec<f64> = (0..10).map(|i| 50.0 + i as f64 + 22.5).collect();
        want.extend((10..100).map(|k| 59.0 + 0.5 * (k - 9) as f64 + 22.5));
        assert_ms(&got, &want);
        // At 250 ms the 100-packet train of 200 ms carries 100 at 0.5 ms spacing; it is the
        // longest, so 20 more go on with the heavy opportunities after it: 300, 302, ... 338.
        let mut r = replay(crafted(), ReplayMode::Full);
        let got = train_delivery(&mut r, 250 * MS, 120);
        let mut want: Vec<f64> = (0..100).map(|i| 250.0 + i as f64 * 0.5 + 30.0).collect();
        want.extend((0..20).map(|k| 300.0 + 2.0 * k as f64 + 30.0));
        assert_ms(&got, &want);
    }

    #[test]
    fn a_burst_going_on_with_a_longer_train_meets_its_stall_not_only_its_release() {
        // A 10-packet train 1 ms apart at 0 ms; at 200 ms a 100-packet one that an ARQ stall
        // held after its fifth packet: 0..2 ms, then the other 95 at 60 ms, 0.01 ms apart;
        // base 20 ms. A 20-packet burst at 50 ms takes the first train's ten (70..79) and
        // goes on with the long one's 11th to 20th, no sooner after the burst's start than
        // after their own train's (50 + 60.05.. + 20). Before, they followed the tenth as the
        // long train's followed its own tenth (its release, 0.01 ms apart): 80.05..80.14.
        let stalled = (0..5)
            .map(|k| 0.5 * k as f64)
            .chain((5..100).map(|k| 60.0 + 0.01 * (k - 5) as f64));
        let mut trace = crafted();
        trace.light = vec![
            Train {
                at_ms: 0.0,
                base_delay_ms: 20.0,
                pdo_ms: (0..10).map(f64::from).collect(),
            },
            Train {
                at_ms: 200.0,
                base_delay_ms: 20.0,
                pdo_ms: stalled.collect(),
            },
        ];
        let mut r = replay(trace, ReplayMode::Full);
        let got = train_delivery(&mut r, 50 * MS, 20);
        let mut want: Vec<f64> = (0..10).map(|i| 70.0 + i as f64).collect();
        want.extend((10..20).map(|k| 130.0 + 0.01 * (k - 5) as f64));
        assert_ms(&got, &want);
    }

    /// `n` packets of `bytes` at 250 ms on `crafted()` with its trains' packets 1428 bytes
    /// (the offsets' largest size); their delivery times, ms.
    fn on_1428_byte_trains(n: usize, bytes: usize) -> Vec<f64> {
        let mut trace = crafted();
        trace.offset = vec![(100.0, 0.0), (1428.0, 0.0)];
        let mut r = replay(trace, ReplayMode::Full);
        let arrivals: Vec<(Nanos, usize)> = (0..n).map(|_| (250 * MS, bytes)).collect();
        run(&mut r, &arrivals, 100_000, 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect()
    }

    #[test]
    fn a_segment_a_little_larger_than_the_recorded_packets_leaves_on_the_first_opportunity() {
        // A 1500-byte segment on 1428-byte train packets leaves once it has had 1428 bytes:
        // the first, at 250 + 30 ms; the second once it has too (72 bytes of it were on the
        // second opportunity: 1356 there, 144 of the third, 251 ms), and so on, 72 bytes
        // more each time. Before, the first went on the second opportunity (250.5 ms).
        assert_ms(&on_1428_byte_trains(3, 1500), &[280.0, 281.0, 281.5]);
    }

    #[test]
    fn a_light_opportunity_carries_one_recorded_packet() {
        // The recorded trains' packets were 1428 bytes (the offsets' largest size): 100 packets
        // of 1428 bytes at 250 ms take the 100-packet train's 100 opportunities, one each
        // (250 + 0.5 i + 30 ms). As 1500-byte opportunities they took 96 of them, 4 % fast.
        let want: Vec<f64> = (0..100).map(|i| 250.0 + i as f64 * 0.5 + 30.0).collect();
        assert_ms(&on_1428_byte_trains(100, 1428), &want);
    }

    #[test]
    fn a_gap_in_the_light_series_replays_the_trains_before_it_in_turn() {
        // Trains every 100 ms from 0 to 900 ms, train j delivering its second packet j+1 ms
        // after its first, base delay 20 + j ms; then none until 3000 ms (a saturate phase),
        // whose train had 700 ms (a handoff's held packets). A 2-packet train at 2350 ms, in
        // the gap (2100 ms, over 4 spacings), replays the stretch 0..1000 ms from its start:
        // 2350 is 1350 ms past the stretch's end, so the moment 350 ms: train j = 3 (4 ms),
        // base 23.5 ms (between 23 and 24). Before, the last train before the gap (900 ms:
        // 10 ms) stood for all of it, at a base delay drawn from 29 to 700 ms across it (492).
        let mut light: Vec<Train> = (0..10)
            .map(|j| Train {
                at_ms: 100.0 * j as f64,
                base_delay_ms: 20.0 + j as f64,
                pdo_ms: vec![0.0, (j + 1) as f64],
            })
            .collect();
        light.push(Train {
            at_ms: 3000.0,
            base_delay_ms: 700.0,
            pdo_ms: vec![0.0, 1.0],
        });
        let trace = DirectionTrace {
            light,
            heavy_ms: (1..=2000).map(|i| i * 2).collect(),
            ..Default::default()
        };
        let fresh = || full_replay(&trace, 4000.0);
        assert_ms(
            &train_delivery(&mut fresh(), 2350 * MS, 2),
            &[2373.5, 2377.5],
        );
        // Within the stretch, the last train at or before: at 450 ms the one of 400 ms (5 ms),
        // base 24.5 ms.
        assert_ms(&train_delivery(&mut fresh(), 450 * MS, 2), &[474.5, 479.5]);
        // In the stretch's last spacing, its last train's base delay held: at 950 ms 29 ms.
        assert_ms(&train_delivery(&mut fresh(), 950 * MS, 2), &[979.0, 989.0]);
    }

    #[test]
    fn a_packet_that_finds_the_link_idle_waits_for_no_gap_of_the_saturators_trace() {
        // Heavy: bunches of 10 opportunities every 20 ms (20, 40, ... 1000 ms), 0.5 a ms, as an
        // uplink's grants or an ARQ's releases deliver a saturator's packets.
        let mut trace = crafted();
        trace.heavy_ms = (1..=50).flat_map(|i| [i * 20; 10]).collect();
        // One base delay throughout: no packet waits for the one ahead to leave (`joins`).
        for train in &mut trace.light {
            train.base_delay_ms = 20.0;
        }
        let mut r = replay(trace, ReplayMode::Full);
        // 10 packets at 50 ms take the light train of 0 ms (50..59 ms + 20). Then one a ms
        // from 85 ms, 26 ms after the train (less than the 50 ms before a light train): heavy.
        // The one at 85 finds the link idle in the gap 80..100 ms and leaves at once, as do
        // the next 9 (each finds it idle): the bunch of 100 ms moved to their arrivals. The one
        // at 95 finds that bunch used: the next (120) moves no earlier than its gap's start,
        // 100, where it leaves, and those queued behind it until 100 on the same bunch; those
        // of 101..104 find the link idle and leave at once on the bunch's rest; those from
        // 105 on, the bunch of 140 at 120: the trace's rate, at most one gap ahead. Before,
        // the packets of 85..94 waited for the bunch at 100 ms (15 ms for the first).
        let mut arrivals: Vec<(Nanos, usize)> = (0..10).map(|_| (50 * MS, 1500)).collect();
        arrivals.extend((0..30).map(|i| ((85 + i) * MS, 1500)));
        let got: Vec<f64> = run(&mut r, &arrivals, 100_000, 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        let mut want: Vec<f64> = (0..10).map(|i| 50.0 + i as f64 + 20.0).collect();
        let departures = (85..95)
            .map(f64::from)
            .chain([100.0; 6])
            .chain((101..105).map(f64::from))
            .chain([120.0; 10]);
        want.extend(departures.map(|d| d + 20.0));
        assert_ms(&got, &want);
    }

    #[test]
    fn a_packet_that_comes_while_the_one_ahead_would_still_wait_leaves_right_behind_it() {
        // Uplink trains of 0 and 1000 ms with a base delay of 30 ms, one of 500 ms with 20: a
        // packet that finds the link idle at 100 ms waits 8 ms more than the least base delay
        // nearby (28 against 20: the request for a grant). It takes the train of 0 ms: it
        // leaves at 100 and is delivered at 128. One at 105 comes during that wait: it takes
        // the next opportunity after the first's (101, + 28), as a live grant carries both,
        // where it took the first at its arrival (105 + 28 = 133). One at 115 comes after
        // the wait: the link is idle, and it waits again (heavy, anchored at its arrival, +
        // the base delay then: 30 - 10 * 115 / 500).
        let mut trace = crafted();
        trace.light = [(0.0, 30.0), (500.0, 20.0), (1000.0, 30.0)]
            .map(|(at_ms, base_delay_ms)| Train {
                at_ms,
                base_delay_ms,
                pdo_ms: (0..10).map(f64::from).collect(),
            })
            .to_vec();
        trace.heavy_ms = (1..=1000).collect();
        let mut r = replay(trace, ReplayMode::Full);
        let arrivals = [(100 * MS, 1500), (105 * MS, 1500), (115 * MS, 1500)];
        let got: Vec<f64> = run(&mut r, &arrivals, 100_000, 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        assert_ms(&got, &[128.0, 129.0, 115.0 + 30.0 - 2.3]);
    }

    #[test]
    fn a_burst_among_one_packet_lines_and_in_the_gap_after_them_replays_a_recorded_train() {
        // A sizes phase: one-packet lines every 50 ms for 5 s (base 20 ms), then a 10-packet
        // train at 5000 ms (1 ms apart) and a 100-packet one at 5500 (0.5 ms apart). Heavy:
        // bunches of 10 opportunities every 20 ms. A 10-packet burst at 1000 ms (an idle link)
        // takes the first train's ten opportunities (1000..1009 + 20 ms). Before, it took the
        // line of 1000 ms (one opportunity), found no longer train within reach and went on
        // with the saturator's bunch of 1000 ms: all ten at 1020, a 0-ms train.
        let mut light = sizes_phase(100);
        light.push(Train {
            at_ms: 5000.0,
            base_delay_ms: 20.0,
            pdo_ms: (0..10).map(|i| i as f64).collect(),
        });
        light.push(Train {
            at_ms: 5500.0,
            base_delay_ms: 20.0,
            pdo_ms: (0..100).map(|i| i as f64 * 0.5).collect(),
        });
        let trace = DirectionTrace {
            light,
            heavy_ms: (1..=500).flat_map(|i| [i * 20; 10]).collect(),
            ..Default::default()
        };
        let mut r = full_replay(&trace, 10_000.0);
        let want: Vec<f64> = (0..10).map(|i| 1020.0 + i as f64).collect();
        assert_ms(&train_delivery(&mut r, 1000 * MS, 10), &want);
        // After 6000 ms no train (a gap of over four spacings): the stretch before it is
        // replayed from its first train (5000 ms), not from the lines: at 7600 ms the moment
        // 5600, the train of 5500 (0.5 ms apart). From the lines, the moment was 1600 and the
        // train of 5000 (1 ms apart) stood for 10 s of the stretch's 12; before either change,
        // the line of 1600 and the saturator's bunch (all at 7620).
        let want: Vec<f64> = (0..10).map(|i| 7620.0 + 0.5 * i as f64).collect();
        assert_ms(&train_delivery(&mut r, 7600 * MS, 10), &want);
    }

    #[test]
    fn before_the_first_train_the_first_stretch_of_trains_replays_in_turn() {
        // One-packet lines every 50 ms for 1 s, then a stretch of two 10-packet trains: at
        // 5000 ms one whose packets after the third a handoff held for 300 ms, at 5500 ms one
        // 1 ms apart; base 20 ms throughout. The stretch runs one spacing (500 ms) past its
        // last train, 1000 ms, repeated from the recording's start: a burst at 300 ms replays
        // the moment 5300 (the held train), one at 1600 ms the moment 5600 (the other).
        // Before, the first train stood for both: the burst at 1600 waited 297 ms too.
        let mut light = sizes_phase(20);
        let held = [0.0, 1.0, 2.0]
            .into_iter()
            .chain((3..10).map(|i| 297.0 + i as f64));
        light.push(Train {
            at_ms: 5000.0,
            base_delay_ms: 20.0,
            pdo_ms: held.collect(),
        });
        light.push(Train {
            at_ms: 5500.0,
            base_delay_ms: 20.0,
            pdo_ms: (0..10).map(f64::from).collect(),
        });
        let trace = DirectionTrace {
            light,
            heavy_ms: (1..=5000).map(|i| i * 2).collect(),
            ..Default::default()
        };
        let fresh = || full_replay(&trace, 10_000.0);
        assert_ms(
            &train_delivery(&mut fresh(), 300 * MS, 4),
            &[320.0, 321.0, 322.0, 620.0],
        );
        assert_ms(
            &train_delivery(&mut fresh(), 1600 * MS, 4),
            &[1620.0, 1621.0, 1622.0, 1623.0],
        );
    }

    #[test]
    fn a_packet_after_the_link_idled_starts_a_train_while_the_last_ones_opportunities_go_on() {
        // Uplink trains every 500 ms (a light train after 125 ms of idle), each 5 packets
        // 100 ms apart, base 20 ms. A packet at 50 ms starts the train of 0 ms (70); one at
        // 100, 50 ms after it left, goes on with it (its opportunity of 150: 170); one at
        // 300, 150 ms after the link went idle, starts a train of its own and leaves at once
        // (320). Before, it took the opportunity of 350 (370), the train's it found going on.
        let mut trace = crafted();
        trace.light = [0.0, 500.0, 1000.0]
            .map(|at_ms| Train {
                at_ms,
                base_delay_ms: 20.0,
                pdo_ms: (0..5).map(|i| 100.0 * i as f64).collect(),
            })
            .to_vec();
        let mut r = replay(trace, ReplayMode::Full);
        let arrivals = [(50 * MS, 1500), (100 * MS, 1500), (300 * MS, 1500)];
        let got: Vec<f64> = run(&mut r, &arrivals, 100_000, 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        assert_ms(&got, &[70.0, 170.0, 320.0]);
    }

    #[test]
    fn a_downlink_burst_after_a_short_idle_replays_a_light_train() {
        // Heavy: a lone opportunity every 40 ms (40, 80, ...), a bunch of 9 30 ms after each
        // (70, 110, ...): a saturated link's ARQ stall after each delivery. 10 packets at
        // 50 ms take the light train of 0 ms (50..59 + 22.5); 10 more at 75 ms, 16 ms after its
        // last opportunity (less than the 50 ms of idle before a recorded train).
        let mut trace = crafted();
        trace.heavy_ms = (1..=25)
            .flat_map(|k| std::iter::once(40 * k).chain([40 * k + 30; 9]))
            .collect();
        let arrivals: Vec<(Nanos, usize)> = (0..20)
            .map(|i| ((if i < 10 { 50 } else { 75 }) * MS, 1500))
            .collect();
        let deliveries = |r: &mut Replay| -> Vec<f64> {
            run(r, &arrivals, 100_000, 2000 * MS)
                .iter()
                .map(|&(t, _)| t as f64 / 1e6)
                .collect()
        };
        let first: Vec<f64> = (0..10).map(|i| 72.5 + i as f64).collect();
        // The downlink: the second burst starts a light train too, the train of 0 ms's
        // opportunities from 75 ms at the base then (23.75 ms), as the base station sends a
        // burst that finds its queue empty.
        let mut down = replay(trace.clone(), ReplayMode::Full).downlink();
        let mut want = first.clone();
        want.extend((0..10).map(|i| 98.75 + i as f64));
        assert_ms(&deliveries(&mut down), &want);
        // The uplink (and the downlink before): the saturator's opportunities, the next one
        // (80) moved to the arrival; the other nine wait for the bunch of 110 (105 when moved
        // as much), at the base then (25.25 ms): the rest of the saturator's gap.
        let mut up = replay(trace, ReplayMode::Full);
        let mut want = first;
        want.push(98.75);
        want.extend([130.25; 9]);
        assert_ms(&deliveries(&mut up), &want);
    }

    #[test]
    fn a_train_held_by_a_fade_holds_what_follows_it_and_not_the_series() {
        // Trains every 100 ms, base 20 ms, but the one of 500 ms: 200 (its first packet held
        // until 700). Lone packets at 450, 520, 650 and 800 ms (each its own light train): 450
        // has the base 20 (before: 110, drawn from 20 to 200 across 400..500 ms); 520 and 650
        // come after the held packet was sent, before it was delivered: at 700, not before
        // (before: 520 + 164, 650 + 110); 800 has 20 again.
        let light: Vec<Train> = (0..10)
            .map(|j| Train {
                at_ms: 100.0 * j as f64,
                base_delay_ms: if j == 5 { 200.0 } else { 20.0 },
                pdo_ms: vec![0.0, 1.0],
            })
            .collect();
        let trace = DirectionTrace {
            light,
            heavy_ms: (1..=500).map(|i| i * 2).collect(),
            ..Default::default()
        };
        let mut r = replay(trace, ReplayMode::Full);
        let arrivals: Vec<(Nanos, usize)> = [450, 520, 650, 800]
            .iter()
            .map(|&ms| (ms * MS, 100))
            .collect();
        let got: Vec<f64> = run(&mut r, &arrivals, 100_000, 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        assert_ms(&got, &[470.0, 700.0, 700.0, 820.0]);
    }

    #[test]
    fn a_bad_series_passes_the_check_and_fails_the_build_in_one_line_naming_file_and_line() {
        use crate::replay_bundle::tests::bundle_with;
        use crate::spec::check_link;
        let b = bundle_with("bad-heavy", &[("downlink.heavy", "1\n2\nx\n10\n")]);
        let spec = |direction: &str| {
            serde_json::json!({"rate": {"kind": "replay", "bundle": &*b, "direction": direction}})
                .to_string()
        };
        // The check reads the manifest and opens the files; the series are parsed once, by
        // the build.
        assert_eq!(check_link(&spec("downlink")).unwrap(), None);
        let build = |direction: &str| {
            replay_link(
                &b,
                direction,
                "full",
                OutageMode::Buffer,
                QueueSpec::Unbounded,
                1,
            )
        };
        let err = build("downlink").err().unwrap().to_string();
        assert_eq!(
            err,
            format!(
                "{}/downlink.heavy: line 3: time (ms) is not a whole number ≥ 0",
                &*b
            )
        );
        assert!(build("uplink").is_ok());
        // What the check does see, as the parse says it.
        std::fs::remove_file(std::path::Path::new(&*b).join("uplink.loss")).unwrap();
        let err = check_link(&spec("uplink")).unwrap_err().to_string();
        assert_eq!(err, format!("{}/uplink.loss: missing from the bundle", &*b));
        assert_eq!(err, build("uplink").err().unwrap().to_string());
    }

    /// A bundle whose downlink heavy trace has one opportunity a ms for `seconds`, the line
    /// `bad_line` (if any) replaced by `2.5`.
    fn long_bundle(name: &str, seconds: u64, bad_line: Option<u64>) -> TestBundle {
        let heavy: String = (1..=seconds * 1000)
            .map(|ms| match bad_line == Some(ms) {
                true => "2.5\n".to_string(),
                false => format!("{ms}\n"),
            })
            .collect();
        bundle_with(name, &[("downlink.heavy", &heavy)])
    }

    fn build(b: &str, mode: &str) -> Replay {
        replay_link(
            b,
            "downlink",
            mode,
            OutageMode::Buffer,
            QueueSpec::Unbounded,
            1,
        )
        .unwrap()
        .0
    }

    #[test]
    fn the_heavy_series_is_parsed_as_far_as_the_replay_reached() {
        // 600 s of opportunities (3.9 MB); 1 s of replay, a 1500-byte packet every 10 ms
        // (each takes the saturator's next opportunity in heavy mode; full mode's light trains
        // and their heavy stretches too): the parsed horizon is the moment + AHEAD_MS (5 s) +
        // a chunk, not the recording's 600 s. Before, the build parsed all 600,000 lines.
        let b = long_bundle("long", 600, None);
        for mode in ["heavy", "full"] {
            let mut r = build(&b, mode);
            let parsed_at_build = *r.heavy.parsed().last().unwrap();
            assert!(parsed_at_build < 15_000, "{parsed_at_build}");
            let arrivals: Vec<(Nanos, usize)> = (0..100).map(|i| (i * 10 * MS, 1500)).collect();
            let got = run(&mut r, &arrivals, MS, 1500 * MS);
            assert_eq!(got.len(), 100, "{mode}");
            let horizon = *r.heavy.parsed().last().unwrap();
            assert!(!r.heavy.complete() && horizon < 15_000, "{mode}: {horizon}");
            // A packet 300 s in: parsed to there (the synchronous fallback), not to the end.
            let got = run(&mut r, &[(300_000 * MS, 1500)], MS, 300_100 * MS);
            assert_eq!(got.len(), 1, "{mode}");
            let horizon = *r.heavy.parsed().last().unwrap();
            assert!(
                !r.heavy.complete() && horizon < 310_000,
                "{mode}: {horizon}"
            );
        }
    }

    #[test]
    fn a_fault_deep_in_the_heavy_series_comes_once_the_replay_reaches_it() {
        // Line 200,000 (200 s in) is not a whole number: the build succeeds (the first
        // stretch and the last line are good); packets in the first seconds find nothing
        // wrong; those from 195 s on read ahead to it (AHEAD_MS past them), before any
        // needs it, and the element hands out the parse's own error, once. Before, the
        // build failed with it.
        let b = long_bundle("deep", 600, Some(200_000));
        let mut r = build(&b, "heavy");
        let _ = run(&mut r, &[(MS, 1500), (2000 * MS, 1500)], MS, 2100 * MS);
        assert_eq!(r.take_fault(), None);
        let arrivals: Vec<(Nanos, usize)> =
            (0..40).map(|i| ((195_000 + 100 * i) * MS, 1500)).collect();
        let got = run(&mut r, &arrivals, MS, 199_100 * MS);
        assert_eq!(got.len(), 40);
        let err = r.take_fault().expect("reached").to_string();
        assert_eq!(
            err,
            format!(
                "{}/downlink.heavy: line 200000: time (ms) is not a whole number ≥ 0",
                &*b
            )
        );
        assert_eq!(r.take_fault(), None);
        // The element goes on (no panic) with the opportunities before the fault, looping
        // after them (the run ends on the fault anyway).
        let got = run(&mut r, &[(250_000 * MS, 1500)], 100 * MS, 700_000 * MS);
        assert_eq!(got.len(), 1);
        // In the first stretch, the build's error.
        let b = long_bundle("early", 600, Some(3000));
        let err = replay_link(
            &b,
            "downlink",
            "full",
            OutageMode::Buffer,
            QueueSpec::Unbounded,
            1,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.ends_with("downlink.heavy: line 3000: time (ms) is not a whole number ≥ 0"),
            "{err}"
        );
    }

    /// A 600-s light series as the recorder writes one: one-packet lines every 50 ms for 5 s
    /// (the sizes phase), then cycles of 10 s of 10- and 100-packet trains every 50 ms and 5 s
    /// without (a saturate phase), every 37th train's base delay a fade's spike; the line
    /// `bad_line` (counted from 1, the comment included) not a train.
    fn long_light(bad_line: Option<usize>) -> String {
        let mut lines = vec!["# t base pdo...".to_string()];
        for i in 0..100 {
            lines.push(format!("{} {} 0", 50 * i, 20 + i % 3));
        }
        let mut k = 0;
        for cycle in 0..39 {
            for j in 0..200 {
                let (n, step) = if k % 2 == 0 { (10, 1.0) } else { (100, 0.5) };
                let base = if k % 37 == 36 { 150 } else { 20 + k % 7 };
                let pdo: Vec<String> = (0..n).map(|p| format!("{}", p as f64 * step)).collect();
                lines.push(format!(
                    "{} {base} {}",
                    5000 + cycle * 15_000 + 50 * j,
                    pdo.join(" ")
                ));
                k += 1;
            }
        }
        if let Some(n) = bad_line {
            lines[n - 1] = "x".into();
        }
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn the_light_series_is_parsed_as_far_as_the_replay_reached_with_the_same_deliveries() {
        // 7,900 trains (1.5 MB); bursts of 1, 10 and 100 packets every 0.7 s for 620 s (past
        // the recording's end: the replay loops). Parsed as the replay goes, the deliveries
        // are those of the series parsed whole, to the nanosecond; after 1 s of replay the
        // parsed trains are the build's first stretch and no more. Before, the build parsed
        // all 7,900.
        let light = long_light(None);
        let b = long_bundle("light", 600, None);
        std::fs::write(format!("{}/downlink.light", &*b), &light).unwrap();
        let arrivals: Vec<(Nanos, usize)> = (0..886u64)
            .flat_map(|k| {
                let n = [1, 10, 100][k as usize % 3];
                (0..n).map(move |p| (k * 700 * MS + p * 1000, 1500))
            })
            .collect();
        for mode in ["full", "heavy"] {
            let mut lazy = build(&b, mode);
            let at_build = lazy.trace.light.len();
            let mut whole = {
                let bundle = Bundle::load(&b).unwrap();
                let trace = bundle.downlink.unwrap();
                Replay::new(
                    trace,
                    bundle.duration_ms,
                    ReplayMode::parse(mode).unwrap(),
                    OutageMode::Buffer,
                    QueueSpec::Unbounded,
                    1,
                )
                .unwrap()
                .downlink()
            };
            assert_eq!(whole.trace.light.len(), 7900);
            if mode == "full" {
                assert!(at_build < 1000, "{at_build}");
                let _ = run(&mut lazy, &arrivals[..1], MS, 1000 * MS);
                assert_eq!(lazy.trace.light.len(), at_build);
            } else {
                assert_eq!(at_build, 7900, "heavy mode: the smallest base delay of all");
            }
            let mut lazy = build(&b, mode);
            let end = 621_000 * MS;
            let got = run(&mut lazy, &arrivals, MS, end);
            let want = run(&mut whole, &arrivals, MS, end);
            assert_eq!(got.len(), arrivals.len(), "{mode}");
            assert!(got == want, "{mode}: the deliveries differ");
            assert_eq!(lazy.holds, whole.holds);
            let spikes = lazy
                .holds
                .iter()
                .filter(|(sent, got)| got - sent == 150.0)
                .count();
            assert_eq!(spikes, 210, "every 37th train's");
            assert_eq!(lazy.take_fault(), None);
        }
    }

    #[test]
    fn a_fault_deep_in_the_light_series_comes_once_the_replay_reaches_it() {
        // Line 5,000 (a train 380 s in) is no train: the build succeeds; packets in the first
        // seconds find nothing wrong; one 380 s in parses on to it and the element hands out
        // the parse's own error, once. Before, the build failed with it.
        let b = long_bundle("deep-light", 600, None);
        std::fs::write(format!("{}/downlink.light", &*b), long_light(Some(5000))).unwrap();
        let mut r = build(&b, "full");
        let _ = run(&mut r, &[(MS, 1500), (2000 * MS, 1500)], MS, 2100 * MS);
        assert_eq!(r.take_fault(), None);
        let _ = run(&mut r, &[(380_000 * MS, 1500)], MS, 380_100 * MS);
        assert_eq!(
            r.take_fault().expect("reached").to_string(),
            format!(
                "{}/downlink.light: line 5000: expected t_ms base_delay_ms pdo_0 [pdo_1 ...], found 1 fields",
                &*b
            )
        );
        assert_eq!(r.take_fault(), None);
        // In the first stretch, and in heavy mode anywhere: the build's error.
        for (line, mode) in [(50, "full"), (5000, "heavy")] {
            std::fs::write(format!("{}/downlink.light", &*b), long_light(Some(line))).unwrap();
            let err = replay_link(
                &b,
                "downlink",
                mode,
                OutageMode::Buffer,
                QueueSpec::Unbounded,
                1,
            )
            .err()
            .unwrap()
            .to_string();
            assert!(err.ends_with(&format!("downlink.light: line {line}: expected t_ms base_delay_ms pdo_0 [pdo_1 ...], found 1 fields")), "{err}");
        }
    }

    #[test]
    fn heavy_mode_is_the_saturator_with_the_smallest_base_delay() {
        let mut r = replay(crafted(), ReplayMode::Heavy);
        let got = train_delivery(&mut r, 50 * MS, 10);
        let want: Vec<f64> = (0..10).map(|i| 50.0 + 2.0 * i as f64 + 20.0).collect();
        assert_ms(&got, &want);
    }

    #[test]
    fn a_burst_soon_after_the_last_goes_on_with_heavy_opportunities() {
        // 10 packets at 50 ms take the light train of 0 ms (50..59 ms + 22.5); 10 more at 80 ms,
        // 21 ms after the last light opportunity (less than a quarter of the trains' 200 ms),
        // take the heavy ones from 80 ms (80, 82, ... 98), each + the base delay then.
        let mut r = replay(crafted(), ReplayMode::Full);
        let arrivals: Vec<(Nanos, usize)> = (0..20)
            .map(|i| ((if i < 10 { 50 } else { 80 }) * MS, 1500))
            .collect();
        let got: Vec<f64> = run(&mut r, &arrivals, 100_000, 2000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        let mut want: Vec<f64> = (0..10).map(|i| 50.0 + i as f64 + 22.5).collect();
        want.extend((0..10).map(|k| {
            let departure = 80.0 + 2.0 * k as f64;
            departure + 20.0 + 10.0 * departure / 200.0
        }));
        assert_ms(&got, &want);
        assert_eq!(train_spacing_ms(&crafted().light), 200.0);
    }

    #[test]
    fn lone_packets_follow_the_base_delay_series_in_full_mode_only() {
        // A packet every 150 ms: each starts its own train (idle longer than a quarter of the
        // recorded trains' 200 ms); full mode gives the series (interpolated), heavy mode the
        // next 2-ms opportunity + the fixed 20 ms.
        let arrivals: Vec<(Nanos, usize)> = (0..5).map(|i| (i * 150 * MS + MS, 100)).collect();
        let mut full = replay(crafted(), ReplayMode::Full);
        let got: Vec<f64> = run(&mut full, &arrivals, 100_000, 1000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        assert_ms(
            &got,
            &[
                1.0 + 20.05,
                151.0 + 27.55,
                301.0 + 30.0,
                451.0 + 30.0,
                601.0 + 30.0,
            ],
        );
        let mut heavy = replay(crafted(), ReplayMode::Heavy);
        let got: Vec<f64> = run(&mut heavy, &arrivals, 100_000, 1000 * MS)
            .iter()
            .map(|&(t, _)| t as f64 / 1e6)
            .collect();
        assert_ms(&got, &[22.0, 172.0, 322.0, 472.0, 622.0]);
    }

    #[test]
    fn the_size_offset_is_added() {
        let mut trace = crafted();
        trace.offset = vec![(100.0, 0.0), (1500.0, 1.4)];
        let mut r = replay(trace, ReplayMode::Full);
        let got = run(&mut r, &[(MS, 800)], 100_000, 100 * MS);
        assert_eq!(got, vec![(MS + 20_050_000 + 700_000, 800)]);
    }

    #[test]
    fn a_replay_longer_than_the_recording_loops() {
        // 1 s period: a lone packet at 1.250 s meets the train of 200 ms again (base 30 ms);
        // in heavy mode the second loop's last opportunity is at 2000 ms.
        let mut r = replay(crafted(), ReplayMode::Full);
        let got = run(&mut r, &[(1250 * MS, 100)], 100_000, 2000 * MS);
        assert_eq!(got, vec![(1280 * MS, 100)]);
        let mut h = replay(crafted(), ReplayMode::Heavy);
        let got = run(&mut h, &[(1999 * MS + 1, 100)], 100_000, 3000 * MS);
        assert_eq!(got, vec![(2020 * MS, 100)]);
    }

    #[test]
    fn loss_per_window_within_binomial_bounds() {
        let mut trace = crafted();
        trace.loss = vec![
            LossWindow {
                start_ms: 0.0,
                sent: 100,
                lost: 10,
            },
            LossWindow {
                start_ms: 500.0,
                sent: 100,
                lost: 0,
            },
        ];
        let mut r = replay(trace, ReplayMode::Full);
        // 20 loops of 1000 packets in the lossy window's half second, 1000 in the clean one.
        let mut lossy = 0;
        let mut clean = 0;
        let mut out = Vec::new();
        for lap in 0..20u64 {
            for i in 0..2000u64 {
                let t = lap * 1000 * MS + i * MS / 2;
                let before = r.drops().packets;
                r.release(t, &mut out);
                r.accept(Packet::new(vec![0; 100], t));
                if r.drops().packets > before {
                    if i < 1000 {
                        lossy += 1
                    } else {
                        clean += 1
                    }
                }
            }
        }
        // Binomial(20000, 0.1): sd 42.4; 4 sd either side.
        assert!((lossy as f64 - 2000.0).abs() < 4.0 * 42.4, "{lossy}");
        assert_eq!(clean, 0);
    }

    #[test]
    fn an_outage_holds_or_drops() {
        let mut trace = crafted();
        trace.outages = vec![(100.0, 150.0)];
        let arrivals = [(120 * MS, 100), (130 * MS, 100), (160 * MS, 100)];
        let mut held = replay(trace.clone(), ReplayMode::Full);
        let got = run(&mut held, &arrivals, 100_000, 400 * MS);
        // Both buffered packets leave when the outage ends (150 ms), in the first opportunity
        // of one train (base 27.5 ms); the packet at 160 ms finds the link idle and starts a
        // new train (base 28 ms).
        assert_eq!(
            got,
            vec![(177_500_000, 100), (177_500_000, 100), (188 * MS, 100)]
        );
        let mut dropped = Replay::new(
            trace,
            1000.0,
            ReplayMode::Full,
            OutageMode::Drop,
            QueueSpec::Unbounded,
            7,
        )
        .unwrap();
        let got = run(&mut dropped, &arrivals, 100_000, 400 * MS);
        assert_eq!(got, vec![(188 * MS, 100)]);
        assert_eq!(dropped.drops().packets, 2);
    }

    #[test]
    fn a_drop_tail_queue_limits_the_heavy_backlog() {
        let mut r = Replay::new(
            crafted(),
            1000.0,
            ReplayMode::Heavy,
            OutageMode::Buffer,
            QueueSpec::DropTailPackets(5),
            7,
        )
        .unwrap();
        // The first leaves at once (50 ms); five wait for 52..60 ms; the other 14 are dropped.
        let got = train_delivery(&mut r, 50 * MS, 20);
        assert_ms(&got, &[70.0, 72.0, 74.0, 76.0, 78.0, 80.0]);
        assert_eq!(r.drops().packets, 14);
    }
}
