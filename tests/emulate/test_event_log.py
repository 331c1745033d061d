"""`cellperf emulate --uplink-log/--downlink-log`: mahimahi-format event logs of a real run,
checked against the trace that drove the link and against the emulator's own captures."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tests.emulate.conftest import emulate, ip_fields, read_event_log, read_pcap

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("nothing_left_behind")]


def _trace(path) -> np.ndarray:
    """A 1-s mahimahi trace with 0, 1 or 2 opportunities per millisecond (12 Mb/s on average)."""
    times = np.repeat(np.arange(1, 1001), np.arange(1, 1001) % 3)
    path.write_text("\n".join(map(str, times)) + "\n")
    return times


def _bytes_from(records, src: str) -> tuple[int, int]:
    """Packets and bytes of the records sent by `src`."""
    sizes = [len(p) for _, p in records if ip_fields(p)[1] == src]
    return len(sizes), sum(sizes)


def test_event_logs_follow_the_trace_and_the_captures(tmp_path, iperf3_server):
    trace = _trace(tmp_path / "down.trace")
    srv = iperf3_server()
    down_log, up_log = tmp_path / "down.log", tmp_path / "up.log"
    # A 20 Mb/s UDP flood into a 12 Mb/s downlink with a 30-packet queue: arrivals, drops,
    # departures; the uplink carries iperf3's control connection. The link is idle for the last
    # 0.5 s (connections closed), so every packet is accounted for when the run ends.
    p = emulate("--downlink", str(tmp_path / "down.trace"), "--uplink", "5mbit", "--queue", "packets=30",
                "--pcap-dir", str(tmp_path), "--downlink-log", str(down_log), "--uplink-log", str(up_log), "--json", "--",
                "sh", "-c", f"iperf3 -c $CELLPERF_CN -p {srv.port} -u -R -b 20M -l 1400 -t 3 --logfile {tmp_path}/iperf3.txt"
                "&& sleep 0.5")
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout.strip().splitlines()[-1])
    mn_addr, cn_addr = stats["mn_addrs"][0], stats["cn_addrs"][0]
    header, down = read_event_log(down_log)
    assert header["base timestamp"] == "0" and header["queue"] == "droptail [packets=30]"
    kinds = down.group_by("event").agg(pl.len().alias("n"), pl.col("a").sum(), pl.col("b").sum())
    n = {r["event"]: r for r in kinds.iter_rows(named=True)}
    assert set(n) == {"#", "+", "-", "d"}, n

    # Opportunities: exactly the trace's times, looped, from time 0 to the end of the run.
    opportunities = down.filter(pl.col("event") == "#")
    expected = np.concatenate([trace + 1000 * k for k in range(20)])
    expected = expected[expected <= down["t"].max()]
    assert np.array_equal(opportunities["t"].to_numpy(), expected)
    assert (opportunities["a"] == 1500).all()
    # Departures only at an opportunity, never more bytes than offered so far, FIFO delays
    # pointing back at arrival times.
    departures = down.filter(pl.col("event") == "-")
    t_dep = departures["t"].to_numpy()
    assert np.isin(t_dep, expected).all()
    offered_by = np.searchsorted(expected, t_dep, side="right") * 1500
    assert (np.cumsum(departures["a"].to_numpy()) <= offered_by).all()
    arrivals = down.filter(pl.col("event") == "+")
    assert (departures["b"] >= 0).all() and np.isin(t_dep - departures["b"].to_numpy(), arrivals["t"].to_numpy()).all()
    # Every arrival is a drop or a departure (the queue is empty at the end), and the log agrees
    # with the captures and the statistics to the byte: arrivals = what the CN side sent into
    # the link, departures = what the MN side received.
    drops = down.filter(pl.col("event") == "d")
    assert n["+"]["n"] == drops["a"].sum() + n["-"]["n"]
    assert n["+"]["a"] == drops["b"].sum() + n["-"]["a"]
    mn, cn = read_pcap(tmp_path / "mn.pcap"), read_pcap(tmp_path / "cn.pcap")
    assert _bytes_from(cn, cn_addr) == (n["+"]["n"], n["+"]["a"]) == (stats["downlink"]["packets_in"], stats["downlink"]["bytes_in"])
    assert _bytes_from(mn, cn_addr) == (n["-"]["n"], n["-"]["a"]) == (stats["downlink"]["packets_out"], stats["downlink"]["bytes_out"])
    assert drops["a"].sum() == stats["downlink"]["dropped_packets"] > 1000
    # The log's clock is the captures' clock: a packet reaches the MN's capture when it
    # departs (no delay configured), within the release error and the log's 1 ms resolution.
    init_s = int(header["init timestamp"]) / 1000
    delivered = np.array([t for t, pkt in mn if ip_fields(pkt)[1] == cn_addr])
    lag = delivered - (init_s + t_dep / 1000)
    assert lag.min() > -0.0005 and np.median(lag) < 0.002, (lag.min(), np.median(lag))

    # The uplink: a constant 5 Mb/s (625 bytes per ms) cut into millisecond opportunities.
    _, up = read_event_log(up_log)
    up_opportunities = up.filter(pl.col("event") == "#")
    per_ms = up_opportunities.group_by("t", maintain_order=True).agg(pl.col("a").sum())
    assert (per_ms["t"] == np.arange(per_ms.height)).all() and (per_ms["a"].head(-1) == 625).all()
    # The log covers the run: its opportunities go on to the end (the link was idle at the end),
    # within the last wake-up of the link's thread (a busy CI host's stall: 15 ms seen).
    assert per_ms.height / 1000 > stats["duration_s"] - 0.1
    up_departed = up.filter(pl.col("event") == "-")
    assert _bytes_from(cn, mn_addr) == (up_departed.height, up_departed["a"].sum())


def test_event_logs_need_one_user(tmp_path):
    p = emulate("--users", "2", "--downlink", "1mbit", "--uplink", "1mbit", "--downlink-log", str(tmp_path / "d.log"), "--", "true")
    assert p.returncode == 1 and p.stderr.strip() == "cellperf: error: --downlink-log: a mahimahi event log describes one link; it needs --users 1"
    p = emulate("--downlink", "1mbit", "--uplink", "1mbit", "--uplink-log", str(tmp_path / "no" / "u.log"), "--", "true")
    assert p.returncode == 1 and p.stderr.strip() == f"cellperf: error: --uplink-log: folder {tmp_path / 'no'} does not exist"
    assert not (tmp_path / "d.log").exists()
