"""The report's Radio states section (issue 30 §3) from a crafted sparse run: the delay of the
first packet after idle against the idle, and the delay periods labelled promotions."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import polars as pl
import pytest

from cellperf.report import collect_items
from cellperf.store import RunRecord, Store, write_parquet
from tests.store.test_store import T0, run_row

#: Intervals of a sparse stream (s) and each packet's one-way delay: after 15 s of idle the
#: packet waited LTE's 260-ms promotion.
INTERVALS = [0.2] * 5 + [1.0] * 3 + [5.0] * 2 + [15.0] * 2
OWD_S = [0.02] * 10 + [0.28] * 2


def _sparse_store(root) -> None:
    send = T0 + np.concatenate([[0.0], np.cumsum(INTERVALS)])
    owd = np.array([0.02, *OWD_S])
    ts = lambda secs: pl.Series(np.round(secs * 1e9).astype(np.int64)).cast(pl.Datetime("ns", "UTC"))
    n = send.size
    with Store.open(root, create=True) as s:
        staging = s.staging_dir("sp")
        write_parquet(pl.DataFrame({
            "flow_id": pl.Series([1] * n, dtype=pl.UInt32), "seq": pl.Series(np.arange(n), dtype=pl.UInt64),
            "send_ts": ts(send), "recv_ts": ts(send + owd), "bytes": pl.Series([1460] * n, dtype=pl.UInt32),
            "lost": [False] * n, "owd_ms": owd * 1e3, "jitter_ms": [0.0] * n, "direction": ["downlink"] * n,
            "run_id": ["sp"] * n}), staging / "udp_packets.parquet")
        gaps = pl.DataFrame({"run_id": ["sp"], "flow_id": [1], "direction": ["downlink"], "kind": ["promotion"],
                             "start_ts": [datetime.fromtimestamp(send[-2] + owd[-2], timezone.utc)],
                             "duration_ms": [15_000.0], "lost": [0]})
        row = run_row("sp") | {"network": "lte", "test": "sparse", "test_type": "sparse", "scenario": "stationary",
                               "config": {"interval_s": 5.0, "options": {}}}
        s.commit_run(RunRecord(row, {"gaps": gaps}, staging_dir=staging))


def test_first_packet_after_idle_and_the_promotions(tmp_path):
    _sparse_store(tmp_path)
    with Store.open(tmp_path, read_only=True) as s:
        sections = dict(collect_items(s))
    items = {i.key: i for i in sections["Radio states"]}
    (trace,) = items["first-packet-after-idle"].figure.data
    assert trace.name == "lte stationary downlink"
    # Idle = interval less the previous packet's 20-ms delay: 0.18, 0.98, 4.98 s; 14.98 and (after
    # the promoted packet) 14.72 s share a bin (median 14.85).
    assert list(trace.y) == pytest.approx([20.0, 20.0, 20.0, 280.0])
    assert list(trace.x) == pytest.approx([0.18, 0.98, 4.98, 14.85])
    table = items["delay-after-idle"].table_html
    assert "<td>lte</td><td>stationary</td><td>downlink</td><td>20.0 (5)</td><td>20.0 (3)</td><td>20.0 (2)</td>" \
           "<td>280.0 (2)</td>" in table
    assert "<td>lte</td><td>stationary</td><td>downlink</td><td>1</td><td>15000</td>" in table
    gaps = {i.key: i for i in sections["Path studies"]}["gaps-table"].table_html
    assert "<td>promotion</td><td>lte</td>" in gaps



def test_page_loads_after_idle_against_the_least_idle(tmp_path):
    """Two loads of cnn after 0 s and two after 15 s of idle, one failed load and one without
    `idle` (neither counted): medians per idle and the difference from the least idle."""
    loads = pl.DataFrame({
        "run_id": ["web"] * 6, "page": ["cnn"] * 6, "load": [0, 1, 0, 1, 2, 0], "status": ["ok"] * 4 + ["failed", "ok"],
        "cache": ["cold"] * 6, "idle_s": [0.0, 0.0, 15.0, 15.0, 15.0, None],
        "load_ms": [900.0, 1000.0, 1300.0, 1500.0, None, 50.0], "ttfb_ms": [120.0, 130.0, 400.0, 420.0, None, 5.0],
        "connections": [6] * 6, "http": ["1.1"] * 6, "compression": [False] * 6, "objects": [70] * 6,
        "bytes": [200_000] * 6})
    with Store.open(tmp_path, create=True) as s:
        row = run_row("web") | {"network": "lte", "test": "web", "test_type": "web", "scenario": "stationary"}
        s.commit_run(RunRecord(row, {"page_loads": loads}, staging_dir=s.staging_dir("web")))
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for i in dict(collect_items(s))["Radio states"]}
    table = items["page-loads-after-idle"].table_html
    assert "<td>lte</td><td>stationary</td><td>cnn</td><td>cold</td><td>0</td><td>2</td><td>950</td><td>125</td>" \
           "<td>–</td>" in table
    assert "<td>15</td><td>2</td><td>1400</td><td>410</td><td>+450</td>" in table
    assert table.count("<td>cnn</td>") == 2
