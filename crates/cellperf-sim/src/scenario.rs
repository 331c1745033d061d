//! What a simulation runs, as JSON (the Python front writes it from options or a TOML
//! scenario; docs/simulate.md), and the link model it builds: the emulator's own elements
//! and shared cell (`cellperf_link::spec`), with the same per-user seeds.
//!
//! Topology (seed 001 Fig. 4): each user's fixed host → `wired.hops` wired hops (rate, delay
//! and queue per hop) → the base station's queue for the user → the shared, scheduled air
//! downlink (or the user's own downlink without a cell) → the mobile host; ACKs go back over
//! the user's air uplink, then the same wired hops.
use crate::congestion::Variant;
use crate::tcp::{Recovery, RtoEstimator, RtoTimer, TcpConfig, TimeoutRecovery};
use cellperf_link::cell::{MultiUserLink, SharedCell};
use cellperf_link::element::{secs_to_nanos, Drops, Element, Nanos, Packet, Pipeline};
use cellperf_link::outage::OutageMode;
use cellperf_link::radio_state::{gates, RadioStatesJson};
use cellperf_link::spec::{
    build_link, cell_scheduler, cell_user, handoff_schedule, link_elements, outage_plan, user_seed,
    CellSpec, HandoffsJson, LinkSpec, OutagesJson, QueueJson, RateSpec,
};
use cellperf_link::LinkError;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub users: Vec<UserJson>,
    #[serde(default)]
    pub cell: Option<CellSpec>,
    #[serde(default)]
    pub wired: WiredJson,
    #[serde(default)]
    pub tcp: TcpJson,
    pub duration_s: f64,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub outages: OutagesJson,
    #[serde(default)]
    pub handoffs: Option<HandoffsJson>,
    /// Record cwnd and RTT over time (the tables of `--out`).
    #[serde(default)]
    pub record: bool,
    /// Each user's radio state machine, as `cellperf emulate` has it.
    #[serde(default)]
    pub radio_states: Option<RadioStatesJson>,
}

/// One user's air interface, each direction as `cellperf emulate` describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserJson {
    pub downlink: LinkSpec,
    pub uplink: LinkSpec,
    /// This user's TCP variant, in place of `tcp.variant` (mixed variants in one cell, as
    /// seed 002 §7 compares them).
    #[serde(default)]
    pub tcp_variant: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WiredJson {
    #[serde(default)]
    pub hops: u32,
    #[serde(default = "hundred_mbit")]
    pub rate_bps: f64,
    #[serde(default)]
    pub delay_s: f64,
    #[serde(default)]
    pub queue: QueueJson,
}

impl Default for WiredJson {
    fn default() -> Self {
        WiredJson {
            hops: 0,
            rate_bps: hundred_mbit(),
            delay_s: 0.0,
            queue: QueueJson::Unbounded,
        }
    }
}

fn hundred_mbit() -> f64 {
    100e6
}

/// The TCP of every flow (docs/simulate.md gives the defaults and why).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpJson {
    #[serde(default = "reno")]
    pub variant: String,
    /// Bytes of one data packet on the wire (seed 001: 2000 bit = 250 bytes).
    #[serde(default = "packet_bytes")]
    pub packet_bytes: usize,
    /// Of which headers (not counted in goodput).
    #[serde(default)]
    pub header_bytes: usize,
    #[serde(default = "ack_bytes")]
    pub ack_bytes: usize,
    #[serde(default = "one")]
    pub initial_window: f64,
    /// Segments; absent for none.
    #[serde(default)]
    pub initial_ssthresh: Option<f64>,
    #[serde(default = "receive_window")]
    pub receive_window: u64,
    #[serde(default = "one_s")]
    pub initial_rto_s: f64,
    #[serde(default = "one_s")]
    pub min_rto_s: f64,
    #[serde(default = "sixty_s")]
    pub max_rto_s: f64,
    #[serde(default = "granularity")]
    pub granularity_s: f64,
    /// Delayed-ACK timeout; absent: every segment is acknowledged.
    #[serde(default)]
    pub delayed_ack_s: Option<f64>,
    /// The RTO estimator: `rfc6298` or `classic` (RFC 793, 2·SRTT).
    #[serde(default = "rfc6298")]
    pub rto: String,
    /// The timer runs from the last ACK (`ack`) or the segment's transmission (`segment`).
    #[serde(default = "ack")]
    pub rto_timer: String,
    /// What a timeout resends: `go-back-n` or `one-segment`.
    #[serde(default = "go_back_n")]
    pub timeout_recovery: String,
    /// Loss recovery: `classic` (duplicate ACKs, no SACK) or `linux` (SACK, RACK, PRR, undo).
    #[serde(default = "classic")]
    pub recovery: String,
    /// Grow the window per segment acknowledged (RFC 3465), not per ACK.
    #[serde(default)]
    pub byte_counting: bool,
}

impl Default for TcpJson {
    fn default() -> Self {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

fn reno() -> String {
    "reno".into()
}
fn rfc6298() -> String {
    "rfc6298".into()
}
fn ack() -> String {
    "ack".into()
}
fn go_back_n() -> String {
    "go-back-n".into()
}
fn classic() -> String {
    "classic".into()
}

/// One of `names`, parsed, or an error naming what was given and what is accepted.
fn named<T>(
    what: &str,
    given: &str,
    parse: fn(&str) -> Option<T>,
    names: &[&str],
) -> Result<T, LinkError> {
    parse(given).ok_or_else(|| {
        LinkError::spec(format!(
            "{what} {given:?} is not one of {}",
            names.join(", ")
        ))
    })
}
fn packet_bytes() -> usize {
    250
}
fn ack_bytes() -> usize {
    40
}
fn one() -> f64 {
    1.0
}
fn receive_window() -> u64 {
    1 << 20
}
fn one_s() -> f64 {
    1.0
}
fn sixty_s() -> f64 {
    60.0
}
fn granularity() -> f64 {
    0.001
}

fn positive_seconds(what: &str, s: f64) -> Result<(), LinkError> {
    if s.is_finite() && s > 0.0 && s <= 86_400.0 * 365.0 {
        Ok(())
    } else {
        Err(LinkError::spec(format!(
            "{what} must be a positive number of seconds, got {s}"
        )))
    }
}

fn variant(given: &str) -> Result<Variant, LinkError> {
    named("TCP variant", given, Variant::parse, &Variant::NAMES)
}

impl TcpJson {
    pub fn config(&self) -> Result<TcpConfig, LinkError> {
        let variant = variant(&self.variant)?;
        let rto_estimator = named(
            "RTO estimator",
            &self.rto,
            RtoEstimator::parse,
            &RtoEstimator::NAMES,
        )?;
        let rto_timer = named(
            "RTO timer",
            &self.rto_timer,
            RtoTimer::parse,
            &RtoTimer::NAMES,
        )?;
        let timeout_recovery = named(
            "timeout recovery",
            &self.timeout_recovery,
            TimeoutRecovery::parse,
            &TimeoutRecovery::NAMES,
        )?;
        let recovery = named(
            "loss recovery",
            &self.recovery,
            Recovery::parse,
            &Recovery::NAMES,
        )?;
        if self.packet_bytes < 16 || self.packet_bytes > 65_535 {
            return Err(LinkError::spec(format!(
                "packet size must be 16 to 65535 bytes, got {}",
                self.packet_bytes
            )));
        }
        if self.header_bytes >= self.packet_bytes {
            return Err(LinkError::spec(
                "the header must be smaller than the packet",
            ));
        }
        if self.ack_bytes < 8 || self.ack_bytes > 65_535 {
            return Err(LinkError::spec(format!(
                "ACK size must be 8 to 65535 bytes, got {}",
                self.ack_bytes
            )));
        }
        if !(self.initial_window >= 1.0 && self.initial_window <= 1e6) {
            return Err(LinkError::spec(
                "the initial window must be 1 to 10^6 segments",
            ));
        }
        if let Some(s) = self.initial_ssthresh {
            if s.is_nan() || s < 2.0 {
                return Err(LinkError::spec(
                    "the initial ssthresh must be at least 2 segments",
                ));
            }
        }
        if self.receive_window == 0 {
            return Err(LinkError::spec(
                "the receive window must be at least one segment",
            ));
        }
        positive_seconds("initial RTO", self.initial_rto_s)?;
        positive_seconds("minimum RTO", self.min_rto_s)?;
        positive_seconds("maximum RTO", self.max_rto_s)?;
        positive_seconds("clock granularity", self.granularity_s)?;
        if self.min_rto_s > self.max_rto_s {
            return Err(LinkError::spec("the minimum RTO exceeds the maximum"));
        }
        if let Some(d) = self.delayed_ack_s {
            positive_seconds("delayed-ACK timeout", d)?;
        }
        Ok(TcpConfig {
            variant,
            initial_window: self.initial_window,
            initial_ssthresh: self.initial_ssthresh.unwrap_or(f64::INFINITY),
            receive_window: self.receive_window,
            dupack_threshold: 3,
            initial_rto: secs_to_nanos(self.initial_rto_s),
            min_rto: secs_to_nanos(self.min_rto_s),
            max_rto: secs_to_nanos(self.max_rto_s),
            granularity: secs_to_nanos(self.granularity_s),
            delayed_ack: self.delayed_ack_s.map(secs_to_nanos),
            rto_estimator,
            rto_timer,
            timeout_recovery,
            recovery,
            byte_counting: self.byte_counting,
        })
    }
}

/// Per-user pipelines with each one's next event kept, so that an event touches only the
/// pipelines due at it (the cost of a step does not grow with the number of users).
pub struct Links {
    pipes: Vec<Pipeline>,
    next: Vec<Option<Nanos>>,
}

impl Links {
    pub fn new(pipes: Vec<Pipeline>) -> Self {
        let next = pipes.iter().map(|p| p.next_event()).collect();
        Links { pipes, next }
    }

    pub fn accept(&mut self, user: usize, packet: Packet) {
        self.pipes[user].accept(packet);
        self.next[user] = self.pipes[user].next_event();
    }

    /// Moves every packet due by `now` to `out`, with its user.
    pub fn release(
        &mut self,
        now: Nanos,
        out: &mut Vec<(usize, Packet)>,
        scratch: &mut Vec<Packet>,
    ) {
        for (u, pipe) in self.pipes.iter_mut().enumerate() {
            if self.next[u].is_some_and(|t| t <= now) {
                pipe.release(now, scratch);
                out.extend(scratch.drain(..).map(|p| (u, p)));
                self.next[u] = pipe.next_event();
            }
        }
    }

    pub fn next_event(&self) -> Option<Nanos> {
        self.next.iter().flatten().min().copied()
    }

    pub fn drops(&self) -> Drops {
        self.pipes
            .iter()
            .fold(Drops::default(), |a, p| a.merge(p.drops()))
    }

    /// A fault an element found in its input while running (`Element::take_fault`).
    pub fn take_fault(&mut self) -> Option<LinkError> {
        self.pipes.iter_mut().find_map(|p| p.take_fault())
    }
}

/// The air downlink: a shared, scheduled cell (and its next event), or one link per user.
// One per run: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Downlink {
    Cell(SharedCell, Option<Nanos>),
    Own(Links),
}

impl Downlink {
    pub fn accept(&mut self, user: usize, packet: Packet) {
        match self {
            Downlink::Cell(c, next) => {
                c.accept(user, packet);
                *next = c.next_event();
            }
            Downlink::Own(l) => l.accept(user, packet),
        }
    }

    pub fn release(
        &mut self,
        now: Nanos,
        out: &mut Vec<(usize, Packet)>,
        scratch: &mut Vec<Packet>,
    ) {
        match self {
            Downlink::Cell(c, next) => {
                if next.is_some_and(|t| t <= now) {
                    c.release(now, out);
                    *next = c.next_event();
                }
            }
            Downlink::Own(l) => l.release(now, out, scratch),
        }
    }

    pub fn next_event(&self) -> Option<Nanos> {
        match self {
            Downlink::Cell(_, next) => *next,
            Downlink::Own(l) => l.next_event(),
        }
    }

    pub fn drops(&self) -> Drops {
        match self {
            Downlink::Cell(c, _) => c.drops(),
            Downlink::Own(l) => l.drops(),
        }
    }

    pub fn served_slots(&self) -> Vec<u64> {
        match self {
            Downlink::Cell(c, _) => c.served_slots().to_vec(),
            Downlink::Own(_) => Vec::new(),
        }
    }

    /// A fault found while running (a shared cell replays nothing: none).
    pub fn take_fault(&mut self) -> Option<LinkError> {
        match self {
            Downlink::Cell(..) => None,
            Downlink::Own(l) => l.take_fault(),
        }
    }
}

/// Every link of a run, built.
pub struct Network {
    /// Fixed host → base station, per user.
    pub wired_down: Links,
    pub air_down: Downlink,
    /// Mobile host → air uplink → wired hops → fixed host, per user.
    pub up: Links,
}

impl Network {
    /// A fault an element found in its input while running (a replay's heavy series parsed
    /// as it is reached, `replay_heavy`): the run's error.
    pub fn take_fault(&mut self) -> Option<LinkError> {
        self.wired_down
            .take_fault()
            .or_else(|| self.air_down.take_fault())
            .or_else(|| self.up.take_fault())
    }
}

fn wired_hop(w: &WiredJson) -> LinkSpec {
    LinkSpec {
        rate: RateSpec::Constant { bps: w.rate_bps },
        queue: w.queue.clone(),
        loss: None,
        delay_s: w.delay_s,
        jitter_s: 0.0,
        wander_s: 0.0,
        wander_tau_s: 10.0,
        arq: None,
        frames: None,
    }
}

impl Scenario {
    pub fn from_json(text: &str) -> Result<Scenario, LinkError> {
        let s: Scenario = serde_json::from_str(text)
            .map_err(|e| LinkError::spec(format!("simulation scenario: {e}")))?;
        if s.users.is_empty() {
            return Err(LinkError::spec("the simulation needs at least one user"));
        }
        if s.users.len() > 4096 {
            return Err(LinkError::spec("at most 4096 users"));
        }
        positive_seconds("duration", s.duration_s)?;
        if s.wired.hops > 64 {
            return Err(LinkError::spec("at most 64 wired hops"));
        }
        s.tcp.config()?;
        s.flow_configs()?;
        Ok(s)
    }

    /// Each user's TCP: the scenario's, with the user's own variant where it names one.
    pub fn flow_configs(&self) -> Result<Vec<TcpConfig>, LinkError> {
        let common = self.tcp.config()?;
        self.users
            .iter()
            .map(|u| {
                Ok(match &u.tcp_variant {
                    None => common.clone(),
                    Some(v) => TcpConfig {
                        variant: variant(v)?,
                        ..common.clone()
                    },
                })
            })
            .collect()
    }

    /// Builds every element (all input errors surface here).
    pub fn network(&self) -> Result<Network, LinkError> {
        let handoffs = self
            .handoffs
            .as_ref()
            .map(|h| handoff_schedule(h, self.seed))
            .transpose()?;
        let (plan, mode) = outage_plan(&self.outages, handoffs.clone(), self.seed)?;
        if self.cell.is_some() && mode == OutageMode::Drop && !plan.is_empty() {
            return Err(LinkError::spec(
                "a shared cell supports buffering outages only (drop mode is per-user)",
            ));
        }
        let hop = wired_hop(&self.wired);
        let no_outages = Default::default();
        // Every hop's elements in one flat pipeline (no pipeline per hop to step through).
        let wired = |seed: u64| -> Result<Vec<Box<dyn Element>>, LinkError> {
            let mut elements = Vec::new();
            for h in 0..self.wired.hops {
                let (hop, _) = link_elements(
                    &hop,
                    &no_outages,
                    OutageMode::Buffer,
                    seed ^ h as u64,
                    false,
                )?;
                elements.extend(hop);
            }
            Ok(elements)
        };
        let radio_params = self.radio_states.as_ref().map(|r| r.params()).transpose()?;
        let mut wired_down = Vec::new();
        let mut own_down = Vec::new();
        let mut cell_users = Vec::new();
        let mut up = Vec::new();
        for (i, u) in self.users.iter().enumerate() {
            let (down_seed, up_seed) = (user_seed(self.seed, i, 0), user_seed(self.seed, i, 1));
            let mut to_air = wired(down_seed ^ 0x7769_7265)?;
            let (down, source) = build_link(&u.downlink, &plan, mode, down_seed, false)?;
            match &self.cell {
                Some(_) => cell_users.push(cell_user(&u.downlink, &source, &plan, down_seed)?),
                None => own_down.push(down),
            }
            let (air_up, _) = link_elements(&u.uplink, &plan, mode, up_seed, false)?;
            let mut back: Vec<Box<dyn Element>> = Vec::new();
            // The radio's gates sit where the emulator has them: before each air bottleneck.
            if let Some(params) = radio_params {
                let (down_gate, up_gate, _) = gates(params);
                to_air.push(Box::new(down_gate));
                back.push(Box::new(up_gate));
            }
            wired_down.push(Pipeline::new(to_air));
            back.extend(air_up);
            back.extend(wired(up_seed ^ 0x7769_7265)?);
            up.push(Pipeline::new(back));
        }
        let air_down = match &self.cell {
            None => Downlink::Own(Links::new(own_down)),
            Some(c) => {
                let scheduler = cell_scheduler(c, cell_users.len())?;
                let cell = SharedCell::new(cell_users, scheduler, c.slot_s, handoffs)
                    .channel_only(c.channel_only()?);
                let next = cell.next_event();
                Downlink::Cell(cell, next)
            }
        };
        Ok(Network {
            wired_down: Links::new(wired_down),
            air_down,
            up: Links::new(up),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    #[test]
    fn the_radio_gates_sit_before_the_air_links_and_share_one_state() {
        let json = r#"{"users": [{"downlink": {"rate": {"kind": "constant", "bps": 1e9}},
                                   "uplink": {"rate": {"kind": "constant", "bps": 1e9}}}],
                       "duration_s": 10, "radio_states": {"promotion_s": 1.0, "tail_s": 2.0}}"#;
        let mut net = Scenario::from_json(json).unwrap().network().unwrap();
        // An ACK at 5 s (idle since 2 s) waits for the promotion, to 6 s.
        net.up.accept(0, Packet::new(vec![0; 100], 5 * S));
        assert_eq!(net.up.next_event(), Some(6 * S));
        // Data for the user at 5.5 s joins the same promotion: one state for both directions.
        net.wired_down
            .accept(0, Packet::new(vec![0; 100], 5 * S + S / 2));
        assert_eq!(net.wired_down.next_event(), Some(6 * S));
    }
}
