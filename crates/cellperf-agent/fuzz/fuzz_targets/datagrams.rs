//! Fuzzes what a receiver (server or probe) does with each UDP datagram a peer sends:
//! `cargo +nightly fuzz run datagrams` (from crates/cellperf-agent). The input is a test's
//! size and a run of datagrams (each a length byte and its bytes). A panic is a bug; so are
//! counts that do not add up, and memory that grows with sequence numbers rather than with
//! the packets taken.
#![no_main]

use cellperf_agent::udp::{DataToken, Intake};
use cellperf_agent::wire::Cookie;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, mut rest)) = data.split_first() else { return };
    // Test sizes from 1 packet to the server's limit and beyond; every other test tokened.
    let max_count = match size % 4 {
        0 => 1,
        1 => 1000,
        2 => 64 << 20,
        _ => u64::MAX,
    };
    let token = DataToken::for_test(&Cookie([size; 16]), if size % 8 < 4 { 1460 } else { 20 });
    let mut intake = Intake::new(max_count, token);
    let mut datagrams = 0u64;
    while let Some((&len, tail)) = rest.split_first() {
        let (d, next) = tail.split_at((len as usize).min(tail.len()));
        if let Some(seq) = intake.take(d, datagrams as i64) {
            assert!(seq < max_count);
        }
        datagrams += 1;
        rest = next;
    }
    let taken = intake.packets();
    assert!(taken <= datagrams);
    // Memory follows what was taken: a record and a set entry per packet, with the growth
    // slack of both, never a table up to a sequence number.
    assert!(intake.heap_bytes() <= 4096 + 200 * taken as usize, "{} heap bytes for {taken} packets", intake.heap_bytes());
    let out = intake.finish();
    assert_eq!(out.received.len() as u64 + out.duplicates + out.foreign + out.spoofed, datagrams);
    assert!(out.received.windows(2).all(|w| w[0].seq < w[1].seq), "not sorted, or a duplicate kept");
});
