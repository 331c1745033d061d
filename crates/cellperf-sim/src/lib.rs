//! TCP in virtual time over the cell model of `cellperf-link` (METHODS §14): a bulk sender
//! and its receiver per flow (`tcp.rs`, variants in `congestion.rs`), and the discrete-event
//! driver that runs them over the very elements and scheduler the emulator runs in real time.
pub mod congestion;
pub mod tcp;

#[cfg(test)]
mod tcp_tests;
