"""Delay spikes labelled by handoffs (seed 000 ch. 5) on crafted spikes: near when the spike
overlaps ±5 s of a handoff, with the signed distance of its start from the nearest one."""

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.handoffs.spikes import label_spikes

T0 = 1_700_000_000.0


def _spikes(starts_s, durations_ms):
    ts = [datetime.fromtimestamp(T0 + s, timezone.utc) for s in starts_s]
    return pl.DataFrame({"start_ts": ts, "duration_ms": durations_ms})


def test_near_and_away_with_offsets():
    # Handoffs at 20 s and 60 s. Spikes: 16 s (ends 16.5: within 20 − 5), 10 s lasting
    # 5.5 s (reaches 15.5 > 15: near), 10 s lasting 4 s (ends 14: away), 40 s (away), 64 s.
    out = label_spikes(_spikes([16.0, 10.0, 10.0, 40.0, 64.0], [500.0, 5500.0, 4000.0, 300.0, 100.0]),
                       [T0 + 60.0, T0 + 20.0])
    assert out["near_handoff"].to_list() == [True, True, False, False, True]
    assert out["handoff_offset_s"].to_list() == pytest.approx([-4.0, -10.0, -10.0, 20.0, 4.0])


def test_without_handoffs_every_spike_is_away():
    out = label_spikes(_spikes([1.0], [100.0]), [])
    assert out["near_handoff"].to_list() == [False] and out["handoff_offset_s"].to_list() == [None]
    assert label_spikes(_spikes([], []), [T0]).height == 0
