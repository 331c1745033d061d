"""The serving base station over time (seed 002 Fig. 7 right) on a store with crafted radio
logs: one step line per run that changed cells, the runs with most changes first, the points
where the cell changes (and the last sample) only."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.campaign.analyse import radio_samples
from cellperf.report import cells
from cellperf.store import RunRecord, Store

T0 = 1_700_000_000.0

#: (run, [(time from its start, bs, sector)]): run b flaps back once (3 changes), a moves on
#: twice, c never leaves its cell.
LOGS = {
    "a": [(0, "1", "1"), (1, "1", "1"), (2, "1", "2"), (3, "1", "2"), (4, "2", "1"), (5, "2", "1")],
    "b": [(0, "1", "1"), (1, "2", "1"), (2, "1", "1"), (3, "2", "1"), (4, "2", "1")],
    "c": [(0, "7", "1"), (1, "7", "1")],
}


def commit_radio_run(s: Store, run: str, k: int, radio: pl.DataFrame, **row) -> None:
    """Stores run `run` (the k-th, from 0) with `radio` as its radio samples; `row` sets its
    columns beyond a WiBro mobile udp-cbr run that started at the radio log's first time."""
    staging = s.staging_dir(run)
    radio_samples(radio, run).write_parquet(staging / "radio_samples.parquet")
    start = radio["time_s"].min()
    row = {"run_id": run, "network": "WiBro", "scenario": "mobile", "test": "udp-cbr", "test_type": "udp-cbr",
           "repetition": k + 1, "config": {}, "config_sha256": "x", "status": "ok",
           "started_at": datetime.fromtimestamp(start, timezone.utc)} | row
    s.commit_run(RunRecord(row, {}, staging_dir=staging))


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "store", create=True) as s:
        for k, (run, log) in enumerate(LOGS.items()):
            start = T0 + 100 * k
            commit_radio_run(s, run, k, pl.DataFrame({"time_s": [start + t for t, _, _ in log],
                                                      "bs_id": [b for _, b, _ in log],
                                                      "sector_id": [x for _, _, x in log]}))
    # Opened again, as the report opens it: the per-sample views cover the files there at open.
    with Store.open(tmp_path / "store", read_only=True) as s:
        yield s


def test_one_step_line_per_run_that_changed_cells_most_changes_first(store):
    (item,) = cells.serving_cells(store)
    assert item.key == "cells-WiBro"
    b, a = item.figure.data
    assert (b.name, a.name) == ("b", "a")
    # Only where the cell changes, and the last sample; time from each run's first sample.
    assert list(b.x) == [0, 1, 2, 3, 4] and list(b.y) == ["1/1", "2/1", "1/1", "2/1", "2/1"]
    assert list(a.x) == [0, 2, 4, 5] and list(a.y) == ["1/1", "1/2", "2/1", "2/1"]
    assert "(2 runs with the most cell changes, 3 at most)" in item.caption
    # Cells top to bottom in the order they first served anyone: 1/1 at 0 s, 2/1 at 1 s (b),
    # 1/2 at 2 s (a); plotly draws a category array bottom up.
    assert list(item.figure.layout.yaxis.categoryarray) == ["1/2", "2/1", "1/1"]


def test_a_big_campaign_keeps_the_runs_with_most_changes_and_says_how_many_it_left(store, monkeypatch):
    monkeypatch.setattr(cells, "MAX_LINES", 1)
    (item,) = cells.serving_cells(store)
    assert [t.name for t in item.figure.data] == ["b"]
    assert item.caption.endswith("Left out: 1 other run with cell changes.")
