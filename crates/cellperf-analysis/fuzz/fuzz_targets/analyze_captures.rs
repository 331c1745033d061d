//! Any bytes as one capture, or split in two as the MN's and the CN's captures: the whole
//! analysis (flows, TCP state, two-sided matching, UDP streams, tables) must end with a
//! result or an error, never a panic. cargo fuzz builds with overflow checks, so sequence
//! and timestamp arithmetic on hostile values is checked too.
//! Run: `cargo +nightly fuzz run analyze_captures` in this folder's parent.
#![no_main]

use std::path::PathBuf;

use cellperf_analysis::{analyze, CaptureInput, Options, Side};
use libfuzzer_sys::fuzz_target;

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("cellperf-fuzz-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).expect("temporary file");
    path
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let opts = Options { tables: selector & 1 == 1, ..Options::default() };
    let inputs = if selector & 2 == 0 {
        vec![CaptureInput { path: write("one", rest), side: Side::Cn }]
    } else {
        // A 2-byte length splits the rest into the MN's capture and the CN's.
        let Some((len, rest)) = rest.split_first_chunk::<2>() else { return };
        let cut = (u16::from_le_bytes(*len) as usize).min(rest.len());
        vec![
            CaptureInput { path: write("mn", &rest[..cut]), side: Side::Mn },
            CaptureInput { path: write("cn", &rest[cut..]), side: Side::Cn },
        ]
    };
    let _ = analyze(&inputs, &opts);
});
