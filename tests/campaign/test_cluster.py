"""`cellperf run --cluster` (docs/scale.md): a campaign's runs on a real `dask scheduler` with
two `dask worker` processes on this machine, one of them killed (SIGKILL) in the middle of a
run: every run is stored once, and the store holds what a local `cellperf run` of the same
campaign holds, apart from hosts and timings. Simulated runs (no root), so it stays short."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cellperf.store import Store
from tests.campaign.capture_corpus import dask_processes
from tests.conftest import CELLPERF, cellperf, cellperf_json

def simulated_grid(runs: int, duration: float) -> str:
    """`runs` simulated runs of 001's cell, `duration` s of virtual time each (also
    bench/campaign.py's grid)."""
    return f"""[campaign]
name = "grid"

[[tests]]
name = "cell"
type = "simulate"
scheduler = "pf"
channel = "ge:good=1mbit,bad=100kbit,switch=5"
users = 3
duration = {duration}
seed = 1
repetitions = {runs}
"""


#: 6 runs of about half a second each (a 250-s cell of 3 users in virtual time).
CAMPAIGN = simulated_grid(6, 250)

EMULATED = """\
[campaign]
name = "emulated"
duration = 2

[[networks]]
name = "UMTS"
profile = "umts"

[[tests]]
type = "voip"
"""

#: What differs between two stores of the same runs made on other hosts at other times.
HOST_AND_TIMING = ("host", "kernel", "versions", "started_at", "ended_at", "phases", "data_dir")


def _rows(out: Path) -> tuple[list[dict], list[dict]]:
    with Store.open(out, read_only=True) as s:
        runs = s.frame("SELECT * FROM runs ORDER BY run_id")
        flows = s.frame("SELECT * FROM flows ORDER BY run_id, flow_id")
    runs = runs.drop(HOST_AND_TIMING)
    return runs.to_dicts(), flows.to_dicts()


def _kill_when_running(out: Path, worker: subprocess.Popen, timeout_s: float = 120) -> str:
    """SIGKILLs `worker` once it has a run in progress (its staging folder in the store's
    runs/, named after its process id); returns that run's folder name."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        mine = [d.name for d in (out / "runs").glob(f".staging-*-{worker.pid}")] if (out / "runs").is_dir() else []
        if mine:
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            return mine[0]
        time.sleep(0.02)
    raise AssertionError("the worker never started a run")


def test_a_killed_workers_run_goes_to_the_other_and_the_store_equals_a_local_run(tmp_path):
    spec = tmp_path / "grid.toml"
    spec.write_text(CAMPAIGN)
    local = tmp_path / "local"
    cellperf("run", spec, "--out", local)

    out = tmp_path / "cluster"
    emulated = tmp_path / "emulated.toml"
    emulated.write_text(EMULATED)
    with dask_processes(2, resources="simulate=1", warm="cellperf.campaign.runner") as (address, workers):
        driver = subprocess.Popen([CELLPERF, "run", str(spec), "--out", str(out), "--cluster", address, "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed_run = _kill_when_running(out, workers[0])
        stdout, stderr = driver.communicate(timeout=300)
        # Runs no worker declares it can run (here: emulated) are refused before anything runs.
        refused = cellperf("run", emulated, "--out", tmp_path / "refused", "--cluster", address, check=False)
    assert driver.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["runs_done"] == 6 and summary["runs_failed"] == []
    # The killed worker's run was done again by the other worker, and stored once.
    assert killed_run.removeprefix(".staging-").rsplit("-", 1)[0] in {r["run_id"] for r in summary["runs"]}
    assert sorted(r["run_id"] for r in summary["runs"]) == [f"simulated.simulated.cell.{k}" for k in range(1, 7)]
    with Store.open(out, read_only=True) as s:
        assert s.frame("SELECT count(*) AS n, count(DISTINCT run_id) AS d FROM runs").row(0) == (6, 6)
    assert _rows(out) == _rows(local)
    # Resumable and idempotent as a local campaign: nothing is run again.
    again = cellperf_json("run", spec, "--out", out)
    assert again["runs_skipped"] == 6 and again["runs"] == []
    assert refused.returncode == 1, refused.stderr
    assert "no worker of the cluster declares the resource 'emulated'" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_cluster_runs_the_campaign_in_its_order(tmp_path):
    spec = tmp_path / "grid.toml"
    spec.write_text(simulated_grid(8, 20))
    cellperf("run", spec, "--out", tmp_path / "out", "--workers", "1")
    with Store.open(tmp_path / "out", read_only=True) as s:
        order = s.frame("SELECT repetition FROM runs ORDER BY started_at")["repetition"].to_list()
    assert order == list(range(1, 9))  # Dask's own order was 1, 8, 7, ..., 2


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "x"]])
def test_bad_worker_counts_are_usage_errors(tmp_path, argv):
    spec = tmp_path / "grid.toml"
    spec.write_text(CAMPAIGN)
    p = cellperf("run", spec, "--out", tmp_path / "out", *argv, check=False)
    assert p.returncode == 2 and "argument --workers: expected a whole number of workers" in p.stderr
