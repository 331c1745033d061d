//! TCP in virtual time over the cell model of `cellperf-link` (docs/methods.md §14): a bulk sender
//! and its receiver per flow (`tcp.rs` with its `scoreboard.rs`, `receiver.rs`, variants in
//! `congestion.rs`), and the discrete-event driver that runs them over the very elements and
//! scheduler the emulator runs in real time.
pub mod congestion;
pub mod driver;
pub mod receiver;
pub mod scenario;
pub mod scoreboard;
pub mod tables;
pub mod tcp;

#[cfg(test)]
mod congestion_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod tcp_tests;

/// A run's summary and its time series as named Arrow batches.
pub type Simulated = (
    driver::RunResult,
    Vec<(&'static str, arrow_array::RecordBatch)>,
);

/// Runs a scenario given as JSON.
pub fn simulate(scenario_json: &str) -> Result<Simulated, cellperf_link::LinkError> {
    let scenario = scenario::Scenario::from_json(scenario_json)?;
    let result = driver::run(&scenario)?;
    let batches = tables::series_batches(&result.series)
        .map_err(|e| cellperf_link::LinkError::System(format!("time-series tables: {e}")))?;
    Ok((result, batches))
}
