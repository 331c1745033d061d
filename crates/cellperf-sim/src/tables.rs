//! The run's time series as Arrow record batches (written as Parquet by `cellperf simulate
//! --out`): `cwnd` (time_s, user, cwnd, ssthresh; one row per change, in segments) and
//! `rtt` (time_s, user, rtt_s; one row per RTT sample).
use crate::driver::Series;
use arrow_array::{ArrayRef, Float64Array, RecordBatch, UInt32Array};
use arrow_schema::{ArrowError, Field, Schema};
use std::sync::Arc;

fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch, ArrowError> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), false))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
}

/// (name, batch) for each table.
pub fn series_batches(s: &Series) -> Result<Vec<(&'static str, RecordBatch)>, ArrowError> {
    let f64s = |v: &[f64]| Arc::new(Float64Array::from(v.to_vec())) as ArrayRef;
    let u32s = |v: &[u32]| Arc::new(UInt32Array::from(v.to_vec())) as ArrayRef;
    Ok(vec![
        (
            "cwnd",
            batch(vec![
                ("time_s", f64s(&s.cwnd_time_s)),
                ("user", u32s(&s.cwnd_user)),
                ("cwnd", f64s(&s.cwnd)),
                // No threshold set yet is +inf.
                ("ssthresh", f64s(&s.ssthresh)),
            ])?,
        ),
        (
            "rtt",
            batch(vec![
                ("time_s", f64s(&s.rtt_time_s)),
                ("user", u32s(&s.rtt_user)),
                ("rtt_s", f64s(&s.rtt_s)),
            ])?,
        ),
    ])
}
