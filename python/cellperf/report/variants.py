"""TCP variants compared on one cell (seed 002 Figs. 8 and 9): where a network and scenario
has TCP test flows of two or more congestion controls, the figures that tell whether the
differences come from the variants' queueing or from the channel each flow met.

- Fig. 8 left: per variant, mean goodput, mean excess one-way delay and mean channel capacity
  (the seed's mean DRC), each divided by its largest value over the variants, so that one axis
  holds all three;
- Fig. 8 middle and right: per flow, the standard deviation of its one-way delay and its loss
  rate against its goodput;
- Fig. 9 middle and right: per flow, the fraction of the mean capacity it exploited
  (utilisation) against the mean and the standard deviation of the capacity over its lifetime.

Flows come from `tcp_study_flows` (the TCP studies' table), so a group run's members and
window sweeps count alike.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from cellperf.report.item import Item, layout
from cellperf.report.studies import tcp_study_flows
from cellperf.store import Store

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def normalised_means(flows: pl.DataFrame) -> pl.DataFrame:
    """Per congestion control of `flows`: mean goodput, excess delay and capacity, each divided
    by its maximum over the variants (002 Fig. 8 left); a metric no flow has stays null."""
    means = flows.group_by("congestion").agg(
        goodput=pl.col("goodput_bps").mean(), delay=pl.col("owd_mean_ms").mean(),
        capacity=pl.col("mean_capacity_bps").mean()).sort("congestion")
    return means.with_columns(pl.col(c) / pl.col(c).max() for c in ("goodput", "delay", "capacity"))


def _scatter(fig: go.Figure, flows: pl.DataFrame, x: str, y: str, col: int, colour: dict, scale_x: float = 1.0,
             scale_y: float = 1.0) -> None:
    for (variant,), f in flows.filter(pl.col(x).is_not_null() & pl.col(y).is_not_null()).group_by(
            "congestion", maintain_order=True):
        fig.add_trace(go.Scatter(x=f[x] / scale_x, y=f[y] / scale_y, mode="markers", name=variant,
                                 legendgroup=variant, showlegend=False, marker=dict(color=colour[variant], size=8),
                                 text=f["run_id"], hovertemplate="%{text}<br>%{x:.3g}, %{y:.3g}<extra>" + variant
                                 + "</extra>"), row=1, col=col)


def _variant_legend(fig: go.Figure, colour: dict) -> None:
    """One legend entry per variant (the scatters hide theirs: several panels would repeat it)."""
    for variant, c in colour.items():
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=variant, marker=dict(color=c, size=8)),
                      row=1, col=2)


def _performance(flows: pl.DataFrame, colour: dict) -> go.Figure:
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=(
        "means, normalised to the largest", "std of one-way delay vs goodput", "loss rate vs goodput"))
    means = normalised_means(flows)
    # Greys for the metrics, so that colours mean variants throughout.
    for (metric, label), grey in zip((("goodput", "goodput"), ("delay", "excess delay"),
                                      ("capacity", "capacity (DRC)")), ("#444", "#888", "#ccc")):
        fig.add_trace(go.Bar(x=means["congestion"], y=means[metric], name=label, marker_color=grey), row=1, col=1)
    _scatter(fig, flows, "goodput_bps", "owd_std_ms", 2, colour, scale_x=1e3)
    _scatter(fig, flows, "goodput_bps", "loss_rate", 3, colour, scale_x=1e3, scale_y=0.01)
    _variant_legend(fig, colour)
    fig.update_yaxes(title_text="fraction of the largest", range=[0, 1.05], row=1, col=1)
    fig.update_xaxes(title_text="goodput, kbit/s", row=1, col=2)
    fig.update_yaxes(title_text="one-way delay std, ms", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="goodput, kbit/s", row=1, col=3)
    fig.update_yaxes(title_text="loss rate, %", rangemode="tozero", row=1, col=3)
    return layout(fig, height=420, barmode="group")


def _channel(flows: pl.DataFrame, colour: dict) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
        "fraction exploited vs mean capacity", "fraction exploited vs capacity std"))
    _scatter(fig, flows, "mean_capacity_bps", "utilisation", 1, colour, scale_x=1e3)
    _scatter(fig, flows, "capacity_std_bps", "utilisation", 2, colour, scale_x=1e3)
    _variant_legend(fig, colour)
    fig.update_xaxes(title_text="mean capacity over the flow, kbit/s", row=1, col=1)
    fig.update_xaxes(title_text="capacity std over the flow, kbit/s", row=1, col=2)
    fig.update_yaxes(title_text="goodput / mean capacity", rangemode="tozero")
    return layout(fig, height=400)


def tcp_variants(store: Store) -> list[Item]:
    # A flow whose congestion control nobody chose or reported (a browser's page-load
    # connections: "–") is no variant of the comparison.
    flows = tcp_study_flows(store).filter(pl.col("congestion") != "–")
    items = []
    for (network, scenario), f in flows.group_by("network", "scenario", maintain_order=True):
        variants = sorted(f["congestion"].unique())
        if len(variants) < 2:
            continue
        colour = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(variants)}
        n = f"{f.height} TCP flows of {len(variants)} congestion controls ({', '.join(variants)})"
        items.append(Item(
            f"variants-{network}-{scenario}", f"TCP variants: performance and delay, {network}, {scenario}",
            f"{n}. Left: mean goodput, mean excess one-way delay and mean channel capacity per variant, each "
            "divided by its largest value; middle and right: each flow's one-way delay standard deviation and "
            "loss rate against its goodput. Seed 002 Fig. 8 (Vegas: least goodput and by far the least delay "
            "variation; the loss rate uncorrelated with goodput).", _performance(f, colour)))
        if f["utilisation"].is_not_null().any():
            items.append(Item(
                f"variants-channel-{network}-{scenario}", f"TCP variants: what of the channel each exploited, "
                f"{network}, {scenario}",
                f"{n}. The fraction of the mean channel capacity (radio log rates over the flow's lifetime) each "
                "flow achieved against that mean and against the capacity's standard deviation. Seed 002 Fig. 9 "
                "middle and right (flows of equal mean DRC perform very differently; the DRC's variation has "
                "little bearing on it).", _channel(f, colour)))
    return items
