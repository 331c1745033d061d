"""Every human table the CLI prints fits 80 columns (issue 28 §2): each command with COLUMNS=80
on crafted inputs (in this process, as `cellperf.cli.main` runs it, or as a user runs it for
--help); every line at most 80 cells wide."""

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
    from tests.report.test_page_load import cbr_runs

    root = tmp_path_factory.mktemp("store")
    with Store.open(root, create=True) as s:
        s.commit_runs(cbr_runs(36))
    return root


def test_a_wide_query_of_many_rows_shows_the_columns_that_fit_and_names_the_rest(big_store, monkeypatch, capsys):
    lines = _in_process(monkeypatch, capsys, "query", big_store, "SELECT * FROM runs")
    assert_fits(lines)
    assert len(lines) < 60  # one line per row, not a block of ~25 lines per row
    assert sum("ok" in line and "┆" in line for line in lines) == 36
    text = " ".join(lines)
    assert "more columns:" in text and "status" in text and "name them in SELECT" in text


def test_a_wide_query_of_a_few_rows_is_one_block_per_row(big_store, monkeypatch, capsys):
    lines = _in_process(monkeypatch, capsys, "query", big_store, "SELECT * FROM runs LIMIT 2")
    assert_fits(lines)
    assert sum(line.startswith("-- row ") for line in lines) == 2


@pytest.mark.parametrize("campaign", ["python/cellperf/campaigns/demo.toml", "examples/seed001-sim.toml"])
def test_run_check_lists_the_runs_in_80_columns(campaign, monkeypatch, capsys):
    lines = _in_process(monkeypatch, capsys, "run", "--check", REPO / campaign)
    assert_fits(lines)
    assert len(lines) > 10  # the runs are listed


def test_analyze_loss_of_one_capture_has_no_split_between_captures():
    from cellperf.commands.analyze import _loss

    flow = {"loss_rate": 0.02, "loss_split": {"before_capture": 0.01, "between_captures": None}}
    assert _loss(flow) == "2.00% (before capture 1.00%)"


def test_channel_stats_lists_the_most_frequent_states(tmp_path, monkeypatch, capsys):
    # 60 distinct rates, rate k·10 kb/s held for k+1 slots: the 20 longest held are shown.
    rates = [k * 10_000 for k in range(60) for _ in range(k + 1)]
    trace = tmp_path / "rates.csv"
    trace.write_text("slot,rate_bps\n" + "".join(f"{i},{r}\n" for i, r in enumerate(rates)))
    lines = _in_process(monkeypatch, capsys, "channel", "stats", trace)
    assert_fits(lines)
    assert any("the 20 most frequent of 60 states (--json lists all)" in line for line in lines)
    listed = [line.split()[1] for line in lines if line.strip() and line.split()[0].isdigit()]
    assert listed == [f"{k * 10:.1f}" for k in range(40, 60)]


def test_help_prose_is_refilled_to_the_terminal_examples_kept():
    lines = human("simulate", "--help")
    prose = [line for line in lines if line and not line[0].isspace()]
    assert_fits(prose)
    assert any(line.startswith("  cellperf simulate --seed001") for line in lines)  # an example, as written
    wide = human("simulate", "--help", columns=200)
    assert any(cell_len(line) > 90 for line in wide)  # a wide terminal keeps the paragraphs as written


def _in_process(monkeypatch, capsys, *args) -> list[str]:
    """`cellperf ARGS` in this process (no start-up per command), at COLUMNS=80."""
    from cellperf.cli import main

    monkeypatch.setenv("COLUMNS", "80")
    main([str(a) for a in args])
    return capsys.readouterr().out.splitlines()


def test_more_commands_fit_80_columns(tmp_path, big_store, monkeypatch, capsys):
    import random

    rng = random.Random(1)
    drc = []
    for user in (1, 2):
        drc.append(tmp_path / f"drc{user}.csv")
        drc[-1].write_text("slot,state\n" + "".join(f"{i},{rng.randint(0, 14)}\n" for i in range(3000)))
    outputs = {
        "simulate": _in_process(monkeypatch, capsys, "simulate", "--users", "3", "--duration", "5"),
        "sched": _in_process(monkeypatch, capsys, "sched", *drc, "--rate-table", "drc", "--users", "1..2"),
        "voip": _in_process(monkeypatch, capsys, "voip", "--delay-ms", "150", "--loss", "0.01"),
        "check": _in_process(monkeypatch, capsys, "check", big_store),
        "query --tables": _in_process(monkeypatch, capsys, "query", big_store, "--tables"),
    }
    for name, lines in outputs.items():
        assert lines, name
        assert_fits(lines)


def test_query_prints_floats_in_full(big_store, monkeypatch, capsys):
    lines = _in_process(monkeypatch, capsys, "query", big_store,
                        "SELECT 1808300.4::DOUBLE AS goodput_bps, 0.00001::DOUBLE AS loss_rate")
    row = next(line for line in lines if "1808300 " in line)  # 6 significant digits
    assert "0.00001" in row and "e6" not in "\n".join(lines)


def test_analyze_labels_each_one_way_delay_figure():
    from cellperf.commands.analyze import _facts

    flow = {"packets": 10, "duration_s": 1.0, "goodput_bps": 8e4,
            "owd_ms": {"median": 13.6, "mean": 14.0, "std": 2.0, "kind": "excess"}}
    assert "OWD median 13.6 ms, mean 14.0 ± 2.0 ms (excess)" in _facts(flow)
