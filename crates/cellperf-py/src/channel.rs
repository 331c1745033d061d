//! Bindings of cellperf-channel (conversion and forwarding only). Per-slot arrays cross as
//! pyarrow arrays (Arrow C data interface, no copies); summaries cross as JSON text.
//! Every crate error becomes `InputError` with the crate's one-line message.
use arrow::array::{Array, ArrayData, Float64Array, Int64Array, UInt16Array, UInt64Array};
use arrow::pyarrow::{PyArrowType, ToPyArrow};
use cellperf_channel::{mahimahi, scheduler, stats, trace, ChannelError, Discipline, MarkovModel, UserTrace};
use pyo3::prelude::*;

use crate::analysis::InputError;

fn input_error(e: ChannelError) -> PyErr {
    InputError::new_err(e.to_string())
}

/// A non-null primitive array of the expected Arrow type.
fn primitive<A: Array + From<ArrayData> + 'static>(data: ArrayData, what: &str) -> PyResult<A> {
    let array = arrow::array::make_array(data);
    if array.null_count() > 0 {
        return Err(InputError::new_err(format!("{what} has missing values")));
    }
    array
        .as_any()
        .downcast_ref::<A>()
        .map(|a| A::from(a.to_data()))
        .ok_or_else(|| {
            let expected = std::any::type_name::<A>().rsplit("::").next().unwrap_or("?").trim_end_matches('>');
            InputError::new_err(format!("{what} must be {expected} values, not {}", array.data_type()))
        })
}

fn to_py<'py>(py: Python<'py>, array: impl Array) -> PyResult<Py<PyAny>> {
    Ok(array.to_data().to_pyarrow(py)?.unbind())
}

#[pyfunction]
fn drc_rate_table() -> (Vec<f64>, f64) {
    (cellperf_channel::drc::RATES_BPS.to_vec(), cellperf_channel::drc::SLOT_S)
}

/// Rates (float64) → (states uint16, rate table).
#[pyfunction]
fn states_from_rates(py: Python<'_>, rates_bps: PyArrowType<ArrayData>) -> PyResult<(Py<PyAny>, Vec<f64>)> {
    let rates: Float64Array = primitive(rates_bps.0, "rate column")?;
    let (states, table) = py.detach(|| trace::states_from_rates(rates.values())).map_err(input_error)?;
    Ok((to_py(py, UInt16Array::from(states))?, table))
}

/// External state codes (int64) → table indices (uint16), `codes[i]` being entry i's code.
#[pyfunction]
fn states_from_codes(py: Python<'_>, values: PyArrowType<ArrayData>, codes: Vec<i64>) -> PyResult<Py<PyAny>> {
    let values: Int64Array = primitive(values.0, "state column")?;
    let states = py.detach(|| trace::states_from_codes(values.values(), &codes)).map_err(input_error)?;
    to_py(py, UInt16Array::from(states))
}

/// Time stamps (float64 s) → slot index of each row (uint64).
#[pyfunction]
fn slots_of_times(py: Python<'_>, times_s: PyArrowType<ArrayData>, slot_s: f64) -> PyResult<Py<PyAny>> {
    let times: Float64Array = primitive(times_s.0, "time column")?;
    let slots = py.detach(|| trace::slot_of_times(times.values(), slot_s)).map_err(input_error)?;
    to_py(py, UInt64Array::from(slots))
}

/// Holds uint16 or float64 row values on the slot grid (one value per slot).
#[pyfunction]
fn hold_by_slot(py: Python<'_>, slots: PyArrowType<ArrayData>, values: PyArrowType<ArrayData>) -> PyResult<Py<PyAny>> {
    let slots: UInt64Array = primitive(slots.0, "slot indices")?;
    if values.0.data_type() == &arrow::datatypes::DataType::UInt16 {
        let v: UInt16Array = primitive(values.0, "values")?;
        let held = py.detach(|| trace::hold_by_slot(slots.values(), v.values())).map_err(input_error)?;
        to_py(py, UInt16Array::from(held))
    } else {
        let v: Float64Array = primitive(values.0, "values")?;
        let held = py.detach(|| trace::hold_by_slot(slots.values(), v.values())).map_err(input_error)?;
        to_py(py, Float64Array::from(held))
    }
}

/// Statistics of the whole trace and of each window, as JSON `{"trace": {...}, "windows": [...]}`.
#[pyfunction]
#[pyo3(signature = (states, rates_bps, window_slots = None, max_depth = 4, lags = None))]
fn trace_stats(
    py: Python<'_>,
    states: PyArrowType<ArrayData>,
    rates_bps: Vec<f64>,
    window_slots: Option<usize>,
    max_depth: usize,
    lags: Option<Vec<u64>>,
) -> PyResult<String> {
    let states: UInt16Array = primitive(states.0, "states")?;
    let mut options = stats::StatsOptions { max_depth, ..Default::default() };
    if let Some(lags) = lags {
        options.lags = lags;
    }
    let result = py.detach(|| -> Result<serde_json::Value, ChannelError> {
        let whole = stats::trace_stats(states.values(), &rates_bps, &options)?;
        let windows = match window_slots {
            Some(w) => stats::window_stats(states.values(), &rates_bps, w, &options)?,
            None => Vec::new(),
        };
        Ok(serde_json::json!({"trace": whole, "windows": windows}))
    });
    Ok(result.map_err(input_error)?.to_string())
}

/// Pearson correlation over the whole series and per window of `window_slots`.
#[pyfunction]
fn correlation(
    py: Python<'_>,
    x: PyArrowType<ArrayData>,
    y: PyArrowType<ArrayData>,
    window_slots: usize,
) -> PyResult<(Option<f64>, Vec<Option<f64>>)> {
    let x: Float64Array = primitive(x.0, "first series")?;
    let y: Float64Array = primitive(y.0, "second series")?;
    py.detach(|| Ok((stats::correlation(x.values(), y.values())?, stats::window_correlation(x.values(), y.values(), window_slots)?)))
        .map_err(input_error)
}

/// Fits a Markov model; returns the model file's text.
#[pyfunction]
#[pyo3(signature = (states, rates_bps, slot_s, order, source_json = None))]
fn fit_model(
    py: Python<'_>,
    states: PyArrowType<ArrayData>,
    rates_bps: Vec<f64>,
    slot_s: f64,
    order: usize,
    source_json: Option<String>,
) -> PyResult<String> {
    let states: UInt16Array = primitive(states.0, "states")?;
    let mut model = py.detach(|| MarkovModel::fit(states.values(), &rates_bps, slot_s, order)).map_err(input_error)?;
    if let Some(s) = source_json {
        model.set_source(serde_json::from_str(&s).map_err(|e| InputError::new_err(e.to_string()))?);
    }
    Ok(model.to_json())
}

/// Checks a model file's text; returns JSON with its order, slot, rates, stationary
/// distribution and (order 1) analytic sojourns.
#[pyfunction]
fn describe_model(text: &str) -> PyResult<String> {
    let model = MarkovModel::from_json(text).map_err(input_error)?;
    let sojourn = model.mean_sojourn_slots().ok();
    Ok(serde_json::json!({
        "order": model.order(),
        "slot_s": model.slot_s(),
        "rates_bps": model.rates_bps(),
        "fractions": model.states().iter().map(|s| s.fraction).collect::<Vec<_>>(),
        "stationary": model.stationary_distribution(),
        "markov_sojourn_slots": sojourn,
        "transition_rows": model.transitions().len(),
        "source": model.source(),
    })
    .to_string())
}

/// Generates `slots` states from a model file's text with a seed → uint16 states.
#[pyfunction]
fn generate(py: Python<'_>, model_text: &str, slots: usize, seed: u64) -> PyResult<Py<PyAny>> {
    let model = MarkovModel::from_json(model_text).map_err(input_error)?;
    let states = py.detach(|| model.generate(slots, seed));
    to_py(py, UInt16Array::from(states))
}

/// mahimahi trace text → per-slot rates (float64).
#[pyfunction]
fn mahimahi_to_rates(py: Python<'_>, text: &[u8], slot_s: f64) -> PyResult<Py<PyAny>> {
    let rates = py
        .detach(|| mahimahi::to_slot_rates(&mahimahi::parse(text)?, slot_s))
        .map_err(input_error)?;
    to_py(py, Float64Array::from(rates))
}

/// Per-slot rates → mahimahi trace text.
#[pyfunction]
fn rates_to_mahimahi(py: Python<'_>, rates_bps: PyArrowType<ArrayData>, slot_s: f64) -> PyResult<Vec<u8>> {
    let rates: Float64Array = primitive(rates_bps.0, "rates")?;
    py.detach(|| mahimahi::from_slot_rates(rates.values(), slot_s).map(|ts| mahimahi::to_text(&ts)))
        .map_err(input_error)
}

/// Full-buffer run: per-user rate arrays, start slots and reset slots; returns
/// (throughput bit/s per user, system throughput bit/s, served slots per user).
#[pyfunction]
#[pyo3(signature = (rates_bps, start_slots, resets, slots, slot_s, discipline, alpha = scheduler::DEFAULT_ALPHA))]
#[allow(clippy::too_many_arguments)]
fn simulate_full_buffer(
    py: Python<'_>,
    rates_bps: Vec<PyArrowType<ArrayData>>,
    start_slots: Vec<usize>,
    resets: Vec<PyArrowType<ArrayData>>,
    slots: u64,
    slot_s: f64,
    discipline: &str,
    alpha: f64,
) -> PyResult<(Vec<f64>, f64, Vec<u64>)> {
    let discipline = match discipline {
        "pf" => Discipline::ProportionalFair { alpha },
        "rr" => Discipline::RoundRobin,
        other => return Err(InputError::new_err(format!("scheduler must be 'pf' or 'rr', not '{other}'"))),
    };
    let rates: Vec<Float64Array> = rates_bps.into_iter().map(|a| primitive(a.0, "user rates")).collect::<PyResult<_>>()?;
    let resets: Vec<UInt64Array> = resets.into_iter().map(|a| primitive(a.0, "reset slots")).collect::<PyResult<_>>()?;
    if start_slots.len() != rates.len() || resets.len() != rates.len() {
        return Err(InputError::new_err("one start slot and one reset list per user"));
    }
    let users: Vec<UserTrace> = rates
        .iter()
        .zip(&start_slots)
        .zip(&resets)
        .map(|((r, &start_slot), z)| UserTrace { rates_bps: r.values(), start_slot, resets: z.values() })
        .collect();
    let outcome = py
        .detach(|| scheduler::simulate_full_buffer(&users, slots, slot_s, discipline))
        .map_err(input_error)?;
    Ok((outcome.throughput_bps(), outcome.system_throughput_bps(), outcome.served_slots))
}

/// Jain's fairness index of per-user throughputs; `None` when all are zero.
#[pyfunction]
fn jain_fairness(values: Vec<f64>) -> Option<f64> {
    cellperf_channel::jain_fairness(&values)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "channel")?;
    sub.add_function(wrap_pyfunction!(drc_rate_table, &sub)?)?;
    sub.add_function(wrap_pyfunction!(states_from_rates, &sub)?)?;
    sub.add_function(wrap_pyfunction!(states_from_codes, &sub)?)?;
    sub.add_function(wrap_pyfunction!(slots_of_times, &sub)?)?;
    sub.add_function(wrap_pyfunction!(hold_by_slot, &sub)?)?;
    sub.add_function(wrap_pyfunction!(trace_stats, &sub)?)?;
    sub.add_function(wrap_pyfunction!(correlation, &sub)?)?;
    sub.add_function(wrap_pyfunction!(fit_model, &sub)?)?;
    sub.add_function(wrap_pyfunction!(describe_model, &sub)?)?;
    sub.add_function(wrap_pyfunction!(generate, &sub)?)?;
    sub.add_function(wrap_pyfunction!(mahimahi_to_rates, &sub)?)?;
    sub.add_function(wrap_pyfunction!(rates_to_mahimahi, &sub)?)?;
    sub.add_function(wrap_pyfunction!(simulate_full_buffer, &sub)?)?;
    sub.add_function(wrap_pyfunction!(jain_fairness, &sub)?)?;
    m.add_submodule(&sub)?;
    m.add("channel", sub)?;
    Ok(())
}
