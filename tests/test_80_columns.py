"""Every human table the CLI prints fits 80 columns (issue 28 §2): each command run as a user
runs it, with COLUMNS=80, on sample inputs; every line at most 80 cells wide."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.conftest import CELLPERF

REPO = Path(__file__).resolve().parents[1]


def human(*args, columns: int = 80) -> list[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    p = subprocess.run([CELLPERF, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def assert_fits(lines: list[str], columns: int = 80) -> None:
    wide = [line for line in lines if cell_len(line) > columns]
    assert wide == [], "\n".join(wide)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """36 runs with wide rows."""
    from cellperf.store import Store
    from tests.report.test_studies_report import _commit

    root = tmp_path_factory.mktemp("store")
    with Store.open(root, create=True) as s:
        for k in range(36):
            _commit(s, f"run{k:02d}", "udp-cbr", network=f"N{k % 3}", flows=[
                {"flow_id": 1, "role": "data", "proto": "udp", "direction": "downlink", "goodput_bps": 1e6 + k,
                 "loss_rate": 0.01}])
    return root


def test_a_wide_query_of_many_rows_shows_the_columns_that_fit_and_names_the_rest(big_store):
    lines = human("query", big_store, "SELECT * FROM runs")
    assert_fits(lines)
    assert len(lines) < 60  # one line per row, not a block of ~25 lines per row
    assert sum("run" in line and "┆" in line for line in lines) >= 36
    text = " ".join(lines)
    assert "more columns:" in text and "status" in text and "name them in SELECT" in text


def test_a_wide_query_of_a_few_rows_is_one_block_per_row(big_store):
    lines = human("query", big_store, "SELECT * FROM runs LIMIT 2")
    assert_fits(lines)
    assert sum(line.startswith("-- row ") for line in lines) == 2


@pytest.mark.parametrize("campaign", ["python/cellperf/campaigns/demo.toml", "examples/seed001-sim.toml"])
def test_run_check_lists_the_runs_in_80_columns(campaign):
    lines = human("run", "--check", REPO / campaign)
    assert_fits(lines)
    assert len(lines) > 10  # the runs are listed


def test_analyze_loss_of_one_capture_has_no_split_between_captures():
    from cellperf.commands.analyze import _loss

    flow = {"loss_rate": 0.02, "loss_split": {"before_capture": 0.01, "between_captures": None}}
    assert _loss(flow) == "2.00% (before capture 1.00%)"


def test_channel_stats_lists_the_most_frequent_states(tmp_path):
    # 60 distinct rates, rate k·10 kb/s held for k+1 slots: the 20 longest held are shown.
    rates = [k * 10_000 for k in range(60) for _ in range(k + 1)]
    trace = tmp_path / "rates.csv"
    trace.write_text("slot,rate_bps\n" + "".join(f"{i},{r}\n" for i, r in enumerate(rates)))
    lines = human("channel", "stats", trace)
    assert_fits(lines)
    assert any("the 20 most frequent of 60 states (--json lists all)" in line for line in lines)
    listed = [line.split()[1] for line in lines if line.strip() and line.split()[0].isdigit()]
    assert listed == [f"{k * 10:.1f}" for k in range(40, 60)]
