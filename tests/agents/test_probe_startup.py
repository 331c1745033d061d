"""What a probe costs around its test (issue 34: part of every campaign run's wall time): its
command imports nothing it does not need, and the log writer it needs after the test is
imported while the test runs."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.agents.conftest import TOKEN, Server


def test_the_probe_command_does_not_import_the_emulator():
    code = "import sys, cellperf.cli, cellperf.commands.probe; print('cellperf.emulate' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_parquet_writer_is_imported_while_the_test_runs(tmp_path):
    server = Server(tmp_path)
    try:
        # A fresh interpreter (this one has pyarrow already): at each progress call (once a
        # second) whether pyarrow.parquet is loaded; by the last, 2 s into the test, it is.
        code = f"""
import json, sys
from cellperf.agents import run_probe
seen = []
r = run_probe({server.address!r}, {TOKEN!r}, "udp-cbr", {{"duration_s": 3.0, "rate_bps": 1e5, "clock_samples": 0}},
              lambda p: seen.append("pyarrow.parquet" in sys.modules), preload=("pyarrow.parquet",))
print(json.dumps([r.error, seen]))
"""
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        error, seen = json.loads(out)
        assert error is None and len(seen) >= 2 and seen[-1] is True, seen
    finally:
        server.stop()
