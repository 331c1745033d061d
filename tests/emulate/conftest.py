"""Fixtures for the emulator tests: root/netns skipping, the public traces, an iperf3 server
on the host side and a small reader of the emulator's pcaps."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CELLPERF as _CELLPERF, MAHIMAHI_TRACES

CELLPERF = [_CELLPERF]
TRACES = MAHIMAHI_TRACES


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0 and os.path.exists("/dev/net/tun") and shutil.which("ip"):
        return
    skip = pytest.mark.skip(reason="needs root, /dev/net/tun and iproute2 (network namespaces)")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def traces() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"public traces absent ({TRACES}); see the traces README")
    return TRACES


def emulate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `cellperf emulate ARGS` and returns the finished process (text output)."""
    return subprocess.run([*CELLPERF, "emulate", *args], capture_output=True, text=True, timeout=timeout)


def leftovers() -> tuple[str, str]:
    """Namespaces and interfaces of the emulator still present on the machine."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return (
        "\n".join(l for l in ns.splitlines() if l.startswith("cpemu")),
        "\n".join(l for l in links.splitlines() if ": cpc" in l or ": cpm" in l),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Iperf3Server:
    def __init__(self, port: int):
        if shutil.which("iperf3") is None:
            pytest.skip("iperf3 not installed")
        self.port = port
        self.proc = subprocess.Popen(["iperf3", "-s", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


@pytest.fixture
def iperf3_server():
    servers = []

    def start(port: int | None = None) -> Iperf3Server:
        s = Iperf3Server(port or free_port())
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def read_pcap(path: Path) -> list[tuple[float, bytes]]:
    """(time in seconds, packet) of every record of a nanosecond LINKTYPE_RAW pcap."""
    data = path.read_bytes()
    magic, _, _, _, _, _, linktype = struct.unpack_from("<IHHiIII", data, 0)
    assert magic == 0xA1B23C4D and linktype == 101
    out, off = [], 24
    while off + 16 <= len(data):
        sec, nsec, incl, _ = struct.unpack_from("<IIII", data, off)
        out.append((sec + nsec / 1e9, data[off + 16 : off + 16 + incl]))
        off += 16 + incl
    return out


def udp_packets(records, dport: int | None = None):
    """(time, ip packet) of IPv4 UDP packets (to `dport` if given)."""
    out = []
    for t, p in records:
        if p[0] >> 4 == 4 and p[9] == 17:
            ihl = (p[0] & 15) * 4
            if dport is None or struct.unpack_from("!H", p, ihl + 2)[0] == dport:
                out.append((t, p))
    return out


def iperf3_json(proc: subprocess.CompletedProcess) -> dict:
    """The iperf3 -J document the emulated command printed (its whole stdout)."""
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
