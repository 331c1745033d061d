//! [`analyze`]: the passes over the captures and the assembly of every flow's report.

use std::fmt;
use std::path::PathBuf;

use arrow_array::RecordBatch;
use cellperf_capture::probe_header::HeaderKind;
use cellperf_capture::reader::unsupported_link;
use cellperf_capture::{addr_to_string, Addr, Capture, CaptureError};
use serde::Serialize;

use crate::flows::{Dir, FlowKey, PROTO_TCP};
use crate::record::UdpRec;
use crate::stats::{BoxSummary, RateSpread, Summary, Variability};
use crate::tables::{
    AckTable, GapTable, IntervalTable, PacketTable, RetransmissionTable, RttTable, SpikeTable, UdpPacketTable,
};
use crate::matching::match_in_order;
use crate::owd::OwdAccumulator;
use crate::tcp_two_sided::{AckCompression, PairedResult, TcpPairing, TwoSided};
use crate::udp_echo::{self, EchoSummary, MatchBy, Vantage};
use crate::udp_stream::{self, IntervalRow, JitterSummary, OwdKind, OwdSummary, StreamPacket, StreamSummary};
use crate::in_step::{clock_offset, read_in_step};
use crate::pass::{FlowAt, Scan, Shared};
use crate::side::{mn_direction, Evidence, Side};
use crate::tcp_feed::{TcpFeed, TcpWork};
use crate::tcp_one_sided::TcpOneSided;
use crate::{PacketStream, PassCounts};

#[derive(Debug, Clone)]
pub struct CaptureInput {
    pub path: PathBuf,
    pub side: Side,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// Length of the interval series (docs/methods.md §3: 5 s).
    pub interval_s: f64,
    /// The MN's address, when the user knows it.
    pub mn_addr: Option<Addr>,
    /// The capture hosts' clocks are synchronised (GPS, PTP, or one host): OWD is raw.
    pub synced_clocks: bool,
    /// Build the Arrow tables (per packet, per interval, ...), not only the summary.
    pub tables: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { interval_s: 5.0, mn_addr: None, synced_clocks: false, tables: false }
    }
}

#[derive(Debug)]
pub enum AnalysisError {
    Capture(CaptureError),
    Input(String),
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::Capture(e) => e.fmt(f),
            AnalysisError::Input(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for AnalysisError {}

#[derive(Debug, Clone, Serialize)]
pub struct CaptureSummary {
    pub path: String,
    pub side: Side,
    pub format: &'static str,
    pub packets: u64,
    pub counts: PassCounts,
    pub flows: u64,
    pub first_ts_s: Option<f64>,
    pub last_ts_s: Option<f64>,
    pub warning: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RetransmissionReport {
    pub total: u64,
    /// Two captures only.
    pub normal: Option<u64>,
    pub spurious: u64,
    /// Two captures only.
    pub unavoidable: Option<u64>,
    pub serial: u64,
    /// Sender-side heuristics (one capture, or the sender's capture of two).
    pub fast: Option<u64>,
    pub rto: Option<u64>,
    /// Retransmitted / all data packets at the sender (%Rxt of 000 Table 4.2, as a fraction).
    pub rate: f64,
    /// "two-sided" (docs/methods.md §4 classes) or "one-sided" (Wireshark-like heuristics).
    pub method: &'static str,
    /// Resent SYNs and SYN/ACKs of the connection's setup (not in `total`).
    pub syn: u64,
    /// Of `total` (one-sided): resends whose original the capture did not hold, known to be
    /// resends because an ACK or SACK had already covered their bytes.
    pub original_not_captured: Option<u64>,
    /// Resends that re-segmented the data (seed 004 §V.B 2.2), by the sender-side view (the
    /// sender's capture, else the one there is): one resend over parts of two or more
    /// original segments (`merged`), or inside one and shorter (`split`).
    pub merged: u64,
    pub split: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TcpDetails {
    pub data_packets: u64,
    pub unique_bytes: u64,
    pub out_of_order: u64,
    pub dup_acks: u64,
    pub zero_windows: u64,
    pub mss: Option<u16>,
    /// Data segments of the sender's capture found at the receiver's (two captures).
    pub data_matched: Option<u64>,
    pub acks_matched: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesReport {
    pub interval_s: f64,
    pub intervals: u64,
    pub throughput_bps: Option<BoxSummary>,
    /// Mean, standard deviation and maximum of the full intervals' throughput (seed 004
    /// Table V reports the maximum beside the mean).
    pub throughput_spread: Option<RateSpread>,
    pub variability: Option<Variability>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    /// The 5-tuple's id in the tables (`flow_id` columns).
    pub flow_id: u32,
    /// The connection this entry is a direction of: a TCP connection with data both ways
    /// (or a UDP flow with datagrams both ways) has two entries sharing it.
    pub connection_id: u32,
    pub proto: &'static str,
    /// Sender of the data this report describes.
    pub src: String,
    pub dst: String,
    pub sport: u16,
    pub dport: u16,
    /// "uplink" (MN→CN) or "downlink".
    pub direction: &'static str,
    /// How the MN end was told: "mn-addr", "ttl" or "initiator".
    pub direction_basis: &'static str,
    pub seen_at: Vec<Side>,
    /// The flow's ends as the CN's capture saw them, when a NAT translated one of them
    /// (paired by content; see `nat`). `src`/`dst` above are as the MN's capture saw them.
    pub nat: Option<TranslatedEnds>,
    /// Packets and bytes (IP) of the flow at the sender's capture (or the one capture).
    pub packets: u64,
    pub bytes: u64,
    /// Frames recorded twice by that capture, left out of every figure (see `pass`).
    pub capture_duplicates: u64,
    /// A control connection of cellperf's agents (known by its hello, on any port): no
    /// data flow, never among the competing flows.
    pub control: bool,
    /// A test's data connection that opened with the agents' `data_connection` frame (to the
    /// server's control port, protocol version 4): data, whatever its port says.
    pub data_connection: bool,
    /// First and last packet of the flow (Unix seconds): for TCP at the capture its goodput
    /// is measured at (the receiver's, when there), else at the one `duration_s` comes from.
    pub start_s: f64,
    pub end_s: f64,
    pub duration_s: f64,
    pub throughput_bps: f64,
    pub goodput_bps: Option<f64>,
    pub rtt_ms: Option<Summary>,
    pub retransmissions: Option<RetransmissionReport>,
    pub ack_compression: Option<AckCompression>,
    pub tcp: Option<TcpDetails>,
    pub loss_rate: Option<f64>,
    /// A cellperf probe stream's loss split by where it happened (see [`LossSplit`]).
    pub loss_split: Option<LossSplit>,
    pub jitter_ms: Option<JitterSummary>,
    pub owd_ms: Option<OwdSummary>,
    pub udp: Option<StreamSummary>,
    /// "two-sided", "receiver" or "sender": which captures the UDP metrics come from.
    pub udp_view: Option<&'static str>,
    /// An echoed UDP flow's requests and echoes (see `udp_echo`), the same in the reports
    /// of both its directions.
    pub echo: Option<EchoSummary>,
    pub series: SeriesReport,
    /// IP fragmentation of the flow's datagrams (seed 004 §II.A), when any were fragmented.
    pub fragments: Option<FragmentReport>,
}

/// A flow direction's fragmented datagrams at its receiver's capture (else the one there
/// is; `side` says which): see [`Fragments`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct FragmentReport {
    pub side: Side,
    pub datagrams: u64,
    pub fragments: u64,
    /// Fragments per fragmented datagram.
    pub per_datagram: f64,
    /// Datagrams whose fragments did not all reach this capture (a reassembly failure).
    pub incomplete: u64,
}

/// Where a cellperf probe stream lost its datagrams, as shares of every datagram the
/// sender numbered (the probe header's sequence numbers, first to last seen at either
/// capture): `before_capture`, numbers missing at both captures (a shaper, a firewall or the
/// sender's own queue dropped them before the first capture point); `between_captures`,
/// datagrams the sender's capture saw and the receiver's did not. They add up to the
/// flow's `loss_rate`. Only with the sender's capture (the receiver's alone sees only
/// the sum, its `loss_rate`); `between_captures` is `None` with the sender's alone.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct LossSplit {
    pub numbered: u64,
    pub lost_before_capture: u64,
    pub before_capture: f64,
    pub between_captures: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TranslatedEnds {
    pub src: String,
    pub dst: String,
    pub sport: u16,
    pub dport: u16,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub cellperf_version: &'static str,
    pub interval_s: f64,
    pub owd_kind: OwdKind,
    pub captures: Vec<CaptureSummary>,
    pub flows: Vec<FlowReport>,
    pub warnings: Vec<String>,
}

/// Arrow tables, when [`Options::tables`] is set (see `docs/tables.md`).
#[derive(Default)]
pub struct Tables {
    pub batches: Vec<(&'static str, RecordBatch)>,
}

pub struct Analysis {
    pub report: Report,
    pub tables: Tables,
}

struct CapturePass {
    side: Side,
    flows: Vec<Option<FlowAt>>,
    /// First and last timestamp of the whole capture.
    span: (i64, i64),
}

/// Analyses one capture or two (one per side). See the crate docs.
pub fn analyze(inputs: &[CaptureInput], opts: &Options) -> Result<Analysis, AnalysisError> {
    check_inputs(inputs, opts)?;
    let interval_ns = (opts.interval_s * 1e9) as i64;
    let two_sided = inputs.len() == 2;
    let captures = inputs
        .iter()
        .map(|i| Capture::open(&i.path).map_err(AnalysisError::Capture))
        .collect::<Result<Vec<_>, _>>()?;
    let (scans, read, mut sh) = read_captures(inputs, &captures, opts, interval_ns);
    let (mut passes, summaries, mut warnings) = summarize(inputs, &captures, scans, read)?;
    let table = &sh.table;
    for p in &mut passes {
        p.flows.resize_with(table.len(), || None);
    }
    if two_sided {
        let common = (0..table.len()).filter(|&i| passes[0].flows[i].is_some() && passes[1].flows[i].is_some()).count();
        if common == 0 {
            return Err(AnalysisError::Input(format!(
                "no flow appears in both {} and {}: are they captures of the same run?",
                summaries[0].path, summaries[1].path
            )));
        }
    }
    let mut paired = std::mem::take(&mut sh.paired);
    paired.resize_with(table.len(), || None);

    let owd_kind = if opts.synced_clocks { OwdKind::Raw } else { OwdKind::Excess };
    let mut out = Assembler {
        opts,
        spans: passes.iter().map(|p| (p.side, p.span)).collect(),
        cut_series: Vec::new(),
        stray_numbers: Vec::new(),
        interval_ns,
        owd_kind,
        reports: Vec::new(),
        intervals: IntervalTable::default(),
        udp_packets: UdpPacketTable::default(),
        gaps: GapTable::default(),
        spikes: SpikeTable::default(),
        retx: RetransmissionTable::default(),
        acks: AckTable::default(),
        rtt: RttTable::default(),
    };
    let mut mn_dirs = Vec::with_capacity(table.len());
    for id in 0..table.len() as u32 {
        let key = table.key(id);
        let at: Vec<(Side, &FlowAt)> =
            passes.iter().filter_map(|p| p.flows[id as usize].as_ref().map(|f| (p.side, f))).collect();
        let pairs = paired[id as usize].take();
        let (mn_dir, basis) = match pairs.as_ref().and_then(|p| p.roles) {
            Some(roles) => roles,
            None => {
                let evidence: Vec<(Side, Evidence)> = at.iter().map(|(s, f)| (*s, f.evidence())).collect();
                mn_direction(&key, &evidence, opts.mn_addr)
            }
        };
        mn_dirs.push(mn_dir as u8);
        let flow = FlowCtx { id, key, alias: table.alias_of(id), at, mn_dir, basis };
        match key.proto {
            PROTO_TCP => out.tcp_flow(&flow, pairs),
            _ => out.udp_flow(&flow),
        }
    }

    for (id, n) in &out.cut_series {
        warnings.push(format!(
            "flow {id}: {n} packets lie more than {} intervals after the flow's start (a timestamp far \
             ahead?); they are left out of its interval series",
            crate::MAX_INTERVALS
        ));
    }
    for (id, span, received) in &out.stray_numbers {
        warnings.push(format!(
            "flow {id}: the sequence numbers of its {received} probe headers span {span} (stray or damaged \
             headers?); its losses are not counted"
        ));
    }
    let mut tables = Tables::default();
    if opts.tables {
        let err = |e: arrow_schema::ArrowError| AnalysisError::Input(format!("building tables: {e}"));
        let packet_table = sh.packet_table.take().unwrap_or_default();
        tables.batches.push(("packets", packet_table.into_batch(&mn_dirs).map_err(err)?));
        tables.batches.push(("intervals", out.intervals.into_batch().map_err(err)?));
        tables.batches.push(("udp_packets", out.udp_packets.into_batch().map_err(err)?));
        tables.batches.push(("gaps", out.gaps.into_batch().map_err(err)?));
        tables.batches.push(("delay_spikes", out.spikes.into_batch().map_err(err)?));
        tables.batches.push(("tcp_retransmissions", out.retx.into_batch().map_err(err)?));
        tables.batches.push(("ack_compression", out.acks.into_batch().map_err(err)?));
        tables.batches.push(("rtt", out.rtt.into_batch().map_err(err)?));
    }
    Ok(Analysis {
        report: Report {
            cellperf_version: crate::version(),
            interval_s: opts.interval_s,
            owd_kind,
            captures: summaries,
            flows: out.reports,
            warnings,
        },
        tables,
    })
}

fn check_inputs(inputs: &[CaptureInput], opts: &Options) -> Result<(), AnalysisError> {
    if inputs.is_empty() || inputs.len() > 2 {
        return Err(AnalysisError::Input("give one capture, or two (the MN's and the CN's)".into()));
    }
    if inputs.len() == 2 && inputs[0].side == inputs[1].side {
        return Err(AnalysisError::Input("two captures must be one at the MN and one at the CN".into()));
    }
    if !(opts.interval_s > 0.0 && opts.interval_s.is_finite()) {
        return Err(AnalysisError::Input(format!("interval must be a positive number of seconds, not {}", opts.interval_s)));
    }
    Ok(())
}

/// What each capture's pass read and built.
type Read = (Vec<Scan>, Vec<(PassCounts, Option<CaptureError>)>, Shared);

/// One pass over one capture, or both read in step with their TCP packets paired.
fn read_captures(inputs: &[CaptureInput], captures: &[Capture], opts: &Options, interval_ns: i64) -> Read {
    let two_sided = inputs.len() == 2;
    let mut sh = Shared { packet_table: opts.tables.then(PacketTable::default), ..Default::default() };
    let mut scans: Vec<Scan> = (0..inputs.len()).map(|ci| Scan::new(ci, two_sided)).collect();
    let tables = opts.tables;
    let read = if two_sided {
        let (offset, window) = clock_offset(&captures[0], &captures[1]);
        let sides = [inputs[0].side, inputs[1].side];
        let mn_addr = opts.mn_addr;
        let pairing = move || TcpPairing::new(sides, mn_addr, interval_ns, tables, window);
        sh.tcp = Some(TcpFeed::new(move || TcpWork::new(Some(pairing()), interval_ns, tables)));
        read_in_step(captures, offset, &mut scans, &mut sh)
    } else {
        sh.tcp = Some(TcpFeed::new(move || TcpWork::new(None, interval_ns, tables)));
        let mut packets = PacketStream::new(&captures[0]);
        while let Some(p) = packets.next_packet() {
            scans[0].packet(&p, &mut sh, p.ts_ns);
        }
        vec![packets.finish()]
    };
    let (paired, one_sided) = sh.tcp.take().map(TcpFeed::finish).unwrap_or_default();
    for (scan, states) in scans.iter_mut().zip(one_sided) {
        for (f, state) in scan.flows.iter_mut().zip(states) {
            if let (Some(f), Some(state)) = (f.as_mut(), state) {
                f.tcp = Some(state);
            }
        }
    }
    sh.paired = paired;
    (scans, read, sh)
}

/// Each capture's flows, its summary, and the warnings about it.
type Summarized = (Vec<CapturePass>, Vec<CaptureSummary>, Vec<String>);

/// Each capture's summary and flows, and the warnings about it; an error for a capture
/// that held nothing to analyse.
fn summarize(
    inputs: &[CaptureInput],
    captures: &[Capture],
    scans: Vec<Scan>,
    read: Vec<(PassCounts, Option<CaptureError>)>,
) -> Result<Summarized, AnalysisError> {
    let mut passes = Vec::new();
    let mut summaries = Vec::new();
    let mut warnings = Vec::new();
    for (((input, capture), mut scan), (mut counts, warning)) in inputs.iter().zip(captures).zip(scans).zip(read) {
        counts.capture_duplicates = scan.duplicates;
        scan.finish_fragments();
        let path = input.path.display().to_string();
        if counts.tcp + counts.udp == 0 {
            return Err(nothing_to_analyse(&path, &counts, warning));
        }
        warnings.extend(capture_warnings(&path, &counts, warning.as_ref(), scan.orphan_fragments()));
        let span = (scan.first_ts.unwrap_or(0), scan.last_ts.unwrap_or(0));
        summaries.push(CaptureSummary {
            path,
            side: input.side,
            format: capture.format().name(),
            packets: counts.frames,
            flows: scan.flows.iter().filter(|f| f.is_some()).count() as u64,
            counts,
            first_ts_s: scan.first_ts.map(|t| t as f64 / 1e9),
            last_ts_s: scan.last_ts.map(|t| t as f64 / 1e9),
            warning: warning.map(|w| w.to_string()),
        });
        passes.push(CapturePass { side: input.side, flows: scan.flows, span });
    }
    Ok((passes, summaries, warnings))
}

/// The error for a capture without a TCP or UDP packet: what it held instead, or the
/// damage or link type that left nothing to read.
fn nothing_to_analyse(path: &str, counts: &PassCounts, warning: Option<CaptureError>) -> AnalysisError {
    if counts.frames == 0 {
        if let Some(w) = warning {
            return AnalysisError::Input(format!("{w}; no packets before it"));
        }
        if counts.skipped_unknown_link > 0 {
            return AnalysisError::Input(format!(
                "{path}: all {} packets are on interfaces with an {}",
                counts.skipped_unknown_link,
                unsupported_link(&counts.unsupported_link_types)
            ));
        }
        return AnalysisError::Input(format!("{path}: no packets"));
    }
    AnalysisError::Input(format!(
        "{path}: no TCP or UDP packets ({} frames: {} other IP, {} not IP, {} malformed)",
        counts.frames, counts.other_ip, counts.non_ip, counts.malformed
    ))
}

/// The warnings about one capture: where reading stopped, what was skipped.
fn capture_warnings(path: &str, counts: &PassCounts, warning: Option<&CaptureError>, orphans: u64) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(w) = warning {
        out.push(format!("{w}; kept the {} packets before it", counts.frames));
    }
    if counts.skipped_unknown_link > 0 {
        out.push(format!(
            "{path}: skipped {} packets on interfaces with an {}",
            counts.skipped_unknown_link,
            unsupported_link(&counts.unsupported_link_types)
        ));
    }
    if orphans > 0 {
        out.push(format!(
            "{path}: {orphans} IP fragments came without their datagram's first fragment; their bytes are in no flow"
        ));
    }
    out
}

struct FlowCtx<'a> {
    id: u32,
    key: FlowKey,
    /// The key at the CN's capture, when a NAT translated one end.
    alias: Option<FlowKey>,
    at: Vec<(Side, &'a FlowAt)>,
    mn_dir: Dir,
    basis: &'static str,
}

impl<'a> FlowCtx<'a> {
    fn side_of(&self, dir: Dir) -> Side {
        if dir == self.mn_dir {
            Side::Mn
        } else {
            Side::Cn
        }
    }

    /// The connection's TCP state at each capture that holds it.
    fn tcp(&self) -> impl Iterator<Item = &'a TcpOneSided> + '_ {
        self.at.iter().filter_map(|(_, f)| f.tcp.as_ref())
    }

    fn at(&self, side: Side) -> Option<&'a FlowAt> {
        self.at.iter().find(|(s, _)| *s == side).map(|(_, f)| *f)
    }

    fn base_report(&self, proto: &'static str, dir: Dir, main: &FlowAt, packets: u64, bytes: u64, duplicates: u64) -> FlowReport {
        let (src, dst) = self.key.ends(dir);
        let duration_s = main.duration_s();
        let receiver = self.side_of(dir).other();
        // Without the receiver's capture, `main` is the sender's.
        let (side, at) = self.at(receiver).map_or((receiver.other(), main), |f| (receiver, f));
        let frag = at.fragments[dir.index()];
        let fragments = (frag.datagrams > 0).then(|| FragmentReport {
            side,
            datagrams: frag.datagrams,
            fragments: frag.fragments,
            per_datagram: frag.fragments as f64 / frag.datagrams as f64,
            incomplete: frag.incomplete,
        });
        FlowReport {
            flow_id: self.id,
            connection_id: self.id,
            proto,
            src: addr_to_string(src.addr),
            dst: addr_to_string(dst.addr),
            sport: src.port,
            dport: dst.port,
            direction: if dir == self.mn_dir { "uplink" } else { "downlink" },
            direction_basis: self.basis,
            seen_at: self.at.iter().map(|(s, _)| *s).collect(),
            nat: self.alias.map(|k| {
                let (src, dst) = k.ends(dir);
                TranslatedEnds {
                    src: addr_to_string(src.addr),
                    dst: addr_to_string(dst.addr),
                    sport: src.port,
                    dport: dst.port,
                }
            }),
            packets,
            bytes,
            capture_duplicates: duplicates,
            control: self.at.iter().any(|(_, f)| f.control),
            data_connection: self.at.iter().any(|(_, f)| f.data_connection),
            start_s: main.first_ts as f64 / 1e9,
            end_s: main.last_ts as f64 / 1e9,
            duration_s,
            throughput_bps: if duration_s > 0.0 { bytes as f64 * 8.0 / duration_s } else { 0.0 },
            goodput_bps: None,
            rtt_ms: None,
            retransmissions: None,
            ack_compression: None,
            tcp: None,
            loss_rate: None,
            loss_split: None,
            jitter_ms: None,
            owd_ms: None,
            fragments,
            udp: None,
            udp_view: None,
            echo: None,
            series: SeriesReport { interval_s: 0.0, intervals: 0, throughput_bps: None, throughput_spread: None, variability: None },
        }
    }
}

struct Assembler<'o> {
    opts: &'o Options,
    /// Each capture's first and last timestamp, by side.
    spans: Vec<(Side, (i64, i64))>,
    /// Flows whose interval series was cut (see [`crate::MAX_INTERVALS`]): (flow, packets left out).
    cut_series: Vec<(u32, u64)>,
    /// Flows whose probe headers' sequence numbers were no stream's (see [`MAX_LOST`]):
    /// (flow, span of the numbers, datagrams).
    stray_numbers: Vec<(u32, u64, u64)>,
    interval_ns: i64,
    owd_kind: OwdKind,
    reports: Vec<FlowReport>,
    intervals: IntervalTable,
    udp_packets: UdpPacketTable,
    gaps: GapTable,
    spikes: SpikeTable,
    retx: RetransmissionTable,
    acks: AckTable,
    rtt: RttTable,
}

impl Assembler<'_> {
    /// Throughput of each full interval (the last, partial one is left out of the summary
    /// so that a flow ending mid-interval does not look like a rate drop).
    fn series(&self, bytes: &[u64], duration_s: f64) -> SeriesReport {
        let interval_s = self.opts.interval_s;
        let full = ((duration_s / interval_s).floor() as usize).min(bytes.len());
        let tput: Vec<f64> = bytes[..full].iter().map(|b| *b as f64 * 8.0 / interval_s).collect();
        SeriesReport {
            interval_s,
            intervals: bytes.len() as u64,
            throughput_bps: BoxSummary::of(&tput),
            throughput_spread: RateSpread::of(&tput),
            variability: Variability::of(&tput),
        }
    }

    /// A TCP connection: one report per direction that carried payload (its sender is the
    /// report's `src`), or one for a connection without any.
    fn tcp_flow(&mut self, flow: &FlowCtx<'_>, mut paired: Option<PairedResult>) {
        let past: u64 = flow.tcp().map(|t| t.packets_past_series()).sum();
        if past > 0 {
            self.cut_series.push((flow.id, past));
        }
        let unique = |d: Dir| flow.tcp().map(|t| t.summary(d).unique_bytes).max().unwrap_or(0);
        let opener = flow.at[0].1.syn_dir.unwrap_or(flow.at[0].1.first_dir);
        let mut dirs: Vec<Dir> = [opener, opener.reverse()].into_iter().filter(|&d| unique(d) > 0).collect();
        if dirs.is_empty() {
            dirs.push(opener);
        }
        // Each direction's SYN resends as its sender's capture saw them (a receiver's
        // capture sees no more than were sent), reported once per connection: in its first
        // entry, the opener's when it carried data, so that a sum over entries counts each
        // resend once.
        let mut syn: u64 = [Dir::AtoB, Dir::BtoA]
            .into_iter()
            .map(|d| flow.tcp().map(|t| t.summary(d).syn_retransmissions).max().unwrap_or(0))
            .sum();
        let shared = dirs.len() == 2;
        for data_dir in dirs {
            let two = paired.as_mut().and_then(|p| p.dirs[data_dir.index()].take());
            self.tcp_direction(flow, data_dir, shared, std::mem::take(&mut syn), two);
        }
    }

    /// The report of the data `flow` carried in `data_dir`; `shared` when the connection
    /// carried data the other way too (its packets are then counted per direction);
    /// `paired`: what both captures showed of that data (see `tcp_two_sided`).
    fn tcp_direction(
        &mut self,
        flow: &FlowCtx<'_>,
        data_dir: Dir,
        shared: bool,
        syn: u64,
        paired: Option<(TwoSided, OwdAccumulator)>,
    ) {
        let sender_side = flow.side_of(data_dir);
        let at_sender = flow.at(sender_side);
        let at_receiver = flow.at(sender_side.other());
        let main = at_sender.or(at_receiver).unwrap_or(flow.at[0].1);
        let d = data_dir.index();
        let mut r = if shared {
            flow.base_report("tcp", data_dir, main, main.packets[d], main.bytes[d], main.duplicates[d])
        } else {
            let sum = |v: [u64; 2]| v[0] + v[1];
            flow.base_report("tcp", data_dir, main, sum(main.packets), sum(main.bytes), sum(main.duplicates))
        };
        let uplink = data_dir == flow.mn_dir;
        let delivered = at_receiver.or(at_sender).unwrap_or(main);
        let dtcp = delivered.tcp.as_ref();
        let dsum = dtcp.map(|t| t.summary(data_dir)).unwrap_or_default();
        let ddur = delivered.duration_s();
        (r.start_s, r.end_s) = (delivered.first_ts as f64 / 1e9, delivered.last_ts as f64 / 1e9);
        r.goodput_bps = Some(if ddur > 0.0 { dsum.unique_bytes as f64 * 8.0 / ddur } else { 0.0 });
        // Both captures: the data's one-way delays, per interval of the receiver's series.
        let nothing_paired = || OwdAccumulator::new(dtcp.map_or(0, |t| t.t0()), self.interval_ns);
        let (two, owd) = match (at_sender, at_receiver, paired) {
            (Some(_), Some(_), Some((two, owd))) => (Some(two), owd),
            (Some(_), Some(_), None) => (Some(TwoSided::default()), nothing_paired()),
            _ => (None, nothing_paired()),
        };
        let (owd_ms, owd_intervals) = owd.finish(self.owd_kind);
        r.owd_ms = owd_ms;
        if let Some(t) = dtcp {
            r.series = self.tcp_series(flow.id, uplink, t, data_dir, ddur, &owd_intervals);
        }
        let stcp = at_sender.and_then(|f| f.tcp.as_ref());
        if let Some(t) = stcp {
            r.rtt_ms = self.tcp_rtt(flow.id, uplink, t, data_dir);
        }
        let one = stcp.or(dtcp).map(|t| t.summary(data_dir)).unwrap_or_default();
        let mut details = TcpDetails {
            data_packets: one.data_packets,
            unique_bytes: dsum.unique_bytes,
            out_of_order: dsum.out_of_order,
            dup_acks: one.dup_acks,
            zero_windows: one.zero_windows,
            mss: one.mss.or(dsum.mss),
            data_matched: None,
            acks_matched: None,
        };
        match two {
            Some(two) => {
                let c = two.counts();
                r.retransmissions = Some(RetransmissionReport {
                    total: c.total,
                    normal: Some(c.normal),
                    spurious: c.spurious,
                    unavoidable: Some(c.unavoidable),
                    serial: c.serial,
                    fast: Some(one.fast),
                    rto: Some(one.rto),
                    rate: fraction(c.total, two.data_packets),
                    method: "two-sided",
                    syn,
                    original_not_captured: None,
                    merged: one.merged,
                    split: one.split,
                });
                r.ack_compression = Some(two.ack_compression());
                details.data_matched = Some(two.data_matched);
                details.acks_matched = Some(two.acks_matched);
                if self.opts.tables {
                    self.two_sided_rows(flow.id, uplink, &two);
                }
            }
            None => {
                r.retransmissions = Some(RetransmissionReport {
                    total: one.retransmissions,
                    normal: None,
                    spurious: one.spurious,
                    unavoidable: None,
                    serial: one.serial,
                    fast: Some(one.fast),
                    rto: Some(one.rto),
                    rate: fraction(one.retransmissions, one.data_packets),
                    method: "one-sided",
                    syn,
                    original_not_captured: Some(one.original_not_captured),
                    merged: one.merged,
                    split: one.split,
                });
                if let Some(t) = stcp.or(dtcp).filter(|_| self.opts.tables) {
                    for x in t.retransmissions().iter().filter(|x| x.dir == data_dir) {
                        let class = serde_name(&x.class);
                        self.retx.push(flow.id, uplink, x.ts_ns, x.rel_seq, x.len, &class, x.serial, "one-sided");
                    }
                }
            }
        }
        r.tcp = Some(details);
        self.reports.push(r);
    }

    /// A TCP direction's delivered bytes per interval (at `t`, the receiver's capture if any),
    /// with the mean one-way delay of the data that arrived in each (`owd`, two captures).
    fn tcp_series(
        &mut self,
        id: u32,
        uplink: bool,
        t: &TcpOneSided,
        dir: Dir,
        duration_s: f64,
        owd: &[Option<f64>],
    ) -> SeriesReport {
        let bins = t.interval_bytes(dir);
        if self.opts.tables {
            for (i, b) in bins.iter().enumerate() {
                let row = IntervalRow {
                    start_ns: t.t0() + i as i64 * self.interval_ns,
                    start_s: i as f64 * self.opts.interval_s,
                    bytes: *b,
                    owd_mean_ms: owd.get(i).copied().flatten(),
                    ..Default::default()
                };
                self.intervals.push(id, uplink, self.opts.interval_s, false, i, &row);
            }
        }
        self.series(bins, duration_s)
    }

    /// RTT of the data sent in `dir`, at its sender's capture `t`, in milliseconds.
    fn tcp_rtt(&mut self, id: u32, uplink: bool, t: &TcpOneSided, dir: Dir) -> Option<Summary> {
        if self.opts.tables {
            for &(ts, _, ms) in t.rtt_samples().iter().filter(|(_, d, _)| *d == dir) {
                self.rtt.push(id, uplink, ts, ms);
            }
        }
        t.rtt(dir).summary().map(|s| Summary {
            min: s.min / 1e6,
            median: s.median / 1e6,
            p95: s.p95 / 1e6,
            max: s.max / 1e6,
            samples: s.samples,
        })
    }

    fn two_sided_rows(&mut self, id: u32, uplink: bool, two: &TwoSided) {
        for x in &two.retransmissions {
            self.retx.push(id, uplink, x.ts_ns, x.rel_seq, x.len, &serde_name(&x.class), x.serial, "two-sided");
        }
        for a in &two.acks {
            self.acks.push(id, uplink, a);
        }
    }

    /// An echoed flow's round trips (see `udp_echo`), paired at the requester's capture
    /// when it holds the flow, else at the echoer's; their samples go to the rtt table.
    fn udp_echo(&mut self, flow: &FlowCtx<'_>) -> Option<FlowEcho> {
        let found: Vec<(Vantage, udp_echo::EchoFlow)> = flow
            .at
            .iter()
            .filter(|(_, f)| f.packets.iter().all(|n| *n > 0))
            .filter_map(|&(side, f)| {
                let end = self.spans.iter().find(|(s, _)| *s == side).map_or(i64::MAX, |(_, span)| span.1);
                let e = udp_echo::find_echo(&f.udp_recs, echo_key(&f.udp_recs), end)?;
                let at_requester = flow.side_of(e.request_dir) == side;
                Some((if at_requester { Vantage::Requester } else { Vantage::Echoer }, e))
            })
            .collect();
        let (vantage, e) = found.iter().find(|(v, _)| *v == Vantage::Requester).or(found.first())?;
        let at_requester = *vantage == Vantage::Requester;
        if self.opts.tables && at_requester {
            let uplink = e.request_dir == flow.mn_dir;
            for (ts, ms) in e.deltas() {
                self.rtt.push(flow.id, uplink, ts, ms);
            }
        }
        Some(FlowEcho {
            request_dir: e.request_dir,
            summary: e.summary(*vantage),
            half_rtt: (at_requester && flow.at.len() == 1).then(|| e.half_rtt()).flatten(),
        })
    }

    fn udp_flow(&mut self, flow: &FlowCtx<'_>) {
        let echo = self.udp_echo(flow);
        for dir in [Dir::AtoB, Dir::BtoA] {
            if flow.at.iter().all(|(_, f)| f.packets[dir.index()] == 0) {
                continue;
            }
            let sender_side = flow.side_of(dir);
            let at_sender = flow.at(sender_side).filter(|f| f.packets[dir.index()] > 0);
            let at_receiver = flow.at(sender_side.other()).filter(|f| f.packets[dir.index()] > 0);
            let main = at_sender.or(at_receiver).unwrap_or(flow.at[0].1);
            let d = dir.index();
            let mut r = flow.base_report("udp", dir, main, main.packets[d], main.bytes[d], main.duplicates[d]);
            let mut owd_kind = self.owd_kind;
            let (packets, duplicates, losses_known, view) = match (at_sender, at_receiver) {
                (Some(s), Some(rx)) => {
                    let (mut p, dups) = match_udp(&s.udp_recs, &rx.udp_recs, dir);
                    if let Some(&(_, span)) = self.spans.iter().find(|(side, _)| *side == sender_side.other()) {
                        udp_stream::keep_within_capture(&mut p, span);
                    }
                    (p, dups, true, "two-sided")
                }
                (None, Some(rx)) => {
                    let st = udp_from_receiver(&rx.udp_recs, dir);
                    if let Some((span, received)) = st.stray_numbers {
                        self.stray_numbers.push((flow.id, span, received));
                    }
                    if !st.wall_clock_sends {
                        // Send stamps from a monotonic clock (iperf3): only differences mean anything.
                        owd_kind = OwdKind::Excess;
                    }
                    (st.packets, st.duplicates, st.losses_known, "receiver")
                }
                (Some(s), None) => (in_capture_order(s.udp_recs.iter().filter(|r| r.dir == dir)), 0, false, "sender"),
                (None, None) => continue,
            };
            let a = udp_stream::analyze(&packets, duplicates, losses_known, owd_kind, self.interval_ns);
            if a.packets_past_series > 0 {
                self.cut_series.push((flow.id, a.packets_past_series));
            }
            let s = &a.summary;
            r.loss_rate = s.loss_rate;
            // With the sender's capture, the probe header's numbers tell what it never saw
            // (an echo's numbers are its request's: not for the echoes).
            let echoes = echo.as_ref().is_some_and(|e| e.request_dir != dir);
            if let Some(sender) = at_sender.filter(|_| !echoes) {
                let between = if view == "two-sided" { s.packets_lost } else { None };
                r.loss_split = LossSplit::of(sender, at_receiver, dir, between);
                if let Some(total) = r.loss_split.and_then(|x| x.total()) {
                    r.loss_rate = Some(total);
                }
            }
            r.jitter_ms = s.jitter_ms;
            r.owd_ms = s.owd_ms;
            if let Some(e) = &echo {
                r.rtt_ms = e.summary.rtt_ms;
                if e.half_rtt.is_some() {
                    // One capture, at the requester: no two-sided OWD or loss per direction;
                    // half the round trip and the round-trip loss are the flow's.
                    r.owd_ms = e.half_rtt;
                    r.loss_rate = e.summary.loss_rate;
                }
                r.echo = Some(e.summary.clone());
            }
            r.goodput_bps = Some(s.throughput_bps);
            let bins: Vec<u64> = a.intervals.iter().map(|i| i.bytes).collect();
            r.series = self.series(&bins, s.duration_s);
            if self.opts.tables {
                let uplink = dir == flow.mn_dir;
                for (i, row) in a.intervals.iter().enumerate() {
                    self.intervals.push(flow.id, uplink, self.opts.interval_s, losses_known, i, row);
                }
                self.udp_packets.push_stream(flow.id, uplink, losses_known, &a.packets);
                self.gaps.push_stream(flow.id, uplink, &a.events);
                self.spikes.push_stream(flow.id, uplink, &a.spikes);
            }
            r.udp = Some(a.summary);
            r.udp_view = Some(view);
            self.reports.push(r);
        }
    }
}

/// An echoed flow's figures for the reports of both its directions.
struct FlowEcho {
    summary: EchoSummary,
    /// Where the requests go: the other direction's numbers follow the requests', so a number
    /// missing there is a request lost on its way, not an echo lost before the capture.
    request_dir: Dir,
    /// Only when the requester's capture alone holds the flow.
    half_rtt: Option<OwdSummary>,
}

/// Echoes pair by the cellperf probe header's sequence number when both directions are
/// probe streams, else by payload.
fn echo_key(recs: &[UdpRec]) -> MatchBy {
    let probe_stream = |d: Dir| {
        let recs: Vec<&UdpRec> = recs.iter().filter(|r| r.dir == d).collect();
        stream_header_kind(&recs) == Some(HeaderKind::Cellperf)
    };
    if probe_stream(Dir::AtoB) && probe_stream(Dir::BtoA) {
        MatchBy::CellperfSeq
    } else {
        MatchBy::Payload
    }
}

/// `n / of`, 0 when `of` is 0.
fn fraction(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 / of as f64
    }
}

fn serde_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|x| x.as_str().map(str::to_string)).unwrap_or_default()
}

type UdpKey = (u16, u64, u32);

fn udp_key(r: &UdpRec) -> UdpKey {
    (r.ip_id.unwrap_or(0), r.payload_hash, r.payload_len)
}

/// Matches a direction's datagrams across captures by (IP id, payload hash, length).
/// Returns the stream in sending order and the number of extra copies received.
fn match_udp(at_sender: &[UdpRec], at_receiver: &[UdpRec], dir: Dir) -> (Vec<StreamPacket>, u64) {
    let received: Vec<(UdpKey, i64)> = at_receiver.iter().filter(|r| r.dir == dir).map(|r| (udp_key(r), r.ts_ns)).collect();
    let sent: Vec<&UdpRec> = at_sender.iter().filter(|r| r.dir == dir).collect();
    let keys: Vec<UdpKey> = sent.iter().map(|r| udp_key(r)).collect();
    let (arrival, extra) = match_in_order(&keys, &received);
    let packets = sent
        .iter()
        .zip(arrival)
        .enumerate()
        .map(|(i, (r, recv))| StreamPacket { seq: i as u64, send_ns: Some(r.ts_ns), recv_ns: recv, bytes: r.payload_len })
        .collect();
    (packets, extra)
}

/// The kind of probe header a stream carries: nearly all (≥ 90 %) of its datagrams carry
/// the same kind, and for iperf3 (no magic number) nearly all consecutive arrivals step the
/// sequence number forward by 1..=16 (random payloads would not). Otherwise headers are
/// taken as coincidences.
fn stream_header_kind(recs: &[&UdpRec]) -> Option<HeaderKind> {
    let n = recs.len();
    for kind in [HeaderKind::Cellperf, HeaderKind::Iperf3] {
        let seqs: Vec<u64> = recs.iter().filter_map(|r| r.probe.filter(|h| h.kind == kind)).map(|h| h.seq).collect();
        if n == 0 || seqs.len() * 10 < n * 9 {
            continue;
        }
        let runs_on = seqs.windows(2).filter(|w| w[1] > w[0] && w[1] - w[0] <= 16).count();
        if kind == HeaderKind::Cellperf || runs_on * 10 >= seqs.len().saturating_sub(1) * 9 {
            return Some(kind);
        }
    }
    None
}

/// A stream rebuilt from the receiver's capture alone.
struct ReceiverStream {
    packets: Vec<StreamPacket>,
    duplicates: u64,
    losses_known: bool,
    /// The send times are on a clock comparable with the capture's (not a monotonic one).
    wall_clock_sends: bool,
    /// (span, datagrams) of header sequence numbers too far apart to be one stream's.
    stray_numbers: Option<(u64, u64)>,
}

/// Sequence numbers missing from a stream seen at its receiver are its losses, unless there
/// would be more than this many and more than [`MAX_LOST_PER_RECEIVED`] per datagram
/// received (so a stream that lost up to 4 M datagrams, or delivered one in a hundred, is
/// counted in full): then the numbers are no stream's but a stray or damaged header's, and
/// an entry for every number between them would take memory without end.
const MAX_LOST: u64 = 1 << 22;
const MAX_LOST_PER_RECEIVED: u64 = 100;

impl LossSplit {
    /// The split of a cellperf probe stream sent `dir` (`None` for another stream, or
    /// numbers too far apart to be one stream's, see [`MAX_LOST`]), seen at its sender's
    /// capture and maybe its receiver's; `between`: datagrams the sender's capture saw and
    /// the receiver's did not (two captures).
    fn of(sender: &FlowAt, receiver: Option<&FlowAt>, dir: Dir, between: Option<u64>) -> Option<LossSplit> {
        let recs: Vec<&UdpRec> = sender.udp_recs.iter().filter(|r| r.dir == dir).collect();
        if stream_header_kind(&recs) != Some(HeaderKind::Cellperf) {
            return None;
        }
        let at_receiver = receiver.map(|f| &f.udp_recs[..]).unwrap_or_default().iter().filter(|r| r.dir == dir);
        let mut seqs: Vec<u64> = recs
            .into_iter()
            .chain(at_receiver)
            .filter_map(|r| r.probe.filter(|h| h.kind == HeaderKind::Cellperf))
            .map(|h| h.seq)
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        let (&lo, &hi) = (seqs.first()?, seqs.last()?);
        let seen = seqs.len() as u64;
        let before = (hi - lo).saturating_add(1) - seen;
        if before > MAX_LOST.max(MAX_LOST_PER_RECEIVED.saturating_mul(seen)) {
            return None;
        }
        let numbered = seen + before;
        let share = |n: u64| n as f64 / numbered as f64;
        Some(LossSplit {
            numbered,
            lost_before_capture: before,
            before_capture: share(before),
            between_captures: between.map(share),
        })
    }

    /// The whole loss, when both parts are known.
    fn total(&self) -> Option<f64> {
        Some(self.before_capture + self.between_captures?)
    }
}

/// A stream seen at its receiver only: sequence numbers and send times come from probe
/// headers when the stream has them; otherwise losses are unknown.
fn udp_from_receiver(recs: &[UdpRec], dir: Dir) -> ReceiverStream {
    let recs: Vec<&UdpRec> = recs.iter().filter(|r| r.dir == dir).collect();
    // Without usable headers: the arrivals, losses unknown.
    let unnumbered = |stray_numbers| ReceiverStream {
        packets: in_capture_order(recs.iter().copied()),
        duplicates: 0,
        losses_known: false,
        wall_clock_sends: false,
        stray_numbers,
    };
    let Some(kind) = stream_header_kind(&recs) else { return unnumbered(None) };
    let mut by_seq: std::collections::BTreeMap<u64, StreamPacket> = std::collections::BTreeMap::new();
    let mut duplicates = 0u64;
    let mut offsets = Vec::new();
    for r in &recs {
        let Some(h) = r.probe.filter(|h| h.kind == kind) else { continue };
        if by_seq.contains_key(&h.seq) {
            duplicates += 1;
            continue;
        }
        offsets.push((r.ts_ns - h.send_ns) as f64);
        by_seq.insert(h.seq, StreamPacket { seq: h.seq, send_ns: Some(h.send_ns), recv_ns: Some(r.ts_ns), bytes: r.payload_len });
    }
    const DAY_NS: f64 = 86_400e9;
    let wall_clock_sends = Summary::of(&mut offsets).is_some_and(|s| s.median.abs() < DAY_NS);
    let (Some(&lo), Some(&hi)) = (by_seq.keys().next(), by_seq.keys().next_back()) else {
        return ReceiverStream { packets: Vec::new(), duplicates, losses_known: true, wall_clock_sends, stray_numbers: None };
    };
    let received = by_seq.len() as u64;
    let span = (hi - lo).saturating_add(1);
    if span - received > MAX_LOST.max(MAX_LOST_PER_RECEIVED.saturating_mul(received)) {
        return unnumbered(Some((span, received)));
    }
    // Missing sequence numbers are losses; their send times are not known.
    let mut packets = Vec::with_capacity(span as usize);
    let mut it = by_seq.into_values().peekable();
    for s in lo..=hi {
        let lost = StreamPacket { seq: s, send_ns: None, recv_ns: None, bytes: 0 };
        match it.peek() {
            Some(p) if p.seq == s => packets.push(it.next().unwrap_or(lost)),
            _ => packets.push(lost),
        }
    }
    ReceiverStream { packets, duplicates, losses_known: true, wall_clock_sends, stray_numbers: None }
}

/// Datagrams numbered in the order the capture saw them, each "received" when seen: a
/// stream without usable sequence numbers (at its receiver: arrivals, losses unknown), or
/// one seen at its sender only (its sending rate and spacing, nothing about delivery).
fn in_capture_order<'r>(recs: impl Iterator<Item = &'r UdpRec>) -> Vec<StreamPacket> {
    recs.enumerate()
        .map(|(i, r)| StreamPacket { seq: i as u64, send_ns: None, recv_ns: Some(r.ts_ns), bytes: r.payload_len })
        .collect()
}
