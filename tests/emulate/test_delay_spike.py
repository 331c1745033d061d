"""A delay spike on real packets (seed 000 ch. 5): a 0.5-s outage that buffers what arrives
holds a paced UDP stream's packets, and the analysis finds one spike of about that height."""

from __future__ import annotations

import pytest

from tests.conftest import cellperf_json
from tests.emulate.conftest import emulate

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("nothing_left_behind")]

#: 150 numbered 100-byte datagrams to the CN's discard port, 20 ms apart (3 s).
SEND = ("import os, socket, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "t = time.monotonic()\n"
        "for i in range(150):\n"
        "    time.sleep(max(0.0, t + 0.02 * i - time.monotonic()))\n"
        "    s.sendto(i.to_bytes(4, 'big') * 25, (os.environ['CELLPERF_CN'], 9))\n"
        "time.sleep(0.3)\n")


def test_outage_shows_as_one_delay_spike(tmp_path):
    p = emulate("--downlink", "10mbit", "--uplink", "10mbit", "--outage", "1.5:0.5", "--outage-mode", "buffer",
                "--pcap-dir", str(tmp_path), "--", "python3", "-c", SEND)
    assert p.returncode == 0, p.stderr
    flows = cellperf_json("analyze", "--mn", tmp_path / "mn.pcap", "--cn", tmp_path / "cn.pcap")["flows"]
    (up,) = [f for f in flows if f["proto"] == "udp" and f["dport"] == 9]
    spikes = up["udp"]["delay_spikes"]
    # Packets sent in the 0.5-s outage wait for its end: the first up to 0.5 s, 25 of them
    # (a few fewer when their 100-ms excess is under the line), the rest of the stream none.
    assert spikes["count"] == 1, spikes
    assert 400 <= spikes["peak_ms"] <= 560
    assert spikes["baseline_ms"] < 20
