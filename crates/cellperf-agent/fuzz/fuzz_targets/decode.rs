//! Fuzzes the control-message decoder the server runs on every client's bytes:
//! `cargo fuzz run decode` (from crates/cellperf-agent). Any panic is a bug.
#![no_main]

use std::time::Duration;

use cellperf_agent::wire::{decode, FrameReader, MAX_CLIENT_FRAME};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode(data);
    // The same bytes as a stream: length prefixes, partial frames, several frames.
    let mut reader = FrameReader::new(MAX_CLIENT_FRAME);
    let mut src = data;
    while !src.is_empty() {
        if reader.read(&mut src, Duration::ZERO).is_err() {
            break;
        }
    }
});
