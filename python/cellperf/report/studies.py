"""The report's sections for the TCP and path studies of seeds 002 §7, 003 and 004 §IV, from
the store alone: each TCP flow's channel utilisation, excess one-way delay, share and Jain's
index per congestion control (002 Figs. 7-10); the queue-size estimate beside the min-delay
probe's least OWD and TCP throughput vs window (003 slides 14-18); RTT vs ping size with its
fit, UDP throughput vs payload size, every gap and delay period and the packet inter-arrival
timeline (004 Figs. 1, 3-4, Table I).
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
import polars as pl

from cellperf.report.figures import Item, _has_view, _layout
from cellperf.report.web import _table
from cellperf.store import Store


def _f(v, spec: str = ".1f") -> str:
    return "–" if v is None else format(v, spec)


def tcp_flows(store: Store) -> list[Item]:
    """002 Figs. 7-10: utilisation and excess delay (mean ± std) of each TCP test flow."""
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, r.run_id, f.flow_id, f.direction,
               coalesce(json_extract_string(r.config, '$.options.congestion'), '–') AS congestion,
               f.goodput_bps, f.utilisation, f.mean_capacity_bps, f.owd_mean_ms, f.owd_std_ms, f.owd_p95_ms,
               f.owd_kind, f.share, f.jain
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.proto = 'tcp' AND f.role = 'data' AND f.goodput_bps > 0
          AND (f.owd_mean_ms IS NOT NULL OR f.utilisation IS NOT NULL)
        ORDER BY r.network, r.scenario, r.test, r.run_id, f.flow_id""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["congestion"], r["direction"],
             _f(r["goodput_bps"] / 1e3, ".0f"), _f(r["utilisation"], ".2f"),
             _f(None if r["mean_capacity_bps"] is None else r["mean_capacity_bps"] / 1e3, ".0f"),
             f"{_f(r['owd_mean_ms'])} ± {_f(r['owd_std_ms'])}", _f(r["owd_p95_ms"]), r["owd_kind"] or "–",
             _f(None if r["share"] is None else 100 * r["share"]), _f(r["jain"], ".3f")]
            for r in df.iter_rows(named=True)]
    items = [Item("tcp-studies-table", "TCP flows: utilisation and one-way delay",
                  "Per TCP test flow: goodput, channel utilisation = goodput / mean channel capacity over the "
                  "flow's lifetime (radio log rates), one-way delay of its data matched across the two captures "
                  "(excess = OWD − the flow's minimum, unless the clocks were synchronised), its share of the "
                  "goodput of the run's flows in its direction and their Jain's index. Seed 002 §7, Figs. 7-10 "
                  "(utilisation: Reno 0.86, Cubic 0.89, Westwood 0.85, Vegas 0.75).",
                  table_html=_table(["network", "scenario", "test", "congestion", "direction", "goodput kbit/s",
                                     "utilisation", "capacity kbit/s", "OWD mean ± std ms", "OWD p95 ms", "OWD kind",
                                     "share %", "Jain"], rows))]
    labels = [f"{r['network']} {r['scenario']} {r['congestion']} #{r['flow_id']}" for r in df.iter_rows(named=True)]
    fig = go.Figure()
    if df["utilisation"].is_not_null().any():
        fig.add_trace(go.Bar(x=labels, y=df["utilisation"], name="utilisation", yaxis="y"))
    if df["owd_mean_ms"].is_not_null().any():
        fig.add_trace(go.Scatter(x=labels, y=df["owd_mean_ms"], mode="markers", name="OWD mean (ms)", yaxis="y2",
                                 error_y=dict(type="data", array=df["owd_std_ms"].fill_null(0).to_list())))
    fig.update_layout(yaxis=dict(title="channel utilisation", rangemode="tozero"),
                      yaxis2=dict(title="one-way delay (ms), mean ± std", overlaying="y", side="right",
                                  rangemode="tozero"), xaxis_title="flow")
    items.append(Item("tcp-studies-figure", "Utilisation and excess delay per TCP flow",
                      "Bars: channel utilisation; points: mean one-way delay with ± one standard deviation. "
                      "Seed 002 Figs. 7-10.", _layout(fig)))
    return items


def queue_size(store: Store) -> list[Item]:
    """003 slides 14-16: the queue under saturating UDP beside the min-delay probe's least OWD."""
    q = store.frame("""
        SELECT r.network, r.scenario, f.direction, count(*) AS runs, max(f.owd_max_ms) AS owd_max_ms,
               avg(f.goodput_bps) AS goodput_bps, max(f.queue_bytes) AS queue_bytes, any_value(f.owd_kind) AS kind
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.role = 'data' AND f.queue_bytes IS NOT NULL AND r.test_type = 'udp-cbr'
        GROUP BY ALL ORDER BY ALL""")
    m = store.frame("""
        SELECT network, scenario, min(CAST(json_extract(result, '$.owd_ms.min') AS DOUBLE)) AS min_owd_ms,
               any_value(json_extract_string(result, '$.owd_ms.kind')) AS min_kind
        FROM runs WHERE status = 'ok' AND test_type = 'min-delay' GROUP BY ALL""")
    if q.height == 0 and m.height == 0:
        return []
    df = q.join(m, on=["network", "scenario"], how="full", coalesce=True) if q.height and m.height else (
        q if q.height else m)
    rows = [[r["network"], r["scenario"], r.get("direction") or "–", _f(r.get("owd_max_ms")),
             _f(None if r.get("goodput_bps") is None else r["goodput_bps"] / 1e3, ".0f"),
             _f(None if r.get("queue_bytes") is None else r["queue_bytes"] / 1e3, ".0f"), r.get("kind") or "–",
             _f(r.get("min_owd_ms")), r.get("min_kind") or "–"] for r in df.iter_rows(named=True)]
    return [Item("queue-size", "Queue size under saturating UDP",
                 "Queue = max one-way delay × measured bandwidth of a saturating UDP CBR flow, per direction "
                 "(excess OWD: over the least delay seen; raw: including propagation), beside the least OWD of "
                 "the min-delay probe (the path without queueing). Seed 003 slides 14-16 (WiBro down: "
                 "961 ms × 9603 kbit/s = 1126 KB).",
                 table_html=_table(["network", "scenario", "direction", "max OWD ms", "bandwidth kbit/s", "queue KB",
                                    "OWD kind", "min-delay OWD ms", "its kind"], rows))]


def _sweeps(store: Store, test_type: str) -> pl.DataFrame:
    """One row per sweep step of the runs of `test_type` (the probe's `sweep` rows)."""
    runs = store.frame("SELECT network, scenario, run_id, result FROM runs WHERE status = 'ok' AND test_type = ? "
                       "ORDER BY network, scenario, repetition", [test_type])
    rows = [{"network": n, "scenario": s, "run_id": rid, **step}
            for n, s, rid, res in runs.iter_rows() for step in (json.loads(res or "{}").get("sweep") or [])]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def window_sweep(store: Store) -> list[Item]:
    """003 slides 17-18: TCP throughput vs receive window."""
    df = _sweeps(store, "window-sweep")
    if df.height == 0 or "window_bytes" not in df.columns:
        return []
    fig = go.Figure()
    for (n, s), g in df.sort("window_bytes").group_by(["network", "scenario"], maintain_order=True):
        g = g.group_by("window_bytes", maintain_order=True).agg(pl.col("throughput_bps").mean())
        fig.add_trace(go.Scatter(x=g["window_bytes"] / 1024, y=g["throughput_bps"] / 1e3, mode="lines+markers",
                                 name=f"{n} {s}"))
    fig.update_layout(xaxis=dict(title="receive window (KB)", type="log"), yaxis_title="TCP throughput (kbit/s)")
    return [Item("window-sweep", "TCP throughput vs window", "Mean over repetitions of each window's throughput. "
                 "Seed 003 slides 17-18, 004 Figs. 5-6.", _layout(fig))]


def ping_sizes(store: Store) -> list[Item]:
    """004 Fig. 1: RTT vs packet size, mean ± std per size, and the linear fit."""
    df = _sweeps(store, "ping-sweep")
    if df.height == 0 or "size_bytes" not in df.columns:
        return []
    df = df.with_columns(median=pl.col("rtt_ms").struct.field("median"))
    for c in ("rtt_mean_ms", "rtt_std_ms"):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, pl.Float64).alias(c))
    fits = store.frame("""SELECT network, scenario, run_id, CAST(json_extract(result, '$.fit.intercept_ms') AS DOUBLE) AS a,
                          CAST(json_extract(result, '$.fit.slope_ms_per_byte') AS DOUBLE) AS b
                          FROM runs WHERE status = 'ok' AND test_type = 'ping-sweep'""")
    rows = [[r["network"], r["scenario"], r["size_bytes"], _f(r["median"]), _f(r["rtt_mean_ms"]), _f(r["rtt_std_ms"]),
             _f(None if r.get("loss_rate") is None else 100 * r["loss_rate"])] for r in df.iter_rows(named=True)]
    items = [Item("ping-table", "RTT per ping size", "Round trip per probe size over each run's probes: median, "
                  "mean and standard deviation, and loss. Seed 004 §IV.A, Fig. 1.",
                  table_html=_table(["network", "scenario", "size B", "median ms", "mean ms", "std ms", "loss %"],
                                    rows))]
    fig = go.Figure()
    for (n, s, rid), g in df.group_by(["network", "scenario", "run_id"], maintain_order=True):
        fig.add_trace(go.Scatter(x=g["size_bytes"], y=g["rtt_mean_ms"], mode="markers", name=f"{n} {s} mean ± std",
                                 error_y=dict(type="data", array=g["rtt_std_ms"].fill_null(0).to_list())))
        fit = fits.filter(pl.col("run_id") == rid)
        if fit.height and fit["a"][0] is not None:
            a, b = fit["a"][0], fit["b"][0]
            xs = [g["size_bytes"].min(), g["size_bytes"].max()]
            fig.add_trace(go.Scatter(x=xs, y=[a + b * x for x in xs], mode="lines", line_dash="dot",
                                     name=f"{n} {s} fit {a:.1f} + {b * 1000:.2f}·size/1000 ms"))
    fig.update_layout(xaxis_title="ping size (bytes)", yaxis_title="RTT (ms)")
    items.append(Item("ping-fit", "RTT vs packet size", "Mean ± std per size and the fit RTT = a + b·size of the "
                      "median per size. Seed 004 Fig. 1.", _layout(fig)))
    return items


def udp_sizes(store: Store) -> list[Item]:
    """004 Table I: UDP throughput per payload size."""
    df = store.frame("""
        SELECT r.network, r.scenario, f.direction,
               CAST(coalesce(json_extract(r.config, '$.options.payload'), 1460) AS INTEGER) AS payload,
               count(*) AS runs, avg(f.goodput_bps) AS goodput_bps, avg(f.loss_rate) AS loss_rate
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'udp-cbr' AND f.role = 'data' GROUP BY ALL ORDER BY ALL""")
    if df.select(pl.struct("network", "scenario", "direction").n_unique()).item() == df.height:
        return []  # one size per network and direction: nothing to compare
    rows = [[r["network"], r["scenario"], r["direction"], r["payload"], r["runs"], _f(r["goodput_bps"] / 1e3, ".0f"),
             _f(None if r["loss_rate"] is None else 100 * r["loss_rate"], ".2f")] for r in df.iter_rows(named=True)]
    return [Item("udp-sizes", "UDP throughput vs packet size", "Mean over runs of each payload size. "
                 "Seed 004 Table I.", table_html=_table(["network", "scenario", "direction", "payload B", "runs",
                                                         "goodput kbit/s", "loss %"], rows))]


def gaps(store: Store) -> list[Item]:
    """004 Figs. 3-4: each gap and delay period, and the inter-arrival timeline around them."""
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, g.run_id, g.flow_id, g.direction, g.kind,
               epoch(g.start_ts) - epoch(r.started_at) AS start_s, g.duration_ms, g.lost
        FROM gaps g JOIN runs r USING (run_id) WHERE r.status = 'ok' ORDER BY r.network, r.scenario, g.run_id, start_s""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["direction"], r["kind"].replace("_", " "), _f(r["start_s"], ".2f"),
             _f(r["duration_ms"], ".0f"), r["lost"]] for r in df.iter_rows(named=True)]
    items = [Item("gaps-table", "Gaps and delay periods", "Every gap (a burst of lost packets: from the arrival before "
                  "it to the one after) and delay period (an inter-arrival of at least 5 sending intervals with "
                  "nothing lost), with its start in the run. Seed 004 §IV.B.2, Figs. 3-4.",
                  table_html=_table(["network", "scenario", "test", "direction", "kind", "start s", "duration ms",
                                     "lost"], rows))]
    if not _has_view(store, "udp_packets"):
        return items
    pid = store.frame("""
        SELECT r.network || ' ' || r.scenario || ' ' || p.direction AS label,
               epoch(p.recv_ts) - epoch(r.started_at) AS t_s,
               (epoch(p.recv_ts) - lag(epoch(p.recv_ts)) OVER (PARTITION BY p.run_id, p.flow_id ORDER BY p.recv_ts)) * 1e3
                 AS pid_ms
        FROM udp_packets p JOIN runs r USING (run_id)
        WHERE p.recv_ts IS NOT NULL AND (p.run_id, p.flow_id) IN (SELECT (run_id, flow_id) FROM gaps)
        ORDER BY label, t_s""").drop_nulls("pid_ms")
    if pid.height == 0:
        return items
    fig = go.Figure()
    for (label,), g in pid.group_by(["label"], maintain_order=True):
        fig.add_trace(go.Scatter(x=g["t_s"], y=g["pid_ms"], mode="markers", marker_size=3, name=label))
    fig.update_layout(xaxis_title="time in run (s)", yaxis=dict(title="packet inter-arrival (ms)", type="log"))
    items.append(Item("pid-timeline", "Packet inter-arrival timeline", "Inter-arrival of each received packet of the "
                      "streams with gaps or delay periods. Seed 004 Figs. 3-4.", _layout(fig)))
    return items


SECTIONS = (("TCP studies", (tcp_flows, window_sweep, queue_size)),
            ("Path studies", (ping_sizes, udp_sizes, gaps)))
