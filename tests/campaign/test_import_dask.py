"""`cellperf import --cluster`: a corpus analysed on a real Dask scheduler with two `dask worker`
processes on this machine; one worker is killed (SIGKILL) while it analyses a run, and that
run is done again by the other, nothing lost or stored twice."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cellperf.store import Store
from tests.campaign.capture_corpus import replicate_corpus

pytestmark = pytest.mark.netns

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(predicate, seconds: float, what: str, poll_s: float = 0.002):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def dask_cluster(tmp_path):
    """A `dask scheduler` and two single-threaded `dask worker`s without nannies (a killed
    worker stays dead), all on loopback; stopped at the end by their process ids."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        _wait_for(lambda: _listening(port), 30, "the scheduler", poll_s=0.1)
        for name in ("w1", "w2"):
            procs.append(subprocess.Popen([str(BIN / "dask"), "worker", address, "--nthreads", "1", "--no-nanny",
                                           "--no-dashboard", "--name", name],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield address, procs[1], procs[2]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


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
        # Worker w1 stages each run it analyses as runs/.staging-RUN-HOST-PID and writes the
        # per-packet Parquet last: kill it inside a run whose analysis has not finished.
        def in_flight():
            for d in (out / "runs").glob(f".staging-*-{w1.pid}") if (out / "runs").is_dir() else []:
                if not (d / "packets.parquet").exists():
                    os.kill(w1.pid, signal.SIGKILL)
                    return d.name
            return None

        staged = _wait_for(in_flight, 120, "worker w1 to start a run")
        w1.wait()
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
        # Nothing half-written is left: no staging folder of the dead worker, one partition per run.
        assert not list(s.runs_dir.glob(".staging-*"))
        assert s.frame("SELECT count(DISTINCT run_id) AS n FROM packets")["n"][0] == 60
