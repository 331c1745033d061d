//! The discrete-event driver: a virtual clock that jumps to the earliest event of the link
//! elements (their `next_event`), the senders' retransmission timers and the receivers'
//! delayed-ACK timers, and moves packets between them. Nothing is ticked: time jumps from one
//! event to the next (a backlogged cell has one per slot, as it has in the emulator).
use crate::receiver::{Ack, Receiver};
use crate::scenario::{Network, Scenario};
use crate::tcp::{Recovery, Sender};
use cellperf_analysis::stats::quantile_sorted;
use cellperf_link::element::{Nanos, Packet, NANOS_PER_SEC};
use cellperf_link::LinkError;
use serde::Serialize;

/// One flow's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    pub user: usize,
    /// The flow's TCP variant (`Variant::NAMES`).
    pub variant: &'static str,
    /// Data packets that reached the mobile host (duplicates included), bit/s.
    pub throughput_bps: f64,
    /// Payload delivered in order to the application, bit/s.
    pub goodput_bps: f64,
    pub segments_sent: u64,
    pub retransmissions: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    /// Timeouts found spurious and undone (`--recovery linux`).
    pub undone_timeouts: u64,
    pub rtt_samples: u64,
    pub rtt_mean_s: Option<f64>,
    pub rtt_min_s: Option<f64>,
    pub rtt_p50_s: Option<f64>,
    pub rtt_p95_s: Option<f64>,
    pub rtt_max_s: Option<f64>,
    /// Mean congestion window over time (segments).
    pub cwnd_mean: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub duration_s: f64,
    pub flows: Vec<FlowResult>,
    /// Slots each user was served in (empty without a shared cell).
    pub served_slots: Vec<u64>,
    /// Packets dropped by the queues (wired, base station, air).
    pub dropped_packets: u64,
    /// Events the clock jumped to.
    pub events: u64,
    #[serde(skip)]
    pub series: Series,
}

/// Congestion window and RTT over time, one row per change or sample.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub cwnd_time_s: Vec<f64>,
    pub cwnd_user: Vec<u32>,
    pub cwnd: Vec<f64>,
    pub ssthresh: Vec<f64>,
    pub rtt_time_s: Vec<f64>,
    pub rtt_user: Vec<u32>,
    pub rtt_s: Vec<f64>,
}

fn secs(t: Nanos) -> f64 {
    t as f64 / NANOS_PER_SEC
}

/// A data segment on the wire: its number and its timestamp (when it was sent) in the
/// packet's first 16 bytes, the packet of the data size.
fn segment(seq: u64, bytes: usize, time: Nanos) -> Packet {
    let mut data = vec![0u8; bytes.max(16)];
    data[..8].copy_from_slice(&seq.to_le_bytes());
    data[8..16].copy_from_slice(&time.to_le_bytes());
    Packet::new(data, time)
}

fn word(p: &Packet, i: usize) -> u64 {
    u64::from_le_bytes(
        p.data[8 * i..8 * i + 8]
            .try_into()
            .expect("the packet holds the word"),
    )
}

/// (segment number, timestamp) of a data packet.
fn segment_of(p: &Packet) -> (u64, Nanos) {
    (word(p, 0), word(p, 1))
}

/// An ACK on the wire: `ack_bytes`, plus a SACK option's 4 + 8 bytes per block (RFC 2018,
/// with two NOPs as Linux pads it). Carried: the ACK number, the echoed timestamp
/// (u64::MAX for none), the block count and the blocks.
fn ack_packet(ack: &Ack, ack_bytes: usize, time: Nanos) -> Packet {
    let sack_bytes = if ack.sack.is_empty() {
        0
    } else {
        4 + 8 * ack.sack.len()
    };
    let mut words = vec![
        ack.next,
        ack.echo.unwrap_or(u64::MAX),
        ack.sack.len() as u64,
    ];
    words.extend(ack.sack.iter().flat_map(|&(s, e)| [s, e]));
    let mut data = vec![0u8; (ack_bytes + sack_bytes).max(8 * words.len())];
    for (i, w) in words.iter().enumerate() {
        data[8 * i..8 * i + 8].copy_from_slice(&w.to_le_bytes());
    }
    Packet::new(data, time)
}

fn ack_of(p: &Packet) -> Ack {
    let blocks = word(p, 2) as usize;
    Ack {
        next: word(p, 0),
        echo: Some(word(p, 1)).filter(|&e| e != u64::MAX),
        sack: (0..blocks)
            .map(|b| (word(p, 3 + 2 * b), word(p, 4 + 2 * b)))
            .collect(),
    }
}

struct Flow {
    sender: Sender,
    receiver: Receiver,
    rtts: Vec<f64>,
    /// ∫ cwnd dt so far and the last change, for the time-weighted mean.
    cwnd_area: f64,
    cwnd_since: Nanos,
    cwnd_now: f64,
}

/// How many events the run goes between looks for a fault (`Network::take_fault`).
const FAULT_CHECK_EVENTS: u64 = 4096;

/// Runs the scenario to its end and returns what each flow did.
pub fn run(scenario: &Scenario) -> Result<RunResult, LinkError> {
    let mut net = scenario.network()?;
    let configs = scenario.flow_configs()?;
    let (data_bytes, ack_bytes) = (scenario.tcp.packet_bytes, scenario.tcp.ack_bytes);
    let payload_bits = ((data_bytes - scenario.tcp.header_bytes) * 8) as f64;
    let end = cellperf_link::element::secs_to_nanos(scenario.duration_s);
    let mut flows: Vec<Flow> = configs
        .iter()
        .map(|cfg| Flow {
            sender: Sender::new(cfg.clone()),
            receiver: Receiver::new(cfg.delayed_ack, cfg.recovery == Recovery::Linux),
            rtts: Vec::new(),
            cwnd_area: 0.0,
            cwnd_since: 0,
            cwnd_now: cfg.initial_window,
        })
        .collect();
    let mut series = Series::default();
    let mut segs = Vec::new();
    for (u, f) in flows.iter_mut().enumerate() {
        f.sender.start(0, &mut segs);
        for seq in segs.drain(..) {
            net.wired_down.accept(u, segment(seq, data_bytes, 0));
        }
        if scenario.record {
            record_cwnd(&mut series, u, 0, &f.sender);
        }
    }
    let mut buf: Vec<(usize, Packet)> = Vec::new();
    let mut scratch = Vec::new();
    let mut events = 0u64;
    while let Some(now) = next_event(&net, &flows).filter(|&t| t <= end) {
        events += 1;
        // A fault in a replayed series ends the run with its error (checked now and then:
        // the events after it only lose packets).
        if events.is_multiple_of(FAULT_CHECK_EVENTS) {
            if let Some(fault) = net.take_fault() {
                return Err(fault);
            }
        }
        // Fixed hosts' packets reach the base station.
        net.wired_down.release(now, &mut buf, &mut scratch);
        for (u, p) in buf.drain(..) {
            net.air_down.accept(u, p);
        }
        // The air delivers to the mobile hosts, which acknowledge.
        net.air_down.release(now, &mut buf, &mut scratch);
        for (u, p) in buf.drain(..) {
            let (seq, sent) = segment_of(&p);
            if let Some(ack) = flows[u].receiver.on_segment(seq, sent, p.time) {
                net.up.accept(u, ack_packet(&ack, ack_bytes, p.time));
            }
        }
        for (u, f) in flows.iter_mut().enumerate() {
            if f.receiver.next_timer().is_some_and(|t| t <= now) {
                if let Some(ack) = f.receiver.on_timer(now) {
                    net.up.accept(u, ack_packet(&ack, ack_bytes, now));
                }
            }
        }
        // ACKs reach the fixed hosts, which send; timers fire.
        net.up.release(now, &mut buf, &mut scratch);
        for (u, p) in buf.drain(..) {
            let f = &mut flows[u];
            f.sender.on_ack(ack_of(&p), p.time, &mut segs);
            if let Some(r) = f.sender.take_rtt_sample() {
                f.rtts.push(secs(r));
                if scenario.record {
                    series.rtt_time_s.push(secs(p.time));
                    series.rtt_user.push(u as u32);
                    series.rtt_s.push(secs(r));
                }
            }
            after_sender_event(
                f,
                u,
                p.time,
                &mut segs,
                &mut net,
                data_bytes,
                scenario.record,
                &mut series,
            );
        }
        for (u, f) in flows.iter_mut().enumerate() {
            if f.sender.next_timer().is_some_and(|t| t <= now) {
                f.sender.on_timeout(now, &mut segs);
                after_sender_event(
                    f,
                    u,
                    now,
                    &mut segs,
                    &mut net,
                    data_bytes,
                    scenario.record,
                    &mut series,
                );
            }
        }
    }
    if let Some(fault) = net.take_fault() {
        return Err(fault);
    }
    let duration = scenario.duration_s;
    let results = flows
        .iter_mut()
        .enumerate()
        .map(|(u, f)| {
            f.cwnd_area += f.cwnd_now * secs(end.saturating_sub(f.cwnd_since));
            let st = f.sender.stats();
            let rs = f.receiver.stats();
            f.rtts.sort_by(f64::total_cmp);
            let q = |p: f64| quantile_sorted(&f.rtts, p);
            FlowResult {
                user: u,
                variant: configs[u].variant.name(),
                throughput_bps: rs.segments_received as f64 * (data_bytes * 8) as f64 / duration,
                goodput_bps: rs.segments_delivered as f64 * payload_bits / duration,
                segments_sent: st.segments_sent,
                retransmissions: st.retransmissions,
                fast_retransmits: st.fast_retransmits,
                timeouts: st.timeouts,
                undone_timeouts: st.undone_timeouts,
                rtt_samples: f.rtts.len() as u64,
                rtt_mean_s: (!f.rtts.is_empty())
                    .then(|| f.rtts.iter().sum::<f64>() / f.rtts.len() as f64),
                rtt_min_s: q(0.0),
                rtt_p50_s: q(0.5),
                rtt_p95_s: q(0.95),
                rtt_max_s: q(1.0),
                cwnd_mean: f.cwnd_area / duration,
            }
        })
        .collect();
    let dropped_packets =
        net.wired_down.drops().packets + net.air_down.drops().packets + net.up.drops().packets;
    Ok(RunResult {
        duration_s: duration,
        flows: results,
        served_slots: net.air_down.served_slots(),
        dropped_packets,
        events,
        series,
    })
}

/// Puts the segments a sender just released on the wire and notes its window.
#[allow(clippy::too_many_arguments)]
fn after_sender_event(
    f: &mut Flow,
    u: usize,
    now: Nanos,
    segs: &mut Vec<u64>,
    net: &mut Network,
    data_bytes: usize,
    record: bool,
    series: &mut Series,
) {
    for seq in segs.drain(..) {
        net.wired_down.accept(u, segment(seq, data_bytes, now));
    }
    let cwnd = f.sender.cwnd();
    if cwnd != f.cwnd_now {
        f.cwnd_area += f.cwnd_now * secs(now - f.cwnd_since);
        f.cwnd_since = now;
        f.cwnd_now = cwnd;
        if record {
            record_cwnd(series, u, now, &f.sender);
        }
    }
}

fn record_cwnd(series: &mut Series, u: usize, now: Nanos, s: &Sender) {
    series.cwnd_time_s.push(secs(now));
    series.cwnd_user.push(u as u32);
    series.cwnd.push(s.cwnd());
    series.ssthresh.push(s.ssthresh());
}

fn next_event(net: &Network, flows: &[Flow]) -> Option<Nanos> {
    let timers = flows
        .iter()
        .flat_map(|f| [f.sender.next_timer(), f.receiver.next_timer()])
        .flatten();
    [
        net.wired_down.next_event(),
        net.air_down.next_event(),
        net.up.next_event(),
    ]
    .into_iter()
    .flatten()
    .chain(timers)
    .min()
}
