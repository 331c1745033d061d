"""`cellperf import --cluster`: a corpus analysed on a real Dask scheduler with two `dask worker`
processes on this machine; one worker is killed (SIGKILL) while it analyses a run, and that
run (only that one of its task's runs) is done again by the other, nothing lost or stored twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cellperf.campaign.capture_import import RECORD_FILE
from cellperf.store import Store
from tests.campaign.capture_corpus import dask_processes, replicate_corpus

pytestmark = pytest.mark.netns

BIN = Path(sys.executable).parent


def _wait_for(predicate, seconds: float, what: str, poll_s: float = 0.002):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def dask_cluster():
    with dask_processes(2) as (address, (w1, w2)):
        yield address, w1, w2


def test_corpus_on_a_dask_cluster_survives_a_killed_worker(campaign, tmp_path, dask_cluster):
    address, w1, w2 = dask_cluster
    _, captures, _ = campaign
    corpus = tmp_path / "corpus"
    replicate_corpus(captures, corpus, 60)
    out = tmp_path / "out"
    proc = subprocess.Popen([str(BIN / "cellperf"), "import", str(out), "--captures", str(corpus), "--cluster",
                             address, "--interval", "1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        # Worker w1 stages each run it analyses as runs/.staging-RUN-HOST-PID, writes the
        # per-packet Parquet last and the run's record once it is done: kill it inside a run
        # whose analysis has not finished, after it finished another of the same task.
        def in_flight():
            staged = list((out / "runs").glob(f".staging-*-{w1.pid}")) if (out / "runs").is_dir() else []
            if any((d / RECORD_FILE).exists() for d in staged):
                for d in staged:
                    if not (d / "packets.parquet").exists():
                        os.kill(w1.pid, signal.SIGKILL)
                        return d.name
            return None

        staged = _wait_for(in_flight, 120, "worker w1 to start a run after finishing one")
        w1.wait()
        # Runs w1 finished in the task it died in (their records not yet taken by the importer).
        finished = {d.parent.name.removeprefix(".staging-").rsplit("-", 2)[0]
                    for d in (out / "runs").glob(f".staging-*-{w1.pid}/{RECORD_FILE}")}
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["runs_done"] == 60 and not summary["runs_failed"]
    assert summary["corpus"]["engine"] == "dask"
    killed_run = staged.removeprefix(".staging-").rsplit("-", 2)[0]
    with Store.open(out, read_only=True) as s:
        runs = s.frame("SELECT run_id, status, config_sha256, analysis FROM runs")
        assert runs.height == 60 and runs["config_sha256"].n_unique() == 60 and set(runs["status"]) == {"ok"}
        # The run w1 died in was analysed again, by w2.
        done_by = {r: json.loads(a)["import"]["pid"] for r, a in runs.select("run_id", "analysis").iter_rows()}
        assert done_by[killed_run] == w2.pid
        assert set(done_by.values()) <= {w1.pid, w2.pid}
        # ... and only that run: those w1 had finished are stored as w1 analysed them.
        assert all(done_by[r] == w1.pid for r in finished)
        # Nothing half-written is left: no staging folder of the dead worker, one partition per run.
        assert not list(s.runs_dir.glob(".staging-*"))
        assert s.frame("SELECT count(DISTINCT run_id) AS n FROM packets")["n"][0] == 60
