"""The report's sections for the TCP and path studies of seeds 002 §7, 003 and 004 §IV, from
the store alone: each TCP flow's channel utilisation, excess one-way delay, share and Jain's
index per congestion control (002 Figs. 7-10); a low-rate stream's delay beside bulk TCP per
TCP variant (002 Fig. 11); the queue-size estimate beside the min-delay probe's least OWD and
TCP throughput and one-way delay vs window (003 slides 14-20); RTT vs ping size with its
fit, UDP throughput vs payload size, every gap and delay period and the packet inter-arrival
timeline (004 Figs. 1, 3-4, Table I).
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from cellperf.report.item import Item, cdf_trace, has_view, layout
from cellperf.report.probe_docs import DIRECTIONS, probe_doc, sweep_steps
from cellperf.report.tables import MAX_ROWS, csv_download, html_table
from cellperf.store import Store


def _f(v, spec: str = ".1f") -> str:
    return "–" if v is None else format(v, spec)


def _bars_and_delay(labels: list[str], bars: pl.Series, bar_names: tuple[str, str], mean: pl.Series,
                    std: pl.Series, delay_names: tuple[str, str], x_title: str) -> go.Figure:
    """Bars on the left axis and a delay (mean ± std markers) on the right, per label;
    `*_names` = (legend name, axis title). Either is left out when it has no value."""
    fig = go.Figure()
    if bars.is_not_null().any():
        fig.add_trace(go.Bar(x=labels, y=bars.to_list(), name=bar_names[0], yaxis="y"))
    if mean.is_not_null().any():
        fig.add_trace(go.Scatter(x=labels, y=mean.to_list(), mode="markers", name=delay_names[0], yaxis="y2",
                                 error_y=dict(type="data", array=std.fill_null(0).to_list())))
    fig.update_layout(yaxis=dict(title=bar_names[1], rangemode="tozero"),
                      yaxis2=dict(title=delay_names[1], overlaying="y", side="right", rangemode="tozero"),
                      xaxis_title=x_title)
    return fig


#: A probe result's `direction` → the flows' directions of its data.
def tcp_study_flows(store: Store) -> pl.DataFrame:
    """The TCP test flows of the studies (002 §7), in the direction(s) its probe ran (a
    download's data connection also carries the probe's few bytes up: not a flow of the
    study), with the congestion control the probe reports (a group member's own), else the one
    the campaign asked for."""
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, r.run_id, f.flow_id, f.direction, f.member, r.result,
               coalesce(json_extract_string(r.config, '$.options.congestion'), '–') AS congestion,
               f.goodput_bps, f.utilisation, f.mean_capacity_bps, f.capacity_std_bps, f.loss_rate,
               f.owd_mean_ms, f.owd_std_ms, f.owd_p95_ms, f.owd_kind, f.share, f.jain
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.proto = 'tcp' AND f.role = 'data' AND f.goodput_bps > 0
          AND (f.owd_mean_ms IS NOT NULL OR f.utilisation IS NOT NULL)
        ORDER BY r.network, r.scenario, r.test, r.run_id, f.flow_id""")
    keep, congestion = [], []
    for r in df.iter_rows(named=True):
        doc = probe_doc(r["result"], r["member"])
        keep.append(r["direction"] in DIRECTIONS.get(doc.get("direction"), (r["direction"],)))
        congestion.append(doc.get("congestion") or r["congestion"])
    return df.with_columns(congestion=pl.Series(congestion, dtype=pl.Utf8)).filter(pl.Series(keep, dtype=pl.Boolean))


def tcp_flows(store: Store) -> list[Item]:
    """002 Figs. 7-10: utilisation and excess delay (mean ± std) of each TCP test flow."""
    df = tcp_study_flows(store)
    if df.height == 0:
        return []
    head = ["network", "scenario", "test", "congestion", "direction", "goodput kbit/s", "utilisation",
            "capacity kbit/s", "OWD mean ± std ms", "OWD p95 ms", "OWD kind", "share %", "Jain"]
    keys = ["network", "scenario", "test", "congestion", "direction"]
    figures = ["goodput_bps", "utilisation", "mean_capacity_bps", "owd_mean_ms", "owd_std_ms", "owd_p95_ms", "share",
               "jain"]
    per_flow = df.height <= MAX_ROWS
    # A campaign of many flows: one row per network, scenario, test, congestion control and
    # direction, the means over its flows (each flow's row in the CSV).
    shown = df if per_flow else (df.group_by(keys, maintain_order=True)
                                 .agg(pl.len().alias("flows"), *(pl.col(c).mean() for c in figures),
                                      pl.col("owd_kind").drop_nulls().first()))

    def cells(r: dict) -> list:
        return [_f(r["goodput_bps"] / 1e3, ".0f"), _f(r["utilisation"], ".2f"),
                _f(None if r["mean_capacity_bps"] is None else r["mean_capacity_bps"] / 1e3, ".0f"),
                f"{_f(r['owd_mean_ms'])} ± {_f(r['owd_std_ms'])}", _f(r["owd_p95_ms"]), r["owd_kind"] or "–",
                _f(None if r["share"] is None else 100 * r["share"]), _f(r["jain"], ".3f")]

    flow_rows = [[*(r[k] for k in keys), *cells(r)] for r in df.iter_rows(named=True)]
    if per_flow:
        table, scope = html_table(head, flow_rows), "Per TCP test flow"
    else:
        table = html_table([*keys, "flows", *(f"mean {h}" for h in head[5:])],
                           [[*(r[k] for k in keys), r["flows"], *cells(r)] for r in shown.iter_rows(named=True)])
        table += csv_download(head, flow_rows, name="tcp-flows", query=None, what=f"each flow ({df.height:,})")
        scope = (f"Means over the flows ({df.height}) of each network, scenario, test, congestion control and "
                 "direction, of each flow's")
    items = [Item("tcp-studies-table", "TCP flows: utilisation and one-way delay",
                  f"{scope}: goodput, channel utilisation = goodput / mean channel capacity over the "
                  "flow's lifetime (radio log rates), one-way delay of its data matched across the two captures "
                  "(excess = OWD − the flow's minimum, unless the clocks were synchronised), its share of the "
                  "goodput of the run's flows in its direction and their Jain's index. Seed 002 §7, Figs. 7-10 "
                  "(utilisation: Reno 0.86, Cubic 0.89, Westwood 0.85, Vegas 0.75).",
                  table_html=table)]
    if per_flow:
        labels = [f"{r['network']} {r['scenario']} {r['congestion']} #{r['flow_id']}" for r in df.iter_rows(named=True)]
    else:
        labels = [" ".join(str(r[k]) for k in ("network", "scenario", "congestion", "direction"))
                  for r in shown.iter_rows(named=True)]
    fig = _bars_and_delay(labels, shown["utilisation"], ("utilisation", "channel utilisation"), shown["owd_mean_ms"],
                          shown["owd_std_ms"], ("OWD mean (ms)", "one-way delay (ms), mean ± std"),
                          "flow" if per_flow else "flows (means)")
    items.append(Item("tcp-studies-figure", "Utilisation and excess delay per TCP flow",
                      "Bars: channel utilisation; points: mean one-way delay with ± one standard deviation"
                      + ("" if per_flow else " (means over the flows of each network, scenario, congestion control "
                         "and direction)") + ". Seed 002 Figs. 7-10.", layout(fig)))
    return items


#: Member types that are "the stream" of 002 §7.4 (a low-rate UDP flow beside bulk TCP).
_STREAM_TYPES = ("udp-cbr", "voip", "sparse")


def stream_beside_tcp(store: Store) -> list[Item]:
    """002 §7.4, Fig. 11: in each group run of one bulk TCP download and one low-rate UDP
    stream on the same link, the stream's one-way delay and the download's throughput, per
    TCP variant (the bulk member's congestion control), over the repetitions."""
    runs = store.frame("""
        SELECT r.network, r.scenario, r.run_id, r.config, r.result, f.member, f.proto, f.direction, f.goodput_bps,
               f.owd_mean_ms, f.owd_std_ms, f.owd_p95_ms, f.owd_kind, f.loss_rate
        FROM runs r JOIN flows f USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'group' AND f.role = 'data' AND f.member IS NOT NULL""")
    points = []
    for (run_id,), g in runs.group_by(["run_id"], maintain_order=True):
        first = g.row(0, named=True)
        config = json.loads(first["config"]) if isinstance(first["config"], str) else first["config"] or {}
        members = config.get("members") or []
        bulk = [m for m in members if m[1] == "tcp-bulk"]
        stream = [m for m in members if m[1] in _STREAM_TYPES]
        if len(bulk) != 1 or len(stream) != 1 or len(members) != 2:
            continue
        (bname, _, bopts), (sname, _, _) = bulk[0], stream[0]
        bulk_doc, stream_doc = probe_doc(first["result"], bname), probe_doc(first["result"], sname)
        # Each member's direction(s) as its probe ran them (the stream's: the side the MN
        # receives when it has two, as a VoIP echo's).
        bulk_dirs = DIRECTIONS.get(bulk_doc.get("direction"), ())
        stream_dirs = DIRECTIONS.get(stream_doc.get("direction"), ())
        tcp = g.filter((pl.col("member") == bname) & (pl.col("proto") == "tcp") & pl.col("direction").is_in(bulk_dirs))
        udp = g.filter((pl.col("member") == sname) & (pl.col("proto") == "udp")
                       & (pl.col("direction") == (stream_dirs[-1] if stream_dirs else None)))
        if tcp.height == 0 or udp.height != 1:
            continue
        u = udp.row(0, named=True)
        points.append({"network": first["network"], "scenario": first["scenario"], "run_id": run_id,
                       "variant": bulk_doc.get("congestion") or bopts.get("congestion") or "default",
                       "tput": tcp["goodput_bps"].sum(),
                       "owd": u["owd_mean_ms"], "owd_std": u["owd_std_ms"], "owd_p95": u["owd_p95_ms"],
                       "kind": u["owd_kind"], "loss": u["loss_rate"]})
    if not points:
        return []
    agg = (pl.DataFrame(points, infer_schema_length=None)
           .group_by("network", "scenario", "variant", maintain_order=True)
           .agg(runs=pl.len(), tput=pl.col("tput").mean(), owd=pl.col("owd").mean(), owd_std=pl.col("owd_std").mean(),
                owd_p95=pl.col("owd_p95").mean(), loss=pl.col("loss").mean(),
                kind=pl.col("kind").drop_nulls().unique().sort().str.join("/"))
           .sort("network", "scenario", "owd", nulls_last=True))
    rows = [[r["network"], r["scenario"], r["variant"], r["runs"], _f(r["tput"] / 1e3, ".0f"),
             f"{_f(r['owd'])} ± {_f(r['owd_std'])}", _f(r["owd_p95"]),
             _f(None if r["loss"] is None else 100 * r["loss"], ".2f"), r["kind"] or "–"]
            for r in agg.iter_rows(named=True)]
    items = [Item("stream-beside-tcp-table", "A low-rate stream beside bulk TCP, per TCP variant",
                  "Each run downloads with one TCP variant while a low-rate UDP stream arrives on the same link "
                  "(one queue at the base station): the download's throughput and the stream's one-way delay "
                  "(its packets' mean ± standard deviation and 95th percentile, averaged over the runs) and loss. "
                  "Seed 002 §7.4, Fig. 11 (a 9.6 kbit/s stream beside a 250 MB download: least delay with Vegas, "
                  "most with Cubic, Westwood about 90 % of Cubic's throughput).",
                  table_html=html_table(["network", "scenario", "TCP variant", "runs", "TCP throughput kbit/s",
                                     "stream OWD mean ± std ms", "stream OWD p95 ms", "stream loss %", "OWD kind"],
                                    rows))]
    labels = [" ".join(x for x in (r["network"], r["scenario"], r["variant"])) for r in agg.iter_rows(named=True)]
    fig = _bars_and_delay(labels, agg["tput"] / 1e3, ("TCP throughput (kbit/s)", "TCP throughput (kbit/s)"),
                          agg["owd"], agg["owd_std"], ("stream delay (ms)", "stream one-way delay (ms), mean ± std"),
                          "TCP variant")
    items.append(Item("stream-beside-tcp", "Stream delay and TCP throughput per TCP variant",
                      "Bars: the download's throughput; points: the stream's mean one-way delay with ± one standard "
                      "deviation. Seed 002 Fig. 11.", layout(fig)))
    return items


def queue_size(store: Store) -> list[Item]:
    """003 slides 14-16: the queue under saturating UDP beside the min-delay probe's least OWD."""
    q = store.frame("""
        SELECT r.network, r.scenario, f.direction, count(*) AS runs, max(f.owd_max_ms) AS owd_max_ms,
               avg(f.goodput_bps) AS goodput_bps, max(f.queue_bytes) AS queue_bytes, any_value(f.owd_kind) AS kind
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.role = 'data' AND f.queue_bytes IS NOT NULL AND r.test_type = 'udp-cbr'
        GROUP BY ALL ORDER BY ALL""")
    # The probe's least one-way delay per direction (`min_owd`, docs/methods.md §1); runs stored
    # before it have the probe's own figure only, half the least RTT, for both directions.
    m = store.frame("""
        SELECT r.network, r.scenario, m.direction, min(m.min_ms) AS min_owd_ms, any_value(m.kind) AS min_kind,
               max(m.uncertainty_ms) AS min_owd_uncertainty_ms
        FROM min_owd m JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'min-delay' AND m.member IS NULL GROUP BY ALL""")
    on = ["network", "scenario", "direction"]
    if m.height == 0:
        m = store.frame("""
            SELECT network, scenario, min(CAST(json_extract(result, '$.owd_ms.min') AS DOUBLE)) AS min_owd_ms,
                   any_value(json_extract_string(result, '$.owd_ms.kind')) AS min_kind
            FROM runs WHERE status = 'ok' AND test_type = 'min-delay' GROUP BY ALL""")
        on = ["network", "scenario"]
    if q.height == 0 and m.height == 0:
        return []
    df = q.join(m, on=on, how="full", coalesce=True) if q.height and m.height else (q if q.height else m)
    rows = [[r["network"], r["scenario"], r.get("direction") or "–", _f(r.get("owd_max_ms")),
             _f(None if r.get("goodput_bps") is None else r["goodput_bps"] / 1e3, ".0f"),
             _f(None if r.get("queue_bytes") is None else r["queue_bytes"] / 1e3, ".0f"), r.get("kind") or "–",
             _f(r.get("min_owd_ms")) + ("" if r.get("min_owd_uncertainty_ms") is None
                                        else f" ± {r['min_owd_uncertainty_ms']:.3f}"),
             r.get("min_kind") or "–"] for r in df.iter_rows(named=True)]
    return [Item("queue-size", "Queue size under saturating UDP",
                 "Queue = max one-way delay × measured bandwidth of a saturating UDP CBR flow, per direction "
                 "(excess OWD: over the least delay seen; raw: including propagation), beside the least OWD of "
                 "the min-delay probe in that direction ± its clock offset's uncertainty (the path without "
                 "queueing; docs/methods.md §1; runs stored before it: half the least RTT). Seed 003 slides 14-16 (WiBro down: "
                 "961 ms × 9603 kbit/s = 1126 KB).",
                 table_html=html_table(["network", "scenario", "direction", "max OWD ms", "bandwidth kbit/s", "queue KB",
                                    "OWD kind", "min-delay OWD ms", "its kind"], rows))]


def _sweeps(store: Store, test_type: str) -> pl.DataFrame:
    """One row per sweep step of the runs of `test_type` (the probe's `sweep` rows)."""
    runs = store.frame("SELECT network, scenario, run_id, result FROM runs WHERE status = 'ok' AND test_type = ? "
                       "ORDER BY network, scenario, repetition", [test_type])
    rows = [{"network": n, "scenario": s, "run_id": rid, **step}
            for n, s, rid, res in runs.iter_rows() for step in (json.loads(res or "{}").get("sweep") or [])]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


#: The TCP settings other than the window that set a run apart (its trace in the window figures).
_OTHER_SETTINGS = ("mss", "sack", "timestamps", "initcwnd", "initrwnd", "congestion", "streams")


def _other(options: dict) -> str:
    return ", ".join(f"{k}={str(options[k]).lower() if isinstance(options[k], bool) else options[k]}"
                     for k in _OTHER_SETTINGS if options.get(k) is not None)


def _window_points(store: Store) -> pl.DataFrame:
    """One row per (run or window-sweep step, direction): the window, the other settings, the
    TCP throughput (goodput of its data flows, from the captures) and the one-way delay of its
    data (each flow's mean, std and p95 averaged over the step's streams).

    A `tcp-bulk` run with a `window` (a campaign sweep grid) is one point. A `window-sweep`
    run is one point per step: its steps run one after another, each on connections of its
    own, so the run's data flows in the test's direction, in the order they started, are the
    steps' (`streams` each); a run whose flows do not split that way keeps the probe's
    throughput per step and no delay."""
    cols = ["network", "scenario", "run_id", "direction", "window_bytes", "setting", "throughput_bps",
            "owd_mean_ms", "owd_std_ms", "owd_p95_ms", "owd_kind"]
    flows = store.frame("""
        SELECT r.network, r.scenario, r.run_id, r.test_type, r.config, r.result, f.direction, f.start_s,
               f.goodput_bps, f.owd_mean_ms, f.owd_std_ms, f.owd_p95_ms, f.owd_kind
        FROM runs r LEFT JOIN flows f ON f.run_id = r.run_id AND f.role = 'data' AND f.proto = 'tcp'
                                         AND f.goodput_bps > 0
        WHERE r.status = 'ok' AND (r.test_type = 'window-sweep'
              OR (r.test_type = 'tcp-bulk' AND json_extract(r.config, '$.options.window') IS NOT NULL))
        ORDER BY r.run_id, f.direction, f.start_s, f.flow_id""")
    rows = []
    for (run_id,), g in flows.group_by(["run_id"], maintain_order=True):
        first = g.row(0, named=True)
        config = json.loads(first["config"]) if isinstance(first["config"], str) else first["config"] or {}
        options = config.get("options") or {}
        base = {"network": first["network"], "scenario": first["scenario"], "run_id": run_id}
        data = g.filter(pl.col("direction").is_not_null())

        def point(direction, window, setting, fl: pl.DataFrame, throughput=None):
            rows.append({**base, "direction": direction, "window_bytes": window, "setting": setting,
                         "throughput_bps": fl["goodput_bps"].sum() if throughput is None else throughput,
                         **{c: fl[c].mean() if fl.height else None for c in ("owd_mean_ms", "owd_std_ms", "owd_p95_ms")},
                         "owd_kind": fl["owd_kind"].drop_nulls().first() if fl.height else None})

        result = probe_doc(first["result"], None)
        # The test's direction(s) as the probe ran it (a download's data connection also
        # carries the probe's few bytes up).
        wanted = DIRECTIONS.get(result.get("direction"), ())
        if first["test_type"] == "tcp-bulk":
            for (direction,), fl in data.filter(pl.col("direction").is_in(wanted)).group_by(["direction"],
                                                                                           maintain_order=True):
                point(direction, options["window"], _other(options), fl)
            continue
        want, steps = sweep_steps(result, options, data)
        for step, fl in steps:
            setting = _other({**options, "mss": step.get("mss") or options.get("mss")})
            if fl is not None:
                point(want, step["window_bytes"], setting, fl)
            else:
                point(want, step["window_bytes"], setting, data.clear(), throughput=step.get("throughput_bps"))
    return pl.DataFrame(rows, schema_overrides={"window_bytes": pl.Int64, "throughput_bps": pl.Float64,
                                                "owd_mean_ms": pl.Float64, "owd_std_ms": pl.Float64,
                                                "owd_p95_ms": pl.Float64, "owd_kind": pl.Utf8},
                        infer_schema_length=None) if rows else pl.DataFrame(schema=cols)


def window_sweep(store: Store) -> list[Item]:
    """003 slides 17-20 (and 004 Figs. 5-6): TCP throughput and one-way delay vs the window,
    over the repetitions of each window, per network, scenario, direction and other settings."""
    points = _window_points(store)
    if points.height == 0 or points["window_bytes"].n_unique() < 2:
        return []
    agg = (points.group_by("network", "scenario", "direction", "setting", "window_bytes")
           .agg(runs=pl.col("run_id").n_unique(), tput=pl.col("throughput_bps").mean(),
                tput_std=pl.col("throughput_bps").std(), owd=pl.col("owd_mean_ms").mean(),
                owd_std=pl.col("owd_std_ms").mean(), owd_p95=pl.col("owd_p95_ms").mean(),
                kind=pl.col("owd_kind").drop_nulls().unique().sort().str.join("/"))
           .sort("network", "scenario", "direction", "setting", "window_bytes"))
    rows = [[r["network"], r["scenario"], r["direction"], r["setting"] or "–", f"{r['window_bytes'] / 1024:g}",
             r["runs"], _f(r["tput"] / 1e3, ".0f"), _f(None if r["tput_std"] is None else r["tput_std"] / 1e3, ".0f"),
             _f(r["owd"]), _f(r["owd_std"]), _f(r["owd_p95"]), r["kind"] or "–"] for r in agg.iter_rows(named=True)]
    items = [Item("window-sweep-table", "TCP throughput and one-way delay per window",
                  "Per receive/send window (both ends' socket buffers, the advertised window clamped to it): TCP "
                  "throughput (goodput from the captures; mean and standard deviation over the runs or window-sweep "
                  "steps of that window) and the one-way delay of the TCP data matched across the two captures "
                  "(each flow's mean, standard deviation and 95th percentile, averaged over the runs; excess = OWD − "
                  "the flow's minimum unless the clocks were synchronised). A window-sweep step without its own "
                  "flows in the captures has the probe's throughput and no delay. Seed 003 slides 17-20 (WiBro: "
                  "128 KB fills the link; the delay first falls, then grows with queueing), 004 Figs. 5-6.",
                  table_html=html_table(["network", "scenario", "direction", "other settings", "window KB", "runs",
                                     "throughput kbit/s", "std kbit/s", "OWD mean ms", "OWD std ms", "OWD p95 ms",
                                     "OWD kind"], rows))]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TCP throughput", "one-way delay of the TCP data"))
    for (n, s, d, setting), g in agg.group_by(["network", "scenario", "direction", "setting"], maintain_order=True):
        name = " ".join(x for x in (n, s, d, setting) if x)
        x = (g["window_bytes"] / 1024).to_list()
        fig.add_trace(go.Scatter(x=x, y=(g["tput"] / 1e3).to_list(), mode="lines+markers", name=name, legendgroup=name,
                                 error_y=dict(type="data", array=(g["tput_std"].fill_null(0) / 1e3).to_list())),
                      row=1, col=1)
        if g["owd"].is_not_null().any():
            fig.add_trace(go.Scatter(x=x, y=g["owd"].to_list(), mode="lines+markers", name=name, legendgroup=name,
                                     showlegend=False, error_y=dict(type="data", array=g["owd_std"].fill_null(0).to_list())),
                          row=1, col=2)
    fig.update_xaxes(title_text="window (KB)", type="log")
    fig.update_yaxes(title_text="kbit/s", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms, mean ± std", rangemode="tozero", row=1, col=2)
    items.append(Item("window-sweep", "TCP throughput and one-way delay vs window",
                      "Left: mean TCP throughput per window with ± one standard deviation over the runs; right: the "
                      "mean one-way delay of the TCP data with ± the flows' standard deviation. Seed 003 slides "
                      "17-20, 004 Figs. 5-6.", layout(fig)))
    return items


#: The ping tests by the end that pings: the MN's probe (ping-sweep) or the CN's server
#: (cn-ping-sweep, the probe echoing), shown side by side (004 Fig. 1).
PING_TESTS = {"ping-sweep": "MN", "cn-ping-sweep": "CN"}


def ping_sizes(store: Store) -> list[Item]:
    """004 Fig. 1: RTT vs packet size, mean ± std per size, and the linear fit, for pings from
    the MN and from the CN."""
    frames = [f.with_columns(pinged_from=pl.lit(end)) for t, end in PING_TESTS.items()
              if (f := _sweeps(store, t)).height and "size_bytes" in f.columns]
    if not frames:
        return []
    df = pl.concat(frames, how="diagonal_relaxed")
    df = df.with_columns(median=pl.col("rtt_ms").struct.field("median"))
    for c in ("rtt_mean_ms", "rtt_std_ms"):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, pl.Float64).alias(c))
    fits = store.frame("""SELECT network, scenario, run_id, CAST(json_extract(result, '$.fit.intercept_ms') AS DOUBLE) AS a,
                          CAST(json_extract(result, '$.fit.slope_ms_per_byte') AS DOUBLE) AS b
                          FROM runs WHERE status = 'ok' AND test_type IN ('ping-sweep', 'cn-ping-sweep')""")
    rows = [[r["network"], r["scenario"], r["pinged_from"], r["size_bytes"], _f(r["median"]), _f(r["rtt_mean_ms"]),
             _f(r["rtt_std_ms"]), _f(None if r.get("loss_rate") is None else 100 * r["loss_rate"])]
            for r in df.iter_rows(named=True)]
    items = [Item("ping-table", "RTT per ping size", "Round trip per probe size over each run's probes: median, "
                  "mean and standard deviation, and loss; pinged from the MN (ping-sweep) or from the CN "
                  "(cn-ping-sweep: the server pings, the probe echoes). Seed 004 §IV.A, Fig. 1.",
                  table_html=html_table(["network", "scenario", "pinged from", "size B", "median ms", "mean ms", "std ms",
                                         "loss %"], rows))]
    fig = go.Figure()
    for (n, s, end, rid), g in df.group_by(["network", "scenario", "pinged_from", "run_id"], maintain_order=True):
        fig.add_trace(go.Scatter(x=g["size_bytes"], y=g["rtt_mean_ms"], mode="markers",
                                 name=f"{n} {s} from {end} mean ± std",
                                 error_y=dict(type="data", array=g["rtt_std_ms"].fill_null(0).to_list())))
        fit = fits.filter(pl.col("run_id") == rid)
        if fit.height and fit["a"][0] is not None:
            a, b = fit["a"][0], fit["b"][0]
            xs = [g["size_bytes"].min(), g["size_bytes"].max()]
            fig.add_trace(go.Scatter(x=xs, y=[a + b * x for x in xs], mode="lines", line_dash="dot",
                                     name=f"{n} {s} from {end} fit {a:.1f} + {b * 1000:.2f}·size/1000 ms"))
    fig.update_layout(xaxis_title="ping size (bytes)", yaxis_title="RTT (ms)")
    items.append(Item("ping-fit", "RTT vs packet size", "Mean ± std per size and the fit RTT = a + b·size of the "
                      "median per size, pings from the MN and from the CN. Seed 004 Fig. 1.", layout(fig)))
    return items


def udp_sizes(store: Store) -> list[Item]:
    """004 Table I: UDP throughput per payload size."""
    df = store.frame("""
        SELECT r.network, r.scenario, f.direction,
               CAST(coalesce(json_extract(r.config, '$.options.payload'), 1460) AS INTEGER) AS payload,
               count(*) AS runs, avg(f.goodput_bps) AS goodput_bps, avg(f.loss_rate) AS loss_rate
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND r.test_type = 'udp-cbr' AND f.role = 'data'
          -- the test's own direction: a downlink test's uplink flow is its request, not a stream
          AND f.direction = CASE r.direction WHEN 'down' THEN 'downlink' WHEN 'up' THEN 'uplink' ELSE f.direction END
        GROUP BY ALL ORDER BY ALL""")
    if df.select(pl.struct("network", "scenario", "direction").n_unique()).item() == df.height:
        return []  # one size per network and direction: nothing to compare
    rows = [[r["network"], r["scenario"], r["direction"], r["payload"], r["runs"], _f(r["goodput_bps"] / 1e3, ".0f"),
             _f(None if r["loss_rate"] is None else 100 * r["loss_rate"], ".2f")] for r in df.iter_rows(named=True)]
    return [Item("udp-sizes", "UDP throughput vs packet size", "Mean over runs of each payload size. "
                 "Seed 004 Table I.", table_html=html_table(["network", "scenario", "direction", "payload B", "runs",
                                                         "goodput kbit/s", "loss %"], rows))]


#: A gap is an outage when its duration is at least this many of its flow's mean
#: inter-arrival times (the flow's duration over its packets); a shorter one is the link's
#: overload: a queue dropped a packet of a stream faster than the link, and the link went on
#: delivering (docs/report.md).
OUTAGE_INTERARRIVALS = 5

#: Each gap and delay period with its class (outage, delay period, overload) and start in the run.
GAPS_SQL = f"""
    SELECT DISTINCT r.network, r.scenario, r.test, g.run_id, g.direction,
           CASE WHEN g.kind = 'delay_period' THEN 'delay period'
                WHEN g.kind = 'promotion' THEN 'promotion'  -- cellperf.promotions
                WHEN f.packets IS NULL THEN 'gap'  -- no flow row to tell
                WHEN g.duration_ms >= {OUTAGE_INTERARRIVALS} * 1e3 * f.duration_s / greatest(f.packets, 1) THEN 'outage'
                ELSE 'overload' END AS class,
           round(epoch(g.start_ts) - epoch(r.started_at), 3) AS start_s, g.duration_ms, g.lost
    FROM gaps g JOIN runs r USING (run_id)
    LEFT JOIN flows f ON f.run_id = g.run_id AND f.flow_id = g.flow_id AND f.direction = g.direction
    WHERE r.status = 'ok' ORDER BY r.network, r.scenario, g.run_id, start_s"""

#: Time bins per series of the inter-arrival timeline: the figure stays a few kB at any run
#: length (every packet drawn made the demo's page take 14 s to draw).
PID_TIMELINE_BINS = 500

#: The longest inter-arrival of each time bin per series (network, scenario, direction) of the
#: streams with gaps, and when in its run it ended.
PID_TIMELINE_SQL = """
    WITH pid AS (
        SELECT r.network || ' ' || r.scenario || ' ' || p.direction AS label,
               epoch(p.recv_ts) - epoch(r.started_at) AS t_s,
               (epoch(p.recv_ts) - lag(epoch(p.recv_ts)) OVER (PARTITION BY p.run_id, p.flow_id ORDER BY p.recv_ts))
                 * 1e3 AS pid_ms
        FROM udp_packets p JOIN runs r USING (run_id)
        WHERE p.recv_ts IS NOT NULL AND (p.run_id, p.flow_id) IN (SELECT (run_id, flow_id) FROM gaps)),
    binned AS (
        SELECT label, t_s, pid_ms,
               floor(t_s / greatest(max(t_s) OVER (PARTITION BY label) / $1, 1e-3)) AS bin
        FROM pid WHERE pid_ms IS NOT NULL)
    SELECT label, arg_max(t_s, pid_ms) AS t_s, max(pid_ms) AS pid_ms
    FROM binned GROUP BY label, bin ORDER BY label, t_s"""

#: The order classes are shown in: what a user came for first (`gap`: a gap whose flow has no
#: row to tell an outage from overload).
GAP_CLASSES = ("outage", "delay period", "promotion", "gap", "overload")


def gaps(store: Store) -> list[Item]:
    """004 Figs. 3-4: gaps and delay periods per run and class (outages and delay periods
    first, the overload of a saturating stream apart), their durations' distribution, every
    gap as a download, and the inter-arrival timeline around them."""
    df = store.frame(GAPS_SQL)
    if df.height == 0:
        return []
    order = pl.col("class").replace_strict({c: k for k, c in enumerate(GAP_CLASSES)}, return_dtype=pl.Int8)
    per_run = (df.group_by("network", "scenario", "test", "run_id", "direction", "class", maintain_order=True)
               .agg(n=pl.len(), total_ms=pl.col("duration_ms").sum(), longest_ms=pl.col("duration_ms").max(),
                    lost=pl.col("lost").sum())
               .sort(order, "network", "scenario", "run_id", "direction"))
    head = ["class", "network", "scenario", "test", "direction", "count", "total s", "longest ms", "lost"]
    run_rows = [[r["class"], r["network"], r["scenario"], r["test"], r["direction"], r["n"],
                 _f(r["total_ms"] / 1e3, ".2f"), _f(r["longest_ms"], ".0f"), r["lost"]] for r in per_run.iter_rows(named=True)]
    detail = [[r["network"], r["scenario"], r["test"], r["run_id"], r["direction"], r["class"], r["start_s"],
               r["duration_ms"], r["lost"]] for r in df.iter_rows(named=True)]
    what = "count, total and longest. Seed 004 §IV.B.2, Figs. 3-4."
    if len(run_rows) <= MAX_ROWS:
        table, scope = html_table(head, run_rows), "Per run and direction"
    else:
        # A campaign of many runs: one row per network, scenario, test, direction and class.
        grouped = (per_run.group_by("network", "scenario", "test", "direction", "class", maintain_order=True)
                   .agg(runs=pl.col("run_id").n_unique(), n=pl.col("n").sum(), total_ms=pl.col("total_ms").sum(),
                        longest_ms=pl.col("longest_ms").max(), lost=pl.col("lost").sum())
                   .sort(order, "network", "scenario", "test", "direction"))
        table = html_table([*head[:5], "runs", *head[5:]],
                           [[r["class"], r["network"], r["scenario"], r["test"], r["direction"], r["runs"], r["n"],
                             _f(r["total_ms"] / 1e3, ".2f"), _f(r["longest_ms"], ".0f"), r["lost"]]
                            for r in grouped.iter_rows(named=True)])
        table += csv_download(head, run_rows, name="gaps-per-run", query=None,
                              what=f"the same per run and direction ({len(run_rows):,} rows)")
        scope = f"Per network, scenario, test and direction, over its runs ({per_run['run_id'].n_unique()} runs)"
    items = [Item("gaps-table", "Gaps and delay periods",
                  f"{scope}: gaps (a burst of lost packets, from the arrival before it to the one after) "
                  f"that are outages (at least {OUTAGE_INTERARRIVALS} of the flow's mean inter-arrival times), delay "
                  "periods (an inter-arrival of at least 5 sending intervals with nothing lost), promotions (a delay "
                  "period ended by a packet sent after at least the radio's tail of idle: the radio set up again, "
                  "nothing lost; cellperf.promotions), and the gaps of a "
                  "stream's overload (a queue dropping what the link could not carry, the link still delivering): "
                  + what, table_html=table)]
    items[-1].table_html += csv_download(["network", "scenario", "test", "run", "direction", "class", "start s",
                                          "duration ms", "lost"], detail, name="gaps", query=GAPS_SQL,
                                         what=f"every gap and delay period ({len(detail):,})")
    fig = go.Figure()
    for cls in GAP_CLASSES:
        trace = cdf_trace(df.filter(pl.col("class") == cls)["duration_ms"].to_numpy(), cls)
        if trace is not None:
            fig.add_trace(trace)
    # 0-ms gaps (two packets received back to back around a loss) have no place on a log axis.
    fig.update_layout(xaxis=dict(title="duration (ms)", type="log"), yaxis_title="fraction")
    items.append(Item("gaps-cdf", "Gap and delay-period durations", "Distribution (CDF) of the durations of each class "
                      "over all runs. Seed 004 §IV.B.2.", layout(fig, 360)))
    if not has_view(store, "udp_packets"):
        return items
    pid = store.frame(PID_TIMELINE_SQL, [PID_TIMELINE_BINS])
    if pid.height == 0:
        return items
    fig = go.Figure()
    for (label,), g in pid.group_by(["label"], maintain_order=True):
        fig.add_trace(go.Scatter(x=g["t_s"], y=g["pid_ms"], mode="lines", line_width=1, name=label))
    fig.update_layout(xaxis_title="time in run (s)", yaxis=dict(title="longest packet inter-arrival (ms)", type="log"))
    items.append(Item("pid-timeline", "Packet inter-arrival timeline", "The longest inter-arrival of a received "
                      f"packet in each of {PID_TIMELINE_BINS} time bins of a series, for the streams with gaps or "
                      "delay periods (a spike is a gap). Every packet's is in the store: cellperf query DIR "
                      "\"SELECT * FROM udp_packets\". Seed 004 Figs. 3-4.", layout(fig)))
    return items


SECTIONS = (("TCP studies", (tcp_flows, stream_beside_tcp, window_sweep, queue_size)),
            ("Path studies", (ping_sizes, udp_sizes, gaps)))
