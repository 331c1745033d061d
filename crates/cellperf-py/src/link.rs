//! Bindings of cellperf-link (conversion and forwarding only): the emulator is built from
//! its JSON specification and runs with the GIL released; statistics come back as JSON text.
//! Every crate error becomes `InputError` with the crate's one-line message.
use cellperf_link::emulator::Emulator;
use cellperf_link::LinkError;
use pyo3::prelude::*;

use crate::analysis::InputError;

fn input_error(e: LinkError) -> PyErr {
    InputError::new_err(e.to_string())
}

/// A link emulator: `LinkEmulator(spec_json)` loads traces and models and creates the TUN
/// devices; `run()` forwards until `stop()` is called from another thread.
#[pyclass(frozen)]
struct LinkEmulator {
    inner: Emulator,
}

#[pymethods]
impl LinkEmulator {
    #[new]
    fn new(py: Python<'_>, spec_json: &str) -> PyResult<Self> {
        let inner = py
            .detach(|| Emulator::new(spec_json))
            .map_err(input_error)?;
        Ok(LinkEmulator { inner })
    }

    /// Forwards packets until `stop()`; returns the run's statistics as JSON text.
    fn run(&self, py: Python<'_>) -> PyResult<String> {
        let stats = py.detach(|| self.inner.run()).map_err(input_error)?;
        serde_json::to_string(&stats).map_err(|e| InputError::new_err(e.to_string()))
    }

    fn stop(&self) {
        self.inner.stop();
    }
}

/// Checks a link direction's JSON specification (traces readable, numbers valid) without
/// creating anything; returns its mean capacity in bit/s when the rate source has one.
#[pyfunction]
fn check_link_spec(py: Python<'_>, spec_json: &str) -> PyResult<Option<f64>> {
    py.detach(|| cellperf_link::spec::check_link(spec_json))
        .map_err(input_error)
}

/// Reads and checks a recording bundle (or a CellReplay trace folder); returns its summary
/// as JSON text (directions, duration, trains, opportunities, loss, outages).
#[pyfunction]
fn check_replay_bundle(py: Python<'_>, path: &str) -> PyResult<String> {
    let bundle = py
        .detach(|| cellperf_link::Bundle::load(path))
        .map_err(input_error)?;
    Ok(bundle.summary().to_string())
}

/// Writes one direction's heavy (saturator) opportunities to `target` in mahimahi's format.
#[pyfunction]
fn export_replay_heavy(py: Python<'_>, path: &str, direction: &str, target: &str) -> PyResult<()> {
    py.detach(|| cellperf_link::Bundle::load(path)?.write_heavy(direction, target))
        .map_err(input_error)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LinkEmulator>()?;
    m.add_function(wrap_pyfunction!(check_link_spec, m)?)?;
    m.add_function(wrap_pyfunction!(check_replay_bundle, m)?)?;
    m.add_function(wrap_pyfunction!(export_replay_heavy, m)?)?;
    Ok(())
}
