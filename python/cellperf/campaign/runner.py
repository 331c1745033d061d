"""`cellperf run`: every run of a campaign, each analysed as it finishes and committed to the
store atomically; resumable at any moment.

A run is its test (`execute.measure_run`, on the testbed) then its analysis (`finish_run`): on this
host the analysis of a run goes on beside the next run's test; on a Dask cluster
(cellperf.campaign.cluster) a worker does both and only this process writes the store.

Resume rule: a run whose `runs` row says `ok` is never run again (its configuration must
not have changed: the stored hash is compared); a `failed` run is tried again; folders of
runs killed before their commit are removed. So a campaign killed at any moment and started
again duplicates nothing and loses nothing committed. Runs that finish close together are
committed together (`CommitPace`): a kill (not a Ctrl-C, which commits them first) loses at
most the last second's finished runs, which are run again.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, ThreadPoolExecutor, wait
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from cellperf import __version__
from cellperf.campaign.execute import finish_run, measure_run
from cellperf.campaign.progress import Progress
from cellperf.campaign.spec import Campaign, RunSpec
from cellperf.campaign.summary import RunStatus, Summary
from cellperf.campaign.testbed import testbed_for
from cellperf.errors import UserError
from cellperf.store import CommitPace, RunRecord, Store


def run_campaign(campaign: Campaign, out_dir: Path, *, workers: int | None = None, cluster: str | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 on_run: Callable[[RunStatus, int, int], None] | None = None) -> Summary:
    """Runs every unfinished run of `campaign` into the store at `out_dir`: on this host
    (`campaign.parallel` runs at a time, each analysed beside the next runs' tests), or on a
    Dask cluster (`cluster`: a scheduler's address; `workers`: a local cluster of that many
    processes), whose workers run whole runs while this process alone writes the store.

    `on_progress(progress)` is called about twice a second; `on_run(status, index, count)`
    after each commit."""
    with Store.open(out_dir, create=True) as store:
        store.write_on_one_thread()
        stored = store.campaign()
        if stored is not None and stored["name"] != campaign.name:
            raise UserError(f"{out_dir}: holds campaign '{stored['name']}', not '{campaign.name}'; use another --out")
        store.set_campaign({
            "name": campaign.name, "description": campaign.description, "testbed": campaign.testbed.kind,
            "spec_toml": campaign.text, "spec_sha256": campaign.sha256, "created_at": datetime.now(timezone.utc),
            "cellperf_version": __version__})
        summary = Summary(out_dir, len(campaign.runs), 0, removed_debris=store.remove_debris())
        states = store.run_states()
        todo = []
        for run in campaign.runs:
            state = states.get(run.run_id)
            if state and state[0] == "ok":
                if state[1] != run.config_sha256(campaign):
                    raise UserError(f"{campaign.path}: run {run.run_id} in {out_dir} was made with other settings; "
                                    "restore the campaign file or use another --out")
                summary.skipped += 1
            else:
                todo.append(run)
        if not todo:
            return summary
        progress = Progress(todo, slots=campaign.parallel if not (workers or cluster) else workers or 1)
        if workers or cluster:
            from cellperf.campaign.cluster import local_resources, on_cluster
            from cellperf.campaign.corpus import _dask_client

            with _dask_client(workers or 0, cluster, store.root / ".dask-workers.log", local_resources(campaign),
                              "cellperf.campaign.runner") as client:
                if cluster:
                    progress.slots = max(1, len(client.scheduler_info()["workers"]))
                _commit_all(store, on_cluster(client, campaign, todo, store.runs_dir), summary, progress,
                            on_progress, on_run)
        else:
            _commit_all(store, _on_this_host(campaign, todo, store.runs_dir, progress), summary, progress,
                        on_progress, on_run)
        return summary


def _commit_all(store: Store, finished, summary: Summary, progress: Progress, on_progress, on_run) -> None:
    """Commits the runs as they come from `finished` (lists of (run, record, seconds) that
    finished together; an empty list every half second while nothing finished), several in
    one transaction when they finish close together (`CommitPace`), and reports the progress.
    What is held when the campaign is interrupted is committed before it stops."""
    pace = CommitPace()
    held: list[tuple[RunSpec, RunRecord, float]] = []

    def commit() -> None:
        batch = held.copy()
        held.clear()
        t0 = time.monotonic()
        store.commit_runs([record for _, record, _ in batch])
        pace.committed()
        commit_s = round((time.monotonic() - t0) / len(batch), 4)  # each run's share
        for run, record, seconds in batch:
            status = RunStatus(run.run_id, record.row["status"], record.row["reason"], seconds,
                               dict(record.row.get("phases") or {}, commit=commit_s), record.row.get("host"))
            summary.finished.append(status)
            progress.finished(run, status)
            if on_run:
                on_run(status, summary.skipped + len(summary.finished), summary.total)

    try:
        for batch in finished:
            held.extend(batch)
            if pace.due(len(held)):
                commit()
            if on_progress:
                on_progress(progress)
    except KeyboardInterrupt:
        if held:
            commit()
        raise
    if held:
        commit()
        if on_progress:
            on_progress(progress)


def _on_this_host(campaign: Campaign, todo: list[RunSpec], runs_dir: Path, progress: Progress):
    """The runs on this host: `parallel` tests at a time on the testbed, each run's analysis
    in a pool beside them (the next run's link comes up while the last one is analysed), at
    most `parallel` analyses waiting. A run's slot is free once its test is over (`over`): an
    emulated run's link drains and goes down beside the next run's test, in its own
    namespaces. Yields lists of (run, record, seconds) of the runs finished since the last
    (empty every half second while none finished)."""
    pending = list(todo)
    testing: dict[Future, tuple[RunSpec, float, Future]] = {}
    analysing: dict[Future, tuple[RunSpec, float]] = {}
    stop = threading.Event()  # no run is tried again once the campaign is interrupted
    # Simulated runs need no testbed (nor root): it is set up only for measured runs.
    measured = any(not r.simulated for r in todo)
    n = campaign.parallel
    with (testbed_for(campaign, runs_dir.parent) if measured else contextlib.nullcontext()) as testbed, \
            ThreadPoolExecutor(2 * n) as tests, ThreadPoolExecutor(n) as analyses:
        try:
            while pending or testing or analysing:
                in_test = sum(not over.done() for _, _, over in testing.values())
                while pending and in_test < n and len(testing) < 2 * n and len(analysing) <= n:
                    run, over = pending.pop(0), Future()
                    fut = tests.submit(measure_run, campaign, run, runs_dir, testbed, stop, _setter(over))
                    testing[fut] = (run, time.time(), over)
                    in_test += 1
                    progress.started(run)
                still_testing = [over for _, _, over in testing.values() if not over.done()]
                done, _ = wait([*testing, *still_testing, *analysing], timeout=0.5, return_when=FIRST_COMPLETED)
                finished = []
                for fut in done:
                    if fut in testing:
                        run, t0, over = testing.pop(fut)
                        _setter(over)()
                        analysing[analyses.submit(finish_run, campaign, fut.result())] = (run, t0)
                    elif fut in analysing:
                        run, t0 = analysing.pop(fut)
                        finished.append((run, fut.result(), time.time() - t0))
                yield finished
        except BaseException:
            stop.set()
            tests.shutdown(wait=False, cancel_futures=True)
            analyses.shutdown(wait=False, cancel_futures=True)
            raise


def _setter(over: Future):
    """Marks `over` done, once, from whichever thread comes first (the testbed's or the loop's)."""

    def mark() -> None:
        with contextlib.suppress(InvalidStateError):
            over.set_result(None)

    return mark
