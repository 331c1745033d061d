"""The report's figures and tables, each made from the results store alone (never from live
state), after seed 000 chapter 4. Every function returns a list of `Item`s (none when the
store has no data for it), so a campaign without VoIP simply has no VoIP section.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from cellperf.report.item import Item, cdf_trace, has_view, layout, natural
from cellperf.report.tables import html_table
from cellperf.report.tcp_tests import tcp_test_flows
from cellperf.store import Store

SCENARIO_COLOURS = {"stationary": "#1f77b4", "mobile": "#d62728"}
#: Colours of free scenario labels (car, subway, KTX, ...: docs/campaigns.md), in order of appearance.
OTHER_COLOURS = ("#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def _scenarios(df: pl.DataFrame) -> list[str]:
    """The scenario labels in `df`: stationary and mobile first, then free labels as they come."""
    present = df["scenario"].unique(maintain_order=True).to_list() if df.height else []
    return [s for s in SCENARIO_COLOURS if s in present] + [s for s in present if s not in SCENARIO_COLOURS]


def _colour(scenario: str, df: pl.DataFrame) -> str:
    if scenario in SCENARIO_COLOURS:
        return SCENARIO_COLOURS[scenario]
    others = [s for s in _scenarios(df) if s not in SCENARIO_COLOURS]
    return OTHER_COLOURS[others.index(scenario) % len(OTHER_COLOURS)] if scenario in others else OTHER_COLOURS[-1]
DIRECTION_DASH = {"up": "dot", "down": "solid", "uplink": "dot", "downlink": "solid"}
HANDOFF_DASH = {"inter-BS": "solid", "inter-technology": "solid", "inter-sector": "dash"}


def _runs_of(store: Store, test_type: str, direction: str | None = None) -> pl.DataFrame:
    where = "status = 'ok' AND test_type = ?"
    params = [test_type]
    if direction:
        where += " AND (direction = ? OR direction IS NULL)"
        params.append(direction)
    return store.frame(f"SELECT run_id, network, scenario, repetition, started_at FROM runs WHERE {where} "
                       "ORDER BY network, scenario, repetition", params)


#: Where a window's point is drawn on a time axis: at its centre, because the value is the
#: window's mean (bytes / interval, mean delay, R of the window's delay and loss), so a
#: handoff line falls inside the span the point stands for (doc: docs/report.md).
INTERVAL_CENTRE_SQL = "epoch(x.start_ts) + CAST(json_extract(r.config, '$.interval_s') AS DOUBLE) / 2"
INTERVAL_END_SQL = "epoch(x.start_ts) + CAST(json_extract(r.config, '$.interval_s') AS DOUBLE)"
WINDOW_CENTRE_SQL = "(epoch(x.window_start) + epoch(x.window_end)) / 2"
WINDOW_END_SQL = "epoch(x.window_end)"


def _timeline(store: Store, table: str, centre_sql: str, end_sql: str, value_sql: str, run_filter: str,
              params: list) -> pl.DataFrame:
    """Per-window rows of the selected runs on one time axis per (network, scenario): the
    runs laid end to end in repetition order, as the thesis plots its data sets (Fig. 4.1a),
    each point at its window's centre (`centre_sql`, epoch seconds; `end_sql` the window's
    end, which sets where the next run begins). Returns network, scenario, run_id, t_s
    (centre on that axis), offset_s (the run's start on it), value columns."""
    df = store.frame(f"""
        SELECT r.network, r.scenario, r.repetition, r.run_id,
               {centre_sql} - epoch(r.started_at) AS t_run, {end_sql} - epoch(r.started_at) AS t_end, {value_sql}
        FROM {table} x JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND {run_filter} ORDER BY r.network, r.scenario, r.repetition, t_run""", params)
    if df.height == 0:
        return df
    lengths = (df.group_by("network", "scenario", "repetition", "run_id").agg(length=pl.col("t_end").max())
               .sort("network", "scenario", "repetition")
               .with_columns(offset_s=pl.col("length").cum_sum().over("network", "scenario") - pl.col("length")))
    return (df.join(lengths.select("run_id", "offset_s"), on="run_id")
            .with_columns(t_s=pl.col("t_run") + pl.col("offset_s")).drop("t_end"))


def _handoff_lines(store: Store, fig: go.Figure, offsets: pl.DataFrame, rows: list[int] | None = None) -> None:
    """Vertical lines at the handoffs of the runs in `offsets` (run_id, offset_s): solid
    inter-BS, dashed inter-sector (000 Fig. 4.5)."""
    if offsets.height == 0:
        return
    h = store.frame("""SELECT h.run_id, h.kind, h.time_s - epoch(r.started_at) AS t_run
                       FROM handoffs h JOIN runs r USING (run_id)""")
    h = h.join(offsets, on="run_id").with_columns(t=pl.col("t_run") + pl.col("offset_s"))
    for t, kind in h.select("t", "kind").iter_rows():
        for row in rows or [None]:
            kw = {"row": row, "col": 1} if row else {}
            fig.add_vline(x=t, line_width=1, line_dash=HANDOFF_DASH.get(kind, "dot"), line_color="#555", opacity=0.6, **kw)


# -- UDP CBR (000 §4.1, Figs. 4.1-4.2) ----------------------------------------------------------

def udp_throughput(store: Store) -> list[Item]:
    filt = "r.test_type = 'udp-cbr' AND x.direction = 'downlink'"
    df = _timeline(store, "intervals", INTERVAL_CENTRE_SQL, INTERVAL_END_SQL, "x.throughput_bps / 1e3 AS kbps", filt, [])
    if df.height == 0:
        return []
    items = []
    networks = df["network"].unique(maintain_order=True).to_list()
    fig = make_subplots(rows=len(networks), cols=1, subplot_titles=networks, shared_xaxes=False,
                        vertical_spacing=0.25 / max(1, len(networks)))
    for i, net in enumerate(networks, start=1):
        for scen in _scenarios(df):
            d = df.filter((pl.col("network") == net) & (pl.col("scenario") == scen))
            if d.height:
                fig.add_trace(go.Scatter(x=d["t_s"], y=d["kbps"], mode="lines+markers", marker_size=4,
                                         name=scen, legendgroup=scen, showlegend=i == 1,
                                         line_color=_colour(scen, df)), row=i, col=1)
        # Lines at the handoffs of every run that has them (the mobile ones, a drive test's).
        runs = df.filter(pl.col("network") == net).select("run_id", "offset_s").unique()
        _handoff_lines(store, fig, runs, rows=[i])
        fig.update_yaxes(title_text="kb/s", row=i, col=1)
    fig.update_xaxes(title_text="time (s), runs end to end", row=len(networks), col=1)
    items.append(Item("udp-series", "UDP CBR downlink throughput per interval",
                      "Throughput of each interval (default 5 s), drawn at the interval's centre, stationary vs mobile, "
                      "the runs of each scenario laid end to end; vertical lines are handoffs (solid inter-BS, dashed inter-sector). Seed 000 Fig. 4.1(a).",
                      layout(fig, height=260 * len(networks) + 120)))

    box = _box_by_scenario(df, "kb/s per interval")
    items.append(Item("udp-box", "Dispersion of UDP throughput (IQR)",
                      "Box: quartiles; whiskers at 1.5 IQR; points: outliers. Seed 000 Fig. 4.1(b).", layout(box)))

    sodp = go.Figure()
    d = df.sort("run_id", "t_s").with_columns(d1=pl.col("kbps").diff().over("run_id"))
    d = d.with_columns(d2=pl.col("d1").shift(-1).over("run_id")).drop_nulls(["d1", "d2"])
    for (net, scen), g in d.group_by(["network", "scenario"], maintain_order=True):
        sodp.add_trace(go.Scatter(x=g["d1"], y=g["d2"], mode="markers", marker=dict(size=5, opacity=0.7),
                                  name=f"{net} {scen}", marker_symbol="circle" if scen == "stationary" else "x"))
    sodp.update_layout(xaxis_title="T[i+1] − T[i] (kb/s)", yaxis_title="T[i+2] − T[i+1] (kb/s)")
    items.append(Item("udp-sodp", "Second-order difference plot of UDP throughput",
                      "Each point is (T[i+1]−T[i], T[i+2]−T[i+1]) of consecutive intervals; the farther from the "
                      "origin, the more variable the link. Seed 000 Fig. 4.1(c).", layout(sodp, height=480)))

    jit = store.frame("""SELECT r.scenario, r.network, abs(p.jitter_ms) AS j FROM udp_packets p JOIN runs r USING (run_id)
                         WHERE r.status = 'ok' AND r.test_type = 'udp-cbr' AND p.direction = 'downlink'
                         AND p.jitter_ms IS NOT NULL""") if has_view(store, "udp_packets") else pl.DataFrame()
    loss = store.frame(f"""SELECT r.scenario, x.loss_rate FROM intervals x JOIN runs r USING (run_id)
                          WHERE r.status = 'ok' AND {filt} AND x.loss_rate IS NOT NULL""")
    cdf = make_subplots(rows=1, cols=2, subplot_titles=("|jitter| (ms)", "loss rate per interval"))
    for scen in _scenarios(loss):
        if jit.height:
            t = cdf_trace(jit.filter(pl.col("scenario") == scen)["j"].to_numpy(), scen,
                           line_color=_colour(scen, loss), legendgroup=scen)
            if t:
                cdf.add_trace(t, row=1, col=1)
        t = cdf_trace(loss.filter(pl.col("scenario") == scen)["loss_rate"].to_numpy(), scen,
                       line_color=_colour(scen, loss), legendgroup=scen, showlegend=False)
        if t:
            cdf.add_trace(t, row=1, col=2)
    cdf.update_xaxes(type="log", row=1, col=1)
    cdf.update_yaxes(title_text="CDF", row=1, col=1)
    items.append(Item("udp-cdf", "Jitter and loss of UDP CBR",
                      "CDFs of per-packet |jitter| = |(r[i]−r[i−1]) − (s[i]−s[i−1])| and of the loss rate per interval. "
                      "Seed 000 Fig. 4.2.", layout(cdf)))
    return items


# -- TCP (000 §4.2, Fig. 4.3, 4.4, Table 4.2) -----------------------------------------------------

def _box_by_scenario(df: pl.DataFrame, y_title: str) -> go.Figure:
    """Box plots of `kbps` per network, stationary beside mobile (seed 000 Figs. 4.1(b), 4.3)."""
    box = go.Figure()
    for scen in _scenarios(df):
        d = df.filter(pl.col("scenario") == scen)
        if d.height:
            box.add_trace(go.Box(x=d["network"], y=d["kbps"], name=scen, marker_color=_colour(scen, df),
                                 boxpoints="outliers"))
    medians = df.group_by("network").agg(pl.col("kbps").median())["kbps"]
    # Networks a generation apart (LTE's few Mb/s beside NR's hundreds) on a linear axis leave
    # the slower ones a line at zero.
    wide = medians.min() > 0 and medians.max() / medians.min() > 10
    box.update_layout(boxmode="group", yaxis=dict(title=y_title, type="log" if wide else "linear"))
    return box


def tcp(store: Store) -> list[Item]:
    tests = tcp_test_flows(store)
    keys = ["run_id", "flow_id", "direction"]
    intervals = store.frame("""SELECT x.run_id, x.flow_id::BIGINT AS flow_id, x.direction, x.throughput_bps / 1e3 AS kbps
                               FROM intervals x JOIN runs r USING (run_id)
                               WHERE r.status = 'ok' AND r.test_type IN ('tcp-bulk', 'group', 'window-sweep')
                                 AND x.bytes > 0""")
    df = tests.join(intervals, on=keys).select(pl.col("label").alias("network"), "scenario", "kbps")
    items = []
    if df.height:
        box = _box_by_scenario(df, "goodput per interval (kb/s)")
        items.append(Item("tcp-box", "TCP bulk throughput", "Box-whisker of TCP goodput per interval, per network "
                          "and scenario, in each test's direction: tcp-bulk runs, the tcp-bulk members of group runs "
                          "(test:member) and each window of a window-sweep. Seed 000 Fig. 4.3.", layout(box)))
    ack = store.frame("""SELECT r.scenario, a.ratio FROM ack_compression a JOIN runs r USING (run_id)
                         WHERE r.status = 'ok' AND a.ratio > 0""")
    if ack.height:
        fig = go.Figure()
        ev = store.frame("""SELECT r.scenario, avg(a.in_event::INT) AS events, avg(a.compressed::INT) AS compressed
                            FROM ack_compression a JOIN runs r USING (run_id) WHERE r.status = 'ok' GROUP BY 1""")
        ev = {s: (e, c) for s, e, c in ev.iter_rows()}
        for scen in _scenarios(ack):
            t = cdf_trace(ack.filter(pl.col("scenario") == scen)["ratio"].to_numpy(), scen,
                           line_color=_colour(scen, ack))
            if t:
                e, c = ev[scen]
                t.name += f": {100 * c:.1f} % compressed, {100 * e:.1f} % in events"
                fig.add_trace(t)
        fig.add_vline(x=0.75, line_dash="dash", line_color="#555")
        fig.update_layout(xaxis_title="ΔTr / ΔTs", yaxis_title="CDF", xaxis_type="log")
        items.append(Item("tcp-ack", "ACK compression", "CDF of ΔTr/ΔTs of ACKs seen at both ends; below 0.75 an ACK "
                          "is compressed, ≥ 3 in a row an event (thesis: 10.8 % stationary, 22.2 % mobile in events). "
                          "Seed 000 Fig. 4.4.", layout(fig)))
    retx = store.frame("""SELECT f.run_id, f.flow_id::BIGINT AS flow_id, f.direction, f.data_packets, f.retx_total,
                                 f.retx_normal, f.retx_spurious, f.retx_unavoidable, f.retx_serial, f.retx_method
                          FROM flows f JOIN runs r USING (run_id)
                          WHERE r.status = 'ok' AND r.test_type IN ('tcp-bulk', 'group', 'window-sweep')
                            AND f.role = 'data' AND f.proto = 'tcp'""")
    # A sum of no counts is none, as SQL's (imported runs count retransmissions without classes).
    total = lambda c: pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum())
    rx = (tests.join(retx, on=keys).group_by(pl.col("label").alias("network"), "scenario")
          .agg(data=total("data_packets"), total=total("retx_total"), n=total("retx_normal"),
               s=total("retx_spurious"), u=total("retx_unavoidable"), m=total("retx_serial"),
               method=pl.col("retx_method").first())
          .sort(["scenario", "network"], descending=[True, False]))
    if rx.height:
        rows = []
        for scen in _scenarios(rx):
            d = rx.filter(pl.col("scenario") == scen)
            if d.height == 0:
                continue
            avg = d.select(pl.lit(f"all, {scen}").alias("network"), pl.lit(scen).alias("scenario"),
                           *[pl.col(c).sum() for c in ("data", "total", "n", "s", "u", "m")],
                           pl.col("method").first())
            rows += [avg.row(0, named=True)] + list(d.iter_rows(named=True))
        cells = []
        for r in rows:
            tot = r["total"] or 0
            # Imported runs (iperf3) count retransmissions without classes: "–".
            share = (lambda k: f"{100 * r[k] / tot:.2f}" if tot and r[k] is not None else "–")
            rxt = f"{100 * tot / r['data']:.2f}" if r["data"] else "–"
            label = r["network"] if r["network"].startswith("all") else f"{r['network']} ({r['scenario']})"
            cells.append([label, rxt, share("n"), share("s"), share("u"), share("m"), tot])
        table = html_table(["rate (%)", "% Rxt", "N-Rxt", "S-Rxt", "U-Rxt", "M-Rxt", "retransmissions"], cells,
                           name="retransmission-classes", strong=[r["network"].startswith("all") for r in rows])
        items.append(Item("tcp-retx", "Retransmission classes",
                          "% Rxt = retransmitted / data packets; N (data lost), S (spurious: neither lost), U (all ACKs "
                          "lost) as shares of retransmissions, summing to 100; M = serial retransmissions, share of "
                          "retransmissions. Rows as the box plot's (tcp-bulk runs, group members, window-sweep windows); "
                          "\"all\" sums a scenario's rows. Two-capture classes (docs/methods.md §4). Seed 000 Table 4.2.",
                          table_html=table))
    return items


# -- VoIP (000 §4.3, Figs. 4.5-4.7) ---------------------------------------------------------------

def voip(store: Store) -> list[Item]:
    df = _timeline(store, "voip_windows", WINDOW_CENTRE_SQL, WINDOW_END_SQL,
                   "x.direction, x.mean_delay_ms, x.loss, x.r, x.delay_kind, x.near_handoff", "x.status != 'no_data'", [])
    if df.height == 0:
        return []
    items = []
    kind = df["delay_kind"].drop_nulls().unique().to_list()
    delay_label = {"half_rtt": "half-RTT (ms)", "one_way": "one-way delay (ms)",
                   "excess_one_way": "excess one-way delay (ms)"}.get(kind[0] if len(kind) == 1 else "", "delay (ms)")
    for net in df["network"].unique(maintain_order=True).to_list():
        d = df.filter(pl.col("network") == net)
        fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                            subplot_titles=("(a) " + delay_label, "(b) loss rate", "(c) R-factor"))
        for (scen, direction), g in d.group_by(["scenario", "direction"], maintain_order=True):
            g = g.sort("t_s")
            style = dict(line_color=_colour(scen, df), line_dash=DIRECTION_DASH.get(direction, "solid"),
                         legendgroup=f"{scen}{direction}", mode="lines")
            name = f"{scen} {direction}"
            fig.add_trace(go.Scatter(x=g["t_s"], y=g["mean_delay_ms"], name=name, **style), row=1, col=1)
            fig.add_trace(go.Scatter(x=g["t_s"], y=g["loss"], name=name, showlegend=False, **style), row=2, col=1)
            fig.add_trace(go.Scatter(x=g["t_s"], y=g["r"], name=name, showlegend=False, **style), row=3, col=1)
        _handoff_lines(store, fig, d.select("run_id", "offset_s").unique(), rows=[1, 2, 3])
        fig.update_xaxes(title_text="time (s), runs end to end", row=3, col=1)
        items.append(Item(f"voip-series-{net}", f"VoIP delay, loss and R over time — {net}",
                          "Per window (default 5 s, drawn at its centre): mean delay, loss and E-model R (simplified G.107, G.711); "
                          "vertical lines are handoffs (solid inter-BS, dashed inter-sector). Seed 000 Fig. 4.5.",
                          layout(fig, height=720)))
    fig = go.Figure()
    for (scen, direction), g in df.group_by(["scenario", "direction"], maintain_order=True):
        t = cdf_trace(g["r"].to_numpy().astype(float), f"{scen} {direction}", line_color=_colour(scen, df),
                       line_dash=DIRECTION_DASH.get(direction, "solid"))
        if t:
            fig.add_trace(t)
    fig.add_vline(x=70, line_dash="dash", line_color="#555")
    fig.update_layout(xaxis_title="R-factor (70 = toll quality)", yaxis_title="CDF")
    items.append(Item("voip-r-cdf", "R-factor per direction", "CDF of R per 5-s window, uplink (MN→CN) and downlink. "
                      "Seed 000 Fig. 4.6.", layout(fig)))
    fig = go.Figure()
    # The mobile runs: by their scenario (mobile, or a free label said mobile), or because they
    # have handoffs (a drive test imported under any label).
    moved = store.frame("""SELECT run_id FROM runs WHERE scenario = 'mobile' OR json_extract(config, '$.mobile') = 'true'
                           OR run_id IN (SELECT run_id FROM handoffs)""")["run_id"]
    mob = df.filter(pl.col("run_id").is_in(moved.to_list()))
    for label, g in (("all windows", mob), ("±5 s of a handoff", mob.filter(pl.col("near_handoff")))):
        t = cdf_trace(g["r"].to_numpy().astype(float), label, line_dash="solid" if label == "all windows" else "dash")
        if t:
            fig.add_trace(t)
    if fig.data:
        fig.update_layout(xaxis_title="R-factor", yaxis_title="CDF")
        items.append(Item("voip-r-handoff", "R-factor around handoffs (mobile)",
                          "CDF of R in windows within 5 s of a handoff vs all windows of the mobile runs (by "
                          "scenario, or with handoffs). "
                          "Seed 000 Fig. 4.7.", layout(fig)))
    return items


# -- Summary tables ------------------------------------------------------------------------------

def summary_table(store: Store) -> list[Item]:
    """Runs per network, scenario and test with their options and headline results (Table 4.1)."""
    df = store.frame(f"""
        WITH per_run AS (
            SELECT r.run_id, r.network, r.test, r.test_type, r.scenario, r.status, r.config,
                   -- the test's direction only (a downlink CBR test also has the probe's uplink hello)
                   median(f.goodput_bps) FILTER (WHERE f.role = 'data' AND f.direction = coalesce(
                       CASE r.direction WHEN 'up' THEN 'uplink' WHEN 'down' THEN 'downlink' END,
                       f.direction)) AS goodput,
                   avg(f.loss_rate) FILTER (WHERE f.role = 'data' AND f.proto = 'udp' AND f.direction = coalesce(
                       CASE r.direction WHEN 'up' THEN 'uplink' WHEN 'down' THEN 'downlink' END,
                       f.direction)) AS loss,
                   avg(f.loss_before_capture) FILTER (WHERE f.role = 'data' AND f.proto = 'udp' AND f.direction = coalesce(
                       CASE r.direction WHEN 'up' THEN 'uplink' WHEN 'down' THEN 'downlink' END,
                       f.direction)) AS loss_before
            FROM runs r LEFT JOIN flows f USING (run_id)
            GROUP BY r.run_id, r.network, r.test, r.test_type, r.scenario, r.status, r.config, r.direction)
        SELECT network, test, test_type, scenario, count(*)::BIGINT AS runs, sum((status = 'ok')::INT)::BIGINT AS ok,
               any_value(json_extract(config, '$.options.rate')::DOUBLE) AS rate,
               any_value(json_extract(config, '$.options.window')::BIGINT) AS window,
               any_value(json_extract_string(config, '$.options.codec')) AS codec,
               -- a simulated test's cell (its network is `simulated`)
               any_value(json_extract_string(config, '$.options.scheduler')) AS scheduler,
               any_value(json_extract(config, '$.options.channel')::VARCHAR[]) AS channel,
               any_value(json_extract_string(config, '$.options.tcp')) AS tcp,
               any_value(json_extract(config, '$.duration_s')::DOUBLE) AS duration,
               median(goodput) AS goodput, median(loss) AS loss, median(loss_before) AS loss_before
        FROM per_run GROUP BY network, test, test_type, scenario ORDER BY network, {natural("test")}, scenario DESC""")
    if df.height == 0:
        return []
    voip_r = store.frame("""SELECT r.network, r.scenario, median(v.r) AS r FROM voip_windows v JOIN runs r USING (run_id)
                            GROUP BY ALL""")
    rmap = {(n, s): r for n, s, r in voip_r.iter_rows()}
    rows = []
    for r in df.iter_rows(named=True):
        opts = ", ".join(o for o in (r["rate"] and f"rate {r['rate'] / 1e3:g} kb/s",
                                     r["window"] and f"window {r['window'] // 1024} KB", r["codec"]) if o)
        if r["test_type"] == "simulate":
            opts = ", ".join([(r["scheduler"] or "").upper(), *(r["channel"] or []), r["tcp"] or ""])
        res = []
        if r["goodput"] is not None:
            res.append(f"goodput {r['goodput'] / 1e3:.0f} kb/s")
        if r["loss"] is not None:
            # Loss the captures could not see (probe numbers missing at both) is part of it.
            before = "" if not r["loss_before"] else f" ({100 * r['loss_before']:.2f} % before the capture)"
            res.append(f"loss {100 * r['loss']:.2f} %{before}")
        if r["test_type"] == "voip" and (r["network"], r["scenario"]) in rmap:
            res.append(f"median R {rmap[(r['network'], r['scenario'])]:.1f}")
        cells = [r["network"], r["test"], r["scenario"], f"{r['ok']}/{r['runs']}",
                 f"{r['duration']:g} s" if r["duration"] is not None else "–",
                 opts or "–", "; ".join(res) or "–"]
        rows.append(cells)
    table = html_table(["network", "test", "scenario", "runs ok/all", "duration", "options", "median result"], rows,
                       name="summary")
    return [Item("summary", "Summary of the experiments", "Runs per network, scenario and test, with the test options "
                 "and median results over the runs. Seed 000 Table 4.1.", table_html=table)]


def channel_table(store: Store) -> list[Item]:
    df = store.frame("""
        SELECT r.network, r.scenario, count(*) AS runs, avg(c.mean_rate_bps) / 1e3 AS mean_kbps,
               avg(c.std_rate_bps) / 1e3 AS std_kbps, avg(c.modal_fraction) AS modal, avg(c.entropy_bits) AS entropy,
               avg(c.mean_sojourn_ms) AS sojourn, sum(c.handoffs)::BIGINT AS handoffs,
               sum(r.duration_s) AS seconds
        FROM channel_stats c JOIN runs r USING (run_id) WHERE r.status = 'ok' GROUP BY ALL ORDER BY 1, 2 DESC""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["runs"], f"{r['mean_kbps']:.0f}", f"{r['std_kbps']:.0f}", f"{r['modal']:.2f}",
             f"{r['entropy']:.2f}", f"{r['sojourn']:.0f}", r["handoffs"],
             f"{r['seconds'] / r['handoffs']:.1f}" if r["handoffs"] and r["seconds"] else "–"]
            for r in df.iter_rows(named=True)]
    table = html_table(["network", "scenario", "runs", "mean rate (kb/s)", "std", "modal fraction", "entropy (bits)",
                        "mean sojourn (ms)", "handoffs", "s per handoff"], rows, name="channel")
    return [Item("channel", "Radio channel and handoffs", "From the radio log's rate samples (docs/methods.md §7: modal "
                 "fraction, entropy, sojourn) and its serving-cell changes (§6).", table_html=table)]


def failed_table(store: Store) -> list[Item]:
    df = store.frame("SELECT run_id, reason FROM runs WHERE status = 'failed' ORDER BY run_id")
    if df.height == 0:
        return []
    return [Item("failed", f"Failed runs ({df.height})", "Recorded with their reason; `cellperf run` tries them again.",
                 table_html=html_table(["run", "reason"], [[a, b or ""] for a, b in df.iter_rows()], name="failed-runs",
                                       query="SELECT run_id, reason FROM runs WHERE status = 'failed' ORDER BY run_id"))]
