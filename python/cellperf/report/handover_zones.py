"""Handover zones (seed 004 §IV.B 2.1, Fig. 2: the handover happened in zone B on the way out
and in zone A on the way back, a hysteresis; near the zones delay spikes and gaps grow): per
network and scenario how many zones the runs crossed and how many were ping-pong (the device
went back and forth between two cells), the ping-pong zones listed with where they were on the
route when the run has positions, and each run's zones on its time axis. From the store's
`handover_zones` rows (`cellperf.handoffs.zones`, docs/methods.md §6)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from cellperf.handoffs.zones import HYSTERESIS_DB, PINGPONG_WINDOW_S, hysteresis_on_route
from cellperf.report.item import Item, layout
from cellperf.report.tables import html_table
from cellperf.store import Store

#: Runs drawn per figure at most (those with the most ping-pong handoffs).
MAX_RUNS = 12

#: Each zone with its start from the run's start and, when the run has positions, the last fix
#: at or before its first handoff.
SQL = """
    SELECT r.network, r.scenario, z.run_id, z.cell_a, z.cell_b, z.start_s - epoch(r.started_at) AS start_rel_s,
           z.end_s - z.start_s AS duration_s, z.handoffs, z.a_to_b, z.b_to_a, z.pingpong, z.signal,
           z.signal_diff_db, z.within_margin, p.lat, p.lon
    FROM handover_zones z JOIN runs r USING (run_id)
    ASOF LEFT JOIN positions p ON z.run_id = p.run_id AND z.start_s >= p.time_s
    WHERE r.status = 'ok'
    ORDER BY r.network, r.scenario, z.run_id, z.start_s"""


#: Each handover with the last position fix at or before it (runs with positions only).
HANDOVERS_SQL = """
    SELECT r.network, h.from_bs_id || '/' || h.from_sector_id AS from_cell, h.to_bs_id || '/' || h.to_sector_id AS to_cell,
           p.lat, p.lon
    FROM handoffs h JOIN runs r USING (run_id)
    ASOF JOIN positions p ON h.run_id = p.run_id AND h.time_s >= p.time_s
    WHERE r.status = 'ok'"""


def zone_summary(zones: pl.DataFrame) -> pl.DataFrame:
    """Per network and scenario of `SQL`'s rows: runs, handoffs, zones, ping-pong zones, the
    share of handoffs in them, their median and longest duration, zones with a signal and those
    within the margin."""
    pp = pl.col("pingpong")
    return (zones.group_by("network", "scenario", maintain_order=True)
            .agg(runs=pl.col("run_id").n_unique(), handoffs=pl.col("handoffs").sum(), zones=pl.len(),
                 pingpong=pp.sum(), pingpong_handoffs=pl.col("handoffs").filter(pp).sum(),
                 median_s=pl.col("duration_s").filter(pp).median(), longest_s=pl.col("duration_s").filter(pp).max(),
                 with_signal=pl.col("within_margin").is_not_null().sum(), within=pl.col("within_margin").sum()))


def _fmt(x, spec: str = ".1f") -> str:
    return "–" if x is None else format(x, spec)


def _figure(zones: pl.DataFrame) -> go.Figure:
    fig = go.Figure()
    kinds = ((True, "ping-pong zone", "#d62728", 8), (False, "single handoff", "#7f7f7f", 2))
    for pingpong, name, colour, width in kinds:
        part = zones.filter(pl.col("pingpong") == pingpong)
        x, y, text = [], [], []
        for r in part.iter_rows(named=True):
            # One segment per zone, from its first handoff to its last (a point for a single one).
            end = r["start_rel_s"] + max(r["duration_s"], 0.5)
            x += [r["start_rel_s"], end, None]
            y += [r["run_id"]] * 2 + [None]
            label = f"{r['cell_a']} ↔ {r['cell_b']}: {r['handoffs']} handoffs"
            text += [label, label, None]
        fig.add_trace(go.Scatter(x=x, y=y, text=text, mode="lines", name=name, line=dict(color=colour, width=width),
                                 hoverinfo="text+x"))
    fig.update_xaxes(title="time from the run's start, s")
    fig.update_yaxes(title="run", type="category")
    return layout(fig, height=max(300, 80 + 30 * zones["run_id"].n_unique()))


def handover_zone_items(store: Store) -> list[Item]:
    zones = store.frame(SQL)
    if zones.height == 0:
        return []
    summary = zone_summary(zones)
    rows = [[r["network"], r["scenario"], r["runs"], r["handoffs"], r["zones"], r["pingpong"],
             _fmt(100 * r["pingpong_handoffs"] / r["handoffs"] if r["handoffs"] else None),
             _fmt(r["median_s"]), _fmt(r["longest_s"]), r["with_signal"], r["within"]]
            for r in summary.iter_rows(named=True)]
    items = [Item("zones-table", "Handover zones",
                  f"Handoffs between the same two cells, each within {PINGPONG_WINDOW_S:g} s of the pair's previous "
                  f"one, form a zone; a ping-pong zone holds two or more (the device went back and forth). Duration: "
                  f"first to last handoff of a ping-pong zone. Within margin: zones whose handoffs changed the serving "
                  f"signal (RSRP, else RSSI, else SINR) by at most {HYSTERESIS_DB:g} dB, i.e. the cells were about "
                  f"equally strong where the device changed between them; counted over the zones whose radio log has "
                  f"a signal. Seed 004 §IV.B 2.1, Fig. 2. Per zone: SELECT * FROM handover_zones.",
                  table_html=html_table(["network", "scenario", "runs", "handoffs", "zones", "ping-pong zones",
                                         "handoffs in ping-pong %", "ping-pong median s", "ping-pong longest s",
                                         "zones with signal", "within margin"], rows, name="zones-summary", query=SQL))]
    pp = zones.filter("pingpong")
    if pp.height:
        listed = [[r["network"], r["scenario"], r["run_id"], f"{r['cell_a']} ↔ {r['cell_b']}", _fmt(r["start_rel_s"]),
                   _fmt(r["duration_s"]), r["handoffs"], r["a_to_b"], r["b_to_a"], _fmt(r["signal_diff_db"]),
                   "–" if r["lat"] is None else f"{r['lat']:.5f}, {r['lon']:.5f}"] for r in pp.iter_rows(named=True)]
        items.append(Item("zones-pingpong", "Ping-pong zones",
                          "Each ping-pong zone: the two cells (a served first), its start from the run's start, its "
                          "duration, its handoffs a → b and b → a, the largest change of the serving signal at "
                          "them, "
                          "and where the route was at its first handoff (the last position fix before it).",
                          table_html=html_table(["network", "scenario", "run", "cells", "start s", "duration s",
                                                 "handoffs", "a → b", "b → a", "signal change dB", "position"],
                                                listed, name="zones-pingpong", query=SQL)))
    route = hysteresis_on_route(store.frame(HANDOVERS_SQL))
    if route.height:
        places = [[r["network"], f"{r['cell_x']} ↔ {r['cell_y']}", r["x_to_y"], r["y_to_x"],
                   f"{r['lat_x_to_y']:.5f}, {r['lon_x_to_y']:.5f}", f"{r['lat_y_to_x']:.5f}, {r['lon_y_to_x']:.5f}",
                   f"{r['displacement_m']:.0f}"] for r in route.iter_rows(named=True)]
        items.append(Item("zones-route", "Where the handovers happen each way",
                          "Per pair of cells handed over both ways on routes with positions: the mean place of the "
                          "handovers x → y and of those y → x (the last position fix before each) and the distance "
                          "between them: seed 004 Fig. 2's hysteresis (zone B going, zone A returning).",
                          table_html=html_table(["network", "cells x ↔ y", "x → y", "y → x", "place x → y",
                                                 "place y → x", "apart m"], places, name="zones-route",
                                                query=HANDOVERS_SQL)))
    for (network,), z in zones.group_by("network", maintain_order=True):
        busiest = (z.group_by("run_id").agg(n=pl.col("handoffs").filter(pl.col("pingpong")).sum())
                   .sort("n", "run_id", descending=[True, False]).head(MAX_RUNS))
        left = z["run_id"].n_unique() - busiest.height
        more = f" Left out: {left} other run{'s' * (left > 1)}." if left else ""
        items.append(Item(f"zones-{network}", f"Handover zones over time: {network}",
                          f"Each run's zones on its time axis: a ping-pong zone as a thick bar from its first handoff "
                          f"to its last, a single handoff as a short mark ({busiest.height} runs, those with the most "
                          f"ping-pong handoffs first).{more}",
                          figure=_figure(z.filter(pl.col("run_id").is_in(busiest["run_id"].implode())))))
    return items


SECTIONS = (("Handover zones", (handover_zone_items,)),)
