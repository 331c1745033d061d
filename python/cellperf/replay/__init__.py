"""Record a link and replay it (issue 29): the recording bundle's reader (`bundle`), the
recorder (`record*`), and the replay's export to mahimahi. The replay itself is the emulator's
`replay` link element (crates/cellperf-link/src/replay.rs; docs/emulator.md)."""
