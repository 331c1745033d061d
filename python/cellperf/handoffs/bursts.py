"""Post-handover bursts (seed 004 §IV.B 2.2, docs/methods.md §6): when a handover ends, packets
held during the gap arrive together, so the rate a receiver sees right after it can exceed what
the link carries (004: peaks of about 1.2 Mb/s on a 384-kb/s bearer).

For each handoff h and each data flow direction active at h that carried a sustained stream
(data in at least one full interval: not a request, a probe's hello or a download's ACKs),
its packets at its *receiver's* capture (the CN's for uplink, the MN's for downlink) arriving
in [h, h + window) are binned in `bin_s` bins starting at h; the peak rate is the fullest bin's IP bytes × 8 / `bin_s`, beside
the flow's mean throughput (`flows.throughput_bps`) as a ratio.
**Choice**: 200-ms bins (short enough to see a driver's burst, long enough to hold several
packets of a 100-kb/s stream) over the 5 s after the handoff (the thesis' ±5-s window, §6); a
window stops at the next handoff, whose burst is its own. Computed with polars over whole
columns (no Python loop over packets).
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: Bin over which the peak rate is measured, and the span after a handoff searched (s).
BURST_BIN_S = 0.2
BURST_WINDOW_S = 5.0

#: Columns of the store's `handoff_bursts` rows (docs/store.md), beside run_id.
BURST_SCHEMA = {"flow_id": pl.UInt32, "direction": pl.String, "handoff_s": pl.Float64, "window_s": pl.Float64,
                "bin_s": pl.Float64, "window_bytes": pl.UInt64, "peak_bps": pl.Float64, "peak_after_s": pl.Float64,
                "flow_bps": pl.Float64, "peak_ratio": pl.Float64}


def receiver_packets(packets: pl.DataFrame, captures: list[dict]) -> pl.DataFrame:
    """The rows of a `packets` table taken at each packet's receiving end (the CN's capture
    for uplink, the MN's for downlink): flow_id, direction, arrival time (`t`, Unix s) and
    `ip_len`."""
    side = pl.col("capture").replace_strict({i: c["side"] for i, c in enumerate(captures)}, default=None)
    return packets.filter(side == pl.when(pl.col("uplink")).then(pl.lit("cn")).otherwise(pl.lit("mn"))).select(
        "flow_id", direction=pl.when(pl.col("uplink")).then(pl.lit("uplink")).otherwise(pl.lit("downlink")),
        t=pl.col("ts").dt.epoch("ns").cast(pl.Float64) / 1e9, ip_len=pl.col("ip_len").cast(pl.UInt64))


def handoff_bursts(arrivals: pl.DataFrame, flows: pl.DataFrame, handoff_s, *, window_s: float = BURST_WINDOW_S,
                   bin_s: float = BURST_BIN_S) -> pl.DataFrame:
    """One row per (flow direction seen at its receiver, handoff inside the flow's span
    [start_s, end_s]): the bytes that arrived in the window after the handoff, the peak rate
    over `bin_s` bins and when its bin began (s after the handoff), the flow's mean rate and
    the ratio (see the module). `arrivals` are `receiver_packets` rows; `flows` has flow_id,
    direction, start_s, end_s, throughput_bps and interval_max_bps (null or 0: no data in a
    full interval, left out)."""
    h = np.sort(np.asarray(handoff_s, dtype=np.float64))
    if h.size == 0 or flows.height == 0:
        return pl.DataFrame(schema=BURST_SCHEMA)
    ends = np.append(h[1:], np.inf)
    marks = pl.DataFrame({"handoff_s": h, "_until": np.minimum(h + window_s, ends)})
    key = ["flow_id", "direction"]
    sustained = flows.filter(pl.col("interval_max_bps") > 0).join(arrivals.select(key).unique(), on=key)
    pairs = sustained.select(*key, "start_s", "end_s", flow_bps="throughput_bps").join(marks, how="cross").filter(
        (pl.col("handoff_s") >= pl.col("start_s")) & (pl.col("handoff_s") <= pl.col("end_s")))
    # Each arrival belongs to the last handoff before it, if within that handoff's window.
    got = arrivals.join(pairs.select(key).unique(), on=key).sort("t").join_asof(
        marks, left_on="t", right_on="handoff_s", strategy="backward").filter(pl.col("t") < pl.col("_until"))
    bins = got.with_columns(_bin=((pl.col("t") - pl.col("handoff_s")) / bin_s).floor().cast(pl.Int64)).group_by(
        "flow_id", "direction", "handoff_s", "_bin").agg(_bytes=pl.col("ip_len").sum())
    peaks = bins.sort("_bin").group_by("flow_id", "direction", "handoff_s").agg(
        window_bytes=pl.col("_bytes").sum(), peak_bytes=pl.col("_bytes").max(),
        peak_after_s=pl.col("_bin").get(pl.col("_bytes").arg_max()).cast(pl.Float64) * bin_s)
    out = pairs.join(peaks, on=["flow_id", "direction", "handoff_s"], how="left").with_columns(
        window_s=pl.col("_until") - pl.col("handoff_s"), bin_s=pl.lit(bin_s),
        window_bytes=pl.col("window_bytes").fill_null(0),
        peak_bps=pl.col("peak_bytes").fill_null(0).cast(pl.Float64) * 8 / bin_s)
    out = out.with_columns(peak_ratio=pl.when(pl.col("flow_bps") > 0).then(pl.col("peak_bps") / pl.col("flow_bps")))
    return out.select(*(pl.col(c).cast(t) for c, t in BURST_SCHEMA.items())).sort("handoff_s", "flow_id", "direction")
