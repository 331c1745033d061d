"""Issue 18 item 5: however the emulator is told to stop, its namespaces go. `cellperf run`
and the parent-death signal deliver two SIGTERMs milliseconds apart; a second signal used to
abort the cleanup (traceback, namespace left until the next `emulate`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.emulate.conftest import leftovers, start_emulate

pytestmark = pytest.mark.netns


def started(proc) -> None:
    deadline = time.time() + 15
    while leftovers(proc.pid)[0] == "" and time.time() < deadline:
        time.sleep(0.05)
    assert leftovers(proc.pid)[0] != "", "the emulator did not set up"
    time.sleep(0.3)  # the command is running behind the link


@pytest.mark.parametrize("signals", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGTERM, signal.SIGINT),
                                     (signal.SIGHUP, signal.SIGTERM, signal.SIGTERM)])
def test_repeated_signals_leave_nothing(signals):
    proc = start_emulate("--downlink", "1mbit", "--uplink", "1mbit", "--", "sleep", "30", stderr=subprocess.PIPE)
    started(proc)
    for s in signals:
        proc.send_signal(s)
        time.sleep(0.02)
    # 130 after the cleanup; a signal that lands after the cleanup, while the interpreter
    # exits, may end it by that signal instead: harmless, everything is gone by then.
    assert proc.wait(timeout=20) in (130, -signals[-1])
    err = proc.stderr.read()
    assert "Traceback" not in err and set(err.strip().splitlines()) <= {"cellperf: interrupted"}, err
    assert leftovers(proc.pid) == ("", "")


def test_parent_killed_leaves_nothing(tmp_path):
    """SIGKILL of the process that started the emulator (as of `cellperf run`): the emulator
    gets the parent-death SIGTERM and removes its namespace on its own."""
    pid_file = tmp_path / "pid"
    parent = subprocess.Popen([sys.executable, "-c", f"""
import ctypes, subprocess, sys
from cellperf.processes import die_with_parent
from tests.emulate.conftest import CELLPERF
p = subprocess.Popen([*CELLPERF, "emulate", "--downlink", "1mbit", "--uplink", "1mbit", "--", "sleep", "30"], preexec_fn=die_with_parent)
open({str(pid_file)!r}, "w").write(str(p.pid))
p.wait()
"""], cwd=os.getcwd())
    deadline = time.time() + 10
    while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())

    class P:
        pid = child
    started(P)
    parent.kill()
    parent.wait()
    deadline = time.time() + 20
    while os.path.exists(f"/proc/{child}") and time.time() < deadline:
        time.sleep(0.1)
    assert leftovers(child) == ("", "")
