"""Virtual-time TCP over a scheduled cell (`cellperf simulate`, docs/methods.md §14): scenarios from
options or TOML, repetitions, and their tables. The per-packet work is `cellperf-sim` (Rust)."""
