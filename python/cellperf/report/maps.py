"""Route maps (seed 000 Fig. 3.1, seed 004 Fig. 2): where a run's positions are known, its
track coloured by a metric with the handoffs marked, one figure per network, scenario and
metric. Offline and self-contained: the track is drawn on plain longitude/latitude axes (equal
distances: the longitude axis is scaled by cos(latitude)), no map tiles.

A position takes the metric of the moment it was logged: the throughput of all data flows of
the interval containing it (kb/s), the median RTT sample within ±0.5 s (ms), the E-model R of
the VoIP window containing it (mean of the two directions). Handoffs are placed at the last
position logged before them.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
import polars as pl

from cellperf.report.item import Item, has_view, layout
from cellperf.store import Store

#: Points per figure at most (a long drive at 1 Hz stays light in the HTML).
MAX_POINTS = 20_000
HANDOFF_SYMBOL = {"inter-BS": "x", "inter-sector": "diamond", "inter-technology": "star"}

_POSITIONS = "SELECT p.run_id, r.network, r.scenario, p.time_s, p.lat, p.lon {value} FROM positions p " \
             "JOIN runs r USING (run_id) {join} WHERE r.status = 'ok' {group}"
METRICS = {
    "throughput": ("throughput, kb/s", lambda s: True, """
        LEFT JOIN (SELECT i.run_id, epoch(i.start_ts) AS t0,
                          epoch(i.start_ts) + CAST(json_extract(r2.config, '$.interval_s') AS DOUBLE) AS t1,
                          sum(i.throughput_bps) / 1e3 AS v
                   FROM intervals i JOIN runs r2 USING (run_id) GROUP BY ALL) m
          ON m.run_id = p.run_id AND p.time_s >= m.t0 AND p.time_s < m.t1"""),
    "rtt": ("RTT, ms", lambda s: has_view(s, "rtt"), """
        LEFT JOIN (SELECT run_id, epoch(ts) AS t, rtt_ms AS v FROM rtt) m
          ON m.run_id = p.run_id AND m.t >= p.time_s - 0.5 AND m.t < p.time_s + 0.5"""),
    "r": ("E-model R", lambda s: True, """
        LEFT JOIN (SELECT run_id, epoch(window_start) AS t0, epoch(window_end) AS t1, avg(r) AS v
                   FROM voip_windows GROUP BY ALL) m
          ON m.run_id = p.run_id AND p.time_s >= m.t0 AND p.time_s < m.t1"""),
}


def _track(store: Store, metric: str) -> pl.DataFrame:
    _, _, join = METRICS[metric]
    agg = "median" if metric == "rtt" else "any_value"
    return store.frame(_POSITIONS.format(value=f", {agg}(m.v) AS v", join=join,
                                         group="GROUP BY ALL ORDER BY p.run_id, p.time_s"))


def _handoff_points(store: Store) -> pl.DataFrame:
    return store.frame("""SELECT r.network, r.scenario, h.run_id, h.kind, p.lat, p.lon FROM handoffs h
                          ASOF JOIN positions p ON h.run_id = p.run_id AND h.time_s >= p.time_s
                          JOIN runs r ON r.run_id = h.run_id WHERE r.status = 'ok'""")


def _figure(track: pl.DataFrame, handoffs: pl.DataFrame, label: str) -> go.Figure:
    fig = go.Figure()
    step = max(1, math.ceil(track.height / MAX_POINTS))
    for run_id, run in track.group_by("run_id", maintain_order=True):
        # The whole route, thin and grey: positions outside every measured interval stay visible.
        fig.add_trace(go.Scatter(x=run["lon"], y=run["lat"], mode="lines", line=dict(color="#bbb", width=1),
                                 name=str(run_id[0]), showlegend=False, hoverinfo="skip"))
    shown = track.filter(pl.col("v").is_not_null()).gather_every(step)
    fig.add_trace(go.Scatter(
        x=shown["lon"], y=shown["lat"], mode="markers", name=label, showlegend=False,
        marker=dict(size=6, color=shown["v"], colorscale="Viridis", colorbar=dict(title=label), showscale=True),
        text=shown["run_id"], hovertemplate=f"%{{text}}<br>{label} %{{marker.color:.1f}}<extra></extra>"))
    for kind, h in handoffs.group_by("kind", maintain_order=True):
        fig.add_trace(go.Scatter(x=h["lon"], y=h["lat"], mode="markers", name=f"{kind[0]} handoff",
                                 marker=dict(symbol=HANDOFF_SYMBOL.get(kind[0], "circle"), size=11, color="#d62728",
                                             line=dict(width=1, color="#222"))))
    mid_lat = float(track["lat"].mean())
    fig.update_xaxes(title="longitude, °", scaleanchor="y", scaleratio=max(math.cos(math.radians(mid_lat)), 0.05))
    fig.update_yaxes(title="latitude, °")
    return layout(fig, height=520)


def route_maps(store: Store) -> list[Item]:
    if not store.frame("SELECT count(*) AS n FROM positions")["n"][0]:
        return []
    handoffs = _handoff_points(store)
    items = []
    for metric, (label, available, _) in METRICS.items():
        if not available(store):
            continue
        track = _track(store, metric)
        if track["v"].null_count() == track.height:
            continue
        for (network, scenario), t in track.group_by("network", "scenario", maintain_order=True):
            h = handoffs.filter((pl.col("network") == network) & (pl.col("scenario") == scenario))
            items.append(Item(
                f"map-{metric}-{network}-{scenario}", f"Route, {label}: {network}, {scenario}",
                f"The mobile node's positions ({t['run_id'].n_unique()} runs) coloured by {label} at the time of "
                f"each fix, handoffs marked (seed 000 Fig. 3.1, seed 004 Fig. 2). Plain longitude/latitude axes "
                "at equal distances; grey: positions outside the measured intervals.",
                figure=_figure(t, h, label)))
    return items
