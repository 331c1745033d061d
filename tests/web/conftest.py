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
    """start(compression=False, http="1.1") → port of `cellperf web serve` on every address."""
    procs = []

    def start(compression: bool = False, http: str = "1.1") -> int:
        p = subprocess.Popen([CELLPERF, "web", "serve", str(pages), "--listen", "0.0.0.0:0", "--json",
                              "--compression", "on" if compression else "off", "--http", http],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        return int(json.loads(p.stdout.readline())["url"].rsplit(":", 1)[1])

    yield start
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
