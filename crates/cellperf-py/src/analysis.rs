//! Bindings of cellperf-analysis: `analyze_captures` returns the report as JSON text and
//! the tables as pyarrow record batches (Arrow C data interface, no copies).
use std::path::PathBuf;

use arrow::array::{Array, AsArray, PrimitiveArray, RecordBatch};
use arrow::datatypes::{ArrowPrimitiveType, Int64Type, UInt32Type, UInt64Type};
use arrow::pyarrow::{FromPyArrow, ToPyArrow};
use cellperf_analysis::tables::{GapTable, IntervalTable, SpikeTable, UdpPacketTable};
use cellperf_analysis::udp_stream::{self, OwdKind, StreamPacket};
use cellperf_analysis::{CaptureInput, Options, Side};
use cellperf_capture::reader::MAX_TS_NS;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_native, InputError, PyException, "A capture or option the user can fix; the message is one line.");

#[pyfunction]
#[pyo3(signature = (captures, interval_s = 5.0, mn_addr = None, synced_clocks = false, tables = false))]
fn analyze_captures(
    py: Python<'_>,
    captures: Vec<(PathBuf, String)>,
    interval_s: f64,
    mn_addr: Option<String>,
    synced_clocks: bool,
    tables: bool,
) -> PyResult<(String, Vec<(String, Py<PyAny>)>)> {
    let mut inputs = Vec::new();
    for (path, side) in captures {
        let side = match side.as_str() {
            "mn" => Side::Mn,
            "cn" => Side::Cn,
            other => return Err(InputError::new_err(format!("capture side must be 'mn' or 'cn', not '{other}'"))),
        };
        inputs.push(CaptureInput { path, side });
    }
    let mn_addr = match mn_addr {
        Some(s) => Some(
            cellperf_analysis::parse_addr(&s)
                .ok_or_else(|| InputError::new_err(format!("--mn-addr: '{s}' is not an IPv4 or IPv6 address")))?,
        ),
        None => None,
    };
    let opts = Options { interval_s, mn_addr, synced_clocks, tables };
    let analysis = py
        .detach(|| cellperf_analysis::analyze(&inputs, &opts))
        .map_err(|e| InputError::new_err(e.to_string()))?;
    let json = serde_json::to_string(&analysis.report).map_err(|e| InputError::new_err(e.to_string()))?;
    let mut out = Vec::new();
    for (name, batch) in analysis.tables.batches {
        out.push((name.to_string(), batch.to_pyarrow(py)?.unbind()));
    }
    Ok((json, out))
}

/// One primitive column of `batch`, or an InputError naming it.
fn column<'b, T: ArrowPrimitiveType>(batch: &'b RecordBatch, name: &str) -> PyResult<&'b PrimitiveArray<T>> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<T>())
        .ok_or_else(|| InputError::new_err(format!("stream table: column '{name}' missing or not {}", T::DATA_TYPE)))
}

/// The UDP stream metrics of `cellperf_analysis::udp_stream` for packets given in sending
/// order as a pyarrow RecordBatch with columns seq (uint64), send_ns and recv_ns (int64,
/// null when unknown / lost) and bytes (uint32). Returns the summary as JSON and the
/// `udp_packets`, `intervals` and `gaps` tables of docs/tables.md for the given flow id.
#[pyfunction]
#[pyo3(signature = (packets, flow_id, uplink, duplicates = 0, losses_known = true, owd_kind = "excess", interval_s = 5.0))]
#[allow(clippy::too_many_arguments)]
fn analyze_udp_stream(
    py: Python<'_>,
    packets: &Bound<'_, PyAny>,
    flow_id: u32,
    uplink: bool,
    duplicates: u64,
    losses_known: bool,
    owd_kind: &str,
    interval_s: f64,
) -> PyResult<(String, Vec<(String, Py<PyAny>)>)> {
    let kind = match owd_kind {
        "raw" => OwdKind::Raw,
        "excess" => OwdKind::Excess,
        "offset_corrected" => OwdKind::OffsetCorrected,
        other => {
            return Err(InputError::new_err(format!(
                "owd_kind must be 'raw', 'excess' or 'offset_corrected', not '{other}'"
            )))
        }
    };
    if !(interval_s > 0.0 && interval_s.is_finite()) {
        return Err(InputError::new_err(format!("interval must be a positive number of seconds, not {interval_s}")));
    }
    let batch = RecordBatch::from_pyarrow_bound(packets)?;
    let (seq, send, recv) = (
        column::<UInt64Type>(&batch, "seq")?,
        column::<Int64Type>(&batch, "send_ns")?,
        column::<Int64Type>(&batch, "recv_ns")?,
    );
    let bytes = column::<UInt32Type>(&batch, "bytes")?;
    // Times as captures give them (cellperf_capture::reader::MAX_TS_NS), so that no
    // difference of two overflows.
    let in_range = |t: &Option<i64>| t.is_none_or(|t| (0..=MAX_TS_NS).contains(&t));
    let stream: Vec<StreamPacket> = (0..batch.num_rows())
        .map(|i| StreamPacket {
            seq: seq.value(i),
            send_ns: send.is_valid(i).then(|| send.value(i)),
            recv_ns: recv.is_valid(i).then(|| recv.value(i)),
            bytes: bytes.value(i),
        })
        .collect();
    if let Some(p) = stream.iter().find(|p| !in_range(&p.send_ns) || !in_range(&p.recv_ns)) {
        return Err(InputError::new_err(format!(
            "packet {}: send or receive time outside 1970-2116 ({:?}, {:?} ns)",
            p.seq, p.send_ns, p.recv_ns
        )));
    }
    let interval_ns = (interval_s * 1e9) as i64;
    let a = py.detach(|| udp_stream::analyze(&stream, duplicates, losses_known, kind, interval_ns));
    let mut packets_out = UdpPacketTable::default();
    packets_out.push_stream(flow_id, uplink, losses_known, &a.packets);
    let mut gaps = GapTable::default();
    gaps.push_stream(flow_id, uplink, &a.events);
    let mut spikes = SpikeTable::default();
    spikes.push_stream(flow_id, uplink, &a.spikes);
    let mut intervals = IntervalTable::default();
    for (i, row) in a.intervals.iter().enumerate() {
        intervals.push(flow_id, uplink, interval_s, losses_known, i, row);
    }
    let err = |e: arrow::error::ArrowError| InputError::new_err(format!("building tables: {e}"));
    let json = serde_json::to_string(&a.summary).map_err(|e| InputError::new_err(e.to_string()))?;
    Ok((
        json,
        vec![
            ("udp_packets".into(), packets_out.into_batch().map_err(err)?.to_pyarrow(py)?.unbind()),
            ("intervals".into(), intervals.into_batch().map_err(err)?.to_pyarrow(py)?.unbind()),
            ("gaps".into(), gaps.into_batch().map_err(err)?.to_pyarrow(py)?.unbind()),
            ("delay_spikes".into(), spikes.into_batch().map_err(err)?.to_pyarrow(py)?.unbind()),
        ],
    ))
}

/// The RTP streams, SSRC changes and RTCP reports of one capture (cellperf_analysis::rtp), as JSON.
#[pyfunction]
fn rtp_streams(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let report = py
        .detach(|| {
            let capture = cellperf_capture::Capture::open(&path)?;
            cellperf_analysis::rtp::analyze_capture(&capture)
        })
        .map_err(|e| InputError::new_err(e.to_string()))?;
    serde_json::to_string(&report).map_err(|e| InputError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add_function(wrap_pyfunction!(analyze_captures, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_udp_stream, m)?)?;
    m.add_function(wrap_pyfunction!(rtp_streams, m)?)?;
    Ok(())
}
