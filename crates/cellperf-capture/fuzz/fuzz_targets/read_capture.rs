//! Any bytes as a capture file: opening, reading every record and decoding every frame
//! must end without a panic. Run: `cargo +nightly fuzz run read_capture` in this folder's parent.
#![no_main]

use cellperf_capture::{decode_frame, Capture};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(capture) = Capture::from_bytes("fuzz", data) {
        for frame in capture.frames() {
            let _ = decode_frame(&frame);
        }
    }
});
