"""Loss the captures cannot see (issue 27 §3): tbf on the probe's own interface drops
datagrams before the capture behind it, so both captures agree; the probe header's sequence
numbers missing at both captures are that loss, and `cellperf analyze`'s total loss equals
the probe's own count."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from cellperf.testbed.veth import VethTestbed
from tests.conftest import CELLPERF, cellperf_json

pytestmark = [pytest.mark.netns, pytest.mark.skipif(
    not all(shutil.which(t) for t in ("tcpdump", "ethtool")), reason="needs tcpdump and ethtool")]


def test_loss_at_a_shaper_before_the_sender_capture(tmp_path):
    token = tmp_path / "token"
    token.write_bytes(b"loss before capture")
    with VethTestbed(downlink=None) as tb:
        # 4 Mbit/s of probes into a 2 Mbit/s tbf on the MN's own interface: about half is
        # dropped before tcpdump on that interface sees it.
        tb.sh(tb.mn, "tc qdisc add dev m0 root tbf rate 2mbit burst 16kb latency 20ms")
        srv = tb.popen(tb.cn, [CELLPERF, "server", "--listen", f"{tb.CN_ADDR}:5250", "--token-file", str(token),
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert srv.stdout.readline(), srv.stderr.read()
        mn, cn = tmp_path / "mn.pcap", tmp_path / "cn.pcap"
        with tb.capture(mn, cn, snaplen=128):
            p = tb.sh(tb.mn, f"{CELLPERF} probe {tb.CN_ADDR}:5250 --token-file {token} -t udp-cbr --rate 4M "
                             "--duration 3 --direction up --json", timeout=60)
        time.sleep(0.2)
    probe = json.loads(p.stdout)
    assert 0.3 < probe["loss_rate"] < 0.7, probe["loss_rate"]
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn)
    f = max((f for f in rep["flows"] if f["proto"] == "udp" and f["direction"] == "uplink"),
            key=lambda f: f["packets"])
    split = f["loss_split"]
    assert abs(f["loss_rate"] - probe["loss_rate"]) <= 0.01, (f["loss_rate"], probe["loss_rate"], split)
    assert split["before_capture"] > 0.3 and split["between_captures"] < 0.01, split
    assert split["before_capture"] + split["between_captures"] == pytest.approx(f["loss_rate"])
    # The MN's capture alone: the loss before it, nothing about what followed.
    one = cellperf_json("analyze", mn, "--side", "mn")
    g = max((g for g in one["flows"] if g["proto"] == "udp" and g["direction"] == "uplink"), key=lambda g: g["packets"])
    assert g["loss_split"]["before_capture"] == pytest.approx(split["before_capture"], abs=0.005)
    assert g["loss_split"]["between_captures"] is None
