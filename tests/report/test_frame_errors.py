"""The frame error rate (seed 002 Fig. 9 left) on a store with crafted radio logs: exact
frames, errors and FERs per network, scenario and profile, each run's FER per second and the
overall mean in the figure; runs without frame counts add nothing."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.report import frame_errors
from cellperf.store import RunRecord, Store
from tests.report.test_cells import commit_radio_run

T0 = 1_700_000_000.0

#: run → (network, profile, [(time from its start, frames, frame_errors)]); None: a handoff row.
LOGS = {
    # 0.5 s samples: second 0 holds 0 + 10 frames (1 error), second 1: 20 frames (3 errors).
    "a": ("EV-DO", "evdo-mobile", [(0, 0, 0), (0.5, 10, 1), (0.7, None, None), (1.0, 10, 2), (1.5, 10, 1)]),
    "b": ("EV-DO", "evdo-mobile", [(0, 0, 0), (0.5, 40, 0), (1.0, 40, 0)]),
    "c": ("WiBro", "wibro-mobile", [(0, 0, 0), (0.5, 0, 0)]),
}


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "store", create=True) as s:
        for k, (run, (network, profile, log)) in enumerate(LOGS.items()):
            start = T0 + 100 * k
            radio = pl.DataFrame({"time_s": [start + t for t, _, _ in log], "bs_id": ["1"] * len(log),
                                  "frames": [f for _, f, _ in log], "frame_errors": [e for _, _, e in log]},
                                 schema_overrides={"frames": pl.Int64, "frame_errors": pl.Int64})
            commit_radio_run(s, run, k, radio, network=network, profile=profile)
    with Store.open(tmp_path / "store", read_only=True) as s:
        yield s


def test_frames_errors_and_fer_per_network_and_per_run(store):
    table, evdo = frame_errors.frame_error_rates(store)
    assert table.key == "fer-table"
    cells = [[c.split("<")[0] for c in row.split("<td>")[1:]] for row in table.table_html.split("<tr>")[2:]]
    # EV-DO: a 30 frames / 4 errors, b 80 / 0: pooled 4/110; runs 0 and 13.333 %. WiBro sent none.
    assert cells == [["EV-DO", "mobile", "evdo-mobile", "2", "110", "4", "3.636", "0.000", "6.667", "13.333"],
                     ["WiBro", "mobile", "wibro-mobile", "1", "0", "0", "–", "–", "–", "–"]]
    assert evdo.key == "fer-EV-DO"
    b, a = evdo.figure.data  # most frames first
    assert (b.name, a.name) == ("b", "a")
    assert list(a.x) == [0.0, 1.0] and list(a.y) == pytest.approx([10.0, 15.0])
    assert list(b.x) == [0.0, 1.0] and list(b.y) == [0.0, 0.0]
    (mean,) = evdo.figure.layout.shapes
    assert mean.y0 == pytest.approx(100 * 4 / 110)


def test_a_store_whose_radio_logs_have_no_frame_counts_has_no_fer_items(tmp_path):
    with Store.open(tmp_path / "store", create=True) as s:
        staging = s.staging_dir("x")
        radio = pl.DataFrame({"time_s": [T0, T0 + 1], "bs_id": ["1", "2"]})
        # A radio log written before frame counts existed: the dataset has no such columns.
        radio.with_columns(run_id=pl.lit("x")).write_parquet(staging / "radio_samples.parquet")
        s.commit_run(RunRecord({"run_id": "x", "network": "n", "scenario": "s", "test": "t", "test_type": "udp-cbr",
                                "repetition": 1, "config": {}, "config_sha256": "x", "status": "ok",
                                "started_at": datetime.fromtimestamp(T0, timezone.utc)}, {}, staging_dir=staging))
    with Store.open(tmp_path / "store", read_only=True) as s:
        assert frame_errors.frame_error_rates(s) == []
