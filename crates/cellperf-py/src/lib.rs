//! Python bindings. Each submodule converts types for one crate and forwards the call;
//! the logic lives in the crates (`cellperf-capture`, `cellperf-analysis`, ...).
use pyo3::prelude::*;

mod agent;
mod analysis;
mod channel;
mod link;
mod sim;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    analysis::register(m)?;
    channel::register(m)?;
    link::register(m)?;
    agent::register(m)?;
    sim::register(m)?;
    Ok(())
}
