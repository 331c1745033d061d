"""`cellperf import --captures`: a corpus of captured runs analysed (here, on a local Dask
cluster, or on a remote one) and committed into a results store (docs/import.md, docs/scale.md).

The importing process is the store's only writer. It finds the runs, skips those already
stored (by a quick check of the files' paths, sizes and mtimes), and hands the others, in
batches (`batches`), to `capture_import.analyse_batch` (jobs of paths and options, never
data), on Dask workers or itself, through the same function; workers stage each run's files
and Parquet inside the store's `runs/` and send back each batch's rows, which this process
commits as they arrive, those received within a second in one transaction. So a kill -9 at
any moment loses only runs not yet committed, and the same command resumes: committed runs
are found by their content hash, debris of unfinished ones is removed. A Dask worker that
dies takes only its run with it: the scheduler gives its batch to another worker
(`distributed`'s allowed failures), which takes the runs finished before as they were left;
a run that keeps killing workers is recorded as failed.

A run whose files cannot be analysed is stored as `failed` with the reason and the others
are imported; when every run fails nothing is stored (and a store this import created is
removed), so a wrong folder or a bad single pair leaves no trace.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cellperf.campaign.capture_import import RECORD_FILE, Batch, Job, analyse_batch, finished_record
from cellperf.campaign.captures import CaptureRun, find_runs, quick_key
from cellperf.campaign.imports import ensure_campaign
from cellperf.campaign.summary import RunStatus, Summary
from cellperf.errors import UserError
from cellperf.store import DB_NAME, RUNS_DIR, CommitPace, RunRecord, Store

#: A corpus larger than this goes to a local Dask cluster unless `--workers` says otherwise.
FEW_RUNS = 4
#: Seconds to reach a scheduler before giving up.
CONNECT_TIMEOUT_S = 10
#: The local cluster's processes write their own output here, in the store's folder.
WORKERS_LOG = ".dask-workers.log"
#: Tasks: see `batches`.
BATCH_RUNS = 32
BATCH_SPLIT = 3
#: A local cluster's Dask settings (the nannies hand them to their workers): no statistical
#: profiler (it samples each worker's stack every 10 ms: ~10 % of a worker's CPU here), the
#: housekeeping timers slowed from 20 ms (event-loop tick), 100 ms (memory monitor) and 500 ms
#: (system monitor) to seconds, and no work stealing (tasks are batches cut to finish
#: together, see `batches`). Measured with two idle workers: 11-14 % of a core with Dask's
#: defaults, 2 % with these; that CPU is taken from the analysis when there are as many
#: workers as cores.
LOCAL_DASK_CONFIG = {"distributed.worker.profile.enabled": False,
                     "distributed.admin.tick.interval": "1s", "distributed.admin.tick.limit": "30s",
                     "distributed.admin.system-monitor.interval": "5s",
                     "distributed.worker.memory.monitor-interval": "1s",
                     "distributed.scheduler.work-stealing": False}
#: One run's analysis on one core: the parallelism of an import is across runs, one per
#: worker (cellperf's analysis would otherwise put two captures' TCP work on a second thread).
ONE_THREAD = {"CELLPERF_ANALYSIS_THREADS": "1"}
#: The environment of worker processes: their libraries' thread pools at one thread (polars
#: and Arrow would each start one thread per core in every worker), and the settings above as
#: Dask reads them from the environment (for `dask worker` processes started by hand).
WORKER_ENV = {"POLARS_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "ARROW_NUM_THREADS": "1",
              **ONE_THREAD,
              **{"DASK_" + key.upper().replace(".", "__").replace("-", "_"): str(value)
                 for key, value in LOCAL_DASK_CONFIG.items()}}


@dataclass
class CorpusStats:
    """What the driver measured (bench/corpus.py reads it from `--json`)."""

    engine: str
    workers: int
    startup_s: float = 0.0  # starting the local cluster or connecting to the scheduler
    wall_s: float = 0.0  # from the cluster being ready to the last commit: hashing, analysis, commits
    driver_s: float = 0.0  # time this process spent not waiting for workers, finding and hashing the runs too
    cpu_s: float = 0.0  # CPU time of this process (all its threads: a local Dask scheduler's too) over wall_s
    packets: int = 0

    def to_json(self, runs: int) -> dict:
        return {"engine": self.engine, "workers": self.workers, "startup_s": self.startup_s, "wall_s": self.wall_s,
                "runs_per_s": runs / self.wall_s if self.wall_s else None,
                "packets": self.packets, "packets_per_s": self.packets / self.wall_s if self.wall_s else None,
                "driver_ms_per_run": 1000 * self.driver_s / runs if runs else None,
                "process_cpu_ms_per_run": 1000 * self.cpu_s / runs if runs else None}


def batches(jobs: list[Job], slots: int) -> list[list[Job]]:
    """The jobs cut into tasks: each about 1/BATCH_SPLIT of what every one of `slots` worker
    threads still has to do, at most BATCH_RUNS runs: large tasks first (the scheduler's and
    the transport's cost per task spread over many runs), single runs at the end (the workers
    finish together)."""
    out, i = [], 0
    while i < len(jobs):
        size = max(1, min(BATCH_RUNS, math.ceil((len(jobs) - i) / (BATCH_SPLIT * max(slots, 1)))))
        out.append(jobs[i:i + size])
        i += size
    return out


def _in_process(jobs: list[Job]) -> Iterator[list[tuple[list[Job], Batch]]]:
    """The batches analysed here, one run at a time on one core, as one worker would."""
    for batch in batches(jobs, 1):
        with _environment(ONE_THREAD):
            done = analyse_batch(batch)
        yield [(batch, done)]


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """This process's environment with `values` set, as it was afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _dask_client(workers: int, cluster: str | None, log: Path, resources: dict | None = None,
                 warm: str = "cellperf.campaign.capture_import"):
    """A `distributed.Client` on the scheduler at `cluster`, or on a LocalCluster of
    `workers` single-threaded processes (the analysis is one core's work per run), each
    declaring `resources` (what it can run: `cellperf run`) and having imported `warm`.

    Ctrl-C is for this process alone (issue 31: it printed Dask's tracebacks): a SIGINT while
    the cluster starts or stops takes effect after, not half-way; a local cluster's worker
    processes ignore it once started (the terminal sends it to them too; this process stops
    them), and they write their output, start-up included, to `log`, not the terminal."""
    import logging

    # The cluster's own chatter (worker start and stop, a lost worker) is not the user's output.
    logging.getLogger("distributed").setLevel(logging.ERROR)
    stack = contextlib.ExitStack()
    with _sigint_deferred(), (_stderr_to(log) if not cluster else contextlib.nullcontext()):
        try:
            client = _start_client(stack, workers, cluster, resources, warm)
        except BaseException:
            stack.close()
            raise
    try:
        yield client
    finally:
        with _sigint_deferred():
            stack.close()


@contextlib.contextmanager
def _sigint_deferred():
    """A SIGINT arriving in the block raises KeyboardInterrupt when the block ends (also
    instead of what the block raised: the workers it reached may have failed to start)."""
    came = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    except BaseException:
        if not came:
            raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if came:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _stderr_to(path: Path):
    """File descriptor 2 of this process, and of every process started meanwhile, on `path`."""
    saved = os.dup(2)
    try:
        with open(path, "ab") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_client(stack: contextlib.ExitStack, workers: int, cluster: str | None, resources: dict | None, warm: str):
    import logging

    from distributed import Client, LocalCluster

    if cluster:
        try:
            return stack.enter_context(Client(cluster, timeout=CONNECT_TIMEOUT_S))
        except (OSError, TimeoutError) as e:
            raise UserError(f"--cluster {cluster}: cannot reach the Dask scheduler ({str(e).splitlines()[0]})") from None
        except ValueError as e:
            raise UserError(f"--cluster {cluster}: not a scheduler address ({e}); e.g. tcp://HOST:8786") from None
    import dask

    # One thread per worker process, in the libraries too: N workers on N cores, not N x N
    # threads. (The nannies hand this process's Dask settings to their workers.)
    stack.enter_context(dask.config.set(LOCAL_DASK_CONFIG))
    lc = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                          dashboard_address=None, silence_logs=logging.ERROR, env=WORKER_ENV,
                                          resources=resources))
    client = stack.enter_context(Client(lc))
    # Each worker imports the analysis once, up front, not inside its first run.
    client.run(importlib.import_module, warm)
    client.run(_ignore_sigint)
    return client


def _on_dask(client, jobs: list[Job]) -> Iterator[list[tuple[list[Job], Batch]]]:
    """The finished batches, in groups of those done since the last group was taken."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    slots = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
    futures = {}

    def submit(batch: list[Job]):
        fut = client.submit(analyse_batch, batch, key=f"cellperf-import-{batch[0].quick}-{len(batch)}", pure=False)
        futures[fut] = batch
        return fut

    running = as_completed([submit(b) for b in batches(jobs, slots)])
    for done in running.batches():
        finished = [f for f in done if f.status == "finished"]
        out = list(zip([futures[f] for f in finished], client.gather(finished))) if finished else []
        for fut in done:
            if fut.status == "finished":
                continue
            batch = futures[fut]
            try:
                fut.result()
            except KilledWorker:
                if len(batch) > 1:
                    # Every worker that took the batch died: keep the runs they finished, try
                    # the others one by one, so that only a run that kills workers fails.
                    kept = [(job, finished_record(job)) for job in batch]
                    out.append(([j for j, r in kept if r], Batch([r for _, r in kept if r], {})))
                    for job, record in kept:
                        if record is None:
                            running.add(submit([job]))
                else:
                    out.append((batch, Batch([_failed(batch[0], "the run killed every Dask worker that tried it "
                                                                "(out of memory?)")], {})))
            except UserError:
                raise  # a full disk: stop
            except Exception as e:  # a worker's exception outside the analysis (e.g. it cannot import cellperf)
                out.append((batch, Batch([_failed(job, f"Dask worker: {type(e).__name__}: {e}") for job in batch], {})))
        for fut in done:
            del futures[fut]
            fut.release()
        yield out


def _failed(job: Job, reason: str) -> RunRecord:
    return RunRecord({"run_id": job.run_id, "status": "failed", "reason": reason}, {}, None)


def import_captures(store_dir: Path, source: Path, defaults: CaptureRun, *, test: str = "capture",
                    interval_s: float = 5.0, tz: str = "UTC", workers: int | None = None, cluster: str | None = None,
                    campaign: str | None = None,
                    on_start: Callable[[int], None] | None = None,
                    on_run: Callable[[RunStatus, int, int], None] | None = None) -> tuple[Summary, CorpusStats]:
    """Imports every run under `source` (folder or manifest) into the store at `store_dir`."""
    t_found = time.perf_counter()
    runs = find_runs(source, defaults)
    finding_s = time.perf_counter() - t_found
    n = local_workers(len(runs), workers, cluster)
    stats = CorpusStats("dask" if (cluster or n > 1) else "in-process", n)
    new_store = not (store_dir / DB_NAME).exists()
    folder_existed = store_dir.exists()
    store = Store.open(store_dir, create=True)
    store.write_on_one_thread()
    try:
        summary = Summary(store_dir, len(runs), 0, removed_debris=store.remove_debris())
        t_start = time.perf_counter()
        dask_client = _dask_client(n, cluster, store.root / WORKERS_LOG) if stats.engine == "dask" else None
        with dask_client or contextlib.nullcontext() as client:
            t0, cpu0 = time.perf_counter(), time.process_time()
            stats.startup_s = t0 - t_start
            jobs, stored = _plan(store, summary, runs, test, interval_s, tz)
            if on_start:
                on_start(len(jobs))
            results = _on_dask(client, jobs) if client is not None else _in_process(jobs)
            held, waited = _collect(store, results, stored, summary, stats, campaign, source, on_run)
        # Failed runs are stored once something of the corpus is: a wrong folder stores nothing.
        if held and (summary.skipped or any(r.status == "ok" for r in summary.finished)):
            store.commit_runs(held)
        stats.wall_s = time.perf_counter() - t0
        stats.cpu_s = time.process_time() - cpu0
        stats.driver_s = stats.wall_s - waited + finding_s
        store.remove_debris()
        return summary, stats
    finally:
        # A store this import created and stored nothing in goes (also when it was interrupted).
        try:
            empty = new_store and not store.frame("SELECT count(*) AS n FROM runs")["n"][0]
        except Exception:  # the error being raised says what happened to the store
            empty = False
        store.close()
        if empty:
            _remove_new_store(store_dir, folder_existed)


def _plan(store: Store, summary: Summary, runs: list[CaptureRun], test: str, interval_s: float,
          tz: str) -> tuple[list[Job], set[str]]:
    """A job per run not known to be stored (counted as skipped otherwise, by the quick check of
    `captures.quick_key`), and the identities of the runs stored ok. A run that failed before
    keeps its id, a new one takes the next free repetition of NETWORK.SCENARIO.TEST."""
    states = store.frame("""SELECT run_id, status, config_sha256,
                                   json_extract_string(config, '$.imported.quick') AS quick FROM runs""")
    by_quick = {q: (rid, st) for rid, st, _, q in states.iter_rows() if q}
    jobs, planned = [], set(states["run_id"])
    for run in runs:
        quick = quick_key(run, interval_s, tz)
        stored = by_quick.get(quick)
        if stored and stored[1] == "ok":
            summary.skipped += 1
            continue
        if stored:  # failed before: the same run again
            run_id = stored[0]
            repetition = int(run_id.rsplit(".", 1)[1])
        else:
            prefix = f"{run.network}.{run.scenario}.{test}."
            repetition = 1 + max((int(r[len(prefix):]) for r in planned
                                  if r.startswith(prefix) and r[len(prefix):].isdigit()), default=0)
            run_id = f"{prefix}{repetition}"
        planned.add(run_id)
        jobs.append(Job(run, run_id, test, repetition, quick, store.runs_dir, interval_s, tz))
    return jobs, set(states.filter(states["status"] == "ok")["config_sha256"])


def _collect(store: Store, results: Iterator[list[tuple[list[Job], Batch]]], stored: set[str], summary: Summary,
             stats: CorpusStats, campaign: str | None, source: Path,
             on_run: Callable[[RunStatus, int, int], None] | None) -> tuple[list[RunRecord], float]:
    """Commits the runs as their batches finish, but not one whose content is stored already
    (`stored`: identities, growing); returns the failed ones (held back) and the seconds spent
    waiting."""
    waited = 0.0
    held: list[RunRecord] = []
    pending: list[RunRecord] = []
    tables: dict[str, list[pa.Table]] = {}
    pace = CommitPace()
    while True:
        w0 = time.perf_counter()
        group = next(results, None)
        waited += time.perf_counter() - w0
        if group is None:
            break
        for jobs, batch in group:
            dropped = []
            for job, record in zip(jobs, batch.records):
                if record.staging_dir is not None:
                    (record.staging_dir / RECORD_FILE).unlink(missing_ok=True)
                if record.row["status"] == "ok" and record.row["config_sha256"] in stored:
                    # The same files under another name or path: stored already.
                    shutil.rmtree(record.staging_dir, ignore_errors=True)
                    dropped.append(job.run_id)
                    summary.skipped += 1
                    continue
                seconds = ((record.row.get("analysis") or {}).get("import") or {}).get("seconds", 0.0)
                status = RunStatus(job.run_id, record.row["status"], record.row["reason"], seconds)
                if status.status == "ok":
                    pending.append(record)
                    stored.add(record.row["config_sha256"])
                    stats.packets += sum(c.get("packets", 0) for c in record.row["analysis"].get("captures", []))
                else:
                    held.append(_complete_failed(record, job))
                summary.finished.append(status)
                if on_run:
                    on_run(status, summary.skipped + len(summary.finished), summary.total)
            for name, table in batch.tables.items():
                if dropped:
                    table = table.filter(pc.invert(pc.is_in(table["run_id"], pa.array(dropped))))
                tables.setdefault(name, []).append(table)
        if pace.due(len(pending)):
            _commit(store, pending, tables, campaign, source)
            pace.committed()
    _commit(store, pending, tables, campaign, source)
    return held, waited


def _commit(store: Store, records: list[RunRecord], tables: dict[str, list[pa.Table]], campaign: str | None,
            source: Path) -> None:
    """Commits the finished runs held and their rows (one transaction) and empties both."""
    if records:
        ensure_campaign(store, campaign, [f"captures {source}"])
        store.commit_runs(records, tables)
    records.clear()
    tables.clear()


def local_workers(runs: int, workers: int | None, cluster: str | None) -> int:
    """How many local workers: none on a remote cluster, `--workers` if given, else one per
    core for a corpus of more than a few runs, else the analysis runs in this process."""
    if cluster:
        return 0
    if workers is not None:
        return workers
    return min(os.cpu_count() or 1, runs) if runs > FEW_RUNS else 1


def _complete_failed(record: RunRecord, job: Job) -> RunRecord:
    """A failed record as a `runs` row of its own (a worker that died sent none)."""
    if "network" in record.row:
        return record
    run = job.run
    row = {"run_id": job.run_id, "network": run.network, "scenario": run.scenario, "test": job.test,
           "test_type": run.test_type, "repetition": job.repetition,
           "config": {"testbed": "imported", "imported": {"tool": "captures", "name": run.name, "quick": job.quick}},
           "config_sha256": job.quick, "status": "failed", "reason": record.row["reason"]}
    return RunRecord(row, {}, None)


def _remove_new_store(store_dir: Path, folder_existed: bool) -> None:
    """Undoes a store this import created and stored nothing in."""
    for name in (DB_NAME, f"{DB_NAME}.wal", WORKERS_LOG):
        with contextlib.suppress(FileNotFoundError):
            (store_dir / name).unlink()
    shutil.rmtree(store_dir / RUNS_DIR, ignore_errors=True)
    if not folder_existed:
        with contextlib.suppress(OSError):
            store_dir.rmdir()
