"""The TCP throughput boxes of networks a generation apart (issue 30's modern campaign)."""

from __future__ import annotations

import polars as pl

from cellperf.report import collect_items
from cellperf.store import RunRecord, Store
from tests.store.test_store import run_row


def test_tcp_boxes_of_networks_a_generation_apart_are_on_a_log_axis(tmp_path):
    # The modern campaign's report drew LTE's 3-4 Mb/s beside NR's 300 Mb/s on a linear axis:
    # LTE's boxes were a line at zero.
    with Store.open(tmp_path, create=True) as s:
        for network, kbps in (("lte", 4_000.0), ("nr", 300_000.0)):
            run_id = f"{network}-bulk"
            intervals = pl.DataFrame({"run_id": [run_id] * 3, "flow_id": [1] * 3, "direction": ["downlink"] * 3,
                                      "interval": [0, 1, 2], "bytes": [1000] * 3,
                                      "throughput_bps": [kbps * 1e3 * f for f in (0.9, 1.0, 1.1)]})
            row = run_row(run_id) | {"network": network, "test": "bulk", "test_type": "tcp-bulk",
                                     "scenario": "stationary", "config": {"interval_s": 5.0, "options": {}}}
            s.commit_run(RunRecord(row, {"intervals": intervals}))
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert items["tcp-box"].figure.layout.yaxis.type == "log"
