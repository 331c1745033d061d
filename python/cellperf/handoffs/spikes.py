"""Delay spikes labelled by handoffs (seed 000 ch. 5: most spikes come at handoffs, one of 5 s
did not). The spikes themselves are found in the analysis (crates/cellperf-analysis,
`spikes.rs`); here each is marked near a handoff when its span [start, start + duration]
overlaps [h − 5 s, h + 5 s] of a handoff h (the same rule as intervals, docs/methods.md §6),
with its start's offset from the nearest handoff."""

from __future__ import annotations

import numpy as np
import polars as pl

from cellperf.handoffs.compare import near_handoff


def label_spikes(spikes: pl.DataFrame, handoff_s, window_s: float = 5.0) -> pl.DataFrame:
    """`spikes` (start_ts, duration_ms, ...) with `near_handoff` and `handoff_offset_s` (the
    spike's start minus the nearest handoff's time; null without handoffs)."""
    start = spikes["start_ts"].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9
    end = start + spikes["duration_ms"].to_numpy() / 1e3
    h = np.sort(np.asarray(handoff_s, dtype=np.float64))
    offset = np.full(start.shape, np.nan)
    if h.size:
        i = np.clip(np.searchsorted(h, start), 1, h.size) - 1
        j = np.minimum(i + 1, h.size - 1)
        nearer = np.where(np.abs(start - h[j]) < np.abs(start - h[i]), h[j], h[i])
        offset = start - nearer
    return spikes.with_columns(near_handoff=pl.Series(near_handoff(start, end, h, window_s), dtype=pl.Boolean),
                               handoff_offset_s=pl.Series(offset, dtype=pl.Float64).fill_nan(None))
