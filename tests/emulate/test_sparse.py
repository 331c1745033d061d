"""Sparse traffic through the real emulator (issue 33): a lone packet on a quiet link is
delayed as configured, not held for a timer tick, a batch or an idle thread's late wake-up."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from tests.emulate.conftest import emulate

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("nothing_left_behind")]


def _ping_times(p) -> list[float]:
    return [float(t) for t in re.findall(r"time=([0-9.]+) ms", p.stdout)]


def test_lone_pings_leave_at_their_due_time():
    # The path outside the delay (thread wake-ups, TUN writes, the echo reply) is this host's:
    # 0.15-0.5 ms on one VM, 0.9-1.1 ms on another whose idle vCPUs wake slowly. Measured
    # first, with no delay, so the bound below is on what the delay element adds.
    floor = emulate("--downlink", "10gbit", "--uplink", "10gbit", "--json", "--",
                    "ping", "-c", "20", "-i", "0.2", "$CELLPERF_CN")
    assert floor.returncode == 0, floor.stderr
    outside = statistics.median(_ping_times(floor))
    p = emulate("--downlink", "10gbit", "--uplink", "10gbit", "--delay", "5", "--json", "--",
                "ping", "-c", "20", "-i", "0.2", "$CELLPERF_CN")
    assert p.returncode == 0, p.stderr
    times = _ping_times(p)
    stats = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(times) == 20 and min(times) >= 10.0, times
    # RTT = 2 × 5 ms plus the path outside the delay. A packet held for a tick or a batch, or
    # released by an idle thread waking late, adds to the median.
    assert statistics.median(times) < outside + 10.6, (outside, times)
    # Each packet is its own due time here: the release error is how late the thread wrote
    # it. It wakes 100 µs before each deadline and polls (the emulator's plan_wait), so the
    # median is about the write's own time (9-13 µs at load average 17); a thread woken by its
    # timer at the deadline is late by its wake-up as well (median 34-51 µs at load 17, more
    # on an idle VM, whose halted vCPUs wake slowly). On a second VM (28 Nov 2026) the same
    # code's medians were 28-103 µs, the code before it alike: the bound is what every host
    # seen so far gives, far below a timer tick or a batch (1 ms and more).
    for direction in ("uplink", "downlink"):
        st = stats[direction]
        assert st["due_instants"] == 20, st
        assert st["release_error_us"][0] <= 200, st
