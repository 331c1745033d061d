//! Bounds of a test that both the probe's plan ([`crate::plan`]) and the server
//! ([`crate::server`]) enforce, below both.

/// Most packets in one UDP stream (bounds the memory of a test's log).
pub const MAX_PACKETS: u64 = 64 << 20;

/// Longest test a server may allow (`--max-duration`): a day.
pub const MAX_DURATION_S: f64 = 86_400.0;
/// Most parallel TCP streams per direction.
pub const MAX_STREAMS: u32 = 16;
/// Highest cap a server may set (`--max-rate`): 1 Tbit/s, beyond any link it serves.
pub const MAX_RATE_BPS: f64 = 1e12;
