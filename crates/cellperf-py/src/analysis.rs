use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("analysis_version", cellperf_analysis::version())?;
    Ok(())
}
