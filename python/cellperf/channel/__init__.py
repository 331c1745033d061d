"""Per-slot channel-rate traces (docs/methods.md §7–§8, seed 002 §5–§6).

- `traces`: read a trace (CSV / Parquet per-slot table, mahimahi trace, emulator radio log)
  into a `SlotTrace`: one state per slot plus a rate table; write one back.
- `analysis`: statistics per trace and per window, Markov fit / generation, figure data.
- `sched`: trace-driven full-buffer PF vs RR comparison (gain, Jain's fairness, handoff resets).

The per-slot work is the compiled core (`cellperf._native.channel`, crate cellperf-channel);
this package reads files, checks options and shapes results.
"""

from cellperf.channel.traces import SlotTrace, read_rate_table, read_trace, write_trace

__all__ = ["SlotTrace", "read_rate_table", "read_trace", "write_trace"]
