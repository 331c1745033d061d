//! Bindings of cellperf-channel (conversion and forwarding only).
use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
