"""Progress of long work (cellperf.progress, issue 28 §3): a rich bar with an ETA on a
terminal; nothing extra when stderr is not a terminal (only the work's notes) nor with --json."""

from __future__ import annotations

import io
import os
import pty
import time
from pathlib import Path

import pytest

from cellperf.progress import Progress


class Log(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_off_a_terminal_only_the_notes_are_written():
    log = Log()
    with Progress("import", total=4, unit="runs", stream=log) as progress:
        progress.advance(2, detail="run-2")
        time.sleep(0.05)
        progress.note("run-3: failed: no packets")
        progress.advance(2)
    assert log.getvalue() == "run-3: failed: no packets\n"


def test_the_eta_is_the_time_so_far_scaled_to_what_is_left():
    progress = Progress("run", total=100, unit="s")
    progress._started -= 90  # 90 s for 30 of 100 planned seconds: 210 s left
    progress.update(30)
    assert progress.left_s() == pytest.approx(210, abs=1)
    progress.update(30, left_s=50)  # the work's own estimate wins
    assert progress.left_s() == 50


def test_json_says_nothing():
    log = Log()
    with Progress("report", total=3, stream=log, enabled=False) as progress:
        time.sleep(0.05)
        progress.note("not shown")
    assert log.getvalue() == ""


def test_a_terminal_gets_a_bar_with_the_count_and_what_is_done():
    main, side = pty.openpty()
    with os.fdopen(side, "w") as tty:
        with Progress("report", total=4, unit="steps", stream=tty) as progress:
            progress.advance(2, detail="Path studies")
            time.sleep(0.3)  # rich refreshes 10 times a second
        screen = b""
        while chunk := _read(main):
            screen += chunk
    os.close(main)
    text = screen.decode(errors="replace")
    assert "report" in text and "2/4" in text and "Path studies" in text and "━" in text


def _read(fd: int) -> bytes:
    import select

    return os.read(fd, 65536) if select.select([fd], [], [], 0.2)[0] else b""


def test_seed001_advances_one_step_per_cell_and_names_it():
    from cellperf.simulate import seed001

    class Steps:  # what a Progress is told, without its clock
        def __init__(self):
            self.done, self.details = 0, []

        def advance(self, n=1, detail=None):
            self.done += n
            if detail:
                self.details.append(detail)

    steps = Steps()
    seed001.reproduce({"duration": 2.0, "_from_file": set()}, progress=steps)
    assert steps.done == len(seed001.PAPER)  # PF and RR at 0.1, 1 and 5 transitions/s
    assert steps.details == [f"{s.upper()} at {r:g} transitions/s" for s, r in seed001.PAPER]


# -- the commands: what each tells its Progress (issue 28 §3) ---------------------------------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "data"


class Recorder(Progress):
    """A Progress that keeps what the command told it (the commands import
    cellperf.progress.Progress when they run, so a monkeypatch reaches them)."""

    made: list[Recorder] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps: list[tuple[float, float | None, str, float | None]] = []
        Recorder.made.append(self)

    def update(self, done, detail=None, left_s=None):
        super().update(done, detail, left_s)
        self.steps.append((done, self.total, self.detail, left_s))


@pytest.fixture
def recorded(monkeypatch):
    import cellperf.progress

    Recorder.made = []
    monkeypatch.setattr(cellperf.progress, "Progress", Recorder)
    return Recorder.made


def _main(*args) -> None:
    from cellperf.cli import main

    main([str(a) for a in args])


def test_run_counts_the_runs_with_the_campaigns_eta_and_names_the_running_one(tmp_path, recorded, capsys):
    campaign = tmp_path / "sim.toml"
    campaign.write_text('[campaign]\nname = "sim"\nrepetitions = 2\n\n'
                        '[[tests]]\nname = "pf"\ntype = "simulate"\nduration = 20\n')
    _main("run", campaign, "--out", tmp_path / "out")
    [progress] = recorded
    assert progress.what == "run sim" and progress.unit == "runs" and progress._enabled
    assert progress.steps[-1][:2] == (2, 2)
    assert all(left is not None for *_, left in progress.steps)  # the campaign's planned ETA, from the start
    assert any(detail.startswith("simulated.simulated.pf.") for _, _, detail, _ in progress.steps), progress.steps
    err = capsys.readouterr().err  # not a terminal: the finished runs, no bar
    assert err.count(" ok (") == 2 and "━" not in err
    _main("run", campaign, "--out", tmp_path / "json", "--json")
    assert not recorded[1]._enabled and capsys.readouterr().err == ""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The shipped capture pair imported (one run), as `cellperf import` does."""
    store = tmp_path_factory.mktemp("imported") / "results"
    _main("import", store, "--captures", EXAMPLES / "runs.csv", "--json")
    return store


def test_import_counts_the_runs(tmp_path, recorded, capsys):
    _main("import", tmp_path / "results", "--captures", EXAMPLES / "runs.csv")
    [progress] = recorded
    assert progress.what == "import" and progress.unit == "runs" and progress._enabled
    assert progress.total == 1 and progress.steps[-1][0] == 1 and progress.detail.endswith(".capture.1")
    _main("import", tmp_path / "json", "--captures", EXAMPLES / "runs.csv", "--json")
    assert not recorded[1]._enabled and capsys.readouterr().err == ""


def test_report_figures_count_the_sections_then_each_file(imported, tmp_path, recorded, monkeypatch, capsys):
    # A stand-in for Chromium that writes the file it is asked for: the steps, not the pictures.
    browser = tmp_path / "chromium"
    browser.write_text('#!/bin/sh\nfor a; do case "$a" in --screenshot=*|--print-to-pdf=*) echo x > "${a#*=}";; esac; done\n')
    browser.chmod(0o755)
    monkeypatch.setenv("CELLPERF_CHROMIUM", str(browser))
    _main("report", imported, "-o", tmp_path / "r.html", "--figures", tmp_path / "figs")
    [progress] = recorded
    files = len(list((tmp_path / "figs").iterdir()))
    assert progress.what == "report" and progress._enabled and files > 0
    from cellperf.report.sections import SECTIONS

    makers = sum(len(m) for _, m in SECTIONS)
    assert progress.total == makers + files and progress.done == makers + files
    assert {d for _, _, d, _ in progress.steps if d.endswith((".png", ".pdf"))} == {
        p.name for p in (tmp_path / "figs").iterdir()}
    _main("report", imported, "-o", tmp_path / "j.html", "--json")
    assert not recorded[1]._enabled and "report" not in capsys.readouterr().err
