"""Progress of long work (cellperf.progress, issue 28 §3): plain periodic lines with an ETA
when stderr is not a terminal, a rich bar on a terminal, nothing with --json."""

from __future__ import annotations

import io
import os
import pty
import time

from cellperf.progress import Progress


class Log(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_plain_lines_say_how_far_and_how_long_is_left():
    log = Log()
    with Progress("import", total=4, unit="runs", stream=log, every_s=0.05) as progress:
        progress.advance(2, detail="run-2")
        deadline = time.monotonic() + 5  # the first line, even on a busy host
        while not log.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        progress.note("run-3: failed: no packets")
        progress.advance(2)
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("import: 2/4 runs (50 %), 0:00 elapsed, about 0:00 left · run-2")
    assert "run-3: failed: no packets" in lines
    assert lines[-1] == "import: 4/4 runs (100 %), 0:00 elapsed · run-2"


def test_the_eta_is_the_time_so_far_scaled_to_what_is_left():
    progress = Progress("run", total=100, unit="s")
    progress._started -= 90  # 90 s for 30 of 100 planned seconds: 210 s left
    progress.update(30)
    assert progress.line() == "run: 30/100 s (30 %), 1:30 elapsed, about 3:30 left"


def test_short_work_and_json_say_nothing():
    log = Log()
    with Progress("report", total=3, stream=log, every_s=60) as progress:
        progress.advance(3)
    assert log.getvalue() == ""
    with Progress("report", total=3, stream=log, every_s=0.01, enabled=False) as progress:
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
