//! The real-time emulator: packets read from TUN devices go through the cell model on the
//! monotonic clock and are written to the TUN device on the other side.
//!
//! Each user has a namespace (the MN) holding one TUN device and a peer TUN device on the
//! host side (the CN). One thread per direction waits in epoll on its input devices, a timerfd
//! armed at the model's next event (absolute CLOCK_MONOTONIC, no tick, nothing runs when the
//! link is idle) and a stop eventfd. A deadline reached from a sleep of milliseconds (a lone
//! packet's) is approached by waking `SPIN_LEAD` early and polling (`plan_wait`). Every packet
//! that crosses has its TTL / hop limit decremented, as a router's would, and is captured on
//! both sides.
pub mod hop;
pub mod mahimahi_log;
pub mod pcap;
pub mod radio_log;
pub mod tun;

use crate::capacity::CapacityMeter;
use crate::cell::{Independent, MultiUserLink, SharedCell};
use crate::element::{Element, LinkEvent, Nanos};
use crate::error::LinkError;
use crate::outage::OutageMode;
use crate::radio_state::{gates, Gated, RadioStatesJson};
use crate::spec::{
    build_link, cell_scheduler, cell_user, handoff_schedule, meter, outage_plan, user_seed,
    CellSpec, HandoffsJson, LinkSpec, OutagesJson,
};
use hop::{decrement_hop_limit, Hop};
use mahimahi_log::MahimahiLog;
use pcap::PcapWriter;
use radio_log::{RadioLog, UserRadio};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmulatorSpec {
    pub users: Vec<UserSpec>,
    #[serde(default)]
    pub cell: Option<CellSpec>,
    #[serde(default)]
    pub outages: OutagesJson,
    #[serde(default)]
    pub handoffs: Option<HandoffsJson>,
    #[serde(default = "default_technology")]
    pub technology: String,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub pcap_dir: Option<String>,
    #[serde(default)]
    pub radio_log: Option<String>,
    #[serde(default = "default_log_interval")]
    pub radio_log_interval_s: f64,
    /// mahimahi-format event logs of each direction's bottleneck (one user only).
    #[serde(default)]
    pub uplink_log: Option<String>,
    #[serde(default)]
    pub downlink_log: Option<String>,
    /// Each user's radio state machine (promotion, tails, DRX), shared by its two directions.
    #[serde(default)]
    pub radio_states: Option<RadioStatesJson>,
}

fn default_technology() -> String {
    "emulated".into()
}
fn default_log_interval() -> f64 {
    0.1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    /// Path of the MN's network namespace (`/run/netns/NAME`).
    pub mn_netns: Option<String>,
    pub mn_tun: String,
    /// Namespace of the CN side; the caller's when absent.
    #[serde(default)]
    pub cn_netns: Option<String>,
    pub cn_tun: String,
    pub downlink: LinkSpec,
    pub uplink: LinkSpec,
}

/// Release error (actual write time − due time) in 1 µs bins up to 100 ms, of the first
/// packet written for each due time: packets due at the same instant (an ARQ's in-order
/// flush releases hundreds at once) go out back to back, and the later ones of such a burst
/// would measure the TUN's write time per packet, not the timing.
#[derive(Clone)]
struct Histogram {
    bins: Vec<u64>,
    overflow_max: u64,
    count: u64,
}

impl Histogram {
    const BINS: usize = 100_000;

    fn new() -> Self {
        Histogram {
            bins: vec![0; Self::BINS],
            overflow_max: 0,
            count: 0,
        }
    }

    fn record(&mut self, nanos: u64) {
        let us = (nanos / 1000) as usize;
        if us < Self::BINS {
            self.bins[us] += 1;
        } else {
            self.overflow_max = self.overflow_max.max(nanos / 1000);
        }
        self.count += 1;
    }

    fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (us, &n) in self.bins.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(us as f64 + 1.0);
            }
        }
        Some(self.overflow_max as f64)
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DirectionStats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub ttl_expired: u64,
    pub write_errors: u64,
    /// CPU time of the direction's thread.
    pub cpu_s: f64,
    /// Upper edges (µs) of the release-error quantiles p50, p90, p99, p99.9, and the maximum
    /// (the first packet of each due time: see `Histogram`).
    pub release_error_us: [Option<f64>; 5],
    /// The same quantiles of the error measured from the later of the due time and the end of
    /// the write before it in this direction: a packet due while the packets ahead of it (an
    /// ARQ flush) are still being written cannot go out before them, and this is the timing's
    /// error apart from the kernel's cost of writing those.
    pub release_error_after_writes_us: [Option<f64>; 5],
    /// Due times timed (the number of samples behind both sets of quantiles).
    pub due_instants: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    pub duration_s: f64,
    pub downlink: DirectionStats,
    pub uplink: DirectionStats,
    /// Per user: slots the shared cell's scheduler gave it (empty without a shared cell).
    pub served_slots: Vec<u64>,
}

#[derive(Clone, Copy)]
struct Clock {
    mono_zero: u64,
    epoch_zero: u64,
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Clock {
    fn start() -> Self {
        Clock {
            mono_zero: clock_ns(libc::CLOCK_MONOTONIC),
            epoch_zero: clock_ns(libc::CLOCK_REALTIME),
        }
    }
    fn now(&self) -> Nanos {
        clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(self.mono_zero)
    }
    fn epoch(&self, t: Nanos) -> u64 {
        self.epoch_zero + t
    }
}

type SharedPcap = Arc<Mutex<PcapWriter>>;

/// One direction: its input devices (one per user), output devices, model and captures.
struct Direction {
    inputs: Vec<OwnedFd>,
    outputs: Vec<OwnedFd>,
    link: Box<dyn MultiUserLink>,
    capture_in: Vec<Option<SharedPcap>>,
    capture_out: Vec<Option<SharedPcap>>,
    radio_log: Option<RadioLog>,
    cell_slots: Option<Arc<Mutex<Vec<u64>>>>,
    /// The event log's capacity reader until `run` opens the file, then the log.
    event_meter: Option<CapacityMeter>,
    event_log: Option<MahimahiLog>,
}

/// A built, not yet running emulator: the model is loaded and the TUN devices exist.
pub struct Emulator {
    spec: EmulatorSpec,
    stop: OwnedFd,
    parts: Mutex<Option<Prepared>>,
}

struct Prepared {
    downlink: Direction,
    uplink: Direction,
    radio: Option<(Vec<UserRadio>, Option<crate::outage::HandoffSchedule>)>,
}

/// How the event log's header names a direction's rate source and queue.
fn describe_rate(rate: &crate::spec::RateSpec) -> String {
    use crate::spec::RateSpec;
    match rate {
        RateSpec::Constant { bps } => format!("constant {bps} bit/s"),
        RateSpec::Mahimahi { path } => format!("mahimahi trace {path}"),
        RateSpec::Slots {
            path: Some(p),
            slot_s,
            ..
        } => format!("slot rates {p}, slot {slot_s} s"),
        RateSpec::Slots { slot_s, .. } => format!("inline slot rates, slot {slot_s} s"),
        RateSpec::Markov { path: Some(p), .. } => format!("Markov model {p}"),
        RateSpec::Markov { .. } => "inline Markov model".into(),
        RateSpec::Replay {
            bundle,
            direction,
            mode,
            ..
        } => format!("replay of {bundle} ({direction}, {mode})"),
        RateSpec::GilbertElliott {
            good_bps, bad_bps, ..
        } => format!("Gilbert-Elliott {good_bps}/{bad_bps} bit/s"),
    }
}

fn describe_queue(queue: &crate::spec::QueueJson) -> String {
    use crate::spec::QueueJson;
    match queue {
        QueueJson::Unbounded => "infinite".into(),
        QueueJson::Droptail {
            packets: Some(n), ..
        } => format!("droptail [packets={n}]"),
        QueueJson::Droptail { bytes, .. } => format!("droptail [bytes={}]", bytes.unwrap_or(0)),
        QueueJson::Codel {
            target_s,
            interval_s,
            packets,
        } => {
            format!(
                "codel [target={}, interval={}, packets={packets}]",
                target_s * 1e3,
                interval_s * 1e3
            )
        }
    }
}

impl Emulator {
    /// Loads every trace and model (all input errors surface here) and creates the TUN devices.
    pub fn new(spec_json: &str) -> Result<Self, LinkError> {
        let spec: EmulatorSpec = serde_json::from_str(spec_json)
            .map_err(|e| LinkError::spec(format!("emulator specification: {e}")))?;
        if spec.users.is_empty() {
            return Err(LinkError::spec("the emulator needs at least one user"));
        }
        if !(spec.radio_log_interval_s > 0.0) {
            return Err(LinkError::spec("the radio log interval must be positive"));
        }
        let event_logs = spec.uplink_log.is_some() || spec.downlink_log.is_some();
        if event_logs && (spec.users.len() > 1 || spec.cell.is_some()) {
            return Err(LinkError::spec("event logs (mahimahi format) describe one link: they need a single user and no shared cell"));
        }
        let handoffs = spec
            .handoffs
            .as_ref()
            .map(|h| handoff_schedule(h, spec.seed))
            .transpose()?;
        let (plan, mode) = outage_plan(&spec.outages, handoffs.clone(), spec.seed)?;

        let mut down_links = Vec::new();
        let mut up_links = Vec::new();
        let mut radio_users = Vec::new();
        let mut cell_users = Vec::new();
        let (mut down_meter, mut up_meter) = (None, None);
        for (i, u) in spec.users.iter().enumerate() {
            let (mut down, source) = build_link(
                &u.downlink,
                &plan,
                mode,
                user_seed(spec.seed, i, 0),
                spec.downlink_log.is_some(),
            )?;
            let (up, up_source) = build_link(
                &u.uplink,
                &plan,
                mode,
                user_seed(spec.seed, i, 1),
                spec.uplink_log.is_some(),
            )?;
            if i == 0 {
                down_meter = spec.downlink_log.as_ref().map(|_| meter(&source, &plan));
                up_meter = spec.uplink_log.as_ref().map(|_| meter(&up_source, &plan));
            }
            let mut radio = UserRadio::new(meter(&source, &plan), plan.clone());
            // The radio log counts the downlink ARQ's frames in its own intervals.
            let log_bin = spec
                .radio_log
                .as_ref()
                .map(|_| radio_log::interval_ns(spec.radio_log_interval_s));
            if spec.cell.is_some() {
                let mut user = cell_user(&u.downlink, &source, &plan, user_seed(spec.seed, i, 0))?;
                radio.frames = log_bin.and_then(|bin| user.after.count_frames(bin));
                cell_users.push(user);
                if mode == OutageMode::Drop && !plan.is_empty() {
                    return Err(LinkError::spec(
                        "a shared cell supports buffering outages only (drop mode is per-user)",
                    ));
                }
            } else {
                radio.frames = log_bin.and_then(|bin| down.count_frames(bin));
            }
            radio_users.push(radio);
            down_links.push(down);
            up_links.push(up);
        }
        let radio_params = spec.radio_states.as_ref().map(|r| r.params()).transpose()?;
        let (mut down_gates, mut up_gates) = (Vec::new(), Vec::new());
        for user in radio_users.iter_mut() {
            if let Some(params) = radio_params {
                let (down, up, radio) = gates(params);
                down_gates.push(down);
                up_gates.push(up);
                user.radio = Some(radio);
            }
        }
        let (downlink, cell_slots): (Box<dyn MultiUserLink>, _) = match &spec.cell {
            None => (Box::new(Independent::new(down_links)), None),
            Some(c) => {
                let scheduler = cell_scheduler(c, cell_users.len())?;
                let channel_only = c.channel_only()?;
                let slots = Arc::new(Mutex::new(vec![0; cell_users.len()]));
                (
                    Box::new(CountingCell {
                        cell: SharedCell::new(cell_users, scheduler, c.slot_s, handoffs.clone())
                            .channel_only(channel_only),
                        slots: slots.clone(),
                    }),
                    Some(slots),
                )
            }
        };

        let mut mn_fds = Vec::new();
        let mut cn_fds = Vec::new();
        for u in &spec.users {
            let mn = tun::open_tun(&u.mn_tun, u.mn_netns.as_deref())?;
            let cn = tun::open_tun(&u.cn_tun, u.cn_netns.as_deref())?;
            mn_fds.push(mn);
            cn_fds.push(cn);
        }
        let mut uplink: Box<dyn MultiUserLink> = Box::new(Independent::new(up_links));
        let downlink = if radio_params.is_some() {
            uplink = Box::new(Gated::new(up_gates, uplink));
            Box::new(Gated::new(down_gates, downlink))
        } else {
            downlink
        };
        let dup = |fds: &[OwnedFd]| {
            fds.iter()
                .map(|f| f.try_clone())
                .collect::<Result<Vec<_>, _>>()
        };
        let dup_err = |e: std::io::Error| {
            LinkError::System(format!("cannot duplicate a TUN descriptor ({e})"))
        };
        let n = spec.users.len();
        let radio = spec
            .radio_log
            .as_ref()
            .map(|_| (radio_users, handoffs.clone()));
        let downlink = Direction {
            inputs: cn_fds,
            outputs: mn_fds,
            link: downlink,
            capture_in: vec![None; n],
            capture_out: vec![None; n],
            radio_log: None,
            cell_slots,
            event_meter: down_meter,
            event_log: None,
        };
        let uplink = Direction {
            inputs: dup(&downlink.outputs).map_err(dup_err)?,
            outputs: dup(&downlink.inputs).map_err(dup_err)?,
            link: uplink,
            capture_in: vec![None; n],
            capture_out: vec![None; n],
            radio_log: None,
            cell_slots: None,
            event_meter: up_meter,
            event_log: None,
        };
        // SAFETY: eventfd returns a new descriptor or -1 (checked).
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if stop < 0 {
            return Err(LinkError::System(format!(
                "eventfd: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: stop is a fresh descriptor owned by nobody else.
        let stop = unsafe { OwnedFd::from_raw_fd(stop) };
        Ok(Emulator {
            spec,
            stop,
            parts: Mutex::new(Some(Prepared {
                downlink,
                uplink,
                radio,
            })),
        })
    }

    /// Asks a running (or about to run) emulator to return; safe from any thread.
    pub fn stop(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Creates the captures and the radio log, then forwards until `stop`. Runs once.
    pub fn run(&self) -> Result<RunStats, LinkError> {
        let Prepared {
            mut downlink,
            mut uplink,
            radio,
        } = self
            .parts
            .lock()
            .map_err(|_| LinkError::System("emulator state poisoned".into()))?
            .take()
            .ok_or_else(|| LinkError::spec("the emulator has already run"))?;
        let clock = Clock::start();
        let n = self.spec.users.len();
        if let Some(dir) = &self.spec.pcap_dir {
            let cn: SharedPcap =
                Arc::new(Mutex::new(PcapWriter::create(&format!("{dir}/cn.pcap"))?));
            for u in 0..n {
                let name = if n == 1 {
                    format!("{dir}/mn.pcap")
                } else {
                    format!("{dir}/mn{u}.pcap")
                };
                let mn: SharedPcap = Arc::new(Mutex::new(PcapWriter::create(&name)?));
                uplink.capture_in[u] = Some(mn.clone());
                uplink.capture_out[u] = Some(cn.clone());
                downlink.capture_in[u] = Some(cn.clone());
                downlink.capture_out[u] = Some(mn);
            }
        }
        if let (Some(path), Some((users, handoffs))) = (&self.spec.radio_log, radio) {
            downlink.radio_log = Some(RadioLog::create(
                path,
                users,
                handoffs,
                &self.spec.technology,
                radio_log::interval_ns(self.spec.radio_log_interval_s),
                clock.epoch(0),
            )?);
        }
        for (dir, path, name, link) in [
            (
                &mut downlink,
                &self.spec.downlink_log,
                "Downlink",
                &self.spec.users[0].downlink,
            ),
            (
                &mut uplink,
                &self.spec.uplink_log,
                "Uplink",
                &self.spec.users[0].uplink,
            ),
        ] {
            if let (Some(path), Some(meter)) = (path, dir.event_meter.take()) {
                let (rate, queue) = (describe_rate(&link.rate), describe_queue(&link.queue));
                dir.event_log = Some(MahimahiLog::create(
                    path,
                    name,
                    &rate,
                    &queue,
                    meter,
                    clock.epoch(0) / 1_000_000,
                )?);
            }
        }
        let stop = self.stop.as_raw_fd();
        let (down, up) = std::thread::scope(|scope| {
            let d = scope.spawn(|| forward(&mut downlink, clock, stop));
            let u = scope.spawn(|| forward(&mut uplink, clock, stop));
            (d.join(), u.join())
        });
        let panicked = || LinkError::System("an emulator thread panicked".into());
        let mut down = down.map_err(|_| panicked())??;
        let mut up = up.map_err(|_| panicked())??;
        for (stats, dir) in [(&mut down, &downlink), (&mut up, &uplink)] {
            let d = dir.link.drops();
            stats.dropped_packets = d.packets;
            stats.dropped_bytes = d.bytes;
            for c in dir.capture_in.iter().chain(&dir.capture_out).flatten() {
                c.lock().map_err(|_| panicked())?.flush()?;
            }
        }
        if let Some(log) = &mut downlink.radio_log {
            log.write_due(clock.now())?;
            log.flush()?;
        }
        let served_slots = downlink
            .cell_slots
            .as_ref()
            .map(|s| s.lock().map(|v| v.clone()).unwrap_or_default())
            .unwrap_or_default();
        Ok(RunStats {
            duration_s: clock.now() as f64 / 1e9,
            downlink: down,
            uplink: up,
            served_slots,
        })
    }
}

const STOP_TOKEN: u64 = u64::MAX;
const TIMER_TOKEN: u64 = u64::MAX - 1;
/// Packets read from one device before the model is given a chance to release again.
const READ_BATCH: usize = 64;
/// SCHED_FIFO priority of the forwarding threads (low among real-time priorities).
const FORWARDING_PRIORITY: i32 = 10;
/// How long before a deadline reached from a long sleep the thread wakes and polls instead.
/// A thread that slept for milliseconds wakes late by tens of µs or more (the idle vCPU halts,
/// and its timer's wake-up goes through the hypervisor), on top of the timer's own slack; a
/// lone packet on a quiet link meets that at every element that holds it. A busy link's
/// deadlines are closer together than `LONG_SLEEP` and never poll.
const SPIN_LEAD: Nanos = 100_000;
/// Sleeps at least this long end `SPIN_LEAD` early, with polling up to the deadline.
const LONG_SLEEP: Nanos = 2_000_000;

/// How the forwarding loop waits for its next deadline.
#[derive(Debug, PartialEq, Eq)]
enum Wait {
    /// Nothing is due: sleep until a packet or the stop event arrives.
    Idle,
    /// The deadline has passed, or is within `SPIN_LEAD` of a long sleep: poll, don't sleep.
    Poll,
    /// Sleep until the timer fires at `wake`; `spin_for` is the deadline to poll up to then.
    Sleep {
        wake: Nanos,
        spin_for: Option<Nanos>,
    },
}

/// The wait before deadline `next` at `now`, given the deadline the loop is already polling
/// towards (`spin_for`, kept from the sleep that ended early).
fn plan_wait(next: Option<Nanos>, now: Nanos, spin_for: Option<Nanos>) -> Wait {
    let Some(due) = next else {
        return Wait::Idle;
    };
    if due <= now {
        return Wait::Poll;
    }
    if spin_for != Some(due) && due - now < LONG_SLEEP {
        return Wait::Sleep {
            wake: due,
            spin_for: None,
        };
    }
    if due - now <= SPIN_LEAD {
        Wait::Poll
    } else {
        Wait::Sleep {
            wake: due - SPIN_LEAD,
            spin_for: Some(due),
        }
    }
}

fn os_error(what: &str) -> LinkError {
    LinkError::System(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn epoll_add(epoll: RawFd, fd: RawFd, token: u64) -> Result<(), LinkError> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: token,
    };
    // SAFETY: valid descriptors and event struct.
    if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(os_error("epoll_ctl"));
    }
    Ok(())
}

/// Arms timerfd `timer` to fire once at `abs` ns on CLOCK_MONOTONIC (an absolute time: no
/// drift from the time spent between reading the clock and arming).
fn arm_timer(timer: RawFd, abs: u64) -> Result<(), LinkError> {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: (abs / 1_000_000_000) as _,
            tv_nsec: (abs % 1_000_000_000) as _,
        },
    };
    // SAFETY: valid timer descriptor and itimerspec.
    if unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) }
        < 0
    {
        return Err(os_error("timerfd_settime"));
    }
    Ok(())
}

fn record(capture: &Option<SharedPcap>, clock: Clock, packet: &[u8]) -> Result<(), LinkError> {
    if let Some(c) = capture {
        // Stamped under the lock so each file's records stay in time order across threads.
        let mut w = c
            .lock()
            .map_err(|_| LinkError::System("capture lock poisoned".into()))?;
        w.write(clock.epoch(clock.now()), packet)?;
    }
    Ok(())
}

/// The forwarding loop of one direction.
fn forward(dir: &mut Direction, clock: Clock, stop: RawFd) -> Result<DirectionStats, LinkError> {
    // Ask for precise wake-ups: the default 50 µs timer slack would be a quarter of the error budget.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    // A router forwards ahead of ordinary work: real-time priority keeps release times exact
    // when the applications under test load every core. The loop blocks in epoll_wait, so it
    // cannot starve the machine. Without the privilege the thread stays at normal priority.
    let param = libc::sched_param {
        sched_priority: FORWARDING_PRIORITY,
    };
    // SAFETY: pid 0 is the calling thread; param is valid.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    // SAFETY: plain syscalls; results checked.
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epoll < 0 {
        return Err(os_error("epoll_create1"));
    }
    // SAFETY: fresh descriptor.
    let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
    // SAFETY: plain syscall; result checked.
    let timer = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if timer < 0 {
        return Err(os_error("timerfd_create"));
    }
    // SAFETY: fresh descriptor.
    let timer = unsafe { OwnedFd::from_raw_fd(timer) };
    epoll_add(epoll.as_raw_fd(), stop, STOP_TOKEN)?;
    epoll_add(epoll.as_raw_fd(), timer.as_raw_fd(), TIMER_TOKEN)?;
    for (user, fd) in dir.inputs.iter().enumerate() {
        epoll_add(epoll.as_raw_fd(), fd.as_raw_fd(), user as u64)?;
    }

    let mut stats = DirectionStats::default();
    let mut errors = Histogram::new();
    let mut errors_after_writes = Histogram::new();
    // When the last write in this direction returned.
    let mut written: Nanos = 0;
    // The due time whose first packet's error is recorded (`Histogram`).
    let mut timed: Option<Nanos> = None;
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::new();
    let mut events: Vec<LinkEvent> = Vec::new();
    let mut ready = [libc::epoll_event { events: 0, u64: 0 }; 16];
    let mut armed: Option<Nanos> = None;
    // The deadline this thread woke early for and polls towards (`plan_wait`).
    let mut spin_for: Option<Nanos> = None;
    let mut stopping = false;
    loop {
        let now = clock.now();
        dir.link.release(now, &mut out);
        for (user, p) in out.drain(..) {
            // SAFETY: writes p.data from a valid buffer to an open TUN descriptor.
            let n = unsafe {
                libc::write(
                    dir.outputs[user].as_raw_fd(),
                    p.data.as_ptr().cast(),
                    p.data.len(),
                )
            };
            let done = clock.now();
            if timed != Some(p.time) {
                errors.record(done.saturating_sub(p.time));
                errors_after_writes.record(done.saturating_sub(p.time.max(written)));
                timed = Some(p.time);
            }
            written = done;
            if n < 0 {
                stats.write_errors += 1;
                continue;
            }
            stats.packets_out += 1;
            stats.bytes_out += p.data.len() as u64;
            record(&dir.capture_out[user], clock, &p.data)?;
        }
        if let Some(fault) = dir.link.take_fault() {
            // The other direction's thread ends too (the stop event stays set).
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a valid u64 to the emulator's eventfd.
            unsafe { libc::write(stop, (&one as *const u64).cast(), 8) };
            return Err(fault);
        }
        if let Some(log) = &mut dir.radio_log {
            log.write_due(now)?;
        }
        if let Some(log) = &mut dir.event_log {
            dir.link.take_events(&mut events);
            if stopping {
                log.finish(now, events.drain(..))?;
            } else {
                log.write_until(now, events.drain(..))?;
            }
        }
        if stopping {
            // SAFETY: plain syscall on our own thread's clock.
            stats.cpu_s = clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) as f64 / 1e9;
            let quantiles = [0.5, 0.9, 0.99, 0.999, 1.0];
            stats.release_error_us = quantiles.map(|q| errors.quantile_us(q));
            stats.release_error_after_writes_us =
                quantiles.map(|q| errors_after_writes.quantile_us(q));
            stats.due_instants = errors.count;
            return Ok(stats);
        }
        let next = [
            dir.link.next_event(),
            dir.radio_log.as_ref().map(|l| l.due()),
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout = match plan_wait(next, clock.now(), spin_for) {
            Wait::Idle => -1,
            Wait::Poll => 0,
            Wait::Sleep {
                wake: t,
                spin_for: s,
            } => {
                spin_for = s;
                if armed != Some(t) {
                    arm_timer(timer.as_raw_fd(), clock.mono_zero + t)?;
                    armed = Some(t);
                }
                -1
            }
        };
        // SAFETY: events is a valid buffer of the given length.
        let n = unsafe {
            libc::epoll_wait(
                epoll.as_raw_fd(),
                ready.as_mut_ptr(),
                ready.len() as i32,
                timeout,
            )
        };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(os_error("epoll_wait"));
        }
        for ev in &ready[..n as usize] {
            match ev.u64 {
                // One more pass releases what is due by now, then the loop returns.
                STOP_TOKEN => stopping = true,
                TIMER_TOKEN => {
                    let mut expirations = 0u64;
                    // SAFETY: reads 8 bytes into a u64 (drains the timer).
                    unsafe {
                        libc::read(timer.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8)
                    };
                    armed = None;
                }
                token => {
                    let user = token as usize;
                    let fd = dir.inputs[user].as_raw_fd();
                    for _ in 0..READ_BATCH {
                        // SAFETY: reads into a valid buffer of its length.
                        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                        if r <= 0 {
                            break;
                        }
                        let t = clock.now();
                        let data = &mut buf[..r as usize];
                        stats.packets_in += 1;
                        stats.bytes_in += r as u64;
                        record(&dir.capture_in[user], clock, data)?;
                        if decrement_hop_limit(data) == Hop::Expired {
                            stats.ttl_expired += 1;
                            continue;
                        }
                        dir.link
                            .accept(user, crate::element::Packet::new(data.to_vec(), t));
                    }
                }
            }
        }
    }
}

/// The shared cell plus a copy of its per-user slot counts readable after the run.
struct CountingCell {
    cell: SharedCell,
    slots: Arc<Mutex<Vec<u64>>>,
}

impl MultiUserLink for CountingCell {
    fn accept(&mut self, user: usize, packet: crate::element::Packet) {
        self.cell.accept(user, packet)
    }
    fn release(&mut self, now: Nanos, out: &mut Vec<(usize, crate::element::Packet)>) {
        self.cell.release(now, out);
        if let Ok(mut s) = self.slots.lock() {
            s.copy_from_slice(self.cell.served_slots());
        }
    }
    fn next_event(&self) -> Option<Nanos> {
        self.cell.next_event()
    }
    fn drops(&self) -> crate::element::Drops {
        self.cell.drops()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn a_long_sleep_ends_early_and_polls_up_to_its_deadline() {
        let due = 20 * MS;
        let early = due - SPIN_LEAD;
        assert_eq!(
            plan_wait(Some(due), 0, None),
            Wait::Sleep {
                wake: early,
                spin_for: Some(due)
            }
        );
        // Woken by the timer (or a little late): poll, whatever is left of the lead.
        assert_eq!(plan_wait(Some(due), early, Some(due)), Wait::Poll);
        assert_eq!(plan_wait(Some(due), due - 1, Some(due)), Wait::Poll);
        assert_eq!(plan_wait(Some(due), due, Some(due)), Wait::Poll);
        // Woken early by a packet, less than a long sleep before the deadline: still early.
        assert_eq!(
            plan_wait(Some(due), due - MS, Some(due)),
            Wait::Sleep {
                wake: early,
                spin_for: Some(due)
            }
        );
    }

    #[test]
    fn close_deadlines_sleep_to_the_deadline_without_polling() {
        // A busy link's bottleneck events, 1-ms frames: exact timer, no polling.
        for gap in [1, 120_000, MS, LONG_SLEEP - 1] {
            assert_eq!(
                plan_wait(Some(5 * MS + gap), 5 * MS, None),
                Wait::Sleep {
                    wake: 5 * MS + gap,
                    spin_for: None
                }
            );
        }
        // A new, nearer deadline than the one being polled towards is not polled for.
        assert_eq!(
            plan_wait(Some(5 * MS + 500_000), 5 * MS, Some(30 * MS)),
            Wait::Sleep {
                wake: 5 * MS + 500_000,
                spin_for: None
            }
        );
    }

    #[test]
    fn past_deadlines_poll_and_no_deadline_sleeps_until_a_packet() {
        assert_eq!(plan_wait(Some(3 * MS), 3 * MS, None), Wait::Poll);
        assert_eq!(plan_wait(Some(3 * MS), 4 * MS, None), Wait::Poll);
        assert_eq!(plan_wait(None, 4 * MS, Some(3 * MS)), Wait::Idle);
    }
}
