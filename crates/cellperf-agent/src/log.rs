//! Per-packet logs of the agents (schema in `docs/agents.md`): one row per UDP datagram a
//! host sent or received. The probe's log merges both ends (Arrow, written by Python as
//! Parquet or CSV); the server's log holds what the server saw (CSV, written here so the
//! daemon needs no Python).

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, TimestampNanosecondBuilder, UInt32Builder,
    UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};

use crate::wire::Record;

/// One row of a per-packet log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    /// `<run id>/<step>/<direction>`: unique per stream across runs.
    pub flow_id: String,
    /// Index of the step in a sweep (0 for single-step tests).
    pub step: u32,
    /// `up` (probe → server) or `down`.
    pub direction: &'static str,
    pub seq: u64,
    pub send_ns: Option<i64>,
    pub recv_ns: Option<i64>,
    pub bytes: u32,
    /// `None` when this end cannot know (the server's log of packets it sent).
    pub lost: Option<bool>,
    pub owd_ms: Option<f64>,
    /// `raw`, `excess` or `half_rtt` (docs/methods.md §1).
    pub owd_kind: &'static str,
    /// Round trip of an echoed packet, on the probe's clock alone.
    pub rtt_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
}

/// The server's own log of one test: what it received (`up`) and what it sent (`down`, echoes
/// included), on its clock alone. The server writes it to `--log-dir`; the probe builds the same
/// rows from the records the server returns, for `--server-log`. Flows are `<prefix>/<direction>`.
pub fn server_view_rows(
    flow_prefix: &str,
    step: u32,
    up: &[Record],
    down: &[Record],
) -> Vec<LogRow> {
    let row = |r: &Record, dir: &'static str| LogRow {
        flow_id: format!("{flow_prefix}/{dir}"),
        step,
        direction: dir,
        seq: r.seq,
        send_ns: r.send_ns,
        recv_ns: r.recv_ns,
        bytes: r.bytes,
        lost: r.recv_ns.map(|_| false),
        owd_ms: r
            .recv_ns
            .zip(r.send_ns)
            .map(|(rx, tx)| (rx - tx) as f64 / 1e6),
        owd_kind: "raw",
        rtt_ms: None,
        jitter_ms: None,
    };
    up.iter()
        .map(|r| row(r, "up"))
        .chain(down.iter().map(|r| row(r, "down")))
        .collect()
}

pub fn schema() -> Schema {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    Schema::new(vec![
        Field::new("flow_id", DataType::Utf8, false),
        Field::new("step", DataType::UInt32, false),
        Field::new("direction", DataType::Utf8, false),
        Field::new("seq", DataType::UInt64, false),
        Field::new("send_ts", ts.clone(), true),
        Field::new("recv_ts", ts, true),
        Field::new("bytes", DataType::UInt32, false),
        Field::new("lost", DataType::Boolean, true),
        Field::new("owd_ms", DataType::Float64, true),
        Field::new("owd_kind", DataType::Utf8, false),
        Field::new("rtt_ms", DataType::Float64, true),
        Field::new("jitter_ms", DataType::Float64, true),
    ])
}

pub fn to_record_batch(rows: &[LogRow]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = rows.len();
    let mut flow = StringBuilder::with_capacity(n, n * 16);
    let mut step = UInt32Builder::with_capacity(n);
    let mut dir = StringBuilder::with_capacity(n, n * 4);
    let mut seq = UInt64Builder::with_capacity(n);
    let mut send = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut recv = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut bytes = UInt32Builder::with_capacity(n);
    let mut lost = BooleanBuilder::with_capacity(n);
    let mut owd = Float64Builder::with_capacity(n);
    let mut kind = StringBuilder::with_capacity(n, n * 6);
    let mut rtt = Float64Builder::with_capacity(n);
    let mut jit = Float64Builder::with_capacity(n);
    for r in rows {
        flow.append_value(&r.flow_id);
        step.append_value(r.step);
        dir.append_value(r.direction);
        seq.append_value(r.seq);
        send.append_option(r.send_ns);
        recv.append_option(r.recv_ns);
        bytes.append_value(r.bytes);
        lost.append_option(r.lost);
        owd.append_option(r.owd_ms);
        kind.append_value(r.owd_kind);
        rtt.append_option(r.rtt_ms);
        jit.append_option(r.jitter_ms);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(flow.finish()),
        Arc::new(step.finish()),
        Arc::new(dir.finish()),
        Arc::new(seq.finish()),
        Arc::new(send.finish()),
        Arc::new(recv.finish()),
        Arc::new(bytes.finish()),
        Arc::new(lost.finish()),
        Arc::new(owd.finish()),
        Arc::new(kind.finish()),
        Arc::new(rtt.finish()),
        Arc::new(jit.finish()),
    ];
    RecordBatch::try_new(Arc::new(schema()), cols)
}

/// RFC 3339 UTC with nanoseconds, e.g. `2024-05-01T12:00:00.000000001Z`.
pub fn rfc3339_ns(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Writes rows as CSV with the [`schema`] columns, atomically (temporary file, then rename),
/// so a reader never sees half a log.
pub fn write_csv(path: &Path, rows: &[LogRow]) -> io::Result<()> {
    let tmp = path.with_extension("csv.part");
    {
        let mut w = io::BufWriter::new(std::fs::File::create(&tmp)?);
        let names: Vec<String> = schema().fields().iter().map(|f| f.name().clone()).collect();
        writeln!(w, "{}", names.join(","))?;
        let t = |v: Option<i64>| v.map(rfc3339_ns).unwrap_or_default();
        let f = |v: Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_default();
        for r in rows {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                r.flow_id,
                r.step,
                r.direction,
                r.seq,
                t(r.send_ns),
                t(r.recv_ns),
                r.bytes,
                r.lost.map(|l| l.to_string()).unwrap_or_default(),
                f(r.owd_ms),
                r.owd_kind,
                f(r.rtt_ms),
                f(r.jitter_ms)
            )?;
        }
        w.flush()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339_ns(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            rfc3339_ns(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        assert_eq!(
            rfc3339_ns(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(rfc3339_ns(-1), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn batch_has_schema_and_nulls() {
        let row = LogRow {
            flow_id: "r/0/up".into(),
            step: 0,
            direction: "up",
            seq: 3,
            send_ns: Some(5),
            recv_ns: None,
            bytes: 20,
            lost: Some(true),
            owd_ms: None,
            owd_kind: "raw",
            rtt_ms: None,
            jitter_ms: None,
        };
        let b = to_record_batch(&[
            row.clone(),
            LogRow {
                seq: 4,
                recv_ns: Some(9),
                lost: Some(false),
                ..row
            },
        ])
        .unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.schema().field(5).name(), "recv_ts");
        assert_eq!(b.column(5).null_count(), 1);
    }
}
