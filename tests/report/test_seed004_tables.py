"""The report's seed-004 tables on a store with crafted rows: interval throughput's maximum
beside mean and std (Table V), bursts after handoffs (§IV.B 2.2), re-segmented resends (§V.B)."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.report.resegmented import resegmented_table
from cellperf.report.throughput_peaks import bursts_table, spread_table
from cellperf.store import RunRecord, Store

T0 = 1_700_000_000.0


def _run(run_id: str, timestamps: bool) -> dict:
    return {"run_id": run_id, "network": "UMTS", "scenario": "mobile", "test": "tcp-up", "test_type": "tcp-bulk",
            "direction": "up", "repetition": 1, "config": {"interval_s": 1.0, "options": {"timestamps": timestamps}},
            "config_sha256": "x", "status": "ok", "started_at": datetime.fromtimestamp(T0, timezone.utc)}


def _flows(run_id: str, mean: float, std: float, peak: float, total: int, merged: int, split: int) -> pl.DataFrame:
    return pl.DataFrame({"run_id": run_id, "flow_id": pl.Series([1], dtype=pl.UInt32), "role": "data", "proto": "tcp",
                         "direction": "uplink", "interval_mean_bps": mean, "interval_std_bps": std,
                         "interval_max_bps": peak, "retx_total": total, "retx_merged": merged, "retx_split": split})


def _bursts(run_id: str, peaks: list[float], flow_bps: float) -> pl.DataFrame:
    n = len(peaks)
    return pl.DataFrame({"run_id": run_id, "flow_id": pl.Series([1] * n, dtype=pl.UInt32), "direction": "uplink",
                         "handoff_s": [T0 + 10 * k for k in range(n)], "window_s": 5.0, "bin_s": 0.2,
                         "peak_bps": peaks, "flow_bps": flow_bps, "peak_ratio": [p / flow_bps for p in peaks]})


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        s.commit_run(RunRecord(_run("ts.1", True), {"flows": _flows("ts.1", 59_000, 1_000, 60_000, 30, 0, 12),
                                                     "handoff_bursts": _bursts("ts.1", [200_000, 100_000], 50_000)}))
        s.commit_run(RunRecord(_run("nots.1", False), {"flows": _flows("nots.1", 61_000, 3_000, 70_000, 8, 1, 0),
                                                       "handoff_bursts": _bursts("nots.1", [300_000], 50_000)}))
        yield s


def _cells(table_html: str) -> list[list[str]]:
    rows = table_html.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    return [[c.split("</td>")[0] for c in r.split("<td>")[1:]] for r in rows]


def test_spread_has_the_largest_interval_beside_the_means(store):
    (item,) = spread_table(store)
    # Two flows: mean of the means and of the stds, the maximum of the maxima.
    assert _cells(item.table_html) == [["UMTS", "mobile", "tcp-up", "uplink", "2", "60.0", "2.0", "70.0"]]


def test_bursts_after_handoffs(store):
    (item,) = bursts_table(store)
    # Three flow × handoff rows: peaks 100, 200, 300 kb/s over a 50-kb/s flow.
    assert _cells(item.table_html) == [["UMTS", "mobile", "tcp-up", "uplink", "3", "50.0", "200.0", "300.0",
                                        "4.00", "6.00"]]
    assert "200-ms bins" in item.caption


def test_resegmented_resends_per_timestamps_setting(store):
    (item,) = resegmented_table(store)
    assert _cells(item.table_html) == [["UMTS", "mobile", "tcp-up", "false", "1", "8", "1", "0", "12.5"],
                                       ["UMTS", "mobile", "tcp-up", "true", "1", "30", "0", "12", "40.0"]]


def test_nothing_to_show_gives_no_items(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        assert spread_table(s) == bursts_table(s) == resegmented_table(s) == []
