"""Handoffs: detect and classify them from a radio log, time between them, and their effect on
any per-interval metric (throughput, loss, delay, jitter, R) by comparison with the other
intervals (docs/methods.md §6).

- `radio_log`: read a radio log, `detect_handoffs`, `dwell_times`.
- `compare`: intervals near handoffs (±w s) versus the rest: quantiles, CDFs, rank test.
- `rank_test`: the Mann–Whitney U test (numpy only).
"""

from cellperf.handoffs.compare import compare_near_handoffs, describe, near_handoff
from cellperf.handoffs.radio_log import (
    HANDOFF_KINDS,
    check_radio_log,
    detect_handoffs,
    dwell_times,
    handoff_counts,
    read_radio_log,
)
from cellperf.handoffs.rank_test import MannWhitney, mann_whitney_u

__all__ = [
    "HANDOFF_KINDS",
    "MannWhitney",
    "check_radio_log",
    "compare_near_handoffs",
    "describe",
    "detect_handoffs",
    "dwell_times",
    "handoff_counts",
    "mann_whitney_u",
    "near_handoff",
    "read_radio_log",
]
