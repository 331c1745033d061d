"""Images of seed 002's channel figures (Figs. 1-6), drawn from the tables that `channel stats`
and `sched` write as CSV, so a user gets the picture and the numbers behind it from one run.

Each function returns report `Item`s; `cellperf.report.export_figures` renders them to PNG
and PDF with the same offline Chromium as the report's figures.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from cellperf.report.item import Item, layout

COLOURS = qualitative.Plotly


def _per_trace(fig: go.Figure, table: pl.DataFrame, x: str, y: str, row: int, col: int, scale_y: float = 1.0,
               mode: str = "lines+markers", show_legend: bool = False) -> None:
    # One colour per trace in every panel, in order of first appearance.
    for i, ((trace,), part) in enumerate(table.group_by("trace", maintain_order=True)):
        colour = COLOURS[i % len(COLOURS)]
        fig.add_trace(go.Scatter(x=part[x].to_list(), y=(part[y].cast(pl.Float64) * scale_y).to_list(), mode=mode,
                                 name=str(trace), legendgroup=str(trace), showlegend=show_legend,
                                 line=dict(color=colour), marker=dict(color=colour)), row=row, col=col)


def _cdf(fig: go.Figure, table: pl.DataFrame, x: str, col: int, log_x: bool = False) -> None:
    fig.add_trace(go.Scatter(x=table[x].to_list(), y=table["cdf"].to_list(), mode="lines", line_shape="hv",
                             showlegend=False), row=1, col=col)
    if log_x:
        fig.update_xaxes(type="log", row=1, col=col)


def channel_stats_items(tables: dict[str, pl.DataFrame]) -> list[Item]:
    """002 Figs. 1/3 (mean, std and modal fraction per window), 2 and 4 (CDFs over windows
    of modal fraction, entropy, sojourn, Markov RMSE) and 5 (conditional entropy by Markov
    depth and by lag), from `cellperf.channel.analysis.figure_tables`."""
    windows = tables["windows"].sort("trace", "start_s").with_columns(t_h=pl.col("start_s") / 3600)
    over_time = make_subplots(rows=1, cols=3, subplot_titles=("mean rate (kb/s)", "std of rate (kb/s)",
                                                               "modal fraction"))
    _per_trace(over_time, windows, "t_h", "mean_rate_bps", 1, 1, 1e-3, show_legend=True)
    _per_trace(over_time, windows, "t_h", "std_rate_bps", 1, 2, 1e-3)
    _per_trace(over_time, windows, "t_h", "modal_fraction", 1, 3)
    over_time.update_xaxes(title_text="window start (h)")

    cdfs = make_subplots(rows=1, cols=4, subplot_titles=("modal fraction", "entropy (bits)",
                                                          "mean sojourn (slots)", "Markov sojourn RMSE"))
    _cdf(cdfs, tables["cdf_modal_fraction"], "modal_fraction", 1)
    _cdf(cdfs, tables["cdf_entropy"], "entropy_bits", 2)
    _cdf(cdfs, tables["cdf_sojourn"], "mean_sojourn_slots", 3, log_x=True)
    _cdf(cdfs, tables["cdf_markov_rmse"], "markov_rmse", 4, log_x=True)
    cdfs.update_yaxes(title_text="CDF over windows", row=1, col=1)

    memory = make_subplots(rows=1, cols=2, subplot_titles=("H(X | past n slots) / H(X)", "H(X+d | X) / H(X+d)"))
    _per_trace(memory, tables["cond_entropy_depth"], "depth", "normalized", 1, 1, mode="markers", show_legend=True)
    _per_trace(memory, tables["cond_entropy_lag"], "lag_slots", "normalized", 1, 2)
    memory.update_xaxes(title_text="Markov depth n (slots)", dtick=1, row=1, col=1)
    memory.update_xaxes(title_text="lag d (slots)", type="log", row=1, col=2)
    return [
        Item("channel-over-time", "Channel rate and its variability per window",
             "Mean and standard deviation of the rate and the modal fraction of each window (002 Figs. 1, 3).",
             layout(over_time, 380)),
        Item("channel-cdfs", "Distributions over windows",
             "CDFs over all windows of the modal fraction, entropy, mean sojourn and the one-step Markov "
             "fit's sojourn RMSE (002 Figs. 2 left, 4).", layout(cdfs, 340)),
        Item("channel-memory", "How far back the channel remembers",
             "Normalized conditional entropy by Markov depth per window, and by lag per trace (002 Fig. 5).",
             layout(memory, 380)),
    ]


def sched_items(gains: pl.DataFrame) -> list[Item]:
    """002 Fig. 6: PF's system throughput gain over RR (and with PF averages reset at
    handoffs, if computed) and Jain's fairness, by number of users, from `gain_vs_users`."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("system gain T_PF / T_RR", "Jain's fairness index"))
    users = gains["users"].to_list()
    fig.add_trace(go.Scatter(x=users, y=gains["gain"].to_list(), mode="lines+markers", name="PF / RR",
                             error_y=dict(type="data", array=gains["gain_std"].fill_null(0).to_list())), row=1, col=1)
    if "gain_handoff" in gains.columns:
        fig.add_trace(go.Scatter(x=users, y=gains["gain_handoff"].to_list(), mode="lines+markers",
                                 name="PF / RR, PF reset at handoffs"), row=1, col=1)
    fig.add_trace(go.Scatter(x=users, y=gains["jain_pf"].to_list(), mode="lines+markers", name="Jain PF"), row=1, col=2)
    fig.add_trace(go.Scatter(x=users, y=gains["jain_rr"].to_list(), mode="lines+markers", name="Jain RR"), row=1, col=2)
    fig.update_xaxes(title_text="users", dtick=1)
    return [Item("sched-gain", "Proportional Fair over Round Robin",
                 "System throughput gain of PF over RR and Jain's fairness by number of users (002 Fig. 6).",
                 layout(fig, 380))]
