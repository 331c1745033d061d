"""Shared test fixtures: running the real `cellperf` command, and root/netns gating."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: The installed console script, beside the running Python (a real process, as a user runs it).
CELLPERF = str(Path(sys.executable).with_name("cellperf"))
#: The public mahimahi traces of the repository's `../shared` (absent on a user's machine).
MAHIMAHI_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces" / "mahimahi"


def cellperf(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs `cellperf ARGS` and returns the finished process (text output)."""
    p = subprocess.run([CELLPERF, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"cellperf {' '.join(map(str, args))} exited {p.returncode}:\n{p.stderr}")
    return p


def cellperf_json(*args: str) -> dict:
    return json.loads(cellperf(*args, "--json").stdout)


def have_netns() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def pytest_collection_modifyitems(config, items):
    if have_netns():
        return
    skip = pytest.mark.skip(reason="needs root and iproute2 for network namespaces")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)
