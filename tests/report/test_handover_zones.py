"""The report's handover zones (seed 004 §IV.B 2.1) from a store holding the zones of two runs
found by `cellperf.handoffs.zones` on crafted radio logs, one of them with a GPS track: exact
counts, shares and durations, the ping-pong zones listed with the last fix before each."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.handoffs import check_radio_log, detect_handoffs
from cellperf.handoffs.zones import handover_zones
from cellperf.report import handover_zones as report
from cellperf.store import RunRecord, Store

T0 = 1_700_000_000.0

#: run → radio log (time from the run's start, bs, sector, rsrp). Run a ping-pongs 1/1 ↔ 1/2
#: three times in 4 s, then crosses to 2/1; run b crosses once.
LOGS = {
    "a": [(0, "1", "1", -90), (10, "1", "2", -91), (12, "1", "1", -90), (14, "1", "2", -89), (40, "2", "1", -80)],
    "b": [(0, "7", "1", None), (5, "7", "2", None)],
}


def tables_of(run: str, start: float) -> dict[str, pl.DataFrame]:
    """The run's handoffs and zones as the campaign stores them."""
    log = LOGS[run]
    radio = check_radio_log(pl.DataFrame({"time_s": [start + t for t, *_ in log], "bs_id": [b for _, b, _, _ in log],
                                          "sector_id": [s for _, _, s, _ in log], "rsrp_dbm": [r for *_, r in log]},
                                         schema_overrides={"rsrp_dbm": pl.Float64}))
    handoffs = detect_handoffs(radio)
    return {"handoffs": handoffs.drop("from_technology", "to_technology", strict=False).with_columns(run_id=pl.lit(run)),
            "handover_zones": handover_zones(radio, handoffs).with_columns(run_id=pl.lit(run))}


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "store", create=True) as s:
        for k, run in enumerate(LOGS):
            start = T0 + 1000 * k
            tables = tables_of(run, start)
            if run == "a":
                tables["positions"] = pl.DataFrame({"run_id": ["a"] * 4, "time_s": [start + t for t in (0, 9, 11, 30)],
                                                    "lat": [36.30, 36.31, 36.32, 36.35],
                                                    "lon": [127.30, 127.31, 127.31, 127.35]})
            row = {"run_id": run, "network": "UMTS", "scenario": "pedestrian", "test": "udp-cbr",
                   "test_type": "udp-cbr", "repetition": k + 1, "config": {}, "config_sha256": "x", "status": "ok",
                   "started_at": datetime.fromtimestamp(start, timezone.utc)}
            s.commit_run(RunRecord(row, tables))
    with Store.open(tmp_path / "store", read_only=True) as s:
        yield s


def _cells(html: str) -> list[list[str]]:
    return [[c.split("<")[0] for c in row.split("<td>")[1:]] for row in html.split("<tr>")[2:]]


def test_zone_counts_ping_pong_list_and_figure(store):
    summary, pingpong, route, figure = report.handover_zone_items(store)
    # Handoffs: a 10, 12, 14 (one zone, 4 s), 40; b 5. Zones 3, one ping-pong holding 3 of 5.
    # Signal: a's zones changed it 1 dB (ping-pong) and 9 dB; b has none.
    assert _cells(summary.table_html) == [["UMTS", "pedestrian", "2", "5", "3", "1", "60.0", "4.0", "4.0", "2", "1"]]
    # The last fix at or before 10 s is the one at 9 s.
    assert _cells(pingpong.table_html) == [["UMTS", "pedestrian", "a", "1/1 ↔ 1/2", "10.0", "4.0", "3", "2", "1",
                                            "1.0", "36.31000, 127.31000"]]
    # 004 Fig. 2: 1/1 → 1/2 at 10 s (fix at 9 s) and 14 s (fix at 11 s), back at 12 s (11 s):
    # 0.005° of latitude apart, 556 m. 1/2 → 2/1 went one way only; run b has no positions.
    assert _cells(route.table_html) == [["UMTS", "1/1 ↔ 1/2", "2", "1", "36.31500, 127.31000", "36.32000, 127.31000",
                                         "556"]]
    assert figure.key == "zones-UMTS"
    bars, marks = figure.figure.data
    assert list(bars.x) == [10.0, 14.0, None] and list(bars.y) == ["a", "a", None]
    assert list(marks.y) == ["a", "a", None, "b", "b", None]
