"""The least one-way delay shows both hosts' clock states beside it (seed 003 slides 11-12): the
MN's and the CN's from each run's `clock_sync`, and "not read" for runs stored before the CN's
state was recorded."""

from __future__ import annotations

import polars as pl

from cellperf.report.min_owd import min_owd_table
from cellperf.store import RunRecord, Store
from tests.store.test_store import run_row

MN = "chrony: GPS stratum 1, offset 0.001 ms, error ≤ 0.020 ms, Normal"
CN = "chrony: PPS stratum 1, offset -0.000 ms, error ≤ 0.010 ms, Normal"


def _commit(s: Store, run_id: str, scenario: str, clock_sync: dict) -> None:
    owd = pl.DataFrame({"run_id": [run_id], "direction": ["uplink"], "min_ms": [100.4], "raw_min_ms": [101.0],
                        "kind": ["offset_corrected"], "offset_ms": [0.6], "uncertainty_ms": [0.25]})
    row = run_row(run_id) | {"test": "min-delay", "test_type": "min-delay", "scenario": scenario,
                             "network": "WiBro", "clock_sync": clock_sync}
    s.commit_run(RunRecord(row, {"min_owd": owd}))


def test_both_hosts_clock_states_beside_the_least_one_way_delay(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        _commit(s, "now", "mobile", {"summary": MN, "cn": {"summary": CN}})
        _commit(s, "before", "stationary", {"summary": MN})
    with Store.open(tmp_path, read_only=True) as s:
        (item,) = min_owd_table(s)
    head = item.table_html.split("</thead>")[0]
    assert head.endswith("<th>MN clock</th><th>CN clock</th></tr>")
    rows = item.table_html.split("<tr>")[2:]
    assert rows[0].startswith("<td>WiBro</td><td>mobile</td>")
    assert f"<td>100.40 ± 0.250</td>" in rows[0] and rows[0].endswith(f"<td>{MN}</td><td>{CN}</td></tr>")
    assert rows[1].startswith("<td>WiBro</td><td>stationary</td>")
    assert rows[1].endswith(f"<td>{MN}</td><td>not read</td></tr></tbody></table>")
