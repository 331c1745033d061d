"""`cellperf server` in one network namespace, `cellperf probe` in another, over a veth pair:
two network stacks and a real link, not loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns

TOKEN = b"netns test token"
SERVER_IP, PROBE_IP = "10.203.0.1", "10.203.0.2"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def two_namespaces():
    tag = f"{os.getpid() % 100000}"
    cn, mn = f"cpag-cn{tag}", f"cpag-mn{tag}"
    try:
        _ip("netns", "add", cn)
        _ip("netns", "add", mn)
        _ip("link", "add", f"cpcn{tag}", "netns", cn, "type", "veth", "peer", "name", f"cpmn{tag}", "netns", mn)
        for ns, dev, addr in ((cn, f"cpcn{tag}", SERVER_IP), (mn, f"cpmn{tag}", PROBE_IP)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield cn, mn
    finally:
        for ns in (cn, mn):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def server(two_namespaces, tmp_path):
    cn, mn = two_namespaces
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    proc = subprocess.Popen(["ip", "netns", "exec", cn, CELLPERF, "server", "--listen", f"{SERVER_IP}:5250",
                             "--token-file", str(token), "--log-dir", str(tmp_path / "srv"), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    assert line, proc.stderr.read()

    def probe(*args: str) -> dict:
        p = subprocess.run(["ip", "netns", "exec", mn, CELLPERF, "probe", f"{SERVER_IP}:5250", "--token-file", str(token),
                            *args, "--json"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    yield probe, tmp_path / "srv"
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_udp_cbr_down_across_namespaces(server):
    probe, _ = server
    doc = probe("-t", "udp-cbr", "--rate", "4M", "--duration", "2", "--direction", "down")
    n = round(2 / (1460 * 8 / 4e6))
    assert doc["packets_sent"] == n and doc["packets_received"] == n and doc["loss_rate"] == 0.0
    assert abs(doc["throughput_bps"] - 4e6) / 4e6 < 0.02
    # One host clock on both sides: the raw OWD over a veth pair is positive and well under 1 ms.
    assert doc["owd_ms"]["kind"] == "raw" and 0.0 < doc["owd_ms"]["min"] <= doc["owd_ms"]["median"] < 1.0


def test_voip_across_namespaces(server):
    probe, server_logs = server
    doc = probe("-t", "voip", "--duration", "2")
    assert doc["packets_sent"] == 100 and doc["packets_received"] == 100
    assert 0.0 < doc["rtt_ms"]["min"] <= doc["rtt_ms"]["median"] < 2.0
    assert doc["owd_ms"]["kind"] == "half_rtt"
    assert doc["owd_ms"]["median"] == pytest.approx(doc["rtt_ms"]["median"] / 2, rel=0.25)
    # The server logged each packet it received and each echo it sent back.
    import pyarrow.csv as pacsv

    (log,) = server_logs.glob("*.csv")
    assert pacsv.read_csv(log).num_rows == 200
