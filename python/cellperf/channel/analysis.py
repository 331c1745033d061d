"""Channel statistics, Markov models and the data behind seed 002's figures (docs/methods.md §7).

The numbers come from the compiled core; this module attaches times and names, and turns
per-window results into the tables a report plots (CDFs over windows, conditional entropy
by depth and by lag).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa

from cellperf import _native
from cellperf.channel.traces import SlotTrace
from cellperf.errors import UserError

native = _native.channel

#: Markov depths reported (002 Fig. 5 left/middle).
MAX_DEPTH = 4
#: Lags for H(X_{i+d}|X_i)/H(X_{i+d}), log-spaced over 1..1000 slots (002 Fig. 5 right).
DEFAULT_LAGS = sorted({int(round(10 ** (3 * k / 30))) for k in range(31)})
#: Summary fields of a window (the per-trace ones plus its start).
WINDOW_FIELDS = (
    "slots",
    "mean_rate_bps",
    "std_rate_bps",
    "modal_rate_bps",
    "modal_fraction",
    "entropy_bits",
    "mean_sojourn_slots",
    "cond_entropy_by_depth",
    "markov_rmse",
)


def trace_stats(trace: SlotTrace, *, window_s: float = 3600.0, lags: list[int] | None = None) -> dict:
    """Statistics of a whole trace and of each window of `window_s` seconds."""
    if not window_s > 0:
        raise UserError(f"--window must be > 0 s, got {window_s:g}")
    window_slots = max(1, int(round(window_s / trace.slot_s)))
    try:
        result = json.loads(
            native.trace_stats(trace.states, trace.rates_bps, window_slots, MAX_DEPTH, lags or DEFAULT_LAGS)
        )
    except _native.InputError as e:
        raise UserError(f"{trace.name}: {e}") from None
    out = {"name": trace.name, "slot_s": trace.slot_s, "duration_s": trace.slots * trace.slot_s, **result["trace"]}
    out["mean_sojourn_ms"] = out["mean_sojourn_slots"] * trace.slot_s * 1000
    for lag in out["cond_entropy_by_lag"]:
        lag["lag_ms"] = lag["lag_slots"] * trace.slot_s * 1000
    out["handoffs"] = int(trace.handoff_slots.size)
    windows = []
    for i, w in enumerate(result["windows"]):
        windows.append({"index": i, "start_s": trace.start_s + i * window_slots * trace.slot_s} | {k: w[k] for k in WINDOW_FIELDS})
    out["window_s"] = window_slots * trace.slot_s
    out["windows"] = windows
    out["sinr_rate_correlation"] = None
    if trace.sinr_db is not None:
        whole, per_window = native.correlation(trace.sinr_db, pa.array(trace.rates()), window_slots)
        out["sinr_rate_correlation"] = whole
        for w, c in zip(windows, per_window):
            w["sinr_rate_correlation"] = c
    return out


def fit_model(trace: SlotTrace, order: int = 1) -> str:
    """The model file's text for an order-`order` Markov fit of `trace`."""
    if order < 1:
        raise UserError(f"--order must be >= 1, got {order}")
    source = {"trace": trace.name, "slots": trace.slots, "fitted_by": f"cellperf {_native.__version__}"}
    try:
        return native.fit_model(trace.states, trace.rates_bps, trace.slot_s, order, json.dumps(source))
    except _native.InputError as e:
        raise UserError(f"{trace.name}: {e}") from None


def describe_model(text: str, source: str) -> dict:
    """Order, rates, fitted fractions, stationary distribution and analytic sojourns of a model file."""
    try:
        return json.loads(native.describe_model(text))
    except _native.InputError as e:
        raise UserError(f"{source}: {e}") from None


def generate(text: str, slots: int, seed: int, name: str) -> SlotTrace:
    """A seeded synthetic trace of `slots` slots from a model file's text."""
    if slots < 1:
        raise UserError(f"--slots must be >= 1, got {slots}")
    if not 0 <= seed < 2**64:
        raise UserError(f"--seed must be in [0, 2^64), got {seed}")
    info = describe_model(text, name)
    states = native.generate(text, slots, seed)
    return SlotTrace(f"{name} (seed {seed})", states, info["rates_bps"], info["slot_s"])


def _cdf(values: np.ndarray, name: str) -> pl.DataFrame:
    values = np.sort(values[np.isfinite(values)])
    return pl.DataFrame({name: values, "cdf": np.arange(1, values.size + 1) / max(values.size, 1)})


def figure_tables(stats: list[dict]) -> dict[str, pl.DataFrame]:
    """Tables behind 002 Figs. 1–5 from `trace_stats` results: per-window summaries, CDFs over
    windows of entropy, modal fraction, mean sojourn and Markov RMSE, and the normalized
    conditional entropy by depth (per window) and by lag (per trace)."""
    rows = [
        {"trace": s["name"], "window": w["index"], "start_s": w["start_s"]}
        | {k: w[k] for k in WINDOW_FIELDS if k != "cond_entropy_by_depth"}
        | {"sinr_rate_correlation": w.get("sinr_rate_correlation")}
        for s in stats
        for w in s["windows"]
    ]
    windows = pl.DataFrame(rows, infer_schema_length=None)
    depth = pl.DataFrame(
        [
            {"trace": s["name"], "window": w["index"], "depth": n + 1, "normalized": v}
            for s in stats
            for w in s["windows"]
            for n, v in enumerate(w["cond_entropy_by_depth"])
        ],
        schema={"trace": pl.String, "window": pl.Int64, "depth": pl.Int64, "normalized": pl.Float64},
    )
    lag = pl.DataFrame(
        [
            {"trace": s["name"], "lag_slots": e["lag_slots"], "lag_ms": e["lag_ms"], "normalized": e["normalized"]}
            for s in stats
            for e in s["cond_entropy_by_lag"]
        ],
        schema={"trace": pl.String, "lag_slots": pl.Int64, "lag_ms": pl.Float64, "normalized": pl.Float64},
    )

    def column(name: str) -> np.ndarray:
        return windows[name].cast(pl.Float64).fill_null(np.nan).to_numpy()

    return {
        "windows": windows,
        "cdf_entropy": _cdf(column("entropy_bits"), "entropy_bits"),
        "cdf_modal_fraction": _cdf(column("modal_fraction"), "modal_fraction"),
        "cdf_sojourn": _cdf(column("mean_sojourn_slots"), "mean_sojourn_slots"),
        "cdf_markov_rmse": _cdf(column("markov_rmse"), "markov_rmse"),
        "cond_entropy_depth": depth,
        "cond_entropy_lag": lag,
    }
