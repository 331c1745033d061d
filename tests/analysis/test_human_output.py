"""Human output of `cellperf analyze` and `cellperf query` fits the terminal: a table where
it fits (COLUMNS=200), a few lines per flow direction or row where it does not (COLUMNS=80),
never a table squeezed into columns a few characters wide (issue 17 item 5)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.analysis.test_crafted import tcp_run  # noqa: F401 (fixture)
from tests.conftest import CELLPERF
from tests.store.test_query_read_only import make_store


def run(columns: int, *args) -> list[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    p = subprocess.run([CELLPERF, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


@pytest.mark.parametrize("columns", [80, 200])
def test_analyze_fits_the_terminal(tcp_run, columns):  # noqa: F811
    mn, cn = tcp_run
    lines = run(columns, "analyze", "--mn", mn, "--cn", cn)
    assert max(map(len, lines)) <= columns
    text = "\n".join(lines)
    assert "192.0.2.7:80 → 10.0.0.2:40000" in text
    assert "5 (N 3 S 1 U 1 M 1)" in text  # the retransmission classes, whole
    table = any("goodput" in line and "RTT ms" in line for line in lines)
    assert table == (columns == 200)


def test_query_fits_the_terminal(tmp_path):
    store = make_store(tmp_path / "out")
    wide = run(200, "query", store, "SELECT run_id, network, scenario, status FROM runs")
    assert any("run_id" in line and "network" in line for line in wide) and max(map(len, wide)) <= 200
    for columns in (80, 200):
        lines = run(columns, "query", store, "SELECT * FROM runs")
        assert max(map(len, lines)) <= columns
        # Too wide for a table either way: a `column  value` line per field.
        assert any(line.startswith("network ") and line.rstrip().endswith("WiBro") for line in lines), lines
