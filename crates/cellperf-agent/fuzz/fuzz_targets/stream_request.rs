//! Fuzzes what the stream server (`cellperf stream serve`, `media.rs`) does with untrusted
//! bytes: `cargo +nightly fuzz run stream_request` (from crates/cellperf-agent). The input is
//! taken both as a datagram to its UDP port (only a 20-byte hello may name a cookie) and as a
//! control frame body; a `start_stream` request is then held to the server's caps. A panic is
//! a bug; so is a hello that is not one, or a schedule the caps admit that runs longer than
//! the duration cap or faster than the rate cap.
#![no_main]

use cellperf_agent::media::MediaConfig;
use cellperf_agent::stream_request::MIN_INTERVAL_NS;
use cellperf_agent::udp;
use cellperf_agent::wire::{decode, Frame, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(cookie) = udp::hello_cookie(data) {
        assert_eq!(data.len(), 20);
        assert_eq!(&data[..4], &udp::HELLO_MAGIC);
        assert_eq!(&data[4..], &cookie.0);
    }
    let cfg = MediaConfig {
        token: b"fuzz".to_vec(),
        max_rate_bps: 100e6,
        max_packet_bytes: 1500,
        max_duration_s: 600.0,
        max_sessions: 16,
        max_per_source: 4,
    };
    if let Ok(Frame::Message(Message::StartStream { request })) = decode(data) {
        if let Ok((interval_ns, count)) = cfg.admit(&request) {
            assert!(interval_ns >= MIN_INTERVAL_NS);
            assert!(
                request.rate_bps <= cfg.max_rate_bps
                    && request.packet_bytes <= cfg.max_packet_bytes
            );
            // The last packet is due within the duration (one interval of rounding).
            let span = (count - 1) as f64 * interval_ns as f64;
            assert!(
                span <= cfg.max_duration_s * 1e9 + interval_ns as f64,
                "{request:?}: {count} × {interval_ns} ns"
            );
        }
    }
});
