//! Bindings of cellperf-agent: run a probe test, run the server (both block, with the GIL
//! released; Ctrl-C is noticed within ~100 ms), and return logs as pyarrow record batches.
use std::path::PathBuf;

use arrow::pyarrow::ToPyArrow;
use cellperf_agent::{hops, keys};
use cellperf_agent::media::{self, MediaConfig, MediaServer};
use cellperf_agent::stream_request::{StreamRequest, Transport};
use cellperf_agent::plan::{kernel_check, plan, KernelRule, Options, KERNEL_RULES, PROC_SYS};
use cellperf_agent::server::{Server, ServerConfig};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    AgentError,
    PyException,
    "An agent option or setup problem the user can fix; one line."
);

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
    // What this host's kernel would refuse of the options the probe applies, before connecting.
    kernel_check(&plan, false, std::path::Path::new(PROC_SYS)).map_err(AgentError::new_err)?;
    let run = py.detach(|| {
        cellperf_agent::probe::run(&server, &token, &plan, &mut |p| {
            Python::attach(|py| {
                if py.check_signals().is_err() {
                    return false;
                }
                match (&progress, serde_json::to_string(p)) {
                    (Some(cb), Ok(text)) => cb
                        .call1(py, (text,))
                        .map(|r| r.is_truthy(py).unwrap_or(true))
                        .unwrap_or(false),
                    _ => true,
                }
            })
        })
    });
    let doc =
        serde_json::to_string(&run.document).map_err(|e| AgentError::new_err(e.to_string()))?;
    let batch = |rows: &[cellperf_agent::log::LogRow]| -> PyResult<Option<Py<PyAny>>> {
        if rows.is_empty() {
            return Ok(None);
        }
        let b = cellperf_agent::log::to_record_batch(rows)
            .map_err(|e| AgentError::new_err(e.to_string()))?;
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
    let addr = listen.parse().map_err(|_| {
        AgentError::new_err(format!(
            "--listen: '{listen}' is not ADDR:PORT (IPv6 in brackets, e.g. [::]:5250)"
        ))
    })?;
    let cfg = ServerConfig {
        listen: addr,
        token,
        max_rate_bps,
        max_duration_s,
        max_tests,
        log_dir,
    };
    cfg.check().map_err(AgentError::new_err)?;
    let server = Server::bind(cfg)
        .map_err(|e| AgentError::new_err(format!("--listen {listen}: cannot listen ({e})")))?;
    let bound = server
        .local_addr()
        .map_err(|e| AgentError::new_err(e.to_string()))?;
    if let Some(cb) = on_ready {
        cb.call1(py, (bound.to_string(),))?;
    }
    serve_until_interrupted(py, |keep_going| server.serve(keep_going))
}

/// Runs a server's loop with the GIL released; its `keep_going` check lets Python see Ctrl-C,
/// which ends the loop and becomes KeyboardInterrupt.
fn serve_until_interrupted<E: std::fmt::Display + Send>(
    py: Python<'_>,
    serve: impl FnOnce(&mut dyn FnMut() -> bool) -> Result<(), E> + Send,
) -> PyResult<()> {
    let mut interrupted = false;
    py.detach(|| {
        serve(&mut || {
            interrupted = Python::attach(|py| py.check_signals().is_err());
            !interrupted
        })
    })
    .map_err(|e| AgentError::new_err(e.to_string()))?;
    if interrupted {
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(
            "interrupted",
        ));
    }
    Ok(())
}

/// Serves media streams (the `stream` test's CN end) to receivers that know `token`, within
/// the caps, until Ctrl-C; `on_ready(address)` once listening on TCP and UDP.
#[pyfunction]
#[pyo3(signature = (listen, token, max_rate_bps, max_packet_bytes, max_duration_s, max_sessions, max_per_source, on_ready = None))]
#[allow(clippy::too_many_arguments)]
fn media_serve(
    py: Python<'_>,
    listen: String,
    token: Vec<u8>,
    max_rate_bps: f64,
    max_packet_bytes: u32,
    max_duration_s: f64,
    max_sessions: usize,
    max_per_source: usize,
    on_ready: Option<Py<PyAny>>,
) -> PyResult<()> {
    let addr = listen.parse().map_err(|_| {
        AgentError::new_err(format!(
            "--listen: '{listen}' is not ADDR:PORT (IPv6 in brackets)"
        ))
    })?;
    let cfg = MediaConfig {
        token,
        max_rate_bps,
        max_packet_bytes,
        max_duration_s,
        max_sessions,
        max_per_source,
    };
    cfg.check().map_err(AgentError::new_err)?;
    let server = MediaServer::bind(addr, cfg)
        .map_err(|e| AgentError::new_err(format!("--listen {listen}: cannot listen ({e})")))?;
    let bound = server
        .local_addr()
        .map_err(|e| AgentError::new_err(e.to_string()))?;
    if let Some(cb) = on_ready {
        cb.call1(py, (bound.to_string(),))?;
    }
    serve_until_interrupted(py, |keep_going| server.serve(keep_going))
}

/// Checks a stream's rate, packet size, duration, fast start and probe as the receiver will
/// (the first problem as one line naming the option), before anything else is read or sent.
#[pyfunction]
#[pyo3(signature = (rate_bps, packet_bytes, duration_s, fast_start_s = 0.0, probe_packets = 0))]
fn media_check(
    rate_bps: f64,
    packet_bytes: u32,
    duration_s: f64,
    fast_start_s: f64,
    probe_packets: u32,
) -> PyResult<()> {
    let req = StreamRequest {
        transport: Transport::Udp,
        rate_bps,
        packet_bytes,
        duration_s,
        fast_start_s,
        probe_packets,
    };
    req.schedule().map(|_| ()).map_err(AgentError::new_err)
}

/// Receives one media stream (authenticating with `token`) and plays it through a
/// `buffer_s` buffer. Returns (summary JSON: request, schedule, the stream's loss/jitter/OWD
/// and the playout; per-packet log batch).
#[pyfunction]
#[pyo3(signature = (server, token, transport, rate_bps, packet_bytes, duration_s, buffer_s, drain_s, flow_id, fast_start_s = 0.0, probe_packets = 0))]
#[allow(clippy::too_many_arguments)]
fn media_receive(
    py: Python<'_>,
    server: String,
    token: Vec<u8>,
    transport: String,
    rate_bps: f64,
    packet_bytes: u32,
    duration_s: f64,
    buffer_s: f64,
    drain_s: f64,
    flow_id: String,
    fast_start_s: f64,
    probe_packets: u32,
) -> PyResult<(String, Option<Py<PyAny>>)> {
    let addr: std::net::SocketAddr = server
        .parse()
        .map_err(|_| AgentError::new_err(format!("SERVER: '{server}' is not ADDR:PORT")))?;
    let transport = match transport.as_str() {
        "udp" => Transport::Udp,
        "tcp" => Transport::Tcp,
        t => {
            return Err(AgentError::new_err(format!(
                "--transport: '{t}' is not one of udp, tcp"
            )))
        }
    };
    let req = StreamRequest {
        transport,
        rate_bps,
        packet_bytes,
        duration_s,
        fast_start_s,
        probe_packets,
    };
    req.schedule().map_err(AgentError::new_err)?;
    let received = py
        .detach(|| media::receive(addr, &token, &req, (drain_s * 1e3) as u64))
        .map_err(AgentError::new_err)?;
    let (summary, rows, arrival) = media::analyse(&received, &flow_id);
    let play = media::playout(
        &arrival,
        received.interval_ns,
        (buffer_s * 1e9) as u64,
        received.request_ns,
    );
    let doc = serde_json::json!({
        "request_ns": received.request_ns, "interval_ns": received.interval_ns,
        "expected": received.expected, "stream": summary, "playout": play,
        "rtcp_reports": received.rtcp_reports,
    });
    let batch = if rows.is_empty() {
        None
    } else {
        let b = cellperf_agent::log::to_record_batch(&rows)
            .map_err(|e| AgentError::new_err(e.to_string()))?;
        Some(b.to_pyarrow(py)?.unbind())
    };
    Ok((doc.to_string(), batch))
}

/// Types `count` keys `interval_s` apart into `argv` on a pseudo-terminal once it printed
/// `ready`; returns each key's send time (wall-clock ns) and echo latency (ns, -1: none).
#[pyfunction]
#[pyo3(signature = (argv, ready, count, interval_s, ready_timeout_s, echo_timeout_s))]
fn type_keys(
    py: Python<'_>,
    argv: Vec<String>,
    ready: String,
    count: u64,
    interval_s: f64,
    ready_timeout_s: f64,
    echo_timeout_s: f64,
) -> PyResult<(Vec<i64>, Vec<i64>)> {
    let keys = py
        .detach(|| {
            keys::type_keys(
                &argv,
                &ready,
                count,
                (interval_s * 1e9) as u64,
                (ready_timeout_s * 1e9) as i64,
                (echo_timeout_s * 1e9) as i64,
            )
        })
        .map_err(AgentError::new_err)?;
    Ok((
        keys.iter().map(|k| k.sent_ns).collect(),
        keys.iter().map(|k| k.echo_ns.unwrap_or(-1)).collect(),
    ))
}

/// The probe's one table of which option (CLI name) applies to which test:
/// `[(option, [test, ...]), ...]` (cellperf_agent::plan::OPTION_TESTS), for `cellperf run --check`.
#[pyfunction]
fn probe_option_tests() -> Vec<(&'static str, Vec<&'static str>)> {
    cellperf_agent::plan::OPTION_TESTS
        .iter()
        .map(|(o, tests)| (*o, tests.to_vec()))
        .collect()
}

/// The VoIP test's codecs, `[(name, payload bytes, packet interval ms)]`
/// (cellperf_agent::plan::CODECS): what a call's packets look like, so that an imported
/// capture's codec is told from its packets by the same table the probe sends by.
#[pyfunction]
fn voip_codecs() -> Vec<(&'static str, u32, u64)> {
    cellperf_agent::plan::CODECS.to_vec()
}

/// The kernel's rules of the TCP options, `[(option, kind, argument)]`
/// (cellperf_agent::plan::KERNEL_RULES; kind `listed`, `within`, `at-most-sysctl` or `sysctl`,
/// argument the /proc/sys path or the bounds `LO..HI`).
#[pyfunction]
fn kernel_rules() -> Vec<(&'static str, &'static str, String)> {
    KERNEL_RULES
        .iter()
        .map(|(o, r)| match *r {
            KernelRule::Listed(p) => (*o, "listed", p.to_string()),
            KernelRule::Within(lo, hi, _) => (*o, "within", format!("{lo}..{hi}")),
            KernelRule::AtMostSysctl(p) => (*o, "at-most-sysctl", p.to_string()),
            KernelRule::Sysctl(p) => (*o, "sysctl", p.to_string()),
        })
        .collect()
}

/// Why this host's kernel would refuse `value` for `option` (KERNEL_RULES), or None.
#[pyfunction]
#[pyo3(signature = (option, value, proc_sys = None))]
fn kernel_refusal(option: &str, value: &str, proc_sys: Option<PathBuf>) -> Option<String> {
    cellperf_agent::plan::kernel_refusal(
        &proc_sys.unwrap_or_else(|| PROC_SYS.into()),
        option,
        value,
    )
}

/// The probe's plan of `test` with `options_json` checked as the probe checks it, and then
/// against this host's kernel (with `both_ends`, the server's end too): the first problem as
/// one line `--option: problem`, or None. For `cellperf run --check`.
#[pyfunction]
#[pyo3(signature = (test, options_json, both_ends, proc_sys = None))]
fn probe_check(
    test: &str,
    options_json: &str,
    both_ends: bool,
    proc_sys: Option<PathBuf>,
) -> Option<String> {
    let p = match Options::from_json(options_json).and_then(|o| plan(test, &o)) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    kernel_check(&p, both_ends, &proc_sys.unwrap_or_else(|| PROC_SYS.into())).err()
}

/// Runs the `hops` test (cellperf_agent::hops) to `target` with the GIL released, its settings
/// checked first (one line naming the option, nothing sent); Ctrl-C stops it with what was
/// measured. Returns (hops JSON, per-probe batch or None).
#[pyfunction]
fn hops_run(
    py: Python<'_>,
    target: &str,
    first_port: u16,
    max_hops: u8,
    count: u32,
    interval_s: f64,
    timeout_s: f64,
) -> PyResult<(String, Option<Py<PyAny>>)> {
    let target = target.parse().map_err(|_| {
        AgentError::new_err(format!("TARGET: '{target}' is not an IP address"))
    })?;
    let cfg = hops::HopsConfig {
        target,
        first_port,
        max_hops,
        rounds: count,
        interval_ns: (interval_s * 1e9) as u64,
        timeout_ns: (timeout_s * 1e9) as u64,
    };
    cfg.check().map_err(AgentError::new_err)?;
    let probes = py
        .detach(|| {
            hops::run(&cfg, &mut || {
                Python::attach(|py| py.check_signals().is_ok())
            })
        })
        .map_err(AgentError::new_err)?;
    let doc = serde_json::to_string(&hops::hops(&probes))
        .map_err(|e| AgentError::new_err(e.to_string()))?;
    let batch = if probes.is_empty() {
        None
    } else {
        let b = hops::to_record_batch(&probes).map_err(|e| AgentError::new_err(e.to_string()))?;
        Some(b.to_pyarrow(py)?.unbind())
    };
    Ok((doc, batch))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe_option_tests, m)?)?;
    m.add_function(wrap_pyfunction!(voip_codecs, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_rules, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(probe_check, m)?)?;
    m.add("AgentError", m.py().get_type::<AgentError>())?;
    m.add_function(wrap_pyfunction!(agent_probe, m)?)?;
    m.add_function(wrap_pyfunction!(agent_serve, m)?)?;
    m.add_function(wrap_pyfunction!(media_serve, m)?)?;
    m.add_function(wrap_pyfunction!(media_receive, m)?)?;
    m.add_function(wrap_pyfunction!(media_check, m)?)?;
    m.add_function(wrap_pyfunction!(type_keys, m)?)?;
    m.add_function(wrap_pyfunction!(hops_run, m)?)?;
    Ok(())
}
