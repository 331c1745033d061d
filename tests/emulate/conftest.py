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

import polars as pl
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


#: Process ids of the emulators the running test started (see `leftovers`).
STARTED: list[int] = []


def emulate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `cellperf emulate ARGS` and returns the finished process (text output)."""
    proc = start_emulate(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM: the emulator ends its command and removes its namespaces (a SIGKILL would
        # leave the command holding the output pipes).
        proc.terminate()
        proc.communicate(timeout=30)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def start_emulate(*args: str, **popen) -> subprocess.Popen:
    """Starts `cellperf emulate ARGS` (text mode) and records its process id."""
    proc = subprocess.Popen([*CELLPERF, "emulate", *args], text=True, **popen)
    STARTED.append(proc.pid)
    return proc


def leftovers(pid: int) -> tuple[str, str]:
    """Namespaces and host-side interfaces that the emulator process `pid` created and that
    still exist. Only that emulator's: its process id is in every name it gives
    (`cpemu<PID>-<k>`, `cpm<PID>u<k>`, `cpc<PID>u<k>`), and other emulators (other tests, a
    campaign) may be running at the same time."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return (
        "\n".join(l for l in ns.splitlines() if l.startswith(f"cpemu{pid}-")),
        "\n".join(l for l in links.splitlines() if f": cpc{pid}u" in l or f": cpm{pid}u" in l),
    )


@pytest.fixture
def nothing_left_behind():
    """After the test: none of the emulators it started left a namespace or interface."""
    STARTED.clear()
    yield
    left = {pid: leftovers(pid) for pid in STARTED}
    assert all(v == ("", "") for v in left.values()), left


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
        # Ready when it listens (a fixed sleep is too short on a loaded machine).
        deadline = time.time() + 10
        while f":{port} " not in subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout:
            assert time.time() < deadline and self.proc.poll() is None, f"iperf3 -s -p {port} did not start"
            time.sleep(0.05)

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


def ip_fields(packet: bytes) -> tuple[int, str, str, int, int]:
    """(IP version, source, destination, TTL or hop limit, protocol or next header) of a raw
    IPv4/IPv6 packet."""
    version = packet[0] >> 4
    if version == 4:
        return 4, socket.inet_ntop(socket.AF_INET, packet[12:16]), socket.inet_ntop(socket.AF_INET, packet[16:20]), packet[8], packet[9]
    assert version == 6, packet[:4]
    return 6, socket.inet_ntop(socket.AF_INET6, packet[8:24]), socket.inet_ntop(socket.AF_INET6, packet[24:40]), packet[7], packet[6]


def udp_packets(records, dport: int | None = None):
    """(time, ip packet) of IPv4 UDP packets (to `dport` if given)."""
    out = []
    for t, p in records:
        if p[0] >> 4 == 4 and p[9] == 17:
            ihl = (p[0] & 15) * 4
            if dport is None or struct.unpack_from("!H", p, ihl + 2)[0] == dport:
                out.append((t, p))
    return out


def read_event_log(path: Path) -> tuple[dict[str, str], pl.DataFrame]:
    """A mahimahi-format link log, read from the format's description (mahimahi's
    link_queue.cc): `# name: value` header lines, then `t + bytes`, `t - bytes delay`,
    `t # bytes`, `t d packets bytes`. Returns the header and the events (t, event, a, b)."""
    header = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            name, _, value = line[1:].partition(":")
            header[name.strip()] = value.strip()
    events = pl.read_csv(path, separator=" ", comment_prefix="#", has_header=False, new_columns=["t", "event", "a", "b"],
                         schema_overrides={"t": pl.Int64, "event": pl.Utf8, "a": pl.Int64, "b": pl.Int64},
                         truncate_ragged_lines=True)
    return header, events


def iperf3_json(proc: subprocess.CompletedProcess) -> dict:
    """The iperf3 -J document the emulated command printed (its whole stdout)."""
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
