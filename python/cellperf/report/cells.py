"""The serving base station over time (seed 002 Fig. 7 right): from each run's radio log, the
base station and sector serving the mobile node at every sample, one step line per run and
user, so that runs of the same route on different days (or users of one cell) show where they
were handed over and how long each cell served them. One figure per network that
saw more than one cell, whatever the runs' scenarios (the run ids name them); a run with a
single cell adds nothing to it.

Time is from each run's first radio sample, so the runs overlay. At campaign scale a figure
keeps the `MAX_LINES` runs with the most cell changes and says how many it left out.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from cellperf.report.item import Item, has_view, layout, natural
from cellperf.store import Store

#: Lines per figure at most: beyond that the step lines cannot be told apart anyway.
MAX_LINES = 12

_SAMPLES = f"""
    SELECT s.run_id, r.network, coalesce(s."user", 0) AS "user",
           s.time_s - min(s.time_s) OVER (PARTITION BY s.run_id) AS t,
           s.bs_id || coalesce('/' || s.sector_id, '') AS cell
    FROM radio_samples s JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND s.bs_id IS NOT NULL
    ORDER BY r.network, {natural("s.run_id")}, "user", s.time_s"""


def cell_changes(samples: pl.DataFrame) -> pl.DataFrame:
    """Per run and user of `samples` (run_id, user, t, cell; in time order): how many times the
    serving cell changed and how many cells served."""
    return (samples.group_by("run_id", "user", maintain_order=True)
            .agg(changes=(pl.col("cell") != pl.col("cell").shift(1)).sum(), cells=pl.col("cell").n_unique()))


def _figure(samples: pl.DataFrame, lines: pl.DataFrame) -> go.Figure:
    fig = go.Figure()
    # Cells in the order they first serve anyone: a route's cells read top to bottom in order.
    order = samples.sort("t")["cell"].unique(maintain_order=True).to_list()
    for i, (run_id, user) in enumerate(lines.select("run_id", "user").rows()):
        one = samples.filter((pl.col("run_id") == run_id) & (pl.col("user") == user))
        # Only the samples where the cell changes, plus the last: a step line needs no more.
        keep = one.with_columns(change=pl.col("cell") != pl.col("cell").shift(1)).filter(
            pl.col("change").fill_null(True) | (pl.int_range(pl.len()) == pl.len() - 1))
        name = run_id if samples["user"].n_unique() == 1 else f"{run_id} user {user}"
        # Runs of one route often change cells at the same moments: each line is thinner than the
        # one before, so that a line drawn over another leaves it visible around it.
        fig.add_trace(go.Scatter(x=keep["t"], y=keep["cell"], mode="lines+markers", line_shape="hv", name=name,
                                 line=dict(width=max(1.5, 9 - 3.5 * i)), marker=dict(size=4)))
    fig.update_xaxes(title="time from the run's first radio sample, s")
    fig.update_yaxes(title="serving base station / sector", type="category", categoryorder="array",
                     categoryarray=order[::-1])
    return layout(fig, height=max(300, 60 + 28 * len(order)))


def serving_cells(store: Store) -> list[Item]:
    if not has_view(store, "radio_samples"):
        return []
    samples = store.frame(_SAMPLES)
    items = []
    for (network,), s in samples.group_by("network", maintain_order=True):
        changes = cell_changes(s)
        # The most changes first, then the runs in _SAMPLES' (natural) order.
        moved = changes.filter(pl.col("cells") > 1).sort("changes", descending=True, maintain_order=True)
        if moved.is_empty():
            continue
        lines = moved.head(MAX_LINES)
        n = moved.height - lines.height
        left = f" Left out: {n} other run{'s' * (n > 1)} with cell changes." if n else ""
        items.append(Item(
            f"cells-{network}", f"Serving base station over time: {network}",
            f"The base station (and sector) serving the mobile node at each radio-log sample, one step line per "
            f"run and user ({lines.height} runs with the most cell changes, {int(lines['changes'].max())} at most); "
            f"seed 002 Fig. 7 right.{left}",
            figure=_figure(s.filter(pl.col("run_id").is_in(lines["run_id"].implode())), lines)))
    return items
