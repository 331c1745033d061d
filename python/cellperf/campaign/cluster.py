"""A campaign's runs on a Dask cluster (`cellperf run --cluster tcp://HOST:8786`, or
`--workers N` for a local one; docs/scale.md): each worker is a testbed host that runs whole
runs (test and analysis) into its own staging folders in the store's `runs/` (a path every
worker shares) and sends the runs' records back; only the driver writes the store.

Workers declare what they can run as Dask resources, and each run asks for one unit of its
kind: `emulated` (root, the emulator), `real-NETWORK` (an MN on that real network: a run of
network NETWORK of a `kind = "real"` campaign), `simulate` (any core). A worker that dies
loses its run: the scheduler gives it to another worker (a run that kills three workers is
stored as failed).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from cellperf.campaign.spec import Campaign, RunSpec
from cellperf.store import RunRecord

#: A worker's testbeds, one per campaign it has run (the campaign's server stays up between its runs).
_TESTBEDS: dict[str, object] = {}
_LOCK = threading.Lock()


def resource(campaign: Campaign, run: RunSpec) -> str:
    """The Dask resource a run needs one unit of."""
    if run.simulated:
        return "simulate"
    return "emulated" if campaign.testbed.kind == "emulated" else f"real-{run.network.name}"


def local_resources(campaign: Campaign) -> dict[str, float]:
    """What a local worker offers: simulations, the emulated testbed if this process is root,
    and this host's real networks (a real campaign's MN is this host)."""
    out = {"simulate": 1.0}
    if campaign.testbed.kind == "emulated":
        if os.geteuid() == 0:
            out["emulated"] = 1.0
    else:
        out.update({f"real-{n.name}": 1.0 for n in campaign.networks})
    return out


def _testbed(campaign: Campaign):
    """This worker's testbed for `campaign`, set up at its first measured run (its work folder,
    holding the server's token, is the worker's own: workers may share a host)."""
    from cellperf.campaign.testbed import testbed_for

    with _LOCK:
        testbed = _TESTBEDS.get(campaign.sha256)
        if testbed is None:
            work = tempfile.mkdtemp(prefix="cellperf-worker-")
            atexit.register(shutil.rmtree, work, True)  # (atexit runs last first: after the testbed's close)
            testbed = testbed_for(campaign, Path(work)).__enter__()
            atexit.register(testbed.__exit__, None, None, None)
            _TESTBEDS[campaign.sha256] = testbed
        return testbed


def run_on_worker(campaign: Campaign, run: RunSpec, runs_dir: str) -> tuple[RunRecord, float]:
    """One whole run on this worker: its record and the seconds it took here."""
    from cellperf.campaign.execute import execute_run

    t0 = time.monotonic()
    testbed = None if run.simulated else _testbed(campaign)
    record = execute_run(campaign, run, Path(runs_dir), testbed, threading.Event())
    return record, time.monotonic() - t0


def on_cluster(client, campaign: Campaign, todo: list[RunSpec], runs_dir: Path) -> Iterator[list[tuple[RunSpec, RunRecord, float]]]:
    """Submits every run and yields lists of (run, record, seconds the worker took) of the
    runs that came back together (an empty list every half second while none came); a run
    the cluster could not finish comes back as a failed record."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    from cellperf.errors import UserError

    have = _cluster_resources(client)
    tag = uuid.uuid4().hex[:8]
    futures = {}
    for run in todo:
        need = resource(campaign, run)
        if need not in have:
            raise UserError(f"no worker of the cluster declares the resource '{need}' that run {run.run_id} needs "
                            "(start workers with --resources, docs/scale.md)")
    for i, run in enumerate(todo):
        # In the campaign's order (Dask's own took the last submitted first): a campaign
        # stopped half-way has its first runs.
        fut = client.submit(run_on_worker, campaign, run, str(runs_dir), key=f"cellperf-run-{run.run_id}-{tag}",
                            resources={resource(campaign, run): 1}, priority=len(todo) - i, pure=False)
        futures[fut] = (run, time.time())
    running = as_completed(futures)
    while not running.is_empty():
        done = _next_finished(running)
        out = []
        for fut in done:
            run, t0 = futures.pop(fut)
            seconds = time.time() - t0
            try:
                record, seconds = fut.result()
            except KilledWorker:
                record = _failed(campaign, run, "the run killed every Dask worker that tried it")
            except UserError:
                raise  # a full disk: stop
            except Exception as e:  # noqa: BLE001 — a worker's error outside the run (it cannot import cellperf ...)
                record = _failed(campaign, run, f"Dask worker: {type(e).__name__}: {e}")
            fut.release()
            out.append((run, record, seconds))
        yield out


def _next_finished(running, tick_s: float = 0.5, poll_s: float = 0.02) -> list:
    """The futures of `running` (an `as_completed`) finished since the last call, waiting at
    most `tick_s` for one (then none): the writer commits what it holds and the progress is
    shown while long runs go on."""
    deadline = time.monotonic() + tick_s
    done = running.next_batch(block=False)
    while not done and time.monotonic() < deadline and not running.is_empty():
        time.sleep(poll_s)
        done = running.next_batch(block=False)
    return done


def _cluster_resources(client) -> set[str]:
    info = client.scheduler_info()["workers"].values()
    return {name for w in info for name in (w.get("resources") or {})}


def _failed(campaign: Campaign, run: RunSpec, reason: str) -> RunRecord:
    from cellperf.campaign.execute import Measured, finish_run
    from cellperf.campaign.testbed import Outcome

    now = time.time()
    return finish_run(campaign, Measured(run, None, Outcome(now, now), reason, [], None))
