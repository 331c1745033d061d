"""The report's streaming and remote-terminal sections, after seed 004 §VI.B-C: each stream's
start-up delay, stalls and losses (from `streams`), and the keystroke-to-echo latency CDF with
the shares above 100 and 200 ms (from `terminal_sessions` and `keystrokes`), per network and
scenario.
"""

from __future__ import annotations

import plotly.graph_objects as go

from cellperf.report.item import Item, has_view, layout
from cellperf.report.tables import html_table
from cellperf.store import Store


def _fmt(v, spec: str = ".0f") -> str:
    return "–" if v is None else format(v, spec)


def stream_stalls(store: Store) -> list[Item]:
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, s.* EXCLUDE (run_id), s.run_id
        FROM streams s JOIN runs r USING (run_id) ORDER BY r.network, r.scenario, r.test, s.run_id""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["transport"], f"{r['rate_bps'] / 1e3:.0f}", f"{r['buffer_s']:g}",
             _fmt(r["startup_ms"]), r["stalls"], f"{r['stall_s']:.2f}", r["late"], r["lost"],
             _fmt(r["jitter_ms"], ".1f"), _fmt(r["owd_median_ms"])] for r in df.iter_rows(named=True)]
    items = [Item("stream-table", "Streams", "Start-up delay (request to playback), stalls (rebuffering to the full "
                  "buffer when the packet due is missing), packets late for a playout that never stalls, lost "
                  "packets, RFC 3550 jitter and median one-way delay. Seed 004 §VI.B.",
                  table_html=html_table(["network", "scenario", "test", "transport", "kbit/s", "buffer s", "start-up ms",
                                     "stalls", "stall s", "late", "lost", "jitter ms", "OWD ms"], rows))]
    fig = go.Figure()
    labels = [f"{r['network']} {r['scenario']} {r['test']}" for r in df.iter_rows(named=True)]
    fig.add_trace(go.Bar(x=labels, y=df["stall_s"], name="stall time (s)",
                         text=[f"{n} stall{'s' * (n != 1)}" for n in df["stalls"]], textposition="outside"))
    fig.add_trace(go.Bar(x=labels, y=df["startup_ms"] / 1000, name="start-up delay (s)"))
    fig.update_layout(barmode="group", yaxis_title="seconds", xaxis_title="stream (run)")
    items.append(Item("stream-stalls", "Stream stalls", "Total stall time (labelled with the number of stalls) and "
                      "start-up delay of each stream run.", layout(fig)))
    return items


def keystroke_latency(store: Store) -> list[Item]:
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, t.* EXCLUDE (run_id) FROM terminal_sessions t JOIN runs r USING (run_id)
        ORDER BY r.network, r.scenario, r.test""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], f"{r['echoed']}/{r['keys']}", _fmt(r["median_ms"]),
             _fmt(r["p95_ms"]), _fmt(r["max_ms"]), f"{100 * r['over_100ms']:.0f}", f"{100 * r['over_200ms']:.0f}"]
            for r in df.iter_rows(named=True)]
    items = [Item("keystroke-table", "Remote terminal", "Keys typed into a real ssh session and timed until their "
                  "echo; a key never echoed counts above both thresholds. Seed 004 §VI.C.",
                  table_html=html_table(["network", "scenario", "test", "echoed", "median ms", "p95 ms", "max ms",
                                     "> 100 ms %", "> 200 ms %"], rows))]
    if not has_view(store, "keystrokes"):
        return items
    cdf = store.frame("""
        SELECT r.network || ' ' || r.scenario || ' ' || r.test AS label, k.echo_ms,
               cume_dist() OVER (PARTITION BY r.network, r.scenario, r.test ORDER BY k.echo_ms) AS p
        FROM keystrokes k JOIN runs r USING (run_id) WHERE k.echo_ms IS NOT NULL ORDER BY label, k.echo_ms""")
    fig = go.Figure()
    for (label,), g in cdf.group_by(["label"], maintain_order=True):
        fig.add_trace(go.Scatter(x=g["echo_ms"], y=g["p"], mode="lines", line_shape="hv", name=label))
    for t in (100, 200):
        fig.add_vline(x=t, line_dash="dot", line_color="#888")
    fig.update_layout(xaxis_title="keystroke-to-echo latency (ms)", yaxis_title="share of keys ≤ x")
    items.append(Item("keystroke-cdf", "Keystroke latency CDF", "Echoed keys only, per network, scenario and test; "
                      "dotted: 100 and 200 ms.", layout(fig)))
    return items
