"""The web section (004 Tables VI-VII, Fig. 8) from page_loads rows committed to a store."""

from __future__ import annotations

import polars as pl

from cellperf.report import collect_items
from cellperf.store import RunRecord, Store
from tests.store.test_store import run_row


def _loads(run_id: str, compression: bool) -> pl.DataFrame:
    rows = []
    for conn, ms in ((2, 20000.0), (10, 11400.0)):
        rows.append({"run_id": run_id, "page": "cnn", "load": 0, "connections": conn, "compression": compression,
                     "http": "1.1", "cache": "cold", "status": "ok", "load_ms": ms * (0.9 if compression else 1),
                     "ttfb_ms": 600.0, "objects": 70, "bytes": 178_100 if not compression else 140_000})
    rows.append({"run_id": run_id, "page": "yahoo", "load": 0, "connections": 2, "compression": compression,
                 "http": "1.1", "cache": "cold", "status": "failed", "reason": "net::ERR_CONNECTION_RESET"})
    return pl.DataFrame(rows, infer_schema_length=None)


def test_web_tables_and_connections_figure(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        for run_id, comp in (("w1", False), ("w2", True)):
            s.commit_run(RunRecord(run_row(run_id) | {"test": "web", "test_type": "web", "config": {"duration_s": 60}}, {"page_loads": _loads(run_id, comp)}))
        assert s.frame("SELECT count(*) AS n FROM page_loads")["n"][0] == 6
        items = {i.key: i for _, its in collect_items(s) for i in its}
    times = items["web-times"].table_html
    # cnn at 2 connections: 20.0 s and 178.1 kB → 71.2 kb/s; with gzip 18.0 s and 62.2 kb/s.
    assert "<td>20.0</td><td>71.2</td><td>18.0</td><td>62.2</td>" in times
    fig = items["web-connections"].figure
    assert sorted(list(t.x) for t in fig.data) == [[2, 10], [2, 10]]
    assert "ERR_CONNECTION_RESET" in items["web-failed"].table_html and "2)" in items["web-failed"].title
