"""A sweep's tests in the report in the order of their values (issue 28): `sparse-interval5`
before `sparse-interval15`, which text order puts the other way round ('1' < '5')."""

from __future__ import annotations

import re

import polars as pl

from cellperf.report.figures import summary_table
from cellperf.report.throughput_peaks import spread_table
from cellperf.store import RunRecord, Store
from tests.store.test_store import run_row

TESTS = ["sparse-interval15", "sparse-interval0_2", "sparse-interval5", "sparse-interval1"]
IN_ORDER = ["sparse-interval0_2", "sparse-interval1", "sparse-interval5", "sparse-interval15"]


def test_the_summary_and_spread_tables_order_a_sweep_by_its_values(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        s.commit_runs([RunRecord(run_row(f"lte.mobile.{t}.1") | {"network": "lte", "test": t, "test_type": "sparse"},
                                 {"flows": pl.DataFrame([{"run_id": f"lte.mobile.{t}.1", "flow_id": 1, "role": "data",
                                                          "proto": "udp", "direction": "downlink",
                                                          "interval_mean_bps": 1e3, "interval_std_bps": 1.0,
                                                          "interval_max_bps": 2e3}])}) for t in TESTS])
    with Store.open(tmp_path, read_only=True) as s:
        for item in (*summary_table(s), *spread_table(s)):
            assert re.findall(r"<td>(sparse-interval[0-9_]+)</td>", item.table_html) == IN_ORDER, item.key
