//! The Arrow tables `cellperf analyze` exports (one record batch each); their schemas are
//! documented in `docs/tables.md`. Columns are filled as plain vectors and turned into
//! Arrow arrays once, without per-value dispatch.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, RecordBatch, TimestampNanosecondArray, UInt16Array, UInt32Array,
    UInt64Array, UInt8Array,
};
use arrow_schema::ArrowError;
use cellperf_capture::{Packet, Transport};

use crate::spikes::DelaySpike;
use crate::tcp_two_sided::AckSpacing;
use crate::record::PacketResult;
use crate::udp_stream::{GapEvent, IntervalRow};

fn batch(cols: Vec<(&str, ArrayRef)>) -> Result<RecordBatch, ArrowError> {
    RecordBatch::try_from_iter(cols)
}

fn ts(v: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from(v).with_timezone("UTC"))
}

fn ts_opt(v: Vec<Option<i64>>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from(v).with_timezone("UTC"))
}

/// Every TCP and UDP packet of every capture.
#[derive(Default)]
pub struct PacketTable {
    pub capture: Vec<u8>,
    pub flow_id: Vec<u32>,
    pub ts: Vec<i64>,
    /// 0: from the flow key's endpoint `a` to `b`; 1: the reverse (turned into `uplink`).
    pub dir: Vec<u8>,
    pub ttl: Vec<u8>,
    pub ip_id: Vec<Option<u16>>,
    pub ip_len: Vec<u32>,
    pub payload_len: Vec<u32>,
    pub tcp_seq: Vec<Option<u32>>,
    pub tcp_ack: Vec<Option<u32>>,
    pub tcp_flags: Vec<Option<u16>>,
    pub tcp_window: Vec<Option<u16>>,
    pub tcp_tsval: Vec<Option<u32>>,
    pub probe_seq: Vec<Option<u64>>,
}

impl PacketTable {
    /// A row for `p`, a TCP or UDP packet of flow `flow_id` going `dir` (0: from the
    /// flow key's `a` to `b`) at capture `capture`.
    // Inlined into the reading loop: a call would take the decoded packet through memory
    // for every packet, tables or not.
    #[inline(always)]
    pub fn push(&mut self, capture: u8, flow_id: u32, dir: u8, p: &Packet<'_>, probe_seq: Option<u64>) {
        let (seq, ack, flags, window, tsval, payload_len) = match &p.transport {
            Transport::Tcp(t) => {
                (Some(t.seq), Some(t.ack), Some(t.flags), Some(t.window), t.options.timestamp.map(|x| x.0), t.payload_len)
            }
            Transport::Udp(u) => (None, None, None, None, None, u.payload_len),
            Transport::Other(_) => return,
        };
        self.tcp_seq.push(seq);
        self.tcp_ack.push(ack);
        self.tcp_flags.push(flags);
        self.tcp_window.push(window);
        self.tcp_tsval.push(tsval);
        self.payload_len.push(payload_len);
        self.capture.push(capture);
        self.flow_id.push(flow_id);
        self.ts.push(p.ts_ns);
        self.dir.push(dir);
        self.ttl.push(p.ip.ttl);
        self.ip_id.push(p.ip.ip_id);
        self.ip_len.push(p.ip.len);
        self.probe_seq.push(probe_seq);
    }

    /// `mn_dir[flow_id]` is the key direction that goes from the MN to the CN.
    pub fn into_batch(self, mn_dir: &[u8]) -> Result<RecordBatch, ArrowError> {
        let uplink: Vec<bool> = self.dir.iter().zip(&self.flow_id).map(|(d, f)| *d == mn_dir[*f as usize]).collect();
        batch(vec![
            ("capture", Arc::new(UInt8Array::from(self.capture)) as ArrayRef),
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id))),
            ("ts", ts(self.ts)),
            ("uplink", Arc::new(BooleanArray::from(uplink))),
            ("ttl", Arc::new(UInt8Array::from(self.ttl))),
            ("ip_id", Arc::new(UInt16Array::from(self.ip_id))),
            ("ip_len", Arc::new(UInt32Array::from(self.ip_len))),
            ("payload_len", Arc::new(UInt32Array::from(self.payload_len))),
            ("tcp_seq", Arc::new(UInt32Array::from(self.tcp_seq))),
            ("tcp_ack", Arc::new(UInt32Array::from(self.tcp_ack))),
            ("tcp_flags", Arc::new(UInt16Array::from(self.tcp_flags))),
            ("tcp_window", Arc::new(UInt16Array::from(self.tcp_window))),
            ("tcp_tsval", Arc::new(UInt32Array::from(self.tcp_tsval))),
            ("probe_seq", Arc::new(UInt64Array::from(self.probe_seq))),
        ])
    }
}

/// Per-interval series of every flow.
#[derive(Default)]
pub struct IntervalTable {
    pub flow_id: Vec<u32>,
    /// The series is of MN→CN traffic.
    pub uplink: Vec<bool>,
    pub interval: Vec<u32>,
    pub start_ts: Vec<i64>,
    pub start_s: Vec<f64>,
    pub bytes: Vec<u64>,
    pub throughput_bps: Vec<f64>,
    pub packets_sent: Vec<Option<u64>>,
    pub packets_lost: Vec<Option<u64>>,
    pub loss_rate: Vec<Option<f64>>,
    pub owd_mean_ms: Vec<Option<f64>>,
    pub jitter_mean_ms: Vec<Option<f64>>,
}

impl IntervalTable {
    /// Appends one interval of a flow's series; packet counts only where losses are known.
    pub fn push(&mut self, flow_id: u32, uplink: bool, interval_s: f64, losses_known: bool, index: usize, row: &IntervalRow) {
        let (sent, lost) =
            if losses_known { (Some(row.packets_sent), Some(row.packets_lost)) } else { (None, None) };
        self.flow_id.push(flow_id);
        self.uplink.push(uplink);
        self.interval.push(index as u32);
        self.start_ts.push(row.start_ns);
        self.start_s.push(row.start_s);
        self.bytes.push(row.bytes);
        self.throughput_bps.push(row.bytes as f64 * 8.0 / interval_s);
        self.packets_sent.push(sent);
        self.packets_lost.push(lost);
        self.loss_rate.push(match (sent, lost) {
            (Some(s), Some(l)) if s > 0 => Some(l as f64 / s as f64),
            _ => None,
        });
        self.owd_mean_ms.push(row.owd_mean_ms);
        self.jitter_mean_ms.push(row.jitter_mean_ms);
    }

    pub fn into_batch(self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("interval", Arc::new(UInt32Array::from(self.interval))),
            ("start_ts", ts(self.start_ts)),
            ("start_s", Arc::new(Float64Array::from(self.start_s))),
            ("bytes", Arc::new(UInt64Array::from(self.bytes))),
            ("throughput_bps", Arc::new(Float64Array::from(self.throughput_bps))),
            ("packets_sent", Arc::new(UInt64Array::from(self.packets_sent))),
            ("packets_lost", Arc::new(UInt64Array::from(self.packets_lost))),
            ("loss_rate", Arc::new(Float64Array::from(self.loss_rate))),
            ("owd_mean_ms", Arc::new(Float64Array::from(self.owd_mean_ms))),
            ("jitter_mean_ms", Arc::new(Float64Array::from(self.jitter_mean_ms))),
        ])
    }
}

/// Per-packet results of UDP streams (sending order).
#[derive(Default)]
pub struct UdpPacketTable {
    pub flow_id: Vec<u32>,
    /// The stream goes MN→CN (a UDP flow has one stream per direction).
    pub uplink: Vec<bool>,
    pub seq: Vec<u64>,
    pub send_ts: Vec<Option<i64>>,
    pub recv_ts: Vec<Option<i64>>,
    pub bytes: Vec<u32>,
    pub lost: Vec<bool>,
    pub owd_ms: Vec<Option<f64>>,
    pub jitter_ms: Vec<Option<f64>>,
}

impl UdpPacketTable {
    /// Appends a stream's per-packet results (sending order).
    pub fn push_stream(&mut self, flow_id: u32, uplink: bool, losses_known: bool, packets: &[PacketResult]) {
        for p in packets {
            self.flow_id.push(flow_id);
            self.uplink.push(uplink);
            self.seq.push(p.seq);
            self.send_ts.push(p.send_ns);
            self.recv_ts.push(p.recv_ns);
            self.bytes.push(p.bytes);
            self.lost.push(losses_known && p.recv_ns.is_none());
            self.owd_ms.push(p.owd_ms);
            self.jitter_ms.push(p.jitter_ms);
        }
    }

    pub fn into_batch(self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("seq", Arc::new(UInt64Array::from(self.seq))),
            ("send_ts", ts_opt(self.send_ts)),
            ("recv_ts", ts_opt(self.recv_ts)),
            ("bytes", Arc::new(UInt32Array::from(self.bytes))),
            ("lost", Arc::new(BooleanArray::from(self.lost))),
            ("owd_ms", Arc::new(Float64Array::from(self.owd_ms))),
            ("jitter_ms", Arc::new(Float64Array::from(self.jitter_ms))),
        ])
    }
}

/// Every gap and delay period of the UDP streams (004 Figs. 3-4).
#[derive(Default)]
pub struct GapTable {
    pub flow_id: Vec<u32>,
    pub uplink: Vec<bool>,
    pub kind: StringBuilder,
    pub start_ts: Vec<i64>,
    pub duration_ms: Vec<f64>,
    pub lost: Vec<u64>,
}

impl GapTable {
    pub fn push_stream(&mut self, flow_id: u32, uplink: bool, events: &[GapEvent]) {
        for e in events {
            self.flow_id.push(flow_id);
            self.uplink.push(uplink);
            self.kind.append_value(if e.gap { "gap" } else { "delay_period" });
            self.start_ts.push(e.start_ns);
            self.duration_ms.push(e.duration_ms);
            self.lost.push(e.lost);
        }
    }

    pub fn into_batch(mut self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("kind", Arc::new(self.kind.finish())),
            ("start_ts", ts(self.start_ts)),
            ("duration_ms", Arc::new(Float64Array::from(self.duration_ms))),
            ("lost", Arc::new(UInt64Array::from(self.lost))),
        ])
    }
}

/// Every delay spike of every UDP stream (`spikes`).
#[derive(Default)]
pub struct SpikeTable {
    pub flow_id: Vec<u32>,
    pub uplink: Vec<bool>,
    pub start_ts: Vec<i64>,
    pub duration_ms: Vec<f64>,
    pub packets: Vec<u64>,
    pub peak_ms: Vec<f64>,
}

impl SpikeTable {
    pub fn push_stream(&mut self, flow_id: u32, uplink: bool, spikes: &[DelaySpike]) {
        for s in spikes {
            self.flow_id.push(flow_id);
            self.uplink.push(uplink);
            self.start_ts.push(s.start_ns);
            self.duration_ms.push(s.duration_ms);
            self.packets.push(s.packets);
            self.peak_ms.push(s.peak_ms);
        }
    }

    pub fn into_batch(self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("start_ts", ts(self.start_ts)),
            ("duration_ms", Arc::new(Float64Array::from(self.duration_ms))),
            ("packets", Arc::new(UInt64Array::from(self.packets))),
            ("peak_ms", Arc::new(Float64Array::from(self.peak_ms))),
        ])
    }
}

/// Every TCP retransmission with its class.
#[derive(Default)]
pub struct RetransmissionTable {
    pub flow_id: Vec<u32>,
    pub uplink: Vec<bool>,
    pub ts: Vec<i64>,
    pub rel_seq: Vec<u64>,
    pub len: Vec<u32>,
    pub class: StringBuilder,
    pub serial: Vec<bool>,
    pub method: StringBuilder,
}

impl RetransmissionTable {
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        flow_id: u32,
        uplink: bool,
        ts_ns: i64,
        rel_seq: u64,
        len: u32,
        class: &str,
        serial: bool,
        method: &str,
    ) {
        self.flow_id.push(flow_id);
        self.uplink.push(uplink);
        self.ts.push(ts_ns);
        self.rel_seq.push(rel_seq);
        self.len.push(len);
        self.class.append_value(class);
        self.serial.push(serial);
        self.method.append_value(method);
    }

    pub fn into_batch(mut self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("ts", ts(self.ts)),
            ("rel_seq", Arc::new(UInt64Array::from(self.rel_seq))),
            ("len", Arc::new(UInt32Array::from(self.len))),
            ("class", Arc::new(self.class.finish())),
            ("serial", Arc::new(BooleanArray::from(self.serial))),
            ("method", Arc::new(self.method.finish())),
        ])
    }
}

/// ΔTr/ΔTs of every ACK seen at both ends.
#[derive(Default)]
pub struct AckTable {
    pub flow_id: Vec<u32>,
    /// The data these ACKs acknowledge goes MN→CN.
    pub uplink: Vec<bool>,
    pub sent_ts: Vec<i64>,
    pub received_ts: Vec<i64>,
    pub ratio: Vec<f64>,
    pub compressed: Vec<bool>,
    pub in_event: Vec<bool>,
}

impl AckTable {
    /// An ACK of flow `flow_id`'s data, which goes MN→CN when `uplink`.
    pub fn push(&mut self, flow_id: u32, uplink: bool, a: &AckSpacing) {
        self.flow_id.push(flow_id);
        self.uplink.push(uplink);
        self.sent_ts.push(a.sent_ns);
        self.received_ts.push(a.received_ns);
        self.ratio.push(a.ratio);
        self.compressed.push(a.compressed);
        self.in_event.push(a.in_event);
    }

    pub fn into_batch(self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("sent_ts", ts(self.sent_ts)),
            ("received_ts", ts(self.received_ts)),
            ("ratio", Arc::new(Float64Array::from(self.ratio))),
            ("compressed", Arc::new(BooleanArray::from(self.compressed))),
            ("in_event", Arc::new(BooleanArray::from(self.in_event))),
        ])
    }
}

/// RTT samples (Karn's rule) measured at the data sender's capture.
#[derive(Default)]
pub struct RttTable {
    pub flow_id: Vec<u32>,
    /// The data (or requests) whose round trips these are go MN→CN.
    pub uplink: Vec<bool>,
    pub ts: Vec<i64>,
    pub rtt_ms: Vec<f64>,
}

impl RttTable {
    pub fn push(&mut self, flow_id: u32, uplink: bool, ts_ns: i64, rtt_ms: f64) {
        self.flow_id.push(flow_id);
        self.uplink.push(uplink);
        self.ts.push(ts_ns);
        self.rtt_ms.push(rtt_ms);
    }

    pub fn into_batch(self) -> Result<RecordBatch, ArrowError> {
        batch(vec![
            ("flow_id", Arc::new(UInt32Array::from(self.flow_id)) as ArrayRef),
            ("uplink", Arc::new(BooleanArray::from(self.uplink))),
            ("ts", ts(self.ts)),
            ("rtt_ms", Arc::new(Float64Array::from(self.rtt_ms))),
        ])
    }
}
