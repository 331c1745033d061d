"""The shipped pages follow 004 Table VI; the page server's gzip, HTTP versions and bad input."""

from __future__ import annotations

import gzip
import socket
import urllib.request

import pytest

from cellperf.web.pages import TABLE_VI, plan_page, write_pages
from tests.conftest import cellperf


def test_pages_follow_table_vi(tmp_path):
    written = write_pages(tmp_path)
    for name, (count, shares, total_kb) in TABLE_VI.items():
        objs = written[name]
        assert len(objs) == count
        files = [p for p in (tmp_path / name).rglob("*") if p.is_file()]
        assert len(files) == count  # nothing else in the folder, nothing outside it
        total = sum(p.stat().st_size for p in files)
        assert abs(total - total_kb * 1000) / (total_kb * 1000) < 0.01
        for kind, share in shares.items():
            got = 100 * sum(o.size for o in objs if o.kind == kind) / total
            assert abs(got - share) < 0.3, (name, kind, got, share)
        html = (tmp_path / name / "index.html").read_text()
        # Every object is referenced by the page, relatively (no third-party content).
        assert "http" not in html.lower().replace("http-equiv", "")
        for o in objs[1:]:
            assert f'"{o.name}"' in html


def test_images_are_valid_and_incompressible_text_compresses(tmp_path):
    write_pages(tmp_path, ("starwars",))
    root = tmp_path / "starwars"
    images = [p.read_bytes() for p in sorted(root.glob("gif/*.gif")) + sorted(root.glob("jpeg/*.jpg"))]
    for b in images:
        assert (b[:6] == b"GIF89a" and b.endswith(b";")) or (b[:2] == b"\xff\xd8" and b[-2:] == b"\xff\xd9")
    # The page's image bytes as a whole do not compress (a small JPEG's tables do, a little).
    assert sum(len(gzip.compress(b)) for b in images) > 0.97 * sum(map(len, images))
    html = (root / "index.html").read_bytes()
    assert len(gzip.compress(html)) < 0.4 * len(html)


def test_same_seed_same_pages():
    assert [(o.name, o.size) for o in plan_page("cnn")] == [(o.name, o.size) for o in plan_page("cnn")]


def _get(url: str, gzip_ok: bool):
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzip_ok else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers, r.read()


@pytest.mark.parametrize("compression", [False, True])
def test_server_compresses_text_only_when_on(pages, page_server, compression):
    port = page_server(compression=compression)
    base = f"http://127.0.0.1:{port}/yahoo"
    html = (pages / "yahoo" / "index.html").read_bytes()
    headers, body = _get(f"{base}/", gzip_ok=True)
    assert headers.get("Content-Type").startswith("text/html")
    if compression:
        assert headers.get("Content-Encoding") == "gzip" and gzip.decompress(body) == html
        assert len(body) < 0.4 * len(html)
    else:
        assert headers.get("Content-Encoding") is None and body == html
    # A client that does not accept gzip gets the file as it is; images are never compressed.
    assert _get(f"{base}/", gzip_ok=False)[1] == html
    headers, body = _get(f"{base}/gif/00.gif", gzip_ok=True)
    assert headers.get("Content-Encoding") is None and body == (pages / "yahoo" / "gif" / "00.gif").read_bytes()


def test_server_serves_nothing_outside_its_folder(page_server):
    port = page_server()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 404")


def test_server_bad_input_is_one_line(tmp_path, pages):
    (tmp_path / "empty").mkdir()
    p = cellperf("web", "serve", str(tmp_path / "empty"), check=False)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "no index.html" in p.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = cellperf("web", "serve", str(pages), "--listen", f"127.0.0.1:{port}", check=False)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "Address already in use" in p.stderr, p.stderr
    p = cellperf("web", "load", "ftp://x/", check=False)
    assert p.returncode == 1 and "not an http:// or https:// URL" in p.stderr


def test_failed_load_is_recorded_with_the_browsers_reason(chromium, page_server, tmp_path):
    """A load that cannot reach its server is a failed row naming why; the next load goes on."""
    port = page_server()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nobody listens once closed
    import json

    for http in ("1.1", "2"):
        scheme = "https" if http == "2" else "http"
        p = cellperf("web", "load", f"{scheme}://127.0.0.1:{dead}/x/", f"http://127.0.0.1:{port}/yahoo/",
                     "--http", http, "--connections", "2", "--json") if http == "1.1" else cellperf(
            "web", "load", f"{scheme}://127.0.0.1:{dead}/x/", "--http", "2", "--json")
        loads = json.loads(p.stdout)["loads"]
        assert loads[0]["status"] == "failed"
        assert "refused" in loads[0]["reason"].lower() or "Cannot connect" in loads[0]["reason"], loads[0]["reason"]
        if http == "1.1":
            assert loads[1]["status"] == "ok" and loads[1]["objects"] == 15


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_server_closes_a_connection_once_the_client_has(page_server, http):
    """After a response, the client closes its side: the server closes its own at once (its FIN
    arrives: recv returns b""), not after its 120 s keep-alive timer, so nothing of a run's
    connections outlives the run's link."""
    import ssl
    import time

    port = page_server(http=http)
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    if http == "2":  # HTTP/1.1 over TLS is offered too (ALPN h2, http/1.1)
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        ctx.set_alpn_protocols(["http/1.1"])
        conn = ctx.wrap_socket(conn)
    with conn:
        conn.sendall(b"GET /yahoo/ HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"</html>" not in got:
            got += conn.recv(65536)
        assert got.startswith(b"HTTP/1.1 200")
        conn.shutdown(socket.SHUT_WR)  # a FIN, as the limiter's pool sends when it closes
        started = time.monotonic()
        try:
            while conn.recv(65536):
                pass
        except (ssl.SSLError, OSError):
            pass  # a TLS close without close_notify: still the server's FIN
        assert time.monotonic() - started < 5
