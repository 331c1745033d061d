"""Ctrl-C of `cellperf import --workers 2` (issue 31 item 7: it printed Dask's tracebacks): the
terminal sends SIGINT to the whole process group, the importer and its local cluster's worker
processes alike. One line, exit 130, no process left, and a store the same command completes."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from cellperf.campaign.corpus import WORKERS_LOG
from cellperf.store.verify import verify_store
from tests.conftest import CELLPERF, cellperf

pytestmark = pytest.mark.netns  # the captures come from an emulated campaign


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_while_the_cluster_starts_is_one_line_and_exit_130(campaign, tmp_path):
    _, captures, _ = campaign
    out = tmp_path / "out"
    argv = [CELLPERF, "import", str(out), "--captures", str(captures), "--network", "WiBro", "--interval", "1"]
    # Its own process group, as a shell's foreground job: Ctrl-C is SIGINT to the group.
    p = subprocess.Popen([*argv, "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         process_group=0)
    try:
        # The workers' log is made as the cluster starts; the worker processes then take a
        # second or more to import Dask, numpy and cellperf: the Ctrl-C comes in the middle of that.
        deadline = time.monotonic() + 60
        while not (out / WORKERS_LOG).exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        time.sleep(0.2)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130 and err == "cellperf: interrupted\n", (p.returncode, err)
    deadline = time.monotonic() + 30
    while _group_alive(p.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group_alive(p.pid), "worker processes outlived the import"
    # The store this import made stays only if a run was stored before the Ctrl-C (a fast host's
    # workers can be up and importing within the second above); then it is whole. The same
    # command imports the rest.
    if (out / "results.duckdb").exists():
        early = verify_store(out)
        assert 1 <= early.runs <= 4 and not early.damaged, early.problems
    cellperf(*argv[1:], "--workers", "1", timeout=300)
    verdict = verify_store(out)
    assert verdict.runs == 4 and not verdict.damaged, verdict.problems
