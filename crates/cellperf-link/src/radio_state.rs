//! The radio state machine (RRC): after idle the first packet waits for a promotion, and a
//! connected terminal in DRX sleeps between on-durations.
//!
//! Every cellular technology since 3G releases the radio after a period without traffic (the
//! inactivity timer, or "tail") and must set it up again before the next packet (the
//! promotion): EV-DO leaves dormant mode, UMTS goes IDLE → CELL_DCH or CELL_FACH → CELL_DCH,
//! LTE RRC_IDLE → RRC_CONNECTED, NR also resumes from RRC_INACTIVE. A connected LTE or NR
//! terminal without traffic for the DRX inactivity timer listens to the downlink only during
//! an on-duration each DRX cycle (3GPP TS 36.321 / 38.321 §5.7), so a downlink packet waits
//! for the next one. UMTS's CELL_FACH carries small amounts of data at a low rate on a shared
//! channel, and moves up to CELL_DCH when a direction's buffer passes its threshold.
//! Parameters and their sources: docs/emulator.md "Radio states".
//!
//! One [`RadioState`] per user is shared by both directions (traffic either way promotes and
//! restarts the timers), which in the emulator run in two threads. The state is three atomic
//! times, each only ever raised (`fetch_max`): a packet costs a few atomic loads and one or
//! two uncontended atomic max operations, no lock. Two threads promoting at the same instant
//! both end up waiting for the later of their two promotion ends, which is what one
//! promotion serving both would give within the microseconds between them.
//!
//! Each direction has a [`RadioGate`] in front of its bottleneck: it holds a packet until the
//! radio can carry it (the promotion's end, the next DRX on-duration, its turn on FACH) and
//! records the activity. Activity is counted at the time a packet leaves the gate (when the
//! radio starts to carry it); a packet queued behind others at the bottleneck is sent later,
//! so under load the timers restart a little early, which changes nothing while packets keep
//! coming, and a sparse packet meets an empty queue.
//!
//! The run starts connected, as if the terminal had just been used at time 0: a run that
//! starts idle would give every test's first connection a promotion.
use crate::cell::MultiUserLink;
use crate::element::{secs_to_nanos, DueQueue, Element, LinkEvent, Nanos, Packet};
use crate::error::LinkError;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// DRX in the connected state (3GPP TS 36.321 / 38.321 §5.7): after `inactivity` without
/// traffic the terminal listens only `on` at the start of each cycle; first `short_cycles`
/// short cycles, then long ones. Cycles start at multiples of their length on the run's
/// clock (the specification's `(SFN × 10 + subframe) mod cycle = offset`, with offset 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drx {
    pub inactivity: Nanos,
    pub on: Nanos,
    pub short_cycle: Nanos,
    pub short_cycles: u32,
    pub long_cycle: Nanos,
}

/// The state between connected and idle: UMTS's CELL_FACH (carries data at `rate_bps`,
/// moves up to DCH when a direction holds more than its threshold) or a state that carries
/// nothing and must be left first (NR's RRC_INACTIVE).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LowState {
    Fach {
        rate_bps: f64,
        up_threshold: usize,
        down_threshold: usize,
    },
    Inactive,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RadioParams {
    /// Idle → connected.
    pub promotion: Nanos,
    /// Connected without traffic this long → the low state (or idle without one).
    pub tail: Nanos,
    /// A downlink packet to an idle terminal first waits for its paging occasion, one per
    /// `paging_cycle` (0: none).
    pub paging_cycle: Nanos,
    /// The low state, how long it lasts without traffic, and its promotion to connected.
    pub low: Option<LowState>,
    pub low_tail: Nanos,
    pub low_promotion: Nanos,
    pub drx: Option<Drx>,
}

/// The state a user's radio is in at an instant (the radio log's `radio_state` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Idle,
    /// Being promoted; connected at the given time.
    Promoting(Nanos),
    Connected,
    /// Connected, in DRX (the downlink waits for an on-duration).
    Drx,
    Fach,
    Inactive,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Promoting(_) => "promoting",
            State::Connected => "connected",
            State::Drx => "drx",
            State::Fach => "fach",
            State::Inactive => "inactive",
        }
    }
}

/// One user's radio, shared by its two directions.
#[derive(Debug)]
pub struct RadioState {
    params: RadioParams,
    /// Last time the radio carried a packet in the connected state (or a promotion ended).
    connected_active: AtomicU64,
    /// Last time FACH carried a packet.
    low_active: AtomicU64,
    /// End of the latest promotion.
    promoted_at: AtomicU64,
}

impl RadioState {
    pub fn new(params: RadioParams) -> Arc<Self> {
        Arc::new(RadioState {
            params,
            connected_active: AtomicU64::new(0),
            low_active: AtomicU64::new(0),
            promoted_at: AtomicU64::new(0),
        })
    }

    pub fn params(&self) -> &RadioParams {
        &self.params
    }

    /// The state at `t`.
    pub fn state_at(&self, t: Nanos) -> State {
        let p = &self.params;
        let promoted = self.promoted_at.load(Ordering::Acquire);
        if t < promoted {
            return State::Promoting(promoted);
        }
        let active = self.connected_active.load(Ordering::Acquire);
        let connected_end = active + p.tail;
        if t < connected_end {
            return match p.drx {
                Some(d) if t >= active + d.inactivity => State::Drx,
                _ => State::Connected,
            };
        }
        let low_end = connected_end.max(self.low_active.load(Ordering::Acquire)) + p.low_tail;
        match p.low {
            Some(LowState::Fach { .. }) if t < low_end => State::Fach,
            Some(LowState::Inactive) if t < low_end => State::Inactive,
            _ => State::Idle,
        }
    }

    /// Starts (or joins) a promotion ending no earlier than `end`; returns its end.
    fn promote(&self, end: Nanos) -> Nanos {
        let end = self.promoted_at.fetch_max(end, Ordering::AcqRel).max(end);
        self.connected_active.fetch_max(end, Ordering::AcqRel);
        end
    }

    fn carried_connected(&self, t: Nanos) {
        self.connected_active.fetch_max(t, Ordering::AcqRel);
    }

    fn carried_low(&self, t: Nanos) {
        self.low_active.fetch_max(t, Ordering::AcqRel);
    }

    /// When a downlink packet at `t`, `active` being the connected state's last activity,
    /// is heard: at `t` inside an on-duration, else at the next cycle's start.
    fn drx_wake(drx: &Drx, active: Nanos, t: Nanos) -> Nanos {
        let sleep_start = active + drx.inactivity;
        let short_end = sleep_start + drx.short_cycle * drx.short_cycles as Nanos;
        let next_on = |cycle: Nanos, t: Nanos| {
            if cycle == 0 || t % cycle < drx.on {
                t
            } else {
                t.div_ceil(cycle) * cycle
            }
        };
        if t < short_end {
            let wake = next_on(drx.short_cycle, t);
            if wake < short_end {
                return wake;
            }
            return next_on(drx.long_cycle, short_end);
        }
        next_on(drx.long_cycle, t)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Downlink,
    Uplink,
}

/// One direction's gate in front of its bottleneck (see the module's comment).
pub struct RadioGate {
    radio: Arc<RadioState>,
    direction: Direction,
    /// When this direction's FACH is free again (its packets are sent one after another).
    fach_free: Nanos,
    /// Release time of the last packet queued (releases never go backwards).
    last_due: Nanos,
    held: DueQueue,
}

impl RadioGate {
    pub fn new(radio: Arc<RadioState>, direction: Direction) -> Self {
        RadioGate {
            radio,
            direction,
            fach_free: 0,
            last_due: 0,
            held: DueQueue::default(),
        }
    }

    /// When the packet of `len` bytes arriving at `t` can go, recording the activity.
    fn due(&mut self, t: Nanos, len: usize) -> Nanos {
        let radio = &*self.radio;
        let p = radio.params;
        let downlink = self.direction == Direction::Downlink;
        match radio.state_at(t) {
            State::Promoting(end) => end,
            State::Connected => {
                radio.carried_connected(t);
                t
            }
            State::Drx => {
                let active = radio.connected_active.load(Ordering::Acquire);
                let due = match (downlink, p.drx) {
                    (true, Some(d)) => RadioState::drx_wake(&d, active, t),
                    // The terminal sends a scheduling request whenever it has data.
                    _ => t,
                };
                radio.carried_connected(due);
                due
            }
            State::Fach => {
                let Some(LowState::Fach {
                    rate_bps,
                    up_threshold,
                    down_threshold,
                }) = p.low
                else {
                    unreachable!("the FACH state exists only with FACH parameters")
                };
                let threshold = if downlink {
                    down_threshold
                } else {
                    up_threshold
                };
                let start = t.max(self.fach_free);
                let backlog = ((start - t) as f64 * rate_bps / 8e9) as usize + len;
                if backlog > threshold {
                    return radio.promote(t + p.low_promotion);
                }
                let due = start + (len as f64 * 8e9 / rate_bps).round() as Nanos;
                self.fach_free = due;
                radio.carried_low(due);
                due
            }
            State::Inactive => radio.promote(t + p.low_promotion),
            State::Idle => {
                let paged = if downlink && p.paging_cycle > 0 {
                    t.div_ceil(p.paging_cycle) * p.paging_cycle
                } else {
                    t
                };
                radio.promote(paged + p.promotion)
            }
        }
    }
}

impl Element for RadioGate {
    fn accept(&mut self, mut packet: Packet) {
        let due = self.due(packet.time, packet.len()).max(self.last_due);
        packet.time = due;
        self.last_due = due;
        self.held.push(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<Packet>) {
        self.held.release_into(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.held.next_due()
    }
}

/// The two gates of one user's radio.
pub fn gates(params: RadioParams) -> (RadioGate, RadioGate, Arc<RadioState>) {
    let radio = RadioState::new(params);
    (
        RadioGate::new(radio.clone(), Direction::Downlink),
        RadioGate::new(radio.clone(), Direction::Uplink),
        radio,
    )
}

/// The radio states as the emulator and simulator specifications give them (one object for
/// every user; docs/emulator.md "Radio states"). DRX is on when `drx_long_cycle_s` > 0.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RadioStatesJson {
    pub promotion_s: f64,
    pub tail_s: f64,
    #[serde(default)]
    pub paging_cycle_s: f64,
    /// `fach`, `inactive`, or absent for none.
    #[serde(default)]
    pub low_state: Option<String>,
    #[serde(default)]
    pub low_tail_s: f64,
    #[serde(default)]
    pub low_promotion_s: f64,
    #[serde(default)]
    pub fach_rate_bps: f64,
    #[serde(default)]
    pub fach_up_bytes: usize,
    #[serde(default)]
    pub fach_down_bytes: usize,
    #[serde(default)]
    pub drx_inactivity_s: f64,
    #[serde(default)]
    pub drx_on_s: f64,
    #[serde(default)]
    pub drx_short_cycle_s: f64,
    #[serde(default)]
    pub drx_short_cycles: u32,
    #[serde(default)]
    pub drx_long_cycle_s: f64,
}

/// The longest timer accepted (an hour): longer is a typo.
const MOST_S: f64 = 3600.0;

fn seconds(what: &str, s: f64) -> Result<Nanos, LinkError> {
    if s.is_finite() && (0.0..=MOST_S).contains(&s) {
        Ok(secs_to_nanos(s))
    } else {
        Err(LinkError::spec(format!(
            "radio states: {what} must be between 0 and {MOST_S} s, got {s}"
        )))
    }
}

impl RadioStatesJson {
    pub fn params(&self) -> Result<RadioParams, LinkError> {
        let low = match self.low_state.as_deref() {
            None => None,
            Some("inactive") => Some(LowState::Inactive),
            Some("fach") => {
                if !(self.fach_rate_bps > 0.0 && self.fach_rate_bps.is_finite()) {
                    return Err(LinkError::spec(
                        "radio states: FACH needs a positive rate (fach_rate_bps)",
                    ));
                }
                Some(LowState::Fach {
                    rate_bps: self.fach_rate_bps,
                    up_threshold: self.fach_up_bytes,
                    down_threshold: self.fach_down_bytes,
                })
            }
            Some(other) => {
                return Err(LinkError::spec(format!(
                    "radio states: low state {other:?} is not fach or inactive"
                )))
            }
        };
        let drx = if self.drx_long_cycle_s > 0.0 {
            let d = Drx {
                inactivity: seconds("DRX inactivity timer", self.drx_inactivity_s)?,
                on: seconds("DRX on-duration", self.drx_on_s)?,
                short_cycle: seconds("short DRX cycle", self.drx_short_cycle_s)?,
                short_cycles: self.drx_short_cycles,
                long_cycle: seconds("long DRX cycle", self.drx_long_cycle_s)?,
            };
            if d.on == 0
                || d.on > d.long_cycle
                || (d.short_cycles > 0 && !(d.on..=d.long_cycle).contains(&d.short_cycle))
            {
                return Err(LinkError::spec(
                    "radio states: DRX needs 0 < on-duration <= short cycle <= long cycle",
                ));
            }
            Some(d)
        } else {
            seconds("long DRX cycle", self.drx_long_cycle_s)?;
            None
        };
        Ok(RadioParams {
            promotion: seconds("promotion", self.promotion_s)?,
            tail: seconds("tail", self.tail_s)?,
            paging_cycle: seconds("paging cycle", self.paging_cycle_s)?,
            low,
            low_tail: seconds("low-state tail", self.low_tail_s)?,
            low_promotion: seconds("low-state promotion", self.low_promotion_s)?,
            drx,
        })
    }
}

/// A direction of every user (a [`MultiUserLink`]) behind each user's radio gate: the
/// emulator's downlink (own links or a shared cell) and uplink.
pub struct Gated {
    gates: Vec<RadioGate>,
    inner: Box<dyn MultiUserLink>,
    scratch: Vec<Packet>,
}

impl Gated {
    pub fn new(gates: Vec<RadioGate>, inner: Box<dyn MultiUserLink>) -> Self {
        Gated {
            gates,
            inner,
            scratch: Vec::new(),
        }
    }
}

impl MultiUserLink for Gated {
    fn accept(&mut self, user: usize, packet: Packet) {
        self.gates[user].accept(packet);
    }

    fn release(&mut self, now: Nanos, out: &mut Vec<(usize, Packet)>) {
        for (user, gate) in self.gates.iter_mut().enumerate() {
            gate.release(now, &mut self.scratch);
            for p in self.scratch.drain(..) {
                self.inner.accept(user, p);
            }
        }
        self.inner.release(now, out);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.gates
            .iter()
            .filter_map(|g| g.next_event())
            .chain(self.inner.next_event())
            .min()
    }

    fn drops(&self) -> crate::element::Drops {
        self.inner.drops()
    }

    fn take_events(&mut self, out: &mut Vec<LinkEvent>) {
        self.inner.take_events(out)
    }

    fn take_fault(&mut self) -> Option<crate::error::LinkError> {
        self.inner.take_fault()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::packet;

    const MS: Nanos = 1_000_000;
    const S: Nanos = 1_000 * MS;

    /// Huang et al. (MobiSys 2012)'s LTE: promotion 260 ms, tail 11.576 s, DRX after 100 ms,
    /// 1-ms on-durations, short cycles of 20 ms (two of them here), long cycles of 40 ms,
    /// idle paging cycle 1.28 s.
    fn lte() -> RadioParams {
        RadioParams {
            promotion: 260 * MS,
            tail: 11_576 * MS,
            paging_cycle: 1_280 * MS,
            low: None,
            low_tail: 0,
            low_promotion: 0,
            drx: Some(Drx {
                inactivity: 100 * MS,
                on: MS,
                short_cycle: 20 * MS,
                short_cycles: 2,
                long_cycle: 40 * MS,
            }),
        }
    }

    /// Passes one packet through `gate` at `t` and returns when it leaves.
    fn send(gate: &mut RadioGate, t: Nanos) -> Nanos {
        gate.accept(packet(100, t));
        let due = gate.next_event().expect("held");
        let mut out = Vec::new();
        gate.release(due, &mut out);
        assert_eq!(out.len(), 1);
        due
    }

    #[test]
    fn lte_promotion_after_the_tail_and_none_before() {
        let (_down, mut up, radio) = gates(lte());
        assert_eq!(radio.state_at(0), State::Connected);
        // Just inside the tail: connected (in DRX), an uplink packet goes at once.
        let t = 11_575 * MS;
        assert_eq!(radio.state_at(t), State::Drx);
        assert_eq!(send(&mut up, t), t);
        // The tail restarted at 11.575 s: idle from 23.151 s.
        let idle = t + 11_576 * MS;
        assert_eq!(radio.state_at(idle - 1), State::Drx);
        assert_eq!(radio.state_at(idle), State::Idle);
        // The uplink packet waits exactly the promotion.
        assert_eq!(send(&mut up, idle), idle + 260 * MS);
        assert_eq!(
            radio.state_at(idle + 100 * MS),
            State::Promoting(idle + 260 * MS)
        );
        assert_eq!(radio.state_at(idle + 260 * MS), State::Connected);
    }

    #[test]
    fn a_downlink_packet_to_an_idle_terminal_waits_for_paging_then_the_promotion() {
        let (mut down, mut up, radio) = gates(lte());
        let t = 20 * S + 5 * MS; // idle since 11.576 s
        assert_eq!(radio.state_at(t), State::Idle);
        // Next paging occasion: 16 × 1.28 s = 20.48 s.
        assert_eq!(send(&mut down, t), 20_480 * MS + 260 * MS);
        // The uplink during the promotion waits for the same end, not a second promotion.
        assert_eq!(send(&mut up, 20_600 * MS), 20_740 * MS);
    }

    #[test]
    fn drx_holds_the_downlink_until_the_next_on_duration() {
        let (mut down, mut up, radio) = gates(lte());
        // Activity at 1 s (uplink; connected). DRX from 1.1 s: short cycles at 1.12 and 1.14 s,
        // long cycles (multiples of 40 ms) from 1.14 s.
        assert_eq!(send(&mut up, S), S);
        // 50 ms after: still within the inactivity timer, no wait.
        assert_eq!(send(&mut down, S + 50 * MS), S + 50 * MS);
        // Activity restarted at 1.05 s: DRX from 1.15 s; short cycles end at 1.19 s.
        assert_eq!(radio.state_at(S + 151 * MS), State::Drx);
        // At 1.1505 s: inside the 1.14-s cycle's on-duration? No (1.14 + 1 ms): next short
        // cycle start 1.16 s.
        let t = S + 150 * MS + MS / 2;
        assert_eq!(send(&mut down, t), S + 160 * MS);
        // Activity at 1.16 s: DRX from 1.26 s, short cycles to 1.30 s; at 1.305 s the long
        // cycle applies: next multiple of 40 ms is 1.32 s.
        assert_eq!(send(&mut down, S + 305 * MS), S + 320 * MS);
        // Activity at 1.32 s: DRX from 1.42 s. 1.4405 s lies in the on-duration of the short
        // cycle starting at 1.44 s: heard at once.
        assert_eq!(
            send(&mut down, S + 440 * MS + MS / 2),
            S + 440 * MS + MS / 2
        );
        // The uplink is never held by DRX.
        let t = S + 700 * MS + 3 * MS;
        assert_eq!(radio.state_at(t), State::Drx);
        assert_eq!(send(&mut up, t), t);
    }

    fn umts() -> RadioParams {
        RadioParams {
            promotion: 2 * S,
            tail: 5 * S,
            paging_cycle: 0,
            low: Some(LowState::Fach {
                rate_bps: 32_000.0,
                up_threshold: 540,
                down_threshold: 475,
            }),
            low_tail: 12 * S,
            low_promotion: 1_500 * MS,
            drx: None,
        }
    }

    #[test]
    fn umts_fach_carries_small_packets_slowly_and_promotes_on_a_full_buffer() {
        let (mut down, mut up, radio) = gates(umts());
        // DCH until 5 s, then FACH until 17 s, then idle.
        assert_eq!(radio.state_at(5 * S - 1), State::Connected);
        assert_eq!(radio.state_at(5 * S), State::Fach);
        assert_eq!(radio.state_at(17 * S - 1), State::Fach);
        assert_eq!(radio.state_at(17 * S), State::Idle);
        // A 100-byte packet on FACH at 6 s: 100 B at 32 kb/s = 25 ms; stays in FACH, whose
        // timer restarts (FACH until 6.025 + 12 s).
        assert_eq!(send(&mut up, 6 * S), 6 * S + 25 * MS);
        assert_eq!(radio.state_at(18 * S), State::Fach);
        // Downlink: two 300-byte packets at once pass the 475-byte threshold: the second
        // promotes to DCH, 1.5 s.
        let t = 10 * S;
        down.accept(packet(300, t));
        down.accept(packet(300, t));
        let mut out = Vec::new();
        down.release(20 * S, &mut out);
        assert_eq!(
            out.iter().map(|p| p.time).collect::<Vec<_>>(),
            vec![t + 75 * MS, t + 1_500 * MS]
        );
        assert_eq!(radio.state_at(t + S), State::Promoting(t + 1_500 * MS));
        assert_eq!(radio.state_at(t + 1_500 * MS), State::Connected);
        // Idle after DCH's 5 s and FACH's 12 s: 2 s promotion.
        let idle = t + 1_500 * MS + 17 * S;
        assert_eq!(radio.state_at(idle), State::Idle);
        assert_eq!(send(&mut up, idle), idle + 2 * S);
    }

    #[test]
    fn nr_resumes_from_inactive_faster_than_from_idle() {
        let p = RadioParams {
            promotion: 100 * MS,
            tail: 10 * S,
            paging_cycle: 0,
            low: Some(LowState::Inactive),
            low_tail: 20 * S,
            low_promotion: 30 * MS,
            drx: None,
        };
        let (_down, mut up, radio) = gates(p);
        assert_eq!(radio.state_at(15 * S), State::Inactive);
        assert_eq!(send(&mut up, 15 * S), 15 * S + 30 * MS);
        // Connected from 15.03 s: inactive from 25.03 s, idle from 45.03 s.
        let idle = 45 * S + 30 * MS;
        assert_eq!(radio.state_at(idle - 1), State::Inactive);
        assert_eq!(send(&mut up, idle), idle + 100 * MS);
    }

    #[test]
    fn bad_radio_states_are_one_line_errors() {
        let ok = RadioStatesJson {
            promotion_s: 0.26,
            tail_s: 11.576,
            ..Default::default()
        };
        assert!(ok.params().is_ok());
        let bad = [
            RadioStatesJson {
                promotion_s: -1.0,
                ..ok.clone()
            },
            RadioStatesJson {
                tail_s: f64::NAN,
                ..ok.clone()
            },
            RadioStatesJson {
                low_state: Some("pch".into()),
                ..ok.clone()
            },
            RadioStatesJson {
                low_state: Some("fach".into()),
                ..ok.clone()
            },
            RadioStatesJson {
                drx_long_cycle_s: 0.04,
                ..ok.clone()
            },
            RadioStatesJson {
                drx_long_cycle_s: 0.04,
                drx_on_s: 0.001,
                drx_short_cycles: 2,
                drx_short_cycle_s: 0.08,
                ..ok.clone()
            },
        ];
        for b in bad {
            let err = b.params().expect_err("invalid").to_string();
            assert!(
                err.starts_with("radio states") || err.contains("radio states"),
                "{err}"
            );
            assert!(!err.contains('\n'));
        }
    }
}
