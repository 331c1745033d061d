"""The report's web section, after seed 004 §VI.A: the pages (Table VI), download time and
throughput with and without compression (Table VII) and load time against connections per
host (Fig. 8), per network and scenario, from `page_loads` (and `page_objects` for Table VI).
"""

from __future__ import annotations


import plotly.graph_objects as go
import polars as pl

from cellperf.report.item import Item, has_view, layout
from cellperf.report.tables import html_table
from cellperf.store import Store

_LOADS_SQL = """
    SELECT r.network, r.scenario, p.page, p.connections, coalesce(p.compression, false) AS compression, p.http,
           p.status, p.reason, p.load_ms, p.ttfb_ms, p.bytes, p.objects, p.run_id
    FROM page_loads p JOIN runs r USING (run_id)"""


def pages_table(store: Store) -> list[Item]:
    """004 Table VI for the pages as loaded: objects and bytes by type."""
    if not has_view(store, "page_objects"):
        return []
    df = store.frame("""
        SELECT page, kind, count(*) AS n, sum(decoded_bytes) AS b FROM page_objects
        WHERE (run_id, page, connections, "load") IN (SELECT (any_value(run_id), page, any_value(connections), 0)
                                                     FROM page_objects GROUP BY page)
        GROUP BY ALL""")
    if df.height == 0:
        return []
    kinds = ["html", "gif", "jpeg", "css", "js"]
    rows = []
    for page in sorted(df["page"].unique().to_list()):
        d = df.filter(pl.col("page") == page)
        total = d["b"].sum()
        share = {k: 100 * d.filter(pl.col("kind") == k)["b"].sum() / total for k in kinds}
        rows.append([page, d["n"].sum(), *(f"{share[k]:.1f}" for k in kinds), f"{total / 1000:.1f}"])
    return [Item("web-pages", "Web pages", "Objects and share of bytes by type as the browser loaded them "
                 "(decoded sizes). Seed 004 Table VI; the shipped pages follow it.",
                 table_html=html_table(["page", "objects", "HTML %", "GIF %", "JPEG %", "CSS %", "JS %", "total kB"], rows))]


def download_times(store: Store) -> list[Item]:
    """004 Table VII (download time and throughput, compression off/on) and Fig. 8."""
    df = store.frame(_LOADS_SQL)
    if df.height == 0:
        return []
    items = []
    ok = df.filter(pl.col("status") == "ok").with_columns(kbps=pl.col("bytes") * 8 / pl.col("load_ms"))
    if ok.height:
        agg = (ok.group_by("network", "scenario", "page", "connections", "compression")
               .agg(pl.col("load_ms").mean(), pl.col("kbps").mean(), pl.len().alias("n"))
               .sort("network", "scenario", "page", "connections", "compression"))
        rows = []
        for (net, scen, page, conn), g in agg.group_by(["network", "scenario", "page", "connections"], maintain_order=True):
            cell = {c: r for c, r in zip(g["compression"], g.iter_rows(named=True))}
            row = [net, scen, page, conn]
            for c in (False, True):
                r = cell.get(c)
                row += [f"{r['load_ms'] / 1000:.1f}", f"{r['kbps']:.1f}"] if r else ["–", "–"]
            rows.append(row)
        items.append(Item("web-times", "Web page download times", "Mean over loads of the time from navigation start "
                          "to the load event, and bytes transferred / that time, without and with server compression. "
                          "Seed 004 Table VII (IE, 2 connections, UMTS: Yahoo! 13.9 → 9.2 s with compression).",
                          table_html=html_table(["network", "scenario", "page", "conn.", "time (s)", "kb/s",
                                             "time gzip (s)", "kb/s gzip"], rows)))
        fig = go.Figure()
        for (net, scen, page, comp), g in agg.group_by(["network", "scenario", "page", "compression"], maintain_order=True):
            g = g.sort("connections")
            fig.add_trace(go.Scatter(x=g["connections"], y=g["load_ms"] / 1000, mode="lines+markers",
                                     name=f"{page} {net} {scen}{' gzip' if comp else ''}",
                                     line_dash="dot" if comp else "solid"))
        if ok["connections"].n_unique() > 1:
            fig.update_layout(xaxis_title="TCP connections per host", yaxis_title="page download time (s)")
            items.append(Item("web-connections", "Download time vs connections",
                              "Mean load time per page against the most connections per host (HTTP/1.1); "
                              "dotted: with compression. Seed 004 Fig. 8 (CNN: 43 % less from 2 to 10).", layout(fig)))
    failed = df.filter(pl.col("status") != "ok")
    if failed.height:
        items.append(Item("web-failed", f"Failed page loads ({failed.height})", "With the browser's reason; the campaign went on.",
                          table_html=html_table(["run", "page", "conn.", "reason"],
                                            [[r["run_id"], r["page"], r["connections"], r["reason"]]
                                             for r in failed.iter_rows(named=True)])))
    return items
