//! The link description the emulator (and any other driver) is built from, as JSON, and the
//! functions that turn it into elements. The Python front writes this JSON from the command
//! line and the profiles; the format is documented in `docs/emulator.md`.
use crate::arq::{Arq, ArqParams};
use crate::capacity::{
    two_state_model_json, Capacity, CapacityMeter, MahimahiTrace, MarkovRates, SlotRates,
};
use crate::cell::CellUser;
use crate::delay::{Delay, Wander};
use crate::element::{secs_to_nanos, Element, Pipeline};
use crate::error::LinkError;
use crate::frames::{FrameParams, UplinkFrames};
use crate::loss::{Loss, LossSpec};
use crate::outage::{
    Handoff, HandoffSchedule, OutageClipped, OutageMode, OutagePlan, RandomHandoffs, RandomOutages,
};
use crate::queue::{Queue, QueueSpec};
use crate::random::SeededRng;
use crate::server::RateServer;
use cellperf_channel::{Discipline, SlotScheduler};
use serde::Deserialize;

/// One direction of one user's link.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub rate: RateSpec,
    #[serde(default)]
    pub queue: QueueJson,
    #[serde(default)]
    pub loss: Option<LossJson>,
    #[serde(default)]
    pub delay_s: f64,
    #[serde(default)]
    pub jitter_s: f64,
    /// The base delay's slow wander: standard deviation and correlation time (`delay::Wander`).
    #[serde(default)]
    pub wander_s: f64,
    #[serde(default = "ten")]
    pub wander_tau_s: f64,
    /// Link-layer retransmission (HARQ then RLP/RLC ARQ) after the bottleneck.
    #[serde(default)]
    pub arq: Option<ArqJson>,
    /// Sending only in granted frames (the uplink's MAC).
    #[serde(default)]
    pub frames: Option<FramesJson>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArqJson {
    pub block_error: f64,
    #[serde(default)]
    pub harq_error: Option<f64>,
    #[serde(default)]
    pub harq_retries: u32,
    #[serde(default)]
    pub harq_rtt_s: f64,
    #[serde(default)]
    pub arq_retries: u32,
    #[serde(default)]
    pub arq_delay_s: f64,
    /// Deep fades (correlated errors): mean interval and mean duration, 0 for none.
    #[serde(default)]
    pub fade_every_s: f64,
    #[serde(default)]
    pub fade_s: f64,
    #[serde(default = "one")]
    pub fade_error: f64,
    /// Transport block period (a TTI or slot): packets in one period share a HARQ chain; 0:
    /// each packet its own block.
    #[serde(default)]
    pub block_s: f64,
}

fn one() -> f64 {
    1.0
}

fn ten() -> f64 {
    10.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FramesJson {
    pub frame_s: f64,
    #[serde(default)]
    pub frame_bytes: usize,
    #[serde(default)]
    pub grant_s: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RateSpec {
    Constant {
        bps: f64,
    },
    /// A mahimahi delivery-opportunity trace file.
    Mahimahi {
        path: String,
    },
    /// Per-slot rates (bit/s) or, with `state_rates_bps`, state indices, from a file or inline.
    Slots {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        rates_bps: Option<Vec<f64>>,
        slot_s: f64,
        #[serde(default)]
        state_rates_bps: Option<Vec<f64>>,
    },
    /// A Markov rate model (the format `cellperf channel` writes), from a file or inline.
    Markov {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        model: Option<serde_json::Value>,
    },
    /// One direction of a recorded link (a bundle folder, `replay.rs`): it replaces the
    /// bottleneck, loss, outages and delay; the queue applies to its heavy stretches.
    Replay {
        bundle: String,
        direction: String,
        #[serde(default = "full_replay")]
        mode: String,
        #[serde(default)]
        outage_mode: ModeJson,
    },
    /// Seed 001's two-state channel: Good/Bad rates, transition rates per second.
    GilbertElliott {
        good_bps: f64,
        bad_bps: f64,
        good_to_bad_per_s: f64,
        bad_to_good_per_s: f64,
        slot_s: f64,
    },
}

fn full_replay() -> String {
    "full".into()
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum QueueJson {
    #[default]
    Unbounded,
    Droptail {
        #[serde(default)]
        packets: Option<usize>,
        #[serde(default)]
        bytes: Option<usize>,
    },
    Codel {
        #[serde(default = "codel_target")]
        target_s: f64,
        #[serde(default = "codel_interval")]
        interval_s: f64,
        #[serde(default = "codel_limit")]
        packets: usize,
    },
}

fn codel_target() -> f64 {
    0.005
}
fn codel_interval() -> f64 {
    0.100
}
fn codel_limit() -> usize {
    1000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossJson {
    Iid {
        p: f64,
    },
    GilbertElliott {
        p: f64,
        r: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutagesJson {
    /// (start, duration) in seconds from the start of the run.
    #[serde(default)]
    pub scheduled: Vec<(f64, f64)>,
    #[serde(default)]
    pub random: Option<RandomOutagesJson>,
    #[serde(default)]
    pub mode: ModeJson,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomOutagesJson {
    pub mean_interval_s: f64,
    pub mean_duration_s: f64,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeJson {
    #[default]
    Buffer,
    Drop,
}

impl ModeJson {
    pub fn outage_mode(self) -> OutageMode {
        match self {
            ModeJson::Buffer => OutageMode::Buffer,
            ModeJson::Drop => OutageMode::Drop,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum HandoffsJson {
    Listed(Vec<HandoffJson>),
    Random {
        mean_interval_s: f64,
        inter_bs_fraction: f64,
        inter_bs_outage_s: f64,
        inter_sector_outage_s: f64,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffJson {
    pub time_s: f64,
    pub bs_id: String,
    pub sector_id: String,
    #[serde(default)]
    pub outage_s: f64,
}

/// Capacity whose parsed inputs (trace, model) are kept so that independent streams over the
/// same capacity can be made: one for the server, one for the radio log's meter.
#[derive(Clone)]
pub enum RateSource {
    Mahimahi(MahimahiTrace),
    Slots(SlotRates),
    Markov(cellperf_channel::MarkovModel, u64),
}

impl RateSource {
    pub fn load(spec: &RateSpec, seed: u64) -> Result<Self, LinkError> {
        Ok(match spec {
            RateSpec::Constant { bps } => RateSource::Slots(SlotRates::constant(*bps)?),
            RateSpec::Mahimahi { path } => RateSource::Mahimahi(MahimahiTrace::from_file(path)?),
            RateSpec::Replay {
                bundle, direction, ..
            } => RateSource::Mahimahi(crate::replay::heavy_trace(bundle, direction)?),
            RateSpec::Slots {
                path,
                rates_bps,
                slot_s,
                state_rates_bps,
            } => match (path, rates_bps) {
                (Some(p), None) => RateSource::Slots(SlotRates::from_file(
                    p,
                    *slot_s,
                    state_rates_bps.as_deref(),
                )?),
                (None, Some(r)) => {
                    RateSource::Slots(SlotRates::new(*slot_s, r.clone(), "inline slot rates")?)
                }
                _ => {
                    return Err(LinkError::spec(
                        "a slot-rate link needs exactly one of a trace file or inline rates",
                    ))
                }
            },
            RateSpec::Markov { path, model } => {
                let (text, name) =
                    match (path, model) {
                        (Some(p), None) => (
                            std::fs::read_to_string(p).map_err(|e| {
                                LinkError::file(p, format!("cannot read the Markov model ({e})"))
                            })?,
                            p.as_str(),
                        ),
                        (None, Some(m)) => (m.to_string(), "inline Markov model"),
                        _ => return Err(LinkError::spec(
                            "a Markov link needs exactly one of a model file or an inline model",
                        )),
                    };
                let model = cellperf_channel::MarkovModel::from_json(&text)
                    .map_err(|e| LinkError::file(name, e.to_string()))?;
                check_positive_capacity(&model.rates_bps(), name)?;
                RateSource::Markov(model, seed)
            }
            RateSpec::GilbertElliott {
                good_bps,
                bad_bps,
                good_to_bad_per_s,
                bad_to_good_per_s,
                slot_s,
            } => {
                let ok = |x: f64| x.is_finite() && x >= 0.0;
                if !(ok(*good_bps)
                    && ok(*bad_bps)
                    && ok(*good_to_bad_per_s)
                    && ok(*bad_to_good_per_s)
                    && *slot_s > 0.0)
                {
                    return Err(LinkError::spec("Gilbert–Elliott rate channel: rates, transition rates and slot must be non-negative numbers (slot > 0)"));
                }
                check_positive_capacity(&[*good_bps, *bad_bps], "Gilbert–Elliott rate channel")?;
                // Continuous-time transition rates become per-slot switching probabilities.
                let p = |rate: f64| 1.0 - (-rate * slot_s).exp();
                let json = two_state_model_json(
                    *good_bps,
                    *bad_bps,
                    p(*good_to_bad_per_s),
                    p(*bad_to_good_per_s),
                    *slot_s,
                );
                let model = cellperf_channel::MarkovModel::from_json(&json)
                    .map_err(|e| LinkError::spec(format!("Gilbert–Elliott rate channel: {e}")))?;
                RateSource::Markov(model, seed)
            }
        })
    }

    pub fn stream(&self) -> Box<dyn Capacity> {
        match self {
            RateSource::Mahimahi(t) => Box::new(t.clone()),
            RateSource::Slots(s) => Box::new(s.clone()),
            RateSource::Markov(m, seed) => Box::new(MarkovRates::new(m, *seed)),
        }
    }
}

fn check_positive_capacity(rates: &[f64], name: &str) -> Result<(), LinkError> {
    if rates.iter().all(|&r| !(r > 0.0)) {
        return Err(LinkError::file(
            name,
            "every state has rate 0, so the link could never deliver",
        ));
    }
    Ok(())
}

pub fn queue_spec(q: &QueueJson) -> Result<QueueSpec, LinkError> {
    Ok(match *q {
        QueueJson::Unbounded => QueueSpec::Unbounded,
        QueueJson::Droptail {
            packets: Some(n),
            bytes: None,
        } if n > 0 => QueueSpec::DropTailPackets(n),
        QueueJson::Droptail {
            packets: None,
            bytes: Some(n),
        } if n > 0 => QueueSpec::DropTailBytes(n),
        QueueJson::Droptail { .. } => {
            return Err(LinkError::spec(
                "a drop-tail queue needs exactly one positive limit, packets=N or bytes=N",
            ))
        }
        QueueJson::Codel {
            target_s,
            interval_s,
            packets,
        } => {
            if !(target_s > 0.0 && interval_s > 0.0 && packets > 0) {
                return Err(LinkError::spec(
                    "CoDel needs a positive target, interval and packet limit",
                ));
            }
            QueueSpec::CoDel {
                target: secs_to_nanos(target_s),
                interval: secs_to_nanos(interval_s),
                limit_packets: packets,
            }
        }
    })
}

pub fn loss_spec(l: &LossJson) -> Result<LossSpec, LinkError> {
    let prob = |x: f64| (0.0..=1.0).contains(&x);
    Ok(match *l {
        LossJson::Iid { p } if prob(p) => LossSpec::Iid { p },
        LossJson::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
        } if [p, r, loss_good, loss_bad].iter().all(|&x| prob(x)) => LossSpec::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
        },
        _ => {
            return Err(LinkError::spec(
                "loss probabilities must lie between 0 and 1",
            ))
        }
    })
}

fn check_seconds(what: &str, s: f64) -> Result<(), LinkError> {
    if s.is_finite() && s >= 0.0 {
        Ok(())
    } else {
        Err(LinkError::spec(format!(
            "{what} must be a non-negative number of seconds, got {s}"
        )))
    }
}

pub fn outage_plan(
    outages: &OutagesJson,
    handoffs: Option<HandoffSchedule>,
    seed: u64,
) -> Result<(OutagePlan, OutageMode), LinkError> {
    for &(s, d) in &outages.scheduled {
        check_seconds("outage start", s)?;
        check_seconds("outage duration", d)?;
    }
    let scheduled: Vec<_> = outages
        .scheduled
        .iter()
        .map(|&(s, d)| (secs_to_nanos(s), secs_to_nanos(d)))
        .collect();
    let random = match &outages.random {
        None => None,
        Some(r) => {
            if !(r.mean_interval_s > 0.0 && r.mean_duration_s > 0.0) {
                return Err(LinkError::spec(
                    "random outages need a positive mean interval and mean duration",
                ));
            }
            Some(RandomOutages {
                rng: SeededRng::new(seed ^ 0x6f75_7461_6765),
                mean_interval: secs_to_nanos(r.mean_interval_s),
                mean_duration: secs_to_nanos(r.mean_duration_s),
                last_end: 0,
            })
        }
    };
    Ok((
        OutagePlan::new(&scheduled, random, handoffs),
        outages.mode.outage_mode(),
    ))
}

pub fn handoff_schedule(h: &HandoffsJson, seed: u64) -> Result<HandoffSchedule, LinkError> {
    Ok(match h {
        HandoffsJson::Listed(list) => {
            let mut out = Vec::with_capacity(list.len());
            for h in list {
                check_seconds("handoff time", h.time_s)?;
                check_seconds("handoff outage", h.outage_s)?;
                out.push(Handoff {
                    at: secs_to_nanos(h.time_s),
                    bs_id: h.bs_id.clone(),
                    sector_id: h.sector_id.clone(),
                    outage: secs_to_nanos(h.outage_s),
                });
            }
            HandoffSchedule::listed(out)
        }
        HandoffsJson::Random {
            mean_interval_s,
            inter_bs_fraction,
            inter_bs_outage_s,
            inter_sector_outage_s,
        } => {
            if !(*mean_interval_s > 0.0) || !(0.0..=1.0).contains(inter_bs_fraction) {
                return Err(LinkError::spec("random handoffs need a positive mean interval and an inter-BS fraction in [0, 1]"));
            }
            check_seconds("handoff outage", *inter_bs_outage_s)?;
            check_seconds("handoff outage", *inter_sector_outage_s)?;
            HandoffSchedule::Random(RandomHandoffs {
                rng: SeededRng::new(seed ^ 0x6861_6e64_6f66),
                mean_interval: secs_to_nanos(*mean_interval_s),
                inter_bs_fraction: *inter_bs_fraction,
                inter_bs_outage: secs_to_nanos(*inter_bs_outage_s),
                inter_sector_outage: secs_to_nanos(*inter_sector_outage_s),
                bs: 1,
                sector: 1,
                last: 0,
            })
        }
    })
}

pub fn arq_params(a: &ArqJson) -> Result<ArqParams, LinkError> {
    let harq_error = a.harq_error.unwrap_or(a.block_error);
    if ![a.block_error, harq_error, a.fade_error]
        .iter()
        .all(|p| (0.0..=1.0).contains(p))
    {
        return Err(LinkError::spec(format!(
            "ARQ error probabilities must lie between 0 and 1, got {} and {harq_error}",
            a.block_error
        )));
    }
    check_seconds("HARQ round trip", a.harq_rtt_s)?;
    check_seconds("ARQ status delay", a.arq_delay_s)?;
    check_seconds("fade interval", a.fade_every_s)?;
    check_seconds("fade duration", a.fade_s)?;
    check_seconds("transport block period", a.block_s)?;
    if a.harq_retries > 64 || a.arq_retries > 64 {
        return Err(LinkError::spec(
            "ARQ and HARQ retry limits must be at most 64",
        ));
    }
    Ok(ArqParams {
        block_error: a.block_error,
        harq_error,
        harq_retries: a.harq_retries,
        harq_rtt: secs_to_nanos(a.harq_rtt_s),
        arq_retries: a.arq_retries,
        arq_delay: secs_to_nanos(a.arq_delay_s),
        fade_every: secs_to_nanos(a.fade_every_s),
        fade_mean: secs_to_nanos(a.fade_s),
        fade_error: a.fade_error,
        block: secs_to_nanos(a.block_s),
    })
}

pub fn frame_params(f: &FramesJson) -> Result<FrameParams, LinkError> {
    // Below 0.1 ms a frame is no longer a radio frame, and the emulator would wake per frame.
    if !(f.frame_s.is_finite() && f.frame_s >= 1e-4 && f.frame_s <= 1.0) {
        return Err(LinkError::spec(format!(
            "uplink frame length must be between 0.1 ms and 1 s, got {} s",
            f.frame_s
        )));
    }
    check_seconds("grant delay", f.grant_s)?;
    Ok(FrameParams {
        frame: secs_to_nanos(f.frame_s),
        frame_bytes: f.frame_bytes,
        grant_delay: secs_to_nanos(f.grant_s),
    })
}

/// The elements after the bottleneck: loss, link-layer retransmission, uplink frames, delay.
pub fn after_bottleneck(spec: &LinkSpec, seed: u64) -> Result<Vec<Box<dyn Element>>, LinkError> {
    check_seconds("delay", spec.delay_s)?;
    check_seconds("jitter", spec.jitter_s)?;
    check_seconds("delay wander", spec.wander_s)?;
    if !(spec.wander_tau_s.is_finite() && (0.1..=86_400.0).contains(&spec.wander_tau_s)) {
        return Err(LinkError::spec(format!(
            "delay wander time must be between 0.1 s and a day, got {} s",
            spec.wander_tau_s
        )));
    }
    let mut elements: Vec<Box<dyn Element>> = Vec::new();
    if let Some(l) = &spec.loss {
        elements.push(Box::new(Loss::new(loss_spec(l)?, seed ^ 0x6c6f_7373)));
    }
    if let Some(a) = &spec.arq {
        elements.push(Box::new(Arq::new(arq_params(a)?, seed ^ 0x6172_7121)));
    }
    if let Some(f) = &spec.frames {
        elements.push(Box::new(UplinkFrames::new(frame_params(f)?)));
    }
    if spec.delay_s > 0.0 || spec.jitter_s > 0.0 || spec.wander_s > 0.0 {
        let wander = Wander {
            sd: secs_to_nanos(spec.wander_s),
            tau: secs_to_nanos(spec.wander_tau_s),
        };
        let delay = Delay::new(
            secs_to_nanos(spec.delay_s),
            secs_to_nanos(spec.jitter_s),
            seed ^ 0x6a69_7474,
        );
        elements.push(Box::new(delay.with_wander(wander, seed ^ 0x7761_6e64)));
    }
    Ok(elements)
}

/// The seed of one user's direction (0 downlink, 1 uplink) from the run's seed: the emulator
/// and the simulator derive it the same way, so the same seed gives the same channels.
pub fn user_seed(seed: u64, user: usize, direction: u64) -> u64 {
    seed ^ ((user as u64 * 2 + direction + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// What a shared cell serves: the scheduler, PF's α and the slot length.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    /// `pf` or `rr`.
    pub scheduler: String,
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    #[serde(default = "default_slot")]
    pub slot_s: f64,
    /// What the scheduler sees: `backlog` (users with data queued, PF averaging what was
    /// carried) or `channel` (the channel reports alone, as under full buffer).
    #[serde(default = "default_scheduling")]
    pub scheduling: String,
}

fn default_scheduling() -> String {
    "backlog".into()
}

/// The accepted values of [`CellSpec::scheduling`].
pub const SCHEDULING_NAMES: [&str; 2] = ["backlog", "channel"];

impl CellSpec {
    /// Whether the scheduler decides from the channel alone (`scheduling = "channel"`).
    pub fn channel_only(&self) -> Result<bool, LinkError> {
        match self.scheduling.as_str() {
            "backlog" => Ok(false),
            "channel" => Ok(true),
            other => Err(LinkError::spec(format!(
                "cell scheduling {other:?} is not one of {}",
                SCHEDULING_NAMES.join(", ")
            ))),
        }
    }
}

fn default_alpha() -> f64 {
    cellperf_channel::DEFAULT_ALPHA
}
fn default_slot() -> f64 {
    cellperf_channel::drc::SLOT_S
}

/// The cell's scheduler for `users` users.
pub fn cell_scheduler(c: &CellSpec, users: usize) -> Result<SlotScheduler, LinkError> {
    let discipline = match c.scheduler.as_str() {
        "pf" => Discipline::ProportionalFair { alpha: c.alpha },
        "rr" => Discipline::RoundRobin,
        other => {
            return Err(LinkError::spec(format!(
                "scheduler {other:?} is not pf or rr"
            )))
        }
    };
    if !(c.slot_s > 0.0) {
        return Err(LinkError::spec("the cell's slot length must be positive"));
    }
    SlotScheduler::new(discipline, users).map_err(|e| LinkError::spec(e.to_string()))
}

/// A reader of the capacity a rate source offers, clipped by the outages.
pub fn meter(source: &RateSource, plan: &OutagePlan) -> CapacityMeter {
    CapacityMeter::new(Box::new(OutageClipped::new(source.stream(), plan.clone())))
}

/// One user of a shared cell from its downlink's description: its channel (from `source`,
/// clipped by outages), its queue at the base station and the elements after the air.
pub fn cell_user(
    spec: &LinkSpec,
    source: &RateSource,
    plan: &OutagePlan,
    seed: u64,
) -> Result<CellUser, LinkError> {
    if let RateSpec::Replay { .. } = spec.rate {
        return Err(LinkError::spec(
            "a replay is one user's whole link and cannot share a scheduled cell",
        ));
    }
    Ok(CellUser::new(
        meter(source, plan),
        Queue::new(queue_spec(&spec.queue)?),
        Pipeline::new(after_bottleneck(spec, seed)?),
    ))
}

/// A whole direction: rate server (queue + capacity clipped by outages), loss, delay.
/// Returns the pipeline and the rate source (for a meter). With `record_events` the rate
/// server records its arrivals, departures and drops (`Element::take_events`).
pub fn build_link(
    spec: &LinkSpec,
    outages: &OutagePlan,
    mode: OutageMode,
    seed: u64,
    record_events: bool,
) -> Result<(Pipeline, RateSource), LinkError> {
    let (elements, source) = link_elements(spec, outages, mode, seed, record_events)?;
    Ok((Pipeline::new(elements), source))
}

/// The elements of `build_link`'s pipeline, for a caller chaining several links into one
/// pipeline (the simulator's wired hops).
pub fn link_elements(
    spec: &LinkSpec,
    outages: &OutagePlan,
    mode: OutageMode,
    seed: u64,
    record_events: bool,
) -> Result<(Vec<Box<dyn Element>>, RateSource), LinkError> {
    if let RateSpec::Replay {
        bundle,
        direction,
        mode: replay_mode,
        outage_mode,
    } = &spec.rate
    {
        if !outages.is_empty() || record_events {
            return Err(LinkError::spec("a replay has its recorded outages and no event log: scheduled or random outages, handoffs and mahimahi logs do not apply"));
        }
        let (replay, heavy) = crate::replay::replay_link(
            bundle,
            direction,
            replay_mode,
            outage_mode.outage_mode(),
            queue_spec(&spec.queue)?,
            seed,
        )?;
        let mut elements: Vec<Box<dyn Element>> = vec![Box::new(replay)];
        elements.extend(after_bottleneck(spec, seed)?);
        return Ok((elements, RateSource::Mahimahi(heavy)));
    }
    let source = RateSource::load(&spec.rate, seed)?;
    let queue = Queue::new(queue_spec(&spec.queue)?);
    let mut server = if outages.is_empty() {
        RateServer::new(source.stream(), queue, None)
    } else {
        RateServer::new(
            Box::new(OutageClipped::new(source.stream(), outages.clone())),
            queue,
            Some((outages.clone(), mode)),
        )
    };
    if record_events {
        server = server.record_events();
    }
    let mut elements: Vec<Box<dyn Element>> = vec![Box::new(server)];
    elements.extend(after_bottleneck(spec, seed)?);
    Ok((elements, source))
}

/// Validates one direction's JSON (files readable, numbers valid) by building it; returns
/// the mean capacity for trace and constant sources (`None` for Markov models and replays).
/// A replay's bundle is checked without parsing its series (its manifest, its files
/// readable): the emulator's build parses them, once, the heavy ones as the replay reaches
/// them (`replay_heavy`); a long recording's are millions of lines. Their own errors come
/// from that build, or from the run (`Element::take_fault`).
pub fn check_link(spec_json: &str) -> Result<Option<f64>, LinkError> {
    let spec: LinkSpec = serde_json::from_str(spec_json)
        .map_err(|e| LinkError::spec(format!("link specification: {e}")))?;
    if let RateSpec::Replay {
        bundle,
        direction,
        mode,
        ..
    } = &spec.rate
    {
        crate::replay::ReplayMode::parse(mode)?;
        crate::replay_bundle::Bundle::check_direction(bundle, direction)?;
        queue_spec(&spec.queue)?;
        after_bottleneck(&spec, 0)?;
        return Ok(None);
    }
    let (_, source) = build_link(&spec, &OutagePlan::default(), OutageMode::Buffer, 0, false)?;
    Ok(match source {
        RateSource::Mahimahi(t) => Some(t.mean_bits_per_sec()),
        RateSource::Slots(s) => Some(s.mean_bits_per_sec()),
        RateSource::Markov(..) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::testing::run;

    #[test]
    fn json_link_builds_and_runs() {
        let spec: LinkSpec = serde_json::from_str(
            r#"{"rate": {"kind": "constant", "bps": 12000000}, "queue": {"kind": "droptail", "packets": 5},
                "delay_s": 0.01}"#,
        )
        .unwrap();
        let (mut link, _) =
            build_link(&spec, &OutagePlan::default(), OutageMode::Buffer, 1, false).unwrap();
        let out = run(&mut link, &[(0, 1500), (0, 1500)], 100_000, 50_000_000);
        assert_eq!(out, vec![(11_000_000, 1500), (12_000_000, 1500)]);
    }

    #[test]
    fn bad_specs_are_one_line_errors() {
        let bad = [
            r#"{"rate": {"kind": "constant", "bps": 0}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "queue": {"kind": "droptail"}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "loss": {"kind": "iid", "p": 1.5}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "delay_s": -1}"#,
            r#"{"rate": {"kind": "mahimahi", "path": "/nonexistent/trace"}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "arq": {"block_error": 1.5}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "arq": {"block_error": 0.1, "arq_delay_s": -1}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "frames": {"frame_s": 0}}"#,
            r#"{"rate": {"kind": "constant", "bps": 1e6}, "frames": {"frame_s": 1e-9}}"#,
            r#"{"rate": {"kind": "gilbert_elliott", "good_bps": 0, "bad_bps": 0, "good_to_bad_per_s": 1, "bad_to_good_per_s": 1, "slot_s": 0.001}}"#,
        ];
        for text in bad {
            let spec: LinkSpec = serde_json::from_str(text).unwrap();
            let err = build_link(&spec, &OutagePlan::default(), OutageMode::Buffer, 1, false)
                .err()
                .expect(text)
                .to_string();
            assert!(!err.is_empty() && !err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn gilbert_elliott_rate_channel_of_seed_001() {
        // Good 1 Mb/s, Bad 100 kb/s, 1 transition per second each way: mean 550 kb/s.
        let spec = RateSpec::GilbertElliott {
            good_bps: 1e6,
            bad_bps: 1e5,
            good_to_bad_per_s: 1.0,
            bad_to_good_per_s: 1.0,
            slot_s: 1.0 / 600.0,
        };
        let src = RateSource::load(&spec, 9).unwrap();
        let mut meter = crate::capacity::CapacityMeter::new(src.stream());
        let secs = 4000u64;
        let bps = meter.offered_until(secs * 1_000_000_000) * 8.0 / secs as f64;
        assert!((bps - 550_000.0).abs() < 25_000.0, "{bps}");
    }
}
