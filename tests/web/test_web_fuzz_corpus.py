"""The page server's fuzz corpus (tests/web/fuzz_corpus: nasty requests made by hand, and what
tests/web/fuzz_server.py found), replayed against live servers: no 5xx (but 501 for a transfer
coding h11 does not know), every connection answered or closed within the header and idle
timeouts, the server up at the end, and no traceback in its log."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import CELLPERF
from tests.web.fuzz_server import CORPUS, check_case, start_server


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_corpus_gets_no_5xx_no_hang_no_traceback(pages, http):
    ext = "h2" if http == "2" else "h1"
    cases = sorted(CORPUS.glob(f"*.{ext}"))
    assert len(cases) >= 10
    proc, port = start_server(pages, http, CELLPERF)
    try:
        with ThreadPoolExecutor(8) as pool:
            problems = dict(zip((c.name for c in cases),
                                pool.map(lambda c: check_case(port, c.read_bytes(), http == "2", proc), cases)))
        assert {name: p for name, p in problems.items() if p} == {}
        assert proc.poll() is None
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert "Traceback" not in err and len(err.splitlines()) <= 4, err
