"""The page server under hostile clients (issue 31 item 2): a slowloris of half-sent requests
neither locks legitimate clients out nor holds its connections past the header timeout nor
fills the log; paths the file system refuses are 4xx, not 500."""

from __future__ import annotations

import json
import resource
import select
import socket
import subprocess
import time

import pytest

from tests.conftest import CELLPERF

#: The descriptor limit the server runs under: a slowloris of ATTACKERS connections exhausted
#: it before (accept failed with EMFILE, and asyncio logged a traceback per attempt).
NOFILE = 128
ATTACKERS = 200
HEADER_TIMEOUT_S = 3.0


@pytest.fixture
def serve(pages):
    """serve(*options, nofile=None) → (process, port): `cellperf web serve` on 127.0.0.1."""
    procs = []

    def start(*options: str, nofile: int | None = None) -> tuple[subprocess.Popen, int]:
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        p = subprocess.Popen([CELLPERF, "web", "serve", str(pages), "--listen", "127.0.0.1:0", "--json", *options],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit)
        procs.append(p)
        return p, int(json.loads(p.stdout.readline())["url"].rsplit(":", 1)[1])

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=10)


def get(port: int, path: str, source: str = "127.0.0.1", timeout_s: float = 5.0) -> int:
    """The status of GET `path` on a fresh connection from `source` (0: no answer in time)."""
    with socket.socket() as s:
        s.settimeout(timeout_s)
        s.bind((source, 0))
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            head = s.recv(64)
        except OSError:
            return 0
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0


def test_slowloris_neither_locks_out_nor_lingers_nor_floods_the_log(serve):
    proc, port = serve("--header-timeout", str(HEADER_TIMEOUT_S), nofile=NOFILE)
    attack, started = [], time.monotonic()
    for _ in range(ATTACKERS):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.connect(("127.0.0.1", port))  # the kernel completes it, whatever the server does
        s.sendall(b"GET /yahoo/ HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        attack.append(s)
    # Another address is served at once, while the attack's connections are open.
    assert [get(port, "/yahoo/", source="127.0.0.2") for _ in range(5)] == [200] * 5
    assert time.monotonic() - started < HEADER_TIMEOUT_S  # so the attack was still on
    # Every half-sent request's connection is closed (EOF) within the header timeout, with
    # a margin for a busy host.
    deadline = started + HEADER_TIMEOUT_S + 4.0
    open_ = list(attack)
    while open_ and time.monotonic() < deadline:
        readable, _, _ = select.select(open_, [], [], max(0.0, deadline - time.monotonic()))
        for s in readable:
            try:
                if s.recv(4096) == b"":
                    open_.remove(s)
            except OSError:
                open_.remove(s)
    assert not open_, f"{len(open_)} of {ATTACKERS} half-sent requests still open after {deadline - started:.0f} s"
    for s in attack:
        s.close()
    # The attacker's own address is served again, and the server is alive.
    assert get(port, "/yahoo/") == 200
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    lines = err.splitlines()
    assert "Traceback" not in err and len(lines) <= 6, err[:2000]
    assert any("refused connections over the cap" in ln and "more like it" in ln for ln in lines), err


def test_paths_the_file_system_refuses_are_4xx(serve):
    proc, port = serve()
    assert get(port, "/%00") == 404
    assert get(port, "/yahoo/%00/index.html") == 404
    assert get(port, "/%2500") == 404  # decoded once: a file named "%00", not a NUL
    assert get(port, "/" + "a" * 10_000) == 414
    assert get(port, "/" + "a" * 300) == 404  # under the length cap, a name over the file system's
    assert get(port, "/yahoo/") == 200
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert err == ""


def test_slowloris_from_many_addresses_leaves_a_newcomer_a_place(serve):
    """At the cap in all, filled by 8 addresses' half-sent requests, a newcomer from another
    address takes the place of the oldest connection of an address holding most."""
    proc, port = serve("--max-connections", "40")
    attack = []
    for i in range(8):
        for _ in range(10):
            s = socket.socket()
            s.bind((f"127.0.4.{i + 1}", 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /yahoo/ HTTP/1.1\r\nHost: x\r\n")
            attack.append(s)
    assert [get(port, "/yahoo/", source="127.0.0.2") for _ in range(5)] == [200] * 5
    for s in attack:
        s.close()
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err and len(err.splitlines()) <= 6, err
