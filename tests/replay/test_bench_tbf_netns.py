"""bench/replay.py's tbf + veth live path (issue 29 §4): the base delay comes from the
`cellperf emulate` link in series, and tbf's buffer holds a back-to-back train as long as
the recorder's (a shallower one dropped the train's tail, which the recording took for the
link's own loss and `full` replayed onto every workload)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.netns

BENCH = Path(__file__).resolve().parents[2] / "bench" / "replay.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_replay", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tbf_path_has_its_drawn_delay_and_holds_a_100_packet_train(tmp_path):
    bench = load_bench()
    token = tmp_path / "token"
    token.write_text("t\n")
    with bench.tbf_link(1, (47501, 47502, 47503), token, tmp_path) as (live, (server_at, _, _), drawn):
        cn = server_at.split(":")[0]
        # 100 echo requests of 1,428 bytes back to back, as the recorder's 100-packet trains
        # go: 143 KB, 250 ms of the seed's 4.55-Mb/s uplink; a 100-ms buffer dropped 57.
        p = subprocess.run([*live(), "ping", "-n", "-q", "-s", "1400", "-l", "100", "-c", "100", "-W", "3", cn],
                           capture_output=True, text=True, timeout=60)
        # Then the idle round trip: the emulator's delay each way, over the tbf path's µs.
        idle = subprocess.run([*live(), "ping", "-n", "-c", "5", "-i", "0.2", cn],
                              capture_output=True, text=True, timeout=60)
    assert "100 received" in p.stdout, p.stdout + p.stderr
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", idle.stdout)]
    assert len(rtts) == 5, idle.stdout + idle.stderr
    # The delay is the code's own (2 x 24.1 ms); the margin is for a busy host's scheduling.
    assert 2 * drawn["delay_ms"] <= min(rtts) < 2 * drawn["delay_ms"] + 20, rtts
