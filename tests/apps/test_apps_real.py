"""The stream and interactive tests in real-network mode, with network namespaces standing in
for the hosts (cellperf.testbed.veth): `cellperf stream serve` and `cellperf term serve` (sshd)
in the CN namespace, `cellperf run` in the MN's, the MN's veth captured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from cellperf.store import Store
from tests.campaign.test_run_real import bed, campaign, run_in_mn  # noqa: F401 - `bed` is a fixture
from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns


def test_stream_and_ssh_over_a_real_network(bed):  # noqa: F811
    if not os.path.exists("/usr/sbin/sshd") or shutil.which("ssh") is None:
        pytest.skip("no OpenSSH (Debian packages openssh-server, openssh-client, installed by scripts/dev)")
    tb, folder, server, token = bed
    work = folder / "apps"
    work.mkdir()
    streamer = tb.popen(tb.cn, [CELLPERF, "stream", "serve", "--listen", f"{tb.CN_ADDR}:0", "--token-file",
                                str(folder / "server-token"), "--json"], stdout=subprocess.PIPE, text=True)
    sshd = tb.popen(tb.cn, [CELLPERF, "term", "serve", "--listen", tb.CN_ADDR, "--folder", str(work / "ssh"), "--json"],
                    stdout=subprocess.PIPE, text=True)
    try:
        stream_port = int(json.loads(streamer.stdout.readline())["listening"].rsplit(":", 1)[1])
        ssh = json.loads(sshd.stdout.readline())
        tests = f"""
[[tests]]
type = "stream"
rate = "256k"
port = {stream_port}

[[tests]]
type = "interactive"
count = 10
interval = 0.1
port = {ssh["port"]}
identity = "{ssh["identity"]}"
"""
        path = campaign(work, server, cn_capture=None, token=token, radio=None, tests=tests, name="apps-real")
        p = run_in_mn(tb, path, work / "out")
        assert p.returncode == 0, p.stderr
    finally:
        for proc in (streamer, sshd):
            proc.terminate()
            proc.wait(timeout=10)
    with Store.open(work / "out", read_only=True) as s:
        st = s.frame("SELECT * FROM streams").row(0, named=True)
        # 4 s at 256 kbit/s in 1200-byte packets, through a router of 8 Mbit/s: all delivered.
        assert (st["transport"], st["expected"], st["received"], st["lost"]) == ("udp", 107, 107, 0)
        assert st["stalls"] == 0 and st["owd_median_ms"] >= 0.0
        t = s.frame("SELECT * FROM terminal_sessions").row(0, named=True)
        assert t["keys"] == t["echoed"] == 10
