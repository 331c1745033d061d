"""Round trip and loss per hop of the path (seed 003 slides 9-10, "RTT by the hop": mtr from a
WiBro laptop), from the store's `hop_rtt` rows of `hops` runs (`cellperf hops`, docs/methods.md §2)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from cellperf.report.item import Item, layout
from cellperf.report.tables import html_table
from cellperf.store import Store

SQL = """
    SELECT r.network, r.scenario, h.*
    FROM hop_rtt h JOIN runs r USING (run_id)
    WHERE r.status = 'ok' ORDER BY r.network, r.scenario, h.ttl"""


def _f(x, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def hop_rtt(store: Store) -> list[Item]:
    df = store.frame(SQL)
    if df.height == 0:
        return []
    agg = (df.group_by("network", "scenario", "ttl", maintain_order=True)
           .agg(runs=pl.col("run_id").n_unique(),
                responder=pl.col("responder").drop_nulls().mode().sort().first(),
                addresses=pl.col("responder").drop_nulls().n_unique(), reached=pl.col("reached").any(),
                sent=pl.col("sent").sum(), answered=pl.col("answered").sum(),
                min=pl.col("rtt_min_ms").min(), q1=pl.col("rtt_q1_ms").median(), median=pl.col("rtt_median_ms").median(),
                q3=pl.col("rtt_q3_ms").median(), p95=pl.col("rtt_p95_ms").max(), max=pl.col("rtt_max_ms").max()))
    rows = [[r["network"], r["scenario"], r["ttl"], (r["responder"] or "???") + (" (target)" if r["reached"] else "")
             + (f" +{r['addresses'] - 1}" if r["addresses"] > 1 else ""), r["runs"], r["sent"],
             f"{100 * (1 - r['answered'] / r['sent']):.1f}" if r["sent"] else "-",
             _f(r["min"]), _f(r["median"]), _f(r["p95"]), _f(r["max"])] for r in agg.iter_rows(named=True)]
    caption = ("Per hop of the path (TTL 1 up to the target), from `hops` runs: UDP probes with TTL 1, 2, ... from "
               "the MN, each router answering ICMP time exceeded and the target port unreachable, one probe per hop "
               "a round (as mtr; docs/methods.md §2). Loss = probes without an answer (a router's ICMP rate limit "
               "counts too); RTT over the answered probes: least over the runs, median of the runs' medians, the "
               "largest p95 and max; ??? = no answer. On the emulated testbed TTL 1 expires in the emulated link, which "
               "answers nothing (a silent hop, as a radio network that tunnels the MN's packets to its gateway), "
               "and the CN answers TTL 2. Per run: SELECT * FROM hop_rtt. Seed 003 slides 9-10.")
    table = html_table(["network", "scenario", "TTL", "address", "runs", "probes", "loss %", "min ms", "median ms",
                        "max p95 ms", "max ms"], rows, name="hop-rtt", query=SQL)
    fig = go.Figure()
    for (network, scenario), d in agg.group_by("network", "scenario", maintain_order=True):
        d = d.filter(pl.col("median").is_not_null())
        if d.height:
            fig.add_trace(go.Box(x=d["ttl"].to_list(), q1=d["q1"].to_list(), median=d["median"].to_list(),
                                 q3=d["q3"].to_list(), lowerfence=d["min"].to_list(), upperfence=d["p95"].to_list(),
                                 name=f"{network} {scenario}"))
    # Every hop on the axis: one that never answered is a gap, marked as mtr marks it.
    for ttl in agg.group_by("ttl").agg(pl.col("median").is_null().all().alias("silent")).filter("silent")["ttl"]:
        fig.add_annotation(x=ttl, y=0, yref="paper", text="???", showarrow=False, yanchor="bottom")
    fig.update_layout(boxmode="group", xaxis=dict(title="hop (TTL)", dtick=1, range=[0.5, agg["ttl"].max() + 0.5]),
                      yaxis_title="RTT (ms)", showlegend=True)
    return [Item("hop-rtt", "Round trip and loss per hop", caption, table_html=table),
            Item("hop-rtt-figure", "RTT by the hop", caption + " Boxes: quartiles (medians over the runs), "
                 "whiskers from the least RTT to the largest p95.", layout(fig))]


SECTIONS = (("Path hops", (hop_rtt,)),)
