"""Soft vs hard handovers (seed 004 §IV.B: without macrodiversity UMTS hands over hard, "handovers
lead to connectivity gaps of several seconds", where a soft handover keeps the flow going),
compared by what each did to the UDP streams crossing it (docs/methods.md §6).

A handover's **mode**: `hard` when the link loses what arrives during the interruption
(break before make), `soft` when it keeps it (make before break, or held and forwarded). The
store's handoffs do not say it, so it is taken from the run's link where cellperf knows it: an
emulated run's outage mode (a `[networks.link]`'s `outage_mode`, else its profile's: WiBro and
UMTS drop, the others buffer; the emulator's default is buffer). A run on a real network is
classed by what it measured: `hard` when a gap (lost packets) is assigned to the handover,
else `soft`; its `basis` says so, and its loss is then the class's definition, not a finding.

Per handover h, over the run's sequenced UDP streams alive at h, each gap, delay period and
delay spike is assigned to its nearest handover within `window_s` (distance 0 when its span
contains h): **interruption** = the longest gap or delay period (ms; 0 when none), **lost** =
the packets of its gaps, **spike** = the highest delay-spike peak (ms; none when none).
"""

from __future__ import annotations

import json

import polars as pl

from cellperf.errors import UserError

#: Outage modes → handover modes.
MODES = {"drop": "hard", "buffer": "soft"}

EFFECT_SCHEMA = {"run_id": pl.Utf8, "time_s": pl.Float64, "interruption_ms": pl.Float64, "lost": pl.Int64,
                 "spike_ms": pl.Float64}


def link_mode(config) -> str | None:
    """The handover mode of a run's link from its stored config, None when cellperf cannot
    know it (a real network)."""
    config = json.loads(config) if isinstance(config, str) else config or {}
    given = dict(config.get("link") or [])
    if "outage_mode" in given:
        return MODES[given["outage_mode"]]
    if config.get("profile"):
        from cellperf.emulate.profiles import profile

        try:
            return MODES[profile(config["profile"]).outages.get("mode", "buffer")]
        except UserError:  # a profile this cellperf no longer has (an older store's)
            return None
    return MODES["buffer"] if config.get("testbed") == "emulated" else None


def _assign(handoffs: pl.DataFrame, events: pl.DataFrame, window_s: float) -> pl.DataFrame:
    """`events` (run_id, start_s, end_s, ...) each with the time_s of its nearest handover of
    the same run within window_s; the others left out."""
    d = pl.max_horizontal(pl.lit(0.0), pl.col("start_s") - pl.col("time_s"), pl.col("time_s") - pl.col("end_s"))
    return (events.with_row_index("_event").join(handoffs.select("run_id", "time_s"), on="run_id")
            .with_columns(_d=d).filter(pl.col("_d") <= window_s)
            .sort("_event", "_d", "time_s").unique("_event", keep="first", maintain_order=True))


def handover_effects(handoffs: pl.DataFrame, streams: pl.DataFrame, events: pl.DataFrame, spikes: pl.DataFrame,
                     window_s: float = 5.0) -> pl.DataFrame:
    """One row per handover (run_id, time_s) that a stream (run_id, start_s, end_s) was alive
    at: interruption_ms, lost, spike_ms. `events` are gaps and delay periods (run_id, start_s,
    end_s, duration_ms, lost), `spikes` delay spikes (run_id, start_s, end_s, peak_ms); times in Unix s."""
    alive = (handoffs.select("run_id", "time_s").join(streams, on="run_id")
             .filter((pl.col("start_s") <= pl.col("time_s")) & (pl.col("time_s") <= pl.col("end_s")))
             .select("run_id", "time_s").unique(maintain_order=True))
    if alive.height == 0:
        return pl.DataFrame(schema=EFFECT_SCHEMA)
    key = ["run_id", "time_s"]
    gaps = (_assign(alive, events, window_s).group_by(key)
            .agg(interruption_ms=pl.col("duration_ms").max(), lost=pl.col("lost").sum()))
    peaks = _assign(alive, spikes, window_s).group_by(key).agg(spike_ms=pl.col("peak_ms").max())
    return (alive.join(gaps, on=key, how="left").join(peaks, on=key, how="left")
            .with_columns(pl.col("interruption_ms").fill_null(0.0), pl.col("lost").fill_null(0).cast(pl.Int64))
            .select(list(EFFECT_SCHEMA)).sort(key))
