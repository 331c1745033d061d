"""What a campaign's run costs beyond its test (issue 34, docs/campaigns.md): each run's phases
stored, a TCP test's duration what it says with its drain apart and bounded, no clock
exchange on the emulated testbed, a capture command taken as started once its pcap header is
written (not after a fixed second), the progress's ETA and `run --check`'s planned wall time."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest

from cellperf.campaign import load_campaign
from cellperf.campaign.progress import Progress, planned_wall_s
from cellperf.campaign.testbed import PCAP_HEADER_BYTES, RealTestbed
from cellperf.store import Store
from tests.conftest import cellperf, cellperf_json

def short_tests(profile: str = "umts", seconds: float = 2, repetitions: int = 1, parallel: int = 1) -> str:
    """A campaign of a UDP CBR and a TCP bulk download of `seconds` on `profile` (also
    bench/campaign.py's)."""
    return f"""[campaign]
name = "overhead"
duration = {seconds}
interval = 1
repetitions = {repetitions}
parallel = {parallel}

[[networks]]
name = "{profile.upper()}"
profile = "{profile}"

[[tests]]
type = "udp-cbr"
direction = "down"
rate = "200k"

[[tests]]
type = "tcp-bulk"
direction = "down"
"""


UMTS = short_tests()


@pytest.mark.netns
def test_runs_store_their_phases_overlap_a_drain_and_a_tcp_test_lasts_its_duration(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text(UMTS)
    summary = cellperf_json("run", spec, "--out", tmp_path / "out")
    assert summary["runs_done"] == 2, summary
    commits = {r["run_id"]: r["phases"]["commit"] for r in summary["runs"]}
    with Store.open(tmp_path / "out", read_only=True) as s:
        runs = {r["run_id"]: r for r in s.frame("SELECT run_id, phases, result, started_at, ended_at FROM runs").to_dicts()}
    for run_id, r in runs.items():
        phases = json.loads(r["phases"])
        assert list(phases) == ["link_up", "test", "drain", "teardown", "radio_log", "analysis"], phases
        assert all(v >= 0 for v in phases.values()) and commits[run_id] >= 0
        # The emulator's four phases are the run's time on the testbed, as the runner timed it.
        on_testbed = (r["ended_at"] - r["started_at"]) / timedelta(seconds=1)
        assert sum(phases[p] for p in ("link_up", "test", "drain", "teardown")) == pytest.approx(on_testbed, abs=0.05)
        assert phases["test"] >= 2.0
        result = json.loads(r["result"])
        assert result["clock_offset"] is None  # both ends on the host's clock: no exchange
    # The TCP run's link came up while the UDP run's link still drained and went down.
    udp_run, tcp_run = runs["UMTS.stationary.udp-cbr-down.1"], runs["UMTS.stationary.tcp-bulk-down.1"]
    assert tcp_run["started_at"] < udp_run["ended_at"], (tcp_run["started_at"], udp_run["ended_at"])
    tcp = json.loads(tcp_run["result"])
    # 384 kb/s with a 64-KB queue: the download goes on after its 2 s (it went on 4.5 s before).
    assert tcp["duration_s"] <= 2.0
    assert 0 < tcp["drain_s"] <= 1.0 + 0.15 and tcp["drain_bytes"] > 0
    assert tcp["throughput_bps"] == pytest.approx((tcp["bytes_received"] - tcp["drain_bytes"]) * 8 / tcp["duration_s"])
    # Issue 34: the second run's probe proved the token in its first message with the ticket
    # the first run's was given (the control messages are JSON in clear in the MN's capture).
    first_messages = {run_id: [(tmp_path / "out/runs" / run_id / "mn.pcap").read_bytes().count(b'{"type":"%s"' % t)
                               for t in (b"hello", b"resume")] for run_id in runs}
    assert first_messages == {udp_run["run_id"]: [1, 0], tcp_run["run_id"]: [0, 1]}, first_messages


def test_a_capture_command_is_started_once_its_pcap_header_is_written(tmp_path):
    # The command writes its header after 1.5 s (ssh and a remote tcpdump take their time):
    # the run must not start before the capture does.
    (tmp_path / "token").write_text("x" * 32 + "\n")
    (tmp_path / "c.toml").write_text(f"""[campaign]
name = "real"
duration = 1

[testbed]
kind = "real"
server = "127.0.0.1:5250"
token_file = "token"
cn_capture = "sh -c 'sleep 1.5; head -c {PCAP_HEADER_BYTES} /dev/zero; exec sleep 60'"

[[networks]]
name = "lte"

[[tests]]
type = "voip"
""")
    testbed = RealTestbed(load_campaign(tmp_path / "c.toml"), tmp_path)
    folder = tmp_path / "run"
    folder.mkdir()
    procs = testbed._start_captures(folder, ["127.0.0.1"])
    try:
        assert (folder / "cn.pcap").stat().st_size == PCAP_HEADER_BYTES
    finally:
        testbed._stop_captures(procs)


def test_the_eta_is_the_planned_time_left_scaled_by_what_runs_took():
    runs = [SimpleNamespace(run_id=f"r{k}", planned_s=10.0) for k in range(5)]
    p = Progress(runs, slots=2)
    assert p.eta_s() == pytest.approx(25.0, abs=0.1)  # nothing measured yet: the plan
    for r, seconds in ((runs[0], 15.0), (runs[1], 15.0)):
        p.started(r)
        p.finished(r, SimpleNamespace(status="ok", seconds=seconds))
    p.started(runs[2])
    p.finished(runs[2], SimpleNamespace(status="failed", seconds=15.0))
    # Runs took 1.5x their plan: 2 runs left, 10 s planned each, on 2 slots.
    assert (p.done, p.failed, p.left) == (2, 1, 2)
    assert p.eta_s() == pytest.approx(2 * 10.0 * 1.5 / 2, abs=0.1)
    p.started(runs[3])
    time.sleep(0.2)
    assert p.eta_s() < 15.0  # a running run's time spent is no longer left
    assert planned_wall_s(runs, 2) == 25.0


def test_check_prints_the_planned_wall_time_with_the_overhead(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text(short_tests(repetitions=30, parallel=2))
    campaign = load_campaign(spec)
    expected = sum(r.planned_s for r in campaign.runs) / 2
    assert expected > 60 * 2  # more than the tests alone: 60 runs of 2 s, 2 at a time
    text = cellperf("run", spec, "--check").stdout
    h, m, s = map(int, re.search(r"planned wall time: (\d+):(\d\d):(\d\d) with set-up and analysis, 2 run", text).groups())
    assert h * 3600 + m * 60 + s == round(expected)
    with_workers = cellperf_json("run", spec, "--check", "--workers", "4")["planned_wall_s"]
    assert with_workers == pytest.approx(expected / 2)

