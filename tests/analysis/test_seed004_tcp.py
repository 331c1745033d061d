"""Seed 004's TCP figures on crafted captures whose every event is known: resends that
re-segment the data (§V.B 2.2: merged over two originals, or one original split in two), and
the interval series' maximum beside its mean and standard deviation (Table V)."""

from __future__ import annotations

import math

import pytest

from tests.analysis.pcapcraft import TcpRun
from tests.conftest import cellperf_json


@pytest.fixture
def resent(tmp_path):
    """Four 100-byte segments; the last three lost; a timeout resends the first two of them as
    one 200-byte segment, the last one as two of 50 bytes."""
    r = TcpRun(skew=2.0)
    for i in range(4):
        r.data(0.01 * i, 1 + 100 * i, 100, 0.05 if i == 0 else None)
    r.ack(0.051, 101, 0.10)
    r.data(0.50, 101, 200, 0.55)  # merged: 101..301 were two segments
    r.ack(0.551, 301, 0.60)
    r.data(0.90, 301, 50, 0.95)  # split: 301..401 was one segment
    r.data(0.91, 351, 50, 0.96)
    r.ack(0.961, 401, 1.00)
    (tmp_path / "c").mkdir()
    return r.write(tmp_path / "c")


def test_merged_and_split_resends_are_counted_two_sided(resent):
    mn, cn = resent
    (f,) = cellperf_json("analyze", "--mn", mn, "--cn", cn)["flows"]
    rx = f["retransmissions"]
    assert rx["method"] == "two-sided"
    assert (rx["total"], rx["normal"], rx["merged"], rx["split"]) == (3, 3, 1, 2)


def test_merged_and_split_resends_at_either_capture_alone(resent):
    mn, cn = resent
    rx = cellperf_json("analyze", cn, "--side", "cn")["flows"][0]["retransmissions"]
    assert (rx["method"], rx["total"], rx["merged"], rx["split"]) == ("one-sided", 3, 1, 2)
    # The receiver never saw the lost first copies: there the resends are new data.
    rx = cellperf_json("analyze", mn, "--side", "mn")["flows"][0]["retransmissions"]
    assert (rx["total"], rx["merged"], rx["split"]) == (0, 0, 0)


def test_interval_series_has_max_beside_mean_and_std(tmp_path):
    """1-s intervals from the first arrival: 1000, 3000, 2000 bytes, then a partial one."""
    r = TcpRun(skew=0.5)
    seq = 1
    for t, n in ((0.0, 1000), (1.1, 1000), (1.2, 1000), (1.3, 1000), (2.5, 1000), (2.6, 1000), (3.5, 100)):
        r.data(t - 0.02, seq, n, t)
        seq += n
        r.ack(t + 0.001, seq, t + 0.02)
    (tmp_path / "c").mkdir()
    mn, cn = r.write(tmp_path / "c")
    (f,) = cellperf_json("analyze", "--mn", mn, "--cn", cn, "--interval", "1")["flows"]
    spread = f["series"]["throughput_spread"]
    assert spread["mean"] == pytest.approx(16_000)
    assert spread["std"] == pytest.approx(8_000 * math.sqrt(2 / 3))
    assert spread["max"] == pytest.approx(24_000)
