"""Soft and hard handovers side by side (seed 004 §IV.B): per network and scenario, what the
handovers of each mode did to the UDP streams crossing them (interruption, lost packets,
delay spike), from the store's handoffs, gaps, delay periods and delay spikes
(`cellperf.handoffs.modes`, docs/methods.md §6)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from cellperf.handoffs.modes import handover_effects, link_mode
from cellperf.report.item import Item, layout
from cellperf.report.tables import html_table
from cellperf.store import Store

MODE_COLOURS = {"soft": "#1f77b4", "hard": "#d62728"}


def handover_table(store: Store) -> pl.DataFrame:
    """One row per handover a UDP stream crossed: network, scenario, run_id, time_s, mode,
    basis, interruption_ms, lost, spike_ms."""
    runs = store.frame("SELECT run_id, network, scenario, config FROM runs WHERE status = 'ok'")
    handoffs = store.frame("SELECT h.run_id, h.time_s FROM handoffs h JOIN runs r USING (run_id) WHERE r.status = 'ok'")
    if handoffs.height == 0:
        return pl.DataFrame()
    streams = store.frame("SELECT run_id, start_s, end_s FROM flows WHERE role = 'data' AND proto = 'udp'")
    events = store.frame("""SELECT run_id, epoch(start_ts) AS start_s, epoch(start_ts) + duration_ms / 1e3 AS end_s,
                                   duration_ms, coalesce(lost, 0)::BIGINT AS lost FROM gaps""")
    spikes = store.frame("""SELECT run_id, epoch(start_ts) AS start_s, epoch(start_ts) + duration_ms / 1e3 AS end_s,
                                   peak_ms FROM delay_spikes""")
    effects = handover_effects(handoffs, streams, events, spikes)
    known = pl.DataFrame({"run_id": runs["run_id"], "link": [link_mode(c) for c in runs["config"]]},
                         schema={"run_id": pl.Utf8, "link": pl.Utf8})
    return (effects.join(runs.select("run_id", "network", "scenario"), on="run_id").join(known, on="run_id")
            .with_columns(mode=pl.coalesce("link", pl.when(pl.col("lost") > 0).then(pl.lit("hard")).otherwise(pl.lit("soft"))),
                          basis=pl.when(pl.col("link").is_null()).then(pl.lit("derived: loss")).otherwise(pl.lit("link")))
            .drop("link").sort("network", "scenario", "mode", "run_id", "time_s"))


def _f(v, spec: str = ".0f") -> str:
    return "–" if v is None else format(v, spec)


def handover_modes(store: Store) -> list[Item]:
    per = handover_table(store)
    if per.height == 0:
        return []
    agg = (per.group_by("network", "scenario", "mode", "basis", maintain_order=True)
           .agg(handovers=pl.len(), runs=pl.col("run_id").n_unique(),
                gap_median=pl.col("interruption_ms").median(), gap_max=pl.col("interruption_ms").max(),
                lossy=(pl.col("lost") > 0).mean(), lost=pl.col("lost").mean(), lost_max=pl.col("lost").max(),
                spiky=pl.col("spike_ms").is_not_null().mean(), spike_median=pl.col("spike_ms").median(),
                spike_max=pl.col("spike_ms").max()))
    rows = [[r["network"], r["scenario"], r["mode"], r["basis"], r["runs"], r["handovers"], _f(r["gap_median"]),
             _f(r["gap_max"]), f"{100 * r['lossy']:.0f}", _f(r["lost"], ".1f"), r["lost_max"],
             f"{100 * r['spiky']:.0f}", _f(r["spike_median"]), _f(r["spike_max"])] for r in agg.iter_rows(named=True)]
    table = html_table(["network", "scenario", "mode", "mode from", "runs", "handovers", "median interruption ms",
                        "max interruption ms", "with loss %", "lost per handover", "max lost", "with delay spike %",
                        "median spike peak ms", "max spike peak ms"], rows, name="handover-modes")
    panels = (("interruption_ms", "interruption (ms)", "no gap or delay period"), ("lost", "lost packets", "no loss"),
              ("spike_ms", "delay spike peak (ms)", "no delay spike"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[title for _, title, _ in panels])
    drawn = [k for k, (col, _, _) in enumerate(panels, 1) if per[col].is_not_null().any()]
    for mode in ("soft", "hard"):
        d = per.filter(pl.col("mode") == mode)
        if d.height == 0:
            continue
        x = (d["network"] + " " + d["scenario"]).to_list()
        for k in drawn:
            fig.add_trace(go.Box(x=x, y=d[panels[k - 1][0]].to_list(), name=mode, legendgroup=mode,
                                 showlegend=k == drawn[0], marker_color=MODE_COLOURS[mode], boxpoints="all"),
                          row=1, col=k)
    # A panel with nothing to draw says so, instead of showing empty axes.
    for k, (_, _, none) in enumerate(panels, 1):
        if k not in drawn:
            # In the middle of the panel, in paper coordinates (plotly.js placed a reference to a
            # hidden axis's domain on the first panel's data).
            axis = "" if k == 1 else k
            (x0, x1), (y0, y1) = fig.layout[f"xaxis{axis}"].domain, fig.layout[f"yaxis{axis}"].domain
            fig.add_annotation(text=f"none: {none}<br>within 5 s of a handover", showarrow=False,
                               x=(x0 + x1) / 2, y=(y0 + y1) / 2, xref="paper", yref="paper")
            fig.update_xaxes(visible=False, row=1, col=k)
            fig.update_yaxes(visible=False, row=1, col=k)
    fig.update_layout(boxmode="group")
    caption = ("Each handover that a sequenced UDP stream crossed, by mode: hard (the link loses what arrives during "
               "the interruption) or soft (it keeps it). The mode comes from the run's link (an emulated run's outage "
               "mode: its [networks.link] outage_mode, else its profile's); on a real network it is derived from the "
               "loss (hard when a gap lost packets at the handover), so its loss columns define it there. Per "
               "handover, the gaps, delay periods and delay spikes within 5 s, each counted at its nearest handover: "
               "interruption = the longest gap or delay period, lost = the gaps' packets, spike = the highest peak. "
               "Seed 004 §IV.B (hard UMTS handovers: gaps of several seconds).")
    return [Item("handover-modes", "Soft and hard handovers", caption, table_html=table),
            Item("handover-modes-figure", "Soft and hard handovers per handover", caption, layout(fig))]


SECTIONS = (("Handover modes", (handover_modes,)),)
