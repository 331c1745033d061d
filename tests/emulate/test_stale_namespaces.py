"""Issue 31 item 9: `kill -9` of `cellperf emulate` cannot be caught, so its namespace stays
(with what its command started); the next `cellperf emulate` and the next `cellperf run` each
delete it as they start."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import cellperf
from tests.emulate.conftest import emulate, leftovers, start_emulate

pytestmark = pytest.mark.netns


def killed_emulator() -> tuple[int, list[int]]:
    """The process id of an emulator killed with SIGKILL while its command ran, and of what
    still runs in its namespace, which is still there (checked)."""
    proc = start_emulate("--downlink", "1mbit", "--uplink", "1mbit", "--", "sleep", "60", stderr=subprocess.DEVNULL)
    deadline = time.time() + 15
    while leftovers(proc.pid)[0] == "" and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the command is running behind the link
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert leftovers(proc.pid)[0] != "", "the killed emulator's namespace should stay until the next start"
    inside = subprocess.run(["ip", "netns", "pids", f"cpemu{proc.pid}-0"], capture_output=True, text=True).stdout
    assert inside.split(), "the command should still run in it"
    return proc.pid, [int(p) for p in inside.split()]


def gone(pids: list[int]) -> bool:
    """None of `pids` runs (a zombie has ended: its parent, the killed emulator, is gone and
    whoever inherited it reaps it in its own time)."""
    def running(pid: int) -> bool:
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            return False
        return stat[stat.rindex(")") + 2] != "Z"
    return not any(running(p) for p in pids)


def test_next_emulate_removes_a_killed_emulators_namespace():
    pid, inside = killed_emulator()
    p = emulate("--downlink", "1mbit", "--uplink", "1mbit", "--", "true")
    assert p.returncode == 0, p.stderr
    assert leftovers(pid) == ("", "") and gone(inside)


def test_next_run_removes_a_killed_emulators_namespace(tmp_path):
    """A campaign's emulated testbed deletes it as it starts, before any run."""
    from cellperf.campaign import load_campaign
    from cellperf.campaign.testbed import EmulatedTestbed, testbed_for

    pid, inside = killed_emulator()
    campaign = load_campaign(Path(cellperf.__file__).parent / "campaigns" / "demo-quick.toml")
    testbed = testbed_for(campaign, tmp_path)
    assert isinstance(testbed, EmulatedTestbed)
    with testbed:
        assert leftovers(pid) == ("", "") and gone(inside)
