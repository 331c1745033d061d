"""Real pings through `cellperf emulate --replay` in network namespaces (issue 29): the round
trip is the crafted bundle's uplink + downlink base delay in `full` mode, and the smallest
recorded base delays in `heavy` mode (mahimahi's fixed minimum)."""

from __future__ import annotations

import re
import statistics

import pytest

from tests.emulate.conftest import emulate
from tests.replay.crafted import write_bundle

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("nothing_left_behind")]


def pings(bundle, mode: str) -> list[float]:
    p = emulate("--replay", str(bundle), "--replay-mode", mode, "--", "ping", "-c", "8", "-i", "0.2", "$CELLPERF_CN")
    assert p.returncode == 0, p.stderr
    times = [float(t) for t in re.findall(r"time=([0-9.]+) ms", p.stdout)]
    assert len(times) == 8, p.stdout
    return times


def test_pings_see_the_recorded_base_delays(tmp_path):
    # Downlink 30 ms, uplink 20 ms; the last downlink train (at 9.8 s) recorded 10 ms, so the
    # series' minimum is 10 ms while the first 1.6 s replay 30 ms.
    bundle = write_bundle(tmp_path / "b", low_down_base_ms=10.0)
    full = pings(bundle, "full")
    # A lone 84-byte echo takes its train's first opportunity at once: RTT = 20 + 30 ms plus
    # the offset of its size (below 100 bytes: 0) and the path outside the link (< 1 ms here;
    # a busy CI host's stalls: the margin, 1.65 ms seen), well below the 60 ms of a ping that
    # met the first train's 30 ms both ways.
    assert min(full) >= 50.0 and statistics.median(full) < 53.0, full
    heavy = pings(bundle, "heavy")
    # heavy: the next 1-ms opportunity (0-1 ms each way) + 20 + 10 ms.
    assert min(heavy) >= 30.0 and statistics.median(heavy) < 34.5, heavy


def test_a_bad_series_stops_the_run_in_one_line_naming_file_and_line(tmp_path):
    # The check before the namespaces reads the bundle's manifest and opens its files; the
    # link's build parses the series, once, and a fault in them ends the run with the parse's
    # own line (the namespaces removed: `nothing_left_behind`).
    b = write_bundle(tmp_path / "b", {"downlink.heavy": "1\n2\nx\n10\n"})
    p = emulate("--replay", str(b), "--", "true")
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr == f"cellperf: error: {b}/downlink.heavy: line 3: time (ms) is not a whole number ≥ 0\n"


def test_a_fault_deep_in_the_heavy_series_ends_the_run_once_the_replay_reaches_it(tmp_path):
    # 40 opportunities a ms for 10 s; line 200,000 (5 s in, 1.2 MB into the file) is not a
    # whole number. The build parses the first 64 KB and reads the last line: the command
    # starts; the replay parses on as it plays (5 s ahead of itself), reaches the line within
    # a few seconds of pings, and the run ends with the parse's own line, exit 1, the
    # command ended (fewer than its 100 replies), the namespaces removed. Before (the whole
    # series parsed at the build) the command never started.
    heavy = [f"{t // 40 + 1}\n" for t in range(400_000)]
    heavy[199_999] = "5000.5\n"
    b = write_bundle(tmp_path / "b", {"downlink.heavy": "".join(heavy)})
    p = emulate("--replay", str(b), "--", "sh", "-c", "echo started; ping -n -i 0.2 -c 100 $CELLPERF_CN")
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("started\n") and p.stdout.count("bytes from") < 100, p.stdout
    assert p.stderr == (f"cellperf: error: the emulator stopped: {b}/downlink.heavy: line 200000: "
                        "time (ms) is not a whole number ≥ 0\n")
