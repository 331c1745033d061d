//! Fuzzes the control-message decoder the server runs on every client's bytes:
//! `cargo +nightly fuzz run decode` (from crates/cellperf-agent). Any panic is a bug, and so
//! is a frame that decodes but does not survive being encoded and decoded again.
#![no_main]

use std::time::Duration;

use cellperf_agent::wire::{decode, send_message, send_records, Frame, FrameReader, MAX_CLIENT_FRAME, MAX_SERVER_FRAME};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // An empty records frame decodes, but the encoder sends none (nothing to say).
    if let Ok(frame) = decode(data).map_err(drop).and_then(|f| match &f {
        Frame::Records { records, .. } if records.is_empty() => Err(()),
        _ => Ok(f),
    }) {
        let mut encoded = Vec::new();
        match &frame {
            Frame::Message(m) => send_message(&mut encoded, m).expect("encode to memory"),
            Frame::Records { stream, records } => send_records(&mut encoded, *stream, records).expect("encode to memory"),
        }
        let again = FrameReader::new(MAX_SERVER_FRAME).read(&mut &encoded[..], Duration::ZERO).expect("own encoding decodes");
        assert_eq!(again, frame, "decode(encode(frame)) differs");
    }
    // The same bytes as a stream: length prefixes, partial frames, several frames.
    let mut reader = FrameReader::new(MAX_CLIENT_FRAME);
    let mut src = data;
    while !src.is_empty() {
        if reader.read(&mut src, Duration::ZERO).is_err() {
            break;
        }
    }
});
