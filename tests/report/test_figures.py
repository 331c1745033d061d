"""Where the report draws things, on a store with crafted rows (no testbed needed): every
interval and VoIP window at its centre, runs laid end to end, handoff lines at their time."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.report.figures import udp_throughput, voip
from cellperf.store import RunRecord, Store

T0 = 1_700_000_000.0
INTERVAL_S = 2.0


def _ts(seconds: list[float]) -> pl.Series:
    return pl.Series([datetime.fromtimestamp(T0 + s, timezone.utc) for s in seconds]).dt.cast_time_unit("us")


def _run(run_id: str, test_type: str, repetition: int, started: float) -> dict:
    return {"run_id": run_id, "network": "WiBro", "scenario": "mobile", "test": test_type, "test_type": test_type,
            "direction": "down" if test_type == "udp-cbr" else None, "repetition": repetition,
            "config": {"interval_s": INTERVAL_S}, "config_sha256": "x", "status": "ok",
            "started_at": datetime.fromtimestamp(T0 + started, timezone.utc)}


@pytest.fixture
def store(tmp_path):
    """Two CBR runs of three 2-s intervals each, starting 1 s and 0.5 s after their runs
    began; a VoIP run with three 2-s windows; a handoff 3.2 s into the first CBR run."""
    with Store.open(tmp_path, create=True) as s:
        for rep, run_start, first in ((1, 0.0, 1.0), (2, 100.0, 100.5)):
            starts = [first + k * INTERVAL_S for k in range(3)]
            intervals = pl.DataFrame({
                "run_id": f"cbr.{rep}", "flow_id": pl.Series([1, 1, 1], dtype=pl.UInt32), "direction": "downlink",
                "interval": pl.Series([0, 1, 2], dtype=pl.UInt32), "start_ts": _ts(starts),
                "throughput_bps": [1e6, 2e6, 3e6]})
            tables = {"intervals": intervals}
            if rep == 1:
                tables["handoffs"] = pl.DataFrame({"run_id": ["cbr.1"], "time_s": [T0 + 3.2], "kind": ["inter-BS"]})
            s.commit_run(RunRecord(_run(f"cbr.{rep}", "udp-cbr", rep, run_start), tables))
        windows = pl.DataFrame({
            "run_id": "voip.1", "direction": "down", "window": [0, 1, 2],
            "window_start": _ts([200.0, 202.0, 204.0]), "window_end": _ts([202.0, 204.0, 205.0]),
            "mean_delay_ms": [50.0, 60.0, 70.0], "loss": [0.0, 0.0, 0.1], "r": [90.0, 89.0, 80.0],
            "delay_kind": "half_rtt", "status": "ok", "near_handoff": False})
        s.commit_run(RunRecord(_run("voip.1", "voip", 1, 199.0), {"voip_windows": windows}))
        yield s


def test_interval_points_are_at_the_interval_centre_runs_end_to_end(store):
    series = next(i for i in udp_throughput(store) if i.key == "udp-series").figure
    (trace,) = series.data
    # Run 1: intervals [1, 3), [3, 5), [5, 7) s after its start → centres 2, 4, 6; it ends at 7 s.
    # Run 2: intervals [0.5, 2.5), ... after its start, placed after run 1 → 7 + 1.5, 3.5, 5.5.
    assert list(trace.x) == pytest.approx([2.0, 4.0, 6.0, 8.5, 10.5, 12.5])
    assert list(trace.y) == pytest.approx([1e3, 2e3, 3e3] * 2)
    # The handoff at 3.2 s lies inside the second interval's span, [3, 5).
    (line,) = [s for s in series.layout.shapes if s.type == "line"]
    assert line.x0 == pytest.approx(3.2) and line.line.dash == "solid"


def test_voip_points_are_at_the_window_centre(store):
    fig = next(i for i in voip(store) if i.key == "voip-series-WiBro").figure
    delay = fig.data[0]
    # Windows [1, 3), [3, 5), [5, 6) s after the run's start: centres 2, 4 and 5.5 (a short last window).
    assert list(delay.x) == pytest.approx([2.0, 4.0, 5.5])
    assert list(delay.y) == [50.0, 60.0, 70.0]
