//! Fuzzes the probe's options as the CLI hands them over (JSON) and every test's plan from
//! them: `cargo +nightly fuzz run options` (from crates/cellperf-agent). A panic is a bug; an
//! error must be one line naming an option (`--NAME: …`) or the options themselves.
#![no_main]

use cellperf_agent::plan::{plan, Options, TESTS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let options = match Options::from_json(text) {
        Ok(o) => o,
        Err(e) => {
            assert!(!e.contains('\n') && (e.starts_with("--") || e.starts_with("probe options")), "{e}");
            return;
        }
    };
    for test in TESTS {
        if let Err(e) = plan(test, &options) {
            assert!(!e.contains('\n') && e.starts_with("--"), "{test}: {e}");
        }
    }
});
