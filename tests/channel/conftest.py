"""Trace builders for the channel tests: known chains written with numpy (independent of
the code under test) and model files with known transition matrices."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from tests.conftest import MAHIMAHI_TRACES

SHARED_TRACES = MAHIMAHI_TRACES


def write_rate_csv(path: Path, rates: np.ndarray) -> Path:
    """The minimal trace: header slot,rate_bps."""
    pacsv.write_csv(pa.table({"slot": np.arange(rates.size), "rate_bps": rates}), path)
    return path


def two_state_rates(n: int, p01: float, p10: float, low: float, high: float, seed: int) -> np.ndarray:
    """A two-state Markov chain built from geometric run lengths (mean 1/p01 in `low`, 1/p10 in `high`)."""
    rng = np.random.default_rng(seed)
    runs = int(n * (p01 + p10) / 2) + 100
    lengths = np.empty(runs, dtype=np.int64)
    lengths[0::2] = rng.geometric(p01, size=(runs + 1) // 2)
    lengths[1::2] = rng.geometric(p10, size=runs // 2)
    values = np.where(np.arange(runs) % 2 == 0, low, high)
    return np.repeat(values, lengths)[:n]


def model_text(p: list[list[float]], rates: list[float], slot_s: float = 1 / 600) -> str:
    """An order-1 model file with transition matrix `p`."""
    rows = [
        {"context": [i], "count": 1, "next": [j for j in range(len(p)) if p[i][j] > 0], "p": [q for q in p[i] if q > 0]}
        for i in range(len(p))
    ]
    states = [{"rate_bps": r, "fraction": 1 / len(rates)} for r in rates]
    return json.dumps({"format": "cellperf-markov-rate-model", "version": 1, "order": 1, "slot_s": slot_s, "states": states, "transitions": rows})


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"public traces not found at {SHARED_TRACES} (../shared/traces/mahimahi)")
    return SHARED_TRACES


def run_cli(*args: object) -> subprocess.CompletedProcess:
    """`cellperf ARGS` in a fresh interpreter, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-c", "from cellperf.cli import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
