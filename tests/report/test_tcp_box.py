"""The TCP throughput boxes of networks a generation apart (issue 30's modern campaign)."""

from __future__ import annotations

import polars as pl

from cellperf.report import collect_items
from cellperf.store import Store
from tests.report.test_studies_report import _tcp
from tests.report.test_tcp_tests import _commit


def test_tcp_boxes_of_networks_a_generation_apart_are_on_a_log_axis(tmp_path):
    # The modern campaign's report drew LTE's 3-4 Mb/s beside NR's 300 Mb/s on a linear axis:
    # LTE's boxes were a line at zero.
    with Store.open(tmp_path, create=True) as s:
        for network, kbps in (("lte", 4_000.0), ("nr", 300_000.0)):
            _commit(s, f"{network}-bulk", "tcp-bulk", network=network, direction="down", result={"direction": "down"},
                    flows=[_tcp(1, "downlink", kbps * 1e3)], kbps={(1, "downlink"): [kbps * f for f in (0.9, 1.0, 1.1)]})
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert items["tcp-box"].figure.layout.yaxis.type == "log"
