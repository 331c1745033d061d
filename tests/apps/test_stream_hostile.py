"""`cellperf stream serve` against unauthenticated and forged requests (issue 31 item 1): one
102-byte datagram made it send 500 MB to the address it claimed, and 1,100 distinct session
numbers exhausted its descriptors. Now a datagram that is not an authenticated session's hello
gets nothing and holds nothing, and a stream needs the token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CELLPERF

#: The issue's request, byte for byte (82 bytes of UDP payload).
AMPLIFIER = b'{"session":2,"transport":"udp","rate_bps":2e9,"packet_bytes":65507,"duration_s":2}'


@pytest.fixture
def streamer(tmp_path):
    token = tmp_path / "token"
    token.write_text("stream-hostile-token\n")
    p = subprocess.Popen([CELLPERF, "stream", "serve", "--listen", "127.0.0.1:0", "--token-file", str(token), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    host, port = json.loads(p.stdout.readline())["listening"].rsplit(":", 1)
    yield p, (host, int(port)), token
    p.terminate()
    p.wait(timeout=10)


def _held(pid: int) -> tuple[int, int]:
    """(open descriptors, threads) of a process."""
    threads = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("Threads:"))
    return len(os.listdir(f"/proc/{pid}/fd")), threads


def _play(address: tuple[str, int], token: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CELLPERF, "stream", "play", f"{address[0]}:{address[1]}", "--token-file", str(token),
                           "--rate", "200k", "--packet", "500", "--duration", "1", "--timeout", "0.5", *args, "--json"],
                          capture_output=True, text=True, timeout=60)


def test_unauthenticated_datagrams_get_nothing_and_hold_nothing(streamer):
    proc, address, token = streamer
    before = _held(proc.pid)
    attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    attacker.bind(("127.0.0.1", 0))
    sent = attacker.sendto(AMPLIFIER, address)
    for session in range(1100):
        sent += attacker.sendto(json.dumps({"session": session, "transport": "udp", "rate_bps": 1e6,
                                            "packet_bytes": 1000, "duration_s": 1}).encode(), address)
    attacker.settimeout(0.05)
    received, until = 0, time.monotonic() + 1.0
    while time.monotonic() < until:
        try:
            received += len(attacker.recv(65536))
        except TimeoutError:
            pass
    # Bytes sent per unauthenticated byte: 0.
    assert received == 0, f"{received} bytes answered to {sent} unauthenticated bytes"
    assert proc.poll() is None
    assert _held(proc.pid) == before
    # A legitimate stream, end to end, after the attack.
    p = _play(address, token)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["expected"] == doc["received"] == 50 and doc["lost"] == 0


def test_a_wrong_token_gets_no_stream(streamer, tmp_path):
    _, address, _ = streamer
    wrong = tmp_path / "wrong"
    wrong.write_text("guess\n")
    p = _play(address, wrong)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines() == [
        f"cellperf: error: server {address[0]}:{address[1]}: authentication failed: wrong token"]


def test_the_server_needs_a_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CELLPERF_TOKEN"}
    p = subprocess.run([CELLPERF, "stream", "serve", "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                       timeout=30, env=env)
    assert p.returncode == 1 and p.stderr.splitlines() == [
        "cellperf: error: --token-file: required (or set $CELLPERF_TOKEN); server and probe must share a token"]
