//! Bindings of cellperf-analysis: `analyze_captures` returns the report as JSON text and
//! the tables as pyarrow record batches (Arrow C data interface, no copies).
use std::path::PathBuf;

use arrow::pyarrow::ToPyArrow;
use cellperf_analysis::{CaptureInput, Options, Side};
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add_function(wrap_pyfunction!(analyze_captures, m)?)?;
    Ok(())
}
