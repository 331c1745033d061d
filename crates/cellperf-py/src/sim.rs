//! Bindings of cellperf-sim (conversion and forwarding only): a scenario's JSON in, the run's
//! summary as JSON text and its time series as pyarrow record batches out; the GIL is
//! released while it runs.
use arrow::pyarrow::ToPyArrow;
use pyo3::prelude::*;

use crate::analysis::InputError;

#[pyfunction]
fn simulate(py: Python<'_>, scenario_json: &str) -> PyResult<(String, Vec<(String, Py<PyAny>)>)> {
    let (result, batches) = py
        .detach(|| cellperf_sim::simulate(scenario_json))
        .map_err(|e| InputError::new_err(e.to_string()))?;
    let json = serde_json::to_string(&result).map_err(|e| InputError::new_err(e.to_string()))?;
    let mut out = Vec::new();
    for (name, batch) in batches {
        out.push((name.to_string(), batch.to_pyarrow(py)?.unbind()));
    }
    Ok((json, out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    Ok(())
}
