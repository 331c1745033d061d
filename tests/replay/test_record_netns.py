"""`cellperf record` through a `cellperf emulate` link: the bundle holds the link's delay and
rates."""

from __future__ import annotations

import json
import re
import signal
import subprocess

import numpy as np
import pytest

from tests.agents.conftest import CELLPERF, TOKEN

pytestmark = pytest.mark.netns


def _series(path):
    return [l.split() for l in path.read_text().splitlines() if l and not l.startswith("#")]


def _record(tmp_path, link: list[str], *options: str) -> tuple[subprocess.CompletedProcess, object]:
    """`cellperf record` through `cellperf emulate LINK` against a server on this host: the
    finished process and the bundle's path."""
    token = tmp_path / "token"
    token.write_bytes(TOKEN + b"\n")
    server = subprocess.Popen([*CELLPERF, "server", "--listen", "0.0.0.0:0", "--token-file", str(token), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = tmp_path / "rec"
    try:
        port = json.loads(server.stdout.readline())["listening"].rsplit(":", 1)[1]
        p = subprocess.run([*CELLPERF, "emulate", *link, "--",
                            *CELLPERF, "record", f"$CELLPERF_CN:{port}", "--token-file", str(token), *options,
                            "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)
    return p, out


def test_record_through_the_emulator_gives_its_delay_and_rates(tmp_path):
    p, out = _record(tmp_path, ["--downlink", "10mbit", "--uplink", "5mbit", "--delay", "20"],
                     "--duration", "9.5", "--label", "network=emulated")
    assert p.returncode == 0, p.stderr
    said = " ".join(p.stderr.split())  # warnings wrap to the terminal
    assert "warning: uplink trains of 100 take 22" in said and "downlink trains" not in said, p.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert (m["format"], m["version"], m["complete"], m["directions"]) == ("cellperf-recording", 1, True,
                                                                            ["downlink", "uplink"])
    assert m["clock"]["method"] == "synced" and m["labels"] == {"network": "emulated"}
    assert m["train_lengths"] == [10, 100] and m["train_period_ms"] == 200.0 and 8 <= m["duration_s"] < 20
    for direction, mbit in (("downlink", 10), ("uplink", 5)):
        light = _series(out / f"{direction}.light")
        # The sizes phase's lone packets (one test of 3.5 s, one every 50 ms, the smallest size
        # between each two others) are the series' first base delay samples: the base
        # delay (20 ms and a 128-byte packet's transmission) from the recording's first
        # second, not from the first train's.
        lone = [l for l in light if len(l) == 3]
        assert 55 <= len(lone) <= 70 and float(lone[0][0]) < 1500, (len(lone), lone[:1])
        assert abs(np.median([float(l[1]) for l in lone]) - (20 + 128 * 8 / (mbit * 1e3))) < 1.0, direction
        # Then 4 s of trains, one every 200 ms; on the 5-Mb/s uplink a 100-packet train takes
        # 228 ms to arrive, so the 10-packet train after each queues behind its tail (the
        # recorder warns) and is left out: its delay is the recorder's own queue.
        light = [l for l in light if len(l) > 3]
        assert (18 <= len(light) <= 21) if mbit == 10 else (9 <= len(light) <= 12), (direction, len(light))
        # (the phase's first train, a 10-packet one, queues behind nothing)
        assert mbit == 10 or sum(len(l) == 12 for l in light) <= 1, direction
        # Base delay: 20 ms plus the smallest recorded packet's transmission (128 B: 0.10 ms at
        # 10 Mb/s, 0.20 at 5; the trains' 1428-byte packets' offset taken off): the median, and
        # three trains in four within 3 ms (a busy host's stalls delay a few by tens of ms; the
        # old recorder's uplink 10-packet trains, half of them, said 48 ms).
        long = [l for l in light if len(l) == 102]
        serialise = 1428 * 8 / (mbit * 1e3)
        bases = np.array([float(l[1]) for l in light]) - (20 + 128 * 8 / (mbit * 1e3))
        assert abs(np.median(bases)) < 1.0 and np.percentile(np.abs(bases), 75) < 3.0, (direction, bases)
        # A back-to-back train arrives at the link's rate: 99 packets after the first in 99 × serialise.
        assert abs(np.median([float(l[-1]) for l in long]) - 99 * serialise) < 0.1 * 99 * serialise
        heavy = np.array([int(l[0]) for l in _series(out / f"{direction}.heavy")])
        # The heavy trace spans the recording at the link's rate (1500-byte opportunities).
        rate = len(heavy) * 1500 * 8 / (heavy[-1] - heavy[0]) / 1e3
        assert abs(rate - mbit) < 0.1 * mbit, (direction, rate)
        offsets = _series(out / f"{direction}.offset")
        assert [int(s) for s, _ in offsets] == [128, 428, 828, 1428]
        # Larger packets take longer to send: 1300 more bytes is 1.04 ms at 10 Mb/s, 2.08 at 5.
        assert abs(float(offsets[-1][1]) - 1300 * 8 / (mbit * 1e3)) < 0.5, offsets
        loss = _series(out / f"{direction}.loss")
        assert loss and all(int(lost) == 0 for _, _, lost in loss)
    assert _series(out / "outages") == []
    check = subprocess.run([*CELLPERF, "record", "--check", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    # And replayed: a ping's round trip is the two directions' base delays, as through the live
    # link (20 + 20 ms and its 84-byte packets' transmission), not the trains' 1428-byte packets'
    # (+1.1 and +2.3 ms): the least, which a busy CI host's stalls do not raise, and the median
    # with their margin (42.4 ms seen).
    ping = subprocess.run([*CELLPERF, "emulate", "--replay", str(out), "--", "ping", "-c", "10", "-i", "0.2",
                           "$CELLPERF_CN"], capture_output=True, text=True, timeout=60)
    assert ping.returncode == 0, ping.stderr
    rtt = sorted(float(v) for v in re.findall(r"time=([0-9.]+) ms", ping.stdout))
    assert len(rtt) == 10 and 40.0 <= rtt[0] <= 42.0 and rtt[5] <= 44.0, rtt



def test_size_offsets_are_the_serialisation_under_a_wandering_base_delay(tmp_path):
    """A link whose base delay wanders (sd 2 ms, tau 3 s, seeded) at fixed rates: a lone
    packet's extra delay over a 128-byte one is its transmission time alone (1,428 bytes: 1.04
    ms at 10 Mb/s, 2.08 at 5). Measured size by size in 0.5-s blocks, the offsets took the
    wander between the blocks: 2.6 and 2.9 ms at 828 and 1,428 bytes down, 1.6-1.9 ms at 428
    up (two runs; now within 0.17 ms of the transmission time)."""
    p, out = _record(tmp_path, ["--downlink", "10mbit", "--uplink", "5mbit", "--delay", "20",
                                "--delay-wander", "sd=2ms,tau=3s", "--seed", "3"], "--duration", "6")
    assert p.returncode == 0, p.stderr
    for direction, mbit in (("downlink", 10), ("uplink", 5)):
        offsets = _series(out / f"{direction}.offset")
        assert [int(s) for s, _ in offsets] == [128, 428, 828, 1428]
        got = np.array([float(o) for _, o in offsets])
        want = (np.array([128, 428, 828, 1428]) - 128) * 8 / (mbit * 1e3)
        assert np.abs(got - want).max() < 0.4, (direction, got, want)
