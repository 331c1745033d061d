"""A mutational fuzzer of the page server's request handling (`cellperf web serve`): HTTP/1.1
request lines, headers and paths, and HTTP/2 frames over TLS, sent to a live server.

    PYTHONPATH=python .venv/bin/python -m tests.web.fuzz_server --seconds 300 [--seed 1]

Each case is one connection: the bytes are sent, and the server must answer or close within
its header timeout plus a margin (no hang), with no 5xx status, and stay up; its log must hold
no traceback. A case that breaks one of these is written to tests/web/fuzz_corpus/ (raw bytes:
NAME.h1 over plain TCP, NAME.h2 inside TLS with ALPN h2), which test_web_fuzz_corpus.py
replays on every test run, with the hand-made nasty cases already there. (The agents' parsers
are fuzzed with cargo-fuzz in crates/cellperf-agent/fuzz; this server is Python, behind
hypercorn's h11 and h2, so it is fuzzed through its socket.)
"""

from __future__ import annotations

import argparse
import json
import random
import re
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

CORPUS = Path(__file__).parent / "fuzz_corpus"
#: The fuzzed server's header and idle timeouts: a case ends when the server closes the
#: connection, at most this long after its last answer or after an incomplete request.
HEADER_TIMEOUT_S = 1.0
#: How long past that a case may take before it counts as a hang.
MARGIN_S = 2.0

SEEDS_H1 = [
    b"GET /yahoo/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /yahoo/index.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
    b"GET /cnn/ HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\nGET /cnn/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /yahoo/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    b"GET /yahoo/?q=1 HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
]
#: Pieces a mutation inserts: what broke servers before (NULs, encodings, long runs, CR/LF).
NASTY = [b"%00", b"%2500", b"%ff", b"%", b"%%", b"\x00", b"\r", b"\n", b"\r\n", b"../", b"%2e%2e/", b"\xff\xfe",
         b"\xc0\xaf", "é".encode(), b" ", b"\t", b":", b"?", b"#", b"a" * 300, b"/" * 3000, b"a" * 10_000, b"A: b\r\n" * 200,
         b"Content-Length: -1\r\n", b"Content-Length: 99999999999999999999\r\n", b"Transfer-Encoding: chunked\r\n",
         b"Host: \r\n", b"HTTP/9.9", b"HTTP/1.1\r\n", b"GET"]


def h2_seeds() -> list[bytes]:
    """Client bytes of a few HTTP/2 conversations, made by the h2 library (hypercorn's own)."""
    import h2.config
    import h2.connection

    out = []
    for headers in ([(":method", "GET"), (":path", "/yahoo/"), (":scheme", "https"), (":authority", "x")],
                    [(":method", "GET"), (":path", "/%00"), (":scheme", "https"), (":authority", "x"),
                     ("accept-encoding", "gzip")],
                    [(":method", "HEAD"), (":path", "/" + "a" * 300), (":scheme", "https"), (":authority", "x")]):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        conn.send_headers(1, headers, end_stream=True)
        conn.send_headers(3, headers, end_stream=False)
        conn.send_data(3, b"x" * 100, end_stream=True)
        conn.ping(b"12345678")
        out.append(conn.data_to_send())
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random edits: a flipped byte, a nasty piece inserted or replacing a run, a
    cut, a duplicated slice."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(b) + 1)
        op = rng.randrange(5)
        if op == 0 and b:
            b[min(at, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[at:at] = rng.choice(NASTY)
        elif op == 2:
            b[at:at + rng.randint(1, 8)] = rng.choice(NASTY)
        elif op == 3:
            del b[at:]
        else:
            end = min(len(b), at + rng.randint(1, 64))
            b[at:at] = b[at:end] * rng.randint(1, 50)
    return bytes(b)


def start_server(pages: Path, http: str, cellperf: str) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([cellperf, "web", "serve", str(pages), "--listen", "127.0.0.1:0", "--json", "--http", http,
                          "--header-timeout", str(HEADER_TIMEOUT_S), "--idle-timeout", str(HEADER_TIMEOUT_S),
                          "--compression", "on"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p, int(json.loads(p.stdout.readline())["url"].rsplit(":", 1)[1])


def send_case(port: int, data: bytes, tls: bool) -> tuple[list[int], bool]:
    """Sends `data` on one connection and reads until the server closes it or the time is up:
    the statuses it answered with (HTTP/1.1 status lines; HTTP/2 :status fields), and whether it
    closed in time."""
    conn = _connect(port, tls)
    deadline = time.monotonic() + HEADER_TIMEOUT_S + MARGIN_S
    got = b""
    closed = False
    with conn:
        try:
            conn.sendall(data)
            while (left := deadline - time.monotonic()) > 0:
                conn.settimeout(left)
                chunk = conn.recv(65536)
                if not chunk:
                    closed = True
                    break
                got += chunk
        except (TimeoutError, socket.timeout):
            pass
        except (OSError, ssl.SSLError):
            closed = True  # reset, or a TLS close without close_notify: still closed
    return (_h2_statuses(got) if tls else [int(m) for m in re.findall(rb"^HTTP/1\.[01] (\d{3})", got, re.M)]), closed


def _connect(port: int, tls: bool, tries: int = 3) -> socket.socket:
    """A connection to the server (with TLS: the handshake done, ALPN h2). A handshake the
    server ends at its timeout (the host too busy, parallel cases) is tried again."""
    connect = lambda: socket.create_connection(("127.0.0.1", port), timeout=HEADER_TIMEOUT_S + MARGIN_S)  # noqa: E731
    if not tls:
        return connect()
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    for _ in range(tries - 1):
        raw = connect()
        try:
            return ctx.wrap_socket(raw)
        except (ssl.SSLError, OSError):
            raw.close()
    return ctx.wrap_socket(connect())


def _h2_statuses(data: bytes) -> list[int]:
    """The :status of each HEADERS frame the server sent (its frames read one by one; the
    header blocks decoded in order with one HPACK decoder, as a client would)."""
    import hpack

    decoder, statuses, at = hpack.Decoder(), [], 0
    while at + 9 <= len(data):
        length, kind, flags = int.from_bytes(data[at:at + 3], "big"), data[at + 3], data[at + 4]
        payload = data[at + 9:at + 9 + length]
        at += 9 + length
        if kind != 1 or len(payload) < length:  # HEADERS (our server sends no CONTINUATION)
            continue
        pad = payload[0] if flags & 0x8 else 0
        block = payload[(1 if flags & 0x8 else 0) + (5 if flags & 0x20 else 0):len(payload) - pad]
        try:
            headers = dict(decoder.decode(block, raw=True))
        except hpack.HPACKError:
            break
        if b":status" in headers:
            statuses.append(int(headers[b":status"]))
    return statuses


def check_case(port: int, data: bytes, tls: bool, proc: subprocess.Popen) -> str | None:
    """What is wrong with the server's handling of `data`, or None."""
    statuses, closed = send_case(port, data, tls)
    if any(s >= 500 and s != 501 for s in statuses):  # 501: a transfer coding h11 does not know
        return f"status {statuses}"
    if proc.poll() is not None:
        return f"server exited {proc.returncode}"
    if not closed:
        return "not closed within the header and idle timeouts"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to fuzz each HTTP version")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=8, help="cases sent at once (each on its own connection)")
    ap.add_argument("--pages", type=Path, help="page folder (default: the shipped pages, written to a temporary one)")
    a = ap.parse_args()
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from cellperf.web.pages import write_pages

    pages = a.pages or Path(tempfile.mkdtemp(prefix="cellperf-fuzz-"))
    if a.pages is None:
        write_pages(pages)
    cellperf = str(Path(sys.executable).parent / "cellperf")
    rng = random.Random(a.seed)
    CORPUS.mkdir(exist_ok=True)
    for http, seeds, tls in (("1.1", SEEDS_H1, False), ("2", h2_seeds(), True)):
        proc, port = start_server(pages, http, cellperf)
        cases, found, started = 0, Counter(), time.monotonic()
        try:
            with ThreadPoolExecutor(a.workers) as pool:
                while time.monotonic() - started < a.seconds and proc.poll() is None:
                    batch = [mutate(rng.choice(seeds), rng) for _ in range(a.workers)]
                    for data, problem in zip(batch, pool.map(lambda d: check_case(port, d, tls, proc), batch)):
                        cases += 1
                        if problem:
                            found[problem] += 1
                            name = f"found-{http}-{a.seed}-{cases}.{'h2' if tls else 'h1'}"
                            (CORPUS / name).write_bytes(data)
                            print(f"HTTP/{http} case {cases}: {problem} -> {CORPUS / name}", flush=True)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=15)
        tracebacks = err.count("Traceback")
        print(f"HTTP/{http}: {cases} cases in {time.monotonic() - started:.0f} s, {sum(found.values())} failing "
              f"({dict(found) or 'none'}), log {len(err.splitlines())} lines, {tracebacks} tracebacks")
        for line in err.splitlines()[:10]:
            print(f"  log: {line[:200]}")


if __name__ == "__main__":
    main()
