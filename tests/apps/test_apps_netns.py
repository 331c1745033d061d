"""The stream and interactive tests through `cellperf emulate`: a stream stalls under an
outage longer than its buffer and not under a shorter one; keystroke echo ≈ the link's round
trip on an idle link, through a real OpenSSH session."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns


@pytest.fixture(autouse=True)
def _root():
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        pytest.skip("needs root and /dev/net/tun (network namespaces)")


@pytest.fixture(scope="module")
def stream_port(tmp_path_factory):
    """(port, token file) of a `cellperf stream serve` on every address."""
    token = tmp_path_factory.mktemp("stream") / "token"
    token.write_text("stream-netns-token\n")
    p = subprocess.Popen([CELLPERF, "stream", "serve", "--listen", "0.0.0.0:0", "--token-file", str(token), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield int(json.loads(p.stdout.readline())["listening"].rsplit(":", 1)[1]), token
    p.terminate()
    p.wait(timeout=10)


def _in_mn(tmp_path: Path, link: list[str], command: list[str]) -> dict:
    out = tmp_path / "out.json"
    p = subprocess.run([CELLPERF, "emulate", *link, "--", "sh", "-c", '"$@" > "$0"', str(out), *command],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr + out.read_text()
    return json.loads(out.read_text())


#: 20 ms each way, plenty of rate; a 1.5 s outage from 2.5 s on that holds the packets
#: (buffer mode) and lets them go in a burst when it ends. The stream (4 s of media) starts
#: about a second after the emulator, so the outage falls well inside it.
OUTAGE_S = 1.5
LINK = ["--delay", "20", "--downlink", "4mbit", "--uplink", "4mbit", "--outage", f"2.5s:{OUTAGE_S}s",
        "--outage-mode", "buffer"]


@pytest.mark.parametrize(("transport", "buffer_s"), [("udp", 0.4), ("udp", 3.0), ("tcp", 0.4)])
def test_a_stream_stalls_only_under_an_outage_longer_than_its_buffer(stream_port, tmp_path, transport, buffer_s):
    port, token = stream_port
    doc = _in_mn(tmp_path, LINK, [CELLPERF, "stream", "play", f"$CELLPERF_CN:{port}", "--token-file", str(token),
                                  "--transport", transport,
                                  "--rate", "200k", "--packet", "500", "--duration", "5", "--buffer", str(buffer_s),
                                  "--json"])
    assert doc["expected"] == 250 and doc["received"] + doc["lost"] == 250
    assert doc["lost"] == 0  # buffer mode: held, not dropped
    if buffer_s > OUTAGE_S:
        assert doc["stalls"] == 0 and doc["stall_s"] == 0.0, doc["stall_periods"]
        # Start-up waits for the buffer's media (3 s) plus the outage if it fell in it.
        assert doc["startup_ms"] >= buffer_s * 1000
    else:
        # One stall for the outage: from the first held packet's time to the end of the
        # outage, give or take the buffer's slack and the link's delay.
        assert doc["stalls"] == 1, doc["stall_periods"]
        assert OUTAGE_S - buffer_s - 0.2 <= doc["stall_s"] <= OUTAGE_S + 0.3, doc["stall_s"]
        assert doc["late"] > 0
    # The stream's own measurement: OWD at least the link's 20 ms.
    assert doc["stream"]["owd_ms"]["min"] >= 20.0


def test_keystroke_echo_is_a_round_trip_on_an_idle_link(tmp_path):
    """50 ms each way: every key's echo takes at least the 100 ms round trip, and the median
    is within 60 ms of it (ssh and sshd's own work on a busy host)."""
    import shutil

    if not os.path.exists("/usr/sbin/sshd") or shutil.which("ssh") is None:
        pytest.skip("no sshd to test with (Debian package openssh-server, installed by scripts/dev)")
    # As the campaign runner does: the session starts its own sshd in this (the host's)
    # namespace, on the CN address only, its key accepted from the MN only.
    doc = _in_mn(tmp_path, ["--delay", "50", "--downlink", "10mbit", "--uplink", "10mbit"],
                 [CELLPERF, "term", "type", "$CELLPERF_CN", "--serve-in", f"/proc/{os.getpid()}/ns/net",
                  "--allow-from", "$CELLPERF_MN", "--count", "20", "--interval", "0.15", "--json"])
    assert doc["keys"] == doc["echoed"] == 20
    assert doc["min_ms"] >= 100.0
    assert doc["median_ms"] <= 160.0, doc
    assert doc["over_200ms"] <= 0.2
