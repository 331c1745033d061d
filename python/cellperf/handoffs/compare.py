"""Per-interval metrics near handoffs versus all other intervals (docs/methods.md §6; 000 Fig. 4.7).

An interval [start, end) is *near* a handoff at time h when it overlaps [h − w, h + w]
(default w = 5 s, the thesis' "5 seconds before and after the handoff"). For each metric the
near and other intervals are compared by count, mean, median, quantiles, empirical CDF and a
two-sided Mann–Whitney U test. Intervals where the metric is null or NaN (no data) are left out
of both groups and counted apart.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from cellperf.errors import UserError
from cellperf.handoffs.rank_test import mann_whitney_u

DEFAULT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def near_handoff(start_s, end_s, handoff_s, window_s: float = 5.0) -> np.ndarray:
    """True for each interval [start_s, end_s) that overlaps [h − w, h + w] for some handoff h."""
    start = np.asarray(start_s, dtype=np.float64)
    end = np.asarray(end_s, dtype=np.float64)
    h = np.sort(np.asarray(handoff_s, dtype=np.float64))
    if h.size == 0:
        return np.zeros(start.shape, dtype=bool)
    # The first handoff at or after start − w decides: it is near iff it comes before end + w.
    i = np.searchsorted(h, start - window_s, side="left")
    found = i < h.size
    return found & (h[np.minimum(i, h.size - 1)] < end + window_s)


def _epoch_seconds(df: pl.DataFrame, col: str, source: str) -> np.ndarray:
    if col not in df.columns:
        raise UserError(f"{source}: no column {col!r}")
    dtype = df.schema[col]
    if isinstance(dtype, pl.Datetime):
        return df[col].dt.epoch("ns").cast(pl.Float64).to_numpy() / 1e9
    if dtype.is_numeric():
        return df[col].cast(pl.Float64).to_numpy()
    raise UserError(f"{source}: column {col!r} must be a timestamp or Unix epoch seconds, not {dtype}")


def describe(values: np.ndarray, quantiles=DEFAULT_QUANTILES) -> dict:
    """Count, mean, median, quantiles and the empirical CDF (sorted values, cumulative shares)."""
    v = np.sort(values)
    if v.size == 0:
        return {"n": 0, "mean": None, "median": None, "quantiles": {}, "cdf": {"x": [], "p": []}}
    q = np.quantile(v, quantiles)
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "quantiles": {f"p{round(100 * k):g}": float(x) for k, x in zip(quantiles, q)},
        "cdf": {"x": v.tolist(), "p": (np.arange(1, v.size + 1) / v.size).tolist()},
    }


def compare_near_handoffs(
    intervals: pl.DataFrame,
    handoff_s,
    metrics: list[str],
    *,
    window_s: float = 5.0,
    start_col: str = "window_start",
    end_col: str | None = "window_end",
    interval_s: float | None = None,
    quantiles=DEFAULT_QUANTILES,
    source: str = "interval table",
) -> dict:
    """Compare every metric column of `intervals` near handoffs (±window_s) with the rest.

    Interval times come from `start_col` and `end_col` (timestamps or Unix epoch seconds, on the
    same clock as `handoff_s`), or from `start_col` plus a fixed `interval_s` when there is no
    end column. Returns {"window_s", "intervals_near", "intervals_other", "metrics": {name:
    {"near", "other", "no_data", "mann_whitney"}}}; "mann_whitney" is null when a group is empty.
    """
    if not window_s >= 0:
        raise UserError(f"handoff window must be >= 0 s, got {window_s:g}")
    start = _epoch_seconds(intervals, start_col, source)
    if end_col is not None:
        end = _epoch_seconds(intervals, end_col, source)
    elif interval_s is not None and interval_s > 0:
        end = start + interval_s
    else:
        raise UserError(f"{source}: give an end column or a positive interval length")
    near = near_handoff(start, end, handoff_s, window_s)
    result = {
        "window_s": window_s,
        "intervals_near": int(near.sum()),
        "intervals_other": int((~near).sum()),
        "metrics": {},
    }
    for name in metrics:
        if name not in intervals.columns:
            raise UserError(f"{source}: no metric column {name!r}")
        values = intervals[name].cast(pl.Float64).fill_null(np.nan).to_numpy()
        known = ~np.isnan(values)
        x, y = values[near & known], values[~near & known]
        test = mann_whitney_u(x, y).as_dict() if x.size and y.size else None
        result["metrics"][name] = {
            "near": describe(x, quantiles),
            "other": describe(y, quantiles),
            "no_data": int((~known).sum()),
            "mann_whitney": test,
        }
    return result
