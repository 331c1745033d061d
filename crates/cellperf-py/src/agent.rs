//! Bindings of cellperf-agent: run a probe test, run the server (both block, with the GIL
//! released; Ctrl-C is noticed within ~100 ms), and return logs as pyarrow record batches.
use std::path::PathBuf;

use arrow::pyarrow::ToPyArrow;
use cellperf_agent::plan::{plan, Options};
use cellperf_agent::server::{Server, ServerConfig};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_native, AgentError, PyException, "An agent option or setup problem the user can fix; one line.");

/// Runs one probe test. Returns (result JSON, per-packet log batch or None, the server's own
/// log batch or None, error or None): a run that failed part way still returns what it measured.
#[pyfunction]
#[pyo3(signature = (server, token, test, options_json, progress = None))]
fn agent_probe(
    py: Python<'_>,
    server: String,
    token: Vec<u8>,
    test: String,
    options_json: String,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, Option<Py<PyAny>>, Option<Py<PyAny>>, Option<String>)> {
    let opts = Options::from_json(&options_json).map_err(AgentError::new_err)?;
    let plan = plan(&test, &opts).map_err(AgentError::new_err)?;
    let run = py.detach(|| {
        cellperf_agent::probe::run(&server, &token, &plan, &mut |p| {
            Python::attach(|py| {
                if py.check_signals().is_err() {
                    return false;
                }
                match (&progress, serde_json::to_string(p)) {
                    (Some(cb), Ok(text)) => cb.call1(py, (text,)).map(|r| r.is_truthy(py).unwrap_or(true)).unwrap_or(false),
                    _ => true,
                }
            })
        })
    });
    let doc = serde_json::to_string(&run.document).map_err(|e| AgentError::new_err(e.to_string()))?;
    let batch = |rows: &[cellperf_agent::log::LogRow]| -> PyResult<Option<Py<PyAny>>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let b = cellperf_agent::log::to_record_batch(rows).map_err(|e| AgentError::new_err(e.to_string()))?;
        Ok(Some(b.to_pyarrow(py)?.unbind()))
    };
    Ok((doc, batch(&run.log)?, batch(&run.server_log)?, run.error))
}

/// Runs the server until Ctrl-C (KeyboardInterrupt). `on_ready(address)` is called once
/// the socket is listening.
#[pyfunction]
#[pyo3(signature = (listen, token, max_rate_bps, max_duration_s, max_tests, log_dir = None, on_ready = None))]
#[allow(clippy::too_many_arguments)]
fn agent_serve(
    py: Python<'_>,
    listen: String,
    token: Vec<u8>,
    max_rate_bps: f64,
    max_duration_s: f64,
    max_tests: usize,
    log_dir: Option<PathBuf>,
    on_ready: Option<Py<PyAny>>,
) -> PyResult<()> {
    let addr = listen
        .parse()
        .map_err(|_| AgentError::new_err(format!("--listen: '{listen}' is not ADDR:PORT (IPv6 in brackets, e.g. [::]:5250)")))?;
    let cfg = ServerConfig { listen: addr, token, max_rate_bps, max_duration_s, max_tests, log_dir };
    cfg.check().map_err(AgentError::new_err)?;
    let server = Server::bind(cfg).map_err(|e| AgentError::new_err(format!("--listen {listen}: cannot listen ({e})")))?;
    let bound = server.local_addr().map_err(|e| AgentError::new_err(e.to_string()))?;
    if let Some(cb) = on_ready {
        cb.call1(py, (bound.to_string(),))?;
    }
    let mut interrupted = false;
    py.detach(|| {
        server.serve(&mut || {
            interrupted = Python::attach(|py| py.check_signals().is_err());
            !interrupted
        })
    })
    .map_err(|e| AgentError::new_err(e.to_string()))?;
    if interrupted {
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"));
    }
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("AgentError", m.py().get_type::<AgentError>())?;
    m.add_function(wrap_pyfunction!(agent_probe, m)?)?;
    m.add_function(wrap_pyfunction!(agent_serve, m)?)?;
    Ok(())
}
