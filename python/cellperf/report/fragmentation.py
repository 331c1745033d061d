"""The report's IP fragmentation table (seed 004 §II.A: the link MTU and path-MTU discovery as
settings, and what fragmentation they cause): per test, link MTU and path-MTU setting, the
data flows' fragmented datagrams at their receivers, fragments per datagram, and the share
that could not be reassembled (docs/methods.md §3)."""

from __future__ import annotations

import json

import polars as pl

from cellperf.report.item import Item
from cellperf.report.tables import html_table
from cellperf.store import Store


def _link_settings(store: Store) -> pl.DataFrame:
    """run_id → the link's MTU and path-MTU discovery as the run's `[networks.link]` set
    them ("1500 (default)", "on (default)" otherwise)."""
    rows = []
    for run_id, config in store.con.execute("SELECT run_id, config FROM runs WHERE status = 'ok'").fetchall():
        link = dict((json.loads(config) if isinstance(config, str) else config or {}).get("link") or [])
        rows.append({"run_id": run_id, "mtu": str(link.get("mtu", "1500 (default)")),
                     "pmtu": str(link.get("pmtu_discovery", "on (default)"))})
    return pl.DataFrame(rows, schema={"run_id": pl.String, "mtu": pl.String, "pmtu": pl.String})


def fragmentation_table(store: Store) -> list[Item]:
    flows = store.frame("""
        SELECT r.run_id, r.network, r.scenario, r.test, f.direction, f.frag_datagrams, f.frag_fragments,
               f.frag_incomplete
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.role = 'data' AND f.frag_datagrams IS NOT NULL""")
    if flows.height == 0:
        return []
    df = flows.join(_link_settings(store), on="run_id")
    shown = df.group_by("network", "scenario", "test", "mtu").agg(
        (pl.col("frag_datagrams").sum() > 0).alias("any"))
    if not (shown["any"].any() or (shown["mtu"] != "1500 (default)").any()):
        return []
    agg = df.group_by("network", "scenario", "test", "direction", "mtu", "pmtu").agg(
        flows=pl.len(), datagrams=pl.col("frag_datagrams").sum(), fragments=pl.col("frag_fragments").sum(),
        incomplete=pl.col("frag_incomplete").sum()).sort("network", "scenario", "test", "direction", "mtu", "pmtu")
    rows = [[r["network"], r["scenario"], r["test"], r["direction"], r["mtu"], r["pmtu"], r["flows"], r["datagrams"],
             f"{r['fragments'] / r['datagrams']:.2f}" if r["datagrams"] else "–",
             f"{100 * r['incomplete'] / r['datagrams']:.2f}" if r["datagrams"] else "–"]
            for r in agg.iter_rows(named=True)]
    return [Item("ip-fragmentation", "IP fragmentation",
                 "Fragmented datagrams of the data flows at their receivers' captures, per link MTU and path-MTU "
                 "discovery setting (`[networks.link] mtu`, `pmtu_discovery`): fragments per datagram, and the share "
                 "not reassembled (a fragment lost, and with it the whole datagram; 004 §II.A).",
                 table_html=html_table(["network", "scenario", "test", "direction", "link MTU", "PMTU discovery",
                                        "flows", "fragmented datagrams", "fragments/datagram", "not reassembled %"],
                                       rows, name="ip-fragmentation"))]


SECTIONS = (("IP fragmentation", (fragmentation_table,)),)
