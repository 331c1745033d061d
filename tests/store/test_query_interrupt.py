"""`cellperf query` stops a long query on SIGINT and at --timeout (issue 31 item 6: Ctrl-C was
ignored while DuckDB ran, for ten minutes). The query is a real one that would run for hours:
a cross join of 10^6 × 10^6 rows, summed."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from cellperf.store import Store
from tests.conftest import CELLPERF, cellperf

LONG = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupt")
    Store.open(root, create=True).close()
    return root


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_sigint_stops_a_running_query_with_one_line_and_exit_130(store):
    p = subprocess.Popen([CELLPERF, "query", str(store), LONG], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        # Into the query: start-up (imports, opening the store) takes well under this much CPU,
        # and the cross join then burns CPU until stopped.
        deadline = time.monotonic() + 60
        while _cpu_seconds(p.pid) < 1.5 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = p.communicate(timeout=30)
        stopped_s = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and err == "cellperf: interrupted\n" and out == "", (p.returncode, err)
    assert stopped_s < 20  # DuckDB checks for an interrupt between vectors: well under a second


def test_timeout_stops_a_query_with_one_line(store):
    started = time.monotonic()
    p = cellperf("query", store, LONG, "--timeout", "1", check=False, timeout=120)
    assert p.returncode == 1 and p.stderr == "cellperf: error: query: stopped after --timeout 1 s\n", p.stderr
    assert time.monotonic() - started < 60
    # A query that finishes in time is not disturbed, and the limit is a number of seconds.
    assert cellperf("query", store, "SELECT 42 AS n", "--timeout", "30", "--csv").stdout == "n\n42\n"
    p = cellperf("query", store, "SELECT 1", "--timeout", "0", check=False)
    assert p.returncode == 2 and "--timeout" in p.stderr
