"""The TCP studies' metrics (docs/methods.md §12) through `cellperf analyze --mn --cn` on crafted
captures whose every delay is known: TCP excess and raw one-way delay per flow and per
interval, channel utilisation from a radio log, concurrent flows' shares and Jain's index,
and the list of a UDP stream's gaps and delay periods."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.analysis.pcapcraft import Pcap, TcpRun, udp_packet
from tests.conftest import cellperf, cellperf_json

#: One-way delays (s) of the ten 1000-byte segments, sent 10 ms apart from t = 1.0 s.
DELAYS = [0.050, 0.060, 0.055, 0.080, 0.050, 0.070, 0.065, 0.050, 0.090, 0.060]
SKEW = 3.0  # the CN's clock runs 3 s ahead of the MN's


def _bulk(r: TcpRun, seg: int) -> None:
    for i, d in enumerate(DELAYS):
        t = 1.0 + i / 100
        r.data(t, 1 + seg * i, seg, t + d)
        r.ack(t + d + 0.001, 1 + seg * (i + 1), t + d + 0.040)


@pytest.fixture
def two_flows(tmp_path):
    """Two downlink connections with the same timing: 1000-byte and 500-byte segments."""
    a = TcpRun(skew=SKEW)
    _bulk(a, 1000)
    b = TcpRun(skew=SKEW, ports=(81, 40001), into=a)
    _bulk(b, 500)
    return a.write(tmp_path)


def _flow(rep: dict, sport: int) -> dict:
    return next(f for f in rep["flows"] if f["sport"] == sport)


def test_tcp_excess_one_way_delay_is_exact(two_flows):
    mn, cn = two_flows
    f = _flow(cellperf_json("analyze", "--mn", mn, "--cn", cn), 80)
    o = f["owd_ms"]
    excess = np.array(DELAYS) * 1e3 - 50.0  # the 3-s clock offset cancels
    assert o["kind"] == "excess" and o["samples"] == 10
    assert o["mean"] == pytest.approx(excess.mean(), abs=1e-6)  # 13 ms
    assert o["std"] == pytest.approx(excess.std(), abs=1e-6)
    assert (o["min"], o["max"]) == (pytest.approx(0.0, abs=1e-6), pytest.approx(40.0, abs=1e-6))
    assert o["median"] == pytest.approx(np.percentile(excess, 50), abs=1e-6)
    assert o["p95"] == pytest.approx(np.percentile(excess, 95), abs=1e-6)


def test_synced_clocks_give_raw_delay_and_intervals_hold_each_mean(two_flows, tmp_path):
    mn, cn = two_flows
    out = tmp_path / "out"
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn, "--synced-clocks", "--interval", "0.05", "--out", out)
    o = _flow(rep, 80)["owd_ms"]
    raw = np.array(DELAYS) * 1e3 - SKEW * 1e3  # on the MN's clock minus the CN's (3 s ahead)
    assert o["kind"] == "raw"
    assert o["mean"] == pytest.approx(raw.mean(), abs=1e-6)
    assert o["std"] == pytest.approx(raw.std(), abs=1e-6)
    # Each interval's mean of the segments that arrived in it (the series starts at the
    # flow's first packet at the MN, the first arrival at 1.05 s).
    arrive = 1.0 + np.arange(10) / 100 + np.array(DELAYS)
    bins = ((arrive - arrive.min()) // 0.05 + 1e-9).astype(int)
    fid = _flow(rep, 80)["flow_id"]
    iv = pl.read_parquet(out / "intervals.parquet").filter(pl.col("flow_id") == fid).sort("interval")
    for k in range(bins.max() + 1):
        want = raw[bins == k].mean() if (bins == k).any() else None
        got = iv["owd_mean_ms"][k]
        assert (got is None) if want is None else got == pytest.approx(want, abs=1e-6)


def test_one_capture_gives_no_tcp_owd(two_flows):
    mn, _ = two_flows
    assert _flow(cellperf_json("analyze", mn, "--side", "mn"), 80)["owd_ms"] is None


def test_concurrent_shares_and_jain_index(two_flows):
    mn, cn = two_flows
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn)
    (c,) = rep["concurrent"]
    assert c["direction"] == "downlink"
    # Same lifetimes, half the bytes: goodputs 2:1, shares 2/3 and 1/3, Jain 2.25 / 2.5.
    by_flow = dict(zip(c["flows"], c["shares"]))
    assert by_flow[_flow(rep, 80)["flow_id"]] == pytest.approx(2 / 3)
    assert by_flow[_flow(rep, 81)["flow_id"]] == pytest.approx(1 / 3)
    assert c["jain"] == pytest.approx(0.9)


def test_channel_utilisation_from_the_radio_log(two_flows, tmp_path):
    mn, cn = two_flows
    radio = tmp_path / "radio.csv"
    # 2 Mbit/s while the flows run (1.0-1.2 s at the MN), 100 Mbit/s long after: only the
    # samples over the flow's lifetime count.
    rows = [f"{t / 10:.1f},1,1,LTE,{2_000_000 if t < 30 else 100_000_000}" for t in range(0, 60)]
    radio.write_text("time_s,bs_id,sector_id,technology,rate_bps\n" + "\n".join(rows) + "\n")
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn, "--radio-log", radio)
    for sport in (80, 81):
        f = _flow(rep, sport)
        assert f["channel"]["mean_capacity_bps"] == pytest.approx(2e6)
        assert f["channel"]["capacity_std_bps"] == pytest.approx(0.0, abs=1e-6)
        assert f["channel"]["utilisation"] == pytest.approx(f["goodput_bps"] / 2e6)
    # Goodput over the lifetime at the MN: 10,000 bytes from the first to the last packet.
    f = _flow(rep, 80)
    assert f["goodput_bps"] == pytest.approx(10_000 * 8 / (f["end_s"] - f["start_s"]), rel=1e-9)


def test_capacity_mean_and_std_are_weighted_by_the_time_each_sample_covers():
    from cellperf.studies import capacity_stats

    # Samples at 0..3 s: rate 1 covers (0, 1], 2 covers (1, 2], 4 covers (2, 3]. Over [0.5, 3]
    # they weigh 0.5, 1, 1: mean 6.5 / 2.5 = 2.6; variance (0.5·1.6² + 0.6² + 1.4²) / 2.5 = 1.44.
    times, rates = np.array([0.0, 1.0, 2.0, 3.0]), np.array([9.0, 1.0, 2.0, 4.0])
    mean, std = capacity_stats(times, rates, 0.5, 3.0)
    assert (mean, std) == (pytest.approx(2.6), pytest.approx(1.2))
    assert capacity_stats(times, rates, 3.5, 4.0) is None


def test_radio_log_without_rates_is_one_line(two_flows, tmp_path):
    mn, cn = two_flows
    radio = tmp_path / "ids.csv"
    radio.write_text("time_s,bs_id,sector_id\n1.0,1,1\n")
    p = cellperf("analyze", "--mn", mn, "--cn", cn, "--radio-log", radio, check=False)
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0 and "rate_bps" in p.stderr and "ids.csv" in p.stderr


def test_each_gap_and_delay_period_is_listed(tmp_path):
    """A 10-packet stream every 100 ms: #3 and #4 lost (one gap), #7 held 700 ms (a delay
    period of at least 5 sending intervals)."""
    mn, cn = Pcap(), Pcap()
    arrivals = {}
    for i in range(10):
        t = 1.0 + i / 10
        pkt = udp_packet("10.0.0.2", 5000, "192.0.2.7", 6000, bytes([i]) * 100, ip_id=i + 1, ttl=64)
        mn.add(t, pkt)
        if i in (3, 4):
            continue
        arrivals[i] = t + 0.05 + (0.6 if i == 7 else 0)
        cn.add(arrivals[i] + SKEW, udp_packet("10.0.0.2", 5000, "192.0.2.7", 6000, bytes([i]) * 100, ip_id=i + 1,
                                              ttl=60))
    cn.records.sort(key=lambda r: r[0])
    out = tmp_path / "out"
    cellperf_json("analyze", "--mn", mn.write(tmp_path / "mn.pcap"), "--cn", cn.write(tmp_path / "cn.pcap"),
                  "--out", out)
    g = pl.read_parquet(out / "gaps.parquet")
    assert g["kind"].to_list() == ["gap", "delay_period"]
    assert g["lost"].to_list() == [2, 0]
    # The gap runs from #2's arrival to #5's; the delay period from #6's to #7's.
    assert g["duration_ms"].to_list() == pytest.approx([(arrivals[5] - arrivals[2]) * 1e3,
                                                        (arrivals[7] - arrivals[6]) * 1e3], abs=1e-3)
    start = g["start_ts"].dt.epoch("ns").to_numpy() / 1e9
    assert start == pytest.approx([arrivals[2] + SKEW, arrivals[6] + SKEW], abs=1e-6)


def test_a_connections_lesser_direction_is_no_competitor():
    from cellperf.studies import concurrent_summary

    def flow(fid, direction, goodput):
        return {"flow_id": fid, "proto": "tcp", "direction": direction, "goodput_bps": goodput,
                "tcp": {"unique_bytes": 1000}}

    # Two downloads, each with the probe's hello up its connection: one competition (down),
    # not a second one between the two hellos.
    rep = {"flows": [flow(1, "downlink", 3e6), flow(1, "uplink", 30.0), flow(2, "downlink", 1e6),
                     flow(2, "uplink", 40.0)]}
    (c,) = concurrent_summary(rep)
    assert (c["direction"], c["flows"], c["shares"]) == ("downlink", [1, 2], [0.75, 0.25])
    assert c["jain"] == pytest.approx(0.8)
