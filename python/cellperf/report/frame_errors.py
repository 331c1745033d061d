"""The frame error rate (seed 002 Fig. 9 left: "overall mean and a few individual per-experiment
sample frame error rates", all below 1 % on EV-DO, where turbo codes and hybrid ARQ keep the
loss the link layer leaves negligible) from the radio log's frame counts: the emulated cell's
downlink ARQ (every HARQ chain and whether it failed) or a modem's transport blocks and their
CRC (MobileInsight's PDSCH statistics). Per network, scenario and profile: frames, frames in
error, the pooled FER and the spread of the runs' FERs; per network a figure of the FER over
time, each run's FER per second beside the overall mean (docs/methods.md §1)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from cellperf.report.item import Item, has_view, layout, percent
from cellperf.report.tables import html_table
from cellperf.store import Store

#: Runs drawn per figure at most (002 draws "a few individual" experiments beside the mean).
MAX_RUNS = 6
#: The figure's time step: each run's FER over whole seconds of its radio log.
BIN_S = 1.0

SQL = """
    SELECT s.run_id, r.network, r.scenario, coalesce(r.profile, '–') AS profile,
           s.time_s - min(s.time_s) OVER (PARTITION BY s.run_id) AS t, s.frames, s.frame_errors
    FROM radio_samples s JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND s.frames IS NOT NULL
    ORDER BY r.network, r.scenario, s.run_id, s.time_s"""


def _has_frames(store: Store) -> bool:
    if not has_view(store, "radio_samples"):
        return False
    return "frames" in {r[0] for r in store.con.execute("DESCRIBE radio_samples").fetchall()}


def per_run(samples: pl.DataFrame) -> pl.DataFrame:
    """Per run of `samples` (run_id, network, scenario, profile, frames, frame_errors): its frames,
    frames in error and FER (null when it sent none)."""
    return (samples.group_by("network", "scenario", "profile", "run_id", maintain_order=True)
            .agg(pl.col("frames").sum(), pl.col("frame_errors").sum())
            .with_columns(fer=pl.when(pl.col("frames") > 0).then(pl.col("frame_errors") / pl.col("frames"))))


def fer_summary(runs: pl.DataFrame) -> pl.DataFrame:
    """Per network, scenario and profile of `per_run`'s rows: runs, frames, frames in error,
    the pooled FER (errors / frames over the runs) and the least, median and largest run FER."""
    return (runs.group_by("network", "scenario", "profile", maintain_order=True)
            .agg(runs=pl.len(), frames=pl.col("frames").sum(), frame_errors=pl.col("frame_errors").sum(),
                 least=pl.col("fer").min(), median=pl.col("fer").median(), largest=pl.col("fer").max())
            .with_columns(fer=pl.when(pl.col("frames") > 0).then(pl.col("frame_errors") / pl.col("frames"))))


def _figure(samples: pl.DataFrame, runs: list[str], mean: float | None) -> go.Figure:
    fig = go.Figure()
    for run_id in runs:
        one = (samples.filter(pl.col("run_id") == run_id)
               .group_by(second=(pl.col("t") / BIN_S).floor() * BIN_S).agg(pl.col("frames").sum(),
                                                                             pl.col("frame_errors").sum())
               .filter(pl.col("frames") > 0).sort("second"))
        fig.add_trace(go.Scatter(x=one["second"], y=100 * one["frame_errors"] / one["frames"], mode="lines+markers",
                                 name=run_id, marker=dict(size=4)))
    if mean is not None:
        fig.add_hline(y=100 * mean, line_dash="dash", annotation_text=f"overall mean {100 * mean:.3f} %")
    fig.update_xaxes(title="time from the run's first radio sample, s")
    fig.update_yaxes(title="frame error rate, %", rangemode="tozero")
    return layout(fig)


def frame_error_rates(store: Store) -> list[Item]:
    if not _has_frames(store):
        return []
    samples = store.frame(SQL)
    if samples.is_empty():
        return []
    runs = per_run(samples)
    summary = fer_summary(runs)
    rows = [[r["network"], r["scenario"], r["profile"], r["runs"], r["frames"], r["frame_errors"], percent(r["fer"], 3),
             percent(r["least"], 3), percent(r["median"], 3), percent(r["largest"], 3)] for r in summary.iter_rows(named=True)]
    items = [Item("fer-table", "Frame error rate",
                  "Radio frames sent on the downlink and those in error, from the radio log: the emulated cell's "
                  "link-layer ARQ counts each HARQ chain (a transmission with its hybrid-ARQ retries; in error when "
                  "all failed and RLP/RLC resent; none while a deep fade holds the channel at the null rate); a "
                  "MobileInsight log counts the LTE transport blocks the modem decoded and those whose CRC failed. FER = frames in error / frames, pooled over the runs, and the least, median and largest "
                  "per run. Seed 002 Fig. 9 left (EV-DO: below 1 %). Per sample: SELECT * FROM radio_samples.",
                  table_html=html_table(["network", "scenario", "profile", "runs", "frames", "in error", "FER %",
                                         "least run %", "median run %", "largest run %"], rows, name="fer",
                                        query=SQL))]
    for (network,), s in samples.group_by("network", maintain_order=True):
        net = runs.filter(pl.col("network") == network)
        sent = int(net["frames"].sum())
        mean = int(net["frame_errors"].sum()) / sent if sent else None
        # The runs that sent the most frames: the best-sampled FER curves.
        shown = net.filter(pl.col("frames") > 0).sort("frames", "run_id", descending=[True, False]).head(MAX_RUNS)
        if shown.is_empty():
            continue
        left = net.height - shown.height
        more = f" Left out: {left} other run{'s' * (left > 1)}." if left else ""
        items.append(Item(f"fer-{network}", f"Frame error rate over time: {network}",
                          f"Each run's frame error rate per {BIN_S:g} s of its radio log ({shown.height} runs with "
                          f"the most frames) and the overall mean over all {net.height} runs of the network (dashed); "
                          f"seed 002 Fig. 9 left.{more}",
                          figure=_figure(s, shown["run_id"].to_list(), mean)))
    return items


SECTIONS = (("Frame errors", (frame_error_rates,)),)
