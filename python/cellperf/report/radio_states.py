"""The report's radio states (issue 30 §3): the delay of the first packet after idle against
the idle before it, per network and scenario, from every UDP packet in the store (a sparse
stream, a voice call's packets, a CBR stream's), and the delay periods that were promotions.
The idle before a packet is cellperf.promotions.IDLE_SQL's (docs/emulator.md "Radio states")."""

from __future__ import annotations

import plotly.graph_objects as go

from cellperf.promotions import IDLE_SQL
from cellperf.report.item import Item, has_view, layout
from cellperf.report.tables import html_table
from cellperf.store import Store

#: A packet sent after less idle than this is inside a stream, not the first after a silence.
MIN_IDLE_S = 0.05
#: Idle classes of the table (s), around the validation's idle times (0.2, 1, 5, 15 s: a sparse
#: stream's idle is its interval less a delay): DRX, within every tail, UMTS's FACH, beyond the
#: LTE and NR tails (11.6 and 10 s).
IDLE_CLASSES = ((MIN_IDLE_S, 0.5), (0.5, 4.0), (4.0, 10.0), (10.0, None))

#: Per network, scenario and direction, packets binned by their idle (10 bins per decade):
#: median idle and median and 90th-percentile one-way delay of each bin.
BINNED_SQL = f"""
    WITH idle AS ({IDLE_SQL})
    SELECT r.network, r.scenario, i.direction, floor(log10(i.idle_s) * 10) AS bin, count(*) AS packets,
           median(i.idle_s) AS idle_s, median(i.owd_ms) AS owd_ms, quantile_cont(i.owd_ms, 0.9) AS owd_p90_ms
    FROM idle i JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND i.idle_s >= {MIN_IDLE_S} AND i.owd_ms IS NOT NULL
    GROUP BY ALL ORDER BY ALL"""

CLASSES_SQL = f"""
    WITH idle AS ({IDLE_SQL})
    SELECT r.network, r.scenario, i.direction,
           {", ".join(f"median(i.owd_ms) FILTER (WHERE i.idle_s >= {lo}{f' AND i.idle_s < {hi}' if hi else ''}) AS c{k}, "
                      f"count(*) FILTER (WHERE i.idle_s >= {lo}{f' AND i.idle_s < {hi}' if hi else ''}) AS n{k}"
                      for k, (lo, hi) in enumerate(IDLE_CLASSES))}
    FROM idle i JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND i.idle_s >= {MIN_IDLE_S} AND i.owd_ms IS NOT NULL
    GROUP BY ALL ORDER BY ALL"""

PROMOTIONS_SQL = """
    SELECT r.network, r.scenario, g.direction, count(*) AS promotions, median(g.duration_ms) AS median_ms
    FROM gaps g JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND g.kind = 'promotion' GROUP BY ALL ORDER BY ALL"""


def _class_name(lo: float, hi: float | None) -> str:
    return f"{lo:g}-{hi:g} s" if hi else f"≥ {lo:g} s"


def first_packet_after_idle(store: Store) -> list[Item]:
    if not has_view(store, "udp_packets"):
        return []
    binned = store.frame(BINNED_SQL)
    if binned.height == 0:
        return []
    fig = go.Figure()
    for (network, scenario, direction), g in binned.group_by(["network", "scenario", "direction"], maintain_order=True):
        fig.add_trace(go.Scatter(x=g["idle_s"], y=g["owd_ms"], mode="lines+markers", name=f"{network} {scenario} {direction}",
                                 customdata=g.select("packets", "owd_p90_ms").to_numpy(),
                                 hovertemplate="idle %{x:.2f} s: median %{y:.1f} ms, p90 %{customdata[1]:.1f} ms "
                                               "(%{customdata[0]} packets)<extra></extra>"))
    fig.update_layout(xaxis=dict(title="idle before the packet (s)", type="log"), yaxis_title="one-way delay (ms)")
    items = [Item("first-packet-after-idle", "Delay of the first packet after idle",
                  "One-way delay of each UDP packet sent after at least "
                  f"{MIN_IDLE_S * 1e3:.0f} ms without traffic either way, against that idle time (median per bin, 10 "
                  "bins per decade; a sparse test with `sweep = { interval = [...] }` spreads the idle times). Beyond "
                  "the radio's inactivity timer (tail) the packet waits for the promotion: LTE 260 ms after 11.6 s "
                  "(Huang et al., MobiSys 2012), UMTS 2 s, NR's resume from RRC_INACTIVE; a downlink packet to an "
                  "idle terminal first waits for its paging occasion (up to 1.28 s). Within the tail a downlink "
                  "packet may wait for a DRX on-duration (docs/emulator.md \"Radio states\").", layout(fig, 400))]
    classes = store.frame(CLASSES_SQL)
    head = ["network", "scenario", "direction"] + [f"{_class_name(lo, hi)} ms (packets)" for lo, hi in IDLE_CLASSES]
    rows = [[r["network"], r["scenario"], r["direction"],
             *("–" if r[f"n{k}"] == 0 else f"{r[f'c{k}']:.1f} ({r[f'n{k}']})" for k in range(len(IDLE_CLASSES)))]
            for r in classes.iter_rows(named=True)]
    table = html_table(head, rows, name="first-packet-after-idle", query=CLASSES_SQL)
    promotions = store.frame(PROMOTIONS_SQL)
    if promotions.height:
        table += html_table(["network", "scenario", "direction", "delay periods that were promotions", "median ms"],
                            [[r["network"], r["scenario"], r["direction"], r["promotions"], f"{r['median_ms']:.0f}"]
                             for r in promotions.iter_rows(named=True)], name="promotions", query=PROMOTIONS_SQL)
    items.append(Item("delay-after-idle", "Delay after idle", "Median one-way delay of the packets sent after each "
                      "class of idle time, and the delay periods the gap analysis labelled promotions (a delay period "
                      "ended by a packet sent after at least the profile's tail of idle: the radio was set up again, "
                      "nothing was lost).", table_html=table))
    return items


PAGE_LOADS_SQL = """
    SELECT r.network, r.scenario, p.page, p.cache, p.idle_s, count(*) AS loads, median(p.load_ms) AS load_ms,
           median(p.ttfb_ms) AS ttfb_ms
    FROM page_loads p JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND p.status = 'ok' AND p.idle_s IS NOT NULL
    GROUP BY ALL ORDER BY r.network, r.scenario, p.page, p.cache, p.idle_s"""


def page_loads_after_idle(store: Store) -> list[Item]:
    """Page load time against the silence before the load (web tests with `idle`), with the
    difference from the shortest idle of the same network, scenario, page and cache."""
    loads = store.frame(PAGE_LOADS_SQL)
    if loads.height == 0:
        return []
    rows = []
    for _, g in loads.group_by(["network", "scenario", "page", "cache"], maintain_order=True):
        base = g.row(0, named=True)["load_ms"]
        for k, r in enumerate(g.iter_rows(named=True)):
            rows.append([r["network"], r["scenario"], r["page"], r["cache"], f"{r['idle_s']:g}", r["loads"],
                         f"{r['load_ms']:.0f}", f"{r['ttfb_ms']:.0f}", "–" if k == 0 else f"{r['load_ms'] - base:+.0f}"])
    table = html_table(["network", "scenario", "page", "cache", "idle s", "loads", "load ms", "TTFB ms",
                        "vs least idle ms"], rows, name="page-loads-after-idle", query=PAGE_LOADS_SQL)
    return [Item("page-loads-after-idle", "Page loads after idle",
                 "Median page load time (the browser's load event) and time to first byte of loads that came the "
                 "test's `idle` seconds after a load of the same page (`cellperf web load --idle`), and the "
                 "difference from the least idle measured: after 0 s the radio is still connected, after more than "
                 "its tail the page's first request waits for the promotion (and a downlink for paging) "
                 "(docs/methods.md §13).", table_html=table)]


SECTIONS = (("Radio states", (first_packet_after_idle, page_loads_after_idle)),)
