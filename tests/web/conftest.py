"""Fixtures of the web tests: the shipped pages, a page server on the host, the browser check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cellperf.web.browser import find_chromium
from cellperf.web.pages import write_pages
from tests.conftest import CELLPERF


@pytest.fixture(scope="session")
def pages(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pages")
    write_pages(folder)
    return folder


@pytest.fixture
def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium (Debian package 'chromium', installed by scripts/dev); the web test needs a real browser")
    return exe


@pytest.fixture
def page_server(pages):
    """start(compression=False, http="1.1") → port of `cellperf web serve` on every address
    (`start.spki[port]`: its certificate's, for `--trust-spki`, over HTTP/2)."""
    procs = []

    def start(compression: bool = False, http: str = "1.1") -> int:
        p = subprocess.Popen([CELLPERF, "web", "serve", str(pages), "--listen", "0.0.0.0:0", "--json",
                              "--compression", "on" if compression else "off", "--http", http],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        doc = json.loads(p.stdout.readline())
        port = int(doc["url"].rsplit(":", 1)[1])
        start.spki[port] = doc["spki"]
        return port

    start.spki = {}
    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
