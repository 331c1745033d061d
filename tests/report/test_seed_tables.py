"""The report's tables of issue 32 on a store with crafted rows: seed 004's interval
throughput maximum beside mean and std (Table V), bursts after handoffs (§IV.B 2.2),
re-segmented resends (§V.B), IP fragmentation per link MTU (§II.A); seed 000's delay spikes
near and away from handoffs (ch. 5)."""

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


def test_fragmentation_per_link_mtu(tmp_path):
    from cellperf.report.fragmentation import fragmentation_table

    def run(run_id: str, link: list | None) -> dict:
        row = _run(run_id, False)
        row["config"] = {"interval_s": 1.0, **({"link": link} if link else {})}
        return row

    def flows(run_id: str, datagrams: int, fragments: int, incomplete: int) -> pl.DataFrame:
        return pl.DataFrame({"run_id": run_id, "flow_id": pl.Series([1], dtype=pl.UInt32), "role": "data",
                             "proto": "udp", "direction": "uplink", "frag_datagrams": datagrams,
                             "frag_fragments": fragments, "frag_incomplete": incomplete})

    with Store.open(tmp_path, create=True) as s:
        assert fragmentation_table(s) == []
        s.commit_run(RunRecord(run("plain.1", None), {"flows": flows("plain.1", 0, 0, 0)}))
        assert fragmentation_table(s) == [], "nothing fragmented, no MTU set: no table"
        s.commit_run(RunRecord(run("small.1", [["mtu", "576"], ["pmtu_discovery", "off"]]),
                               {"flows": flows("small.1", 40, 120, 3)}))
        (item,) = fragmentation_table(s)
        assert _cells(item.table_html) == [
            ["UMTS", "mobile", "tcp-up", "uplink", "1500 (default)", "on (default)", "1", "0", "–", "–"],
            ["UMTS", "mobile", "tcp-up", "uplink", "576", "off", "1", "40", "3.00", "7.50"]]


def test_delay_spikes_near_and_away(tmp_path):
    from cellperf.report.delay_spikes import spikes_tables

    start = [datetime.fromtimestamp(T0 + s, timezone.utc) for s in (3.0, 40.0, 80.0)]
    spikes = pl.DataFrame({"run_id": "voip.1", "flow_id": pl.Series([1, 1, 1], dtype=pl.UInt32),
                           "direction": "downlink", "start_ts": start, "duration_ms": [400.0, 5200.0, 300.0],
                           "packets": [20, 250, 15], "peak_ms": [450.0, 5100.0, 380.0],
                           "near_handoff": [True, False, False], "handoff_offset_s": [-1.0, 36.0, None]})
    with Store.open(tmp_path, create=True) as s:
        assert spikes_tables(s) == []
        s.commit_run(RunRecord(_run("voip.1", False), {"delay_spikes": spikes}))
        summary, away = spikes_tables(s)
    assert _cells(summary.table_html) == [["UMTS", "mobile", "tcp-up", "downlink", "1", "3", "1", "2", "450",
                                           "5100", "5200"]]
    # Away from handoffs, highest first; the run began at T0.
    assert _cells(away.table_html) == [
        ["UMTS", "mobile", "tcp-up", "voip.1", "downlink", "40.000", "5200", "250", "5100", "+36.0"],
        ["UMTS", "mobile", "tcp-up", "voip.1", "downlink", "80.000", "300", "15", "380", "no handoff"]]
