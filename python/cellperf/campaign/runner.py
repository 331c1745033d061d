"""`cellperf run`: every run of a campaign, each analysed as it finishes and committed to the
store atomically; resumable at any moment.

Resume rule: a run whose `runs` row says `ok` is never run again (its configuration must
not have changed: the stored hash is compared); a `failed` run is tried again; folders of
runs killed before their commit are removed. So a campaign killed at any moment and started
again loses nothing finished and duplicates nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import polars as pl
from cellperf import __version__
from cellperf.campaign.analyse import analyse_run, member_ports
from cellperf.campaign.failures import recorded_failure
from cellperf.campaign.radio import cut_csv
from cellperf.campaign.spec import Campaign, RunSpec
from cellperf.campaign.testbed import Outcome, testbed_for
from cellperf.errors import UserError
from cellperf.store import RunRecord, Store, disk_full



@dataclass
class RunStatus:
    run_id: str
    status: str
    reason: str | None
    seconds: float


@dataclass
class Summary:
    out_dir: Path
    total: int
    skipped: int  # finished before this invocation
    finished: list[RunStatus] = field(default_factory=list)
    removed_debris: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RunStatus]:
        return [r for r in self.finished if r.status == "failed"]

    def to_json(self, store: Store | None = None) -> dict:
        out = {
            "out_dir": str(self.out_dir), "database": str(self.out_dir / "results.duckdb"),
            "runs_total": self.total, "runs_skipped": self.skipped,
            "runs_done": sum(r.status == "ok" for r in self.finished),
            "runs_failed": [{"run_id": r.run_id, "reason": r.reason} for r in self.failed],
            "runs": [r.__dict__ for r in self.finished],
        }
        if self.removed_debris:
            out["removed_unfinished"] = self.removed_debris
        return out


def _iso(t: float) -> datetime:
    return datetime.fromtimestamp(t, timezone.utc)


def _versions() -> dict:
    import duckdb
    import polars

    return {"cellperf": __version__, "python": platform.python_version(), "duckdb": duckdb.__version__,
            "polars": polars.__version__}


#: Errors that say the network (not the test, the testbed or the tools) failed a run: no
#: path, refused, reset, timed out. As the probe words them (Rust's `(os error N)`) or Python
#: (`os.strerror`).
NETWORK_ERRNOS = (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN, errno.ECONNREFUSED,
                  errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EPIPE, errno.ENOBUFS)
NETWORK_PHRASES = ("cannot connect", "control connection", "timed out", *(f"(os error {n})" for n in NETWORK_ERRNOS),
                   *(os.strerror(n) for n in NETWORK_ERRNOS))


def network_failure(reason: str) -> bool:
    """Whether a run's failure is the network's (tried again on a real network), not one that
    would fail again the same way (a wrong token, an option refused, a capture that would not start)."""
    return any(phrase in reason for phrase in NETWORK_PHRASES)


def execute_run(campaign: Campaign, run: RunSpec, store: Store, testbed, stop: threading.Event) -> RunRecord:
    """Runs, collects and analyses one run; a failure becomes a `failed` record with the
    reason (never an exception), except a full disk, which stops the campaign. On a real
    network a run that failed for a network reason is tried again (`[testbed] retries`,
    `retry_wait`), unless `stop` is set meanwhile (the campaign is interrupted); every attempt
    is kept in `run_attempts`."""
    real = campaign.testbed.kind == "real" and not run.simulated
    attempts = []
    while True:
        folder, outcome, tables, analysis, reason = _attempt(campaign, run, store, testbed)
        if real:
            attempts.append({"run_id": run.run_id, "attempt": len(attempts) + 1, "started_at": _iso(outcome.started_at),
                             "ended_at": _iso(max(outcome.ended_at, outcome.started_at)),
                             "status": "failed" if reason else "ok", "reason": reason})
        if not real or reason is None or len(attempts) > campaign.testbed.retries or not network_failure(reason):
            break
        if stop.wait(campaign.testbed.retry_wait_s):  # (the next attempt's folder replaces this one's)
            break
    tables = tables if not reason else {}
    if attempts:
        tables["run_attempts"] = pl.DataFrame(attempts)
    row = {
        "run_id": run.run_id, "network": run.network.name, "scenario": run.scenario, "test": run.test.name,
        "test_type": run.test.type, "direction": run.options.get("direction"), "repetition": run.repetition,
        "profile": run.profile, "config": run.config(campaign), "config_sha256": run.config_sha256(campaign),
        "status": "failed" if reason else "ok", "reason": reason, "host": socket.gethostname(),
        "kernel": platform.release(), "versions": _versions(),
        "started_at": _iso(outcome.started_at), "ended_at": _iso(max(outcome.ended_at, outcome.started_at)),
        "duration_s": (outcome.result or {}).get("duration_s"), "mn_addr": outcome.mn_addr,
        "cn_addr": outcome.cn_addr, "result": outcome.result, "emulator": outcome.emulator,
        "analysis": analysis or None,
    }
    return RunRecord(row, tables, folder)


def _attempt(campaign: Campaign, run: RunSpec, store: Store, testbed) -> tuple[Path, Outcome, dict, dict, str | None]:
    """One attempt at a run in a fresh staging folder: (folder, outcome, tables, analysis, failure reason)."""
    folder = store.staging_dir(f"{run.run_id}-{os.getpid()}")
    started = time.time()
    outcome = Outcome(started, started)
    tables: dict = {}
    analysis: dict = {}
    with recorded_failure(folder, store.root) as failure:
        if run.simulated:
            from cellperf.campaign.simulated import simulate_run

            outcome, tables = simulate_run(run, folder)
        else:
            outcome, tables, analysis = _measure(campaign, run, folder, testbed)
        failure.reason = outcome.error
    if failure.reason and os.strerror(errno.ENOSPC) in failure.reason:
        # A child (capture, emulator, probe) ran out of space: every later run would too.
        raise disk_full(store.root)
    return folder, outcome, tables, analysis, failure.reason


def _measure(campaign: Campaign, run: RunSpec, folder: Path, testbed) -> tuple[Outcome, dict, dict]:
    """Runs a measured test on the testbed and analyses what it captured."""
    tables: dict = {}
    analysis: dict = {}
    outcome = testbed.run(run, folder)
    if campaign.radio_log.kind == "csv":
        cut_csv(campaign.radio_log.path, outcome.started_at, outcome.ended_at, folder / "radio.csv")
    if outcome.error is None:
        tables, analysis = analyse_run(
            run, folder, interval_s=campaign.interval_s, mn_addr=outcome.mn_addr,
            clocks_synced=outcome.clocks_synced,
            # A page load has no agents' control connection (a page server may even share its port).
            control_port=None if run.test.type == "web" else getattr(testbed, "port", None) or _port(campaign),
            ports=member_ports(run, outcome.result), mn_addrs=(outcome.emulator or {}).get("mn_addrs"))
        analysis["warnings"] = outcome.warnings + analysis.get("warnings", [])
        if run.test.type == "web":
            from cellperf.campaign.web import web_tables

            tables.update(web_tables(run, outcome.result, folder))
        elif run.test.type == "stream":
            from cellperf.campaign.apps import stream_tables

            tables.update(stream_tables(run, outcome.result))
        elif run.test.type == "interactive":
            from cellperf.campaign.apps import interactive_tables

            tables.update(interactive_tables(run, outcome.result, folder))
    return outcome, tables, analysis


def _port(campaign: Campaign) -> int | None:
    if campaign.testbed.kind != "real" or campaign.testbed.server is None:
        return None
    server = campaign.testbed.server
    tail = server.rsplit("]", 1)[-1] if server.startswith("[") else server
    return int(tail.rsplit(":", 1)[1]) if tail.count(":") == 1 and tail.rsplit(":", 1)[1].isdigit() else 5250


def run_campaign(campaign: Campaign, out_dir: Path, *, on_progress: Callable | None = None,
                 on_run: Callable[[RunStatus, int, int], None] | None = None) -> Summary:
    """Runs every unfinished run of `campaign` into the store at `out_dir`.

    `on_progress(done_s, total_s, running)` is called about twice a second with planned
    seconds done (for an ETA); `on_run(status, index, count)` after each commit."""
    with Store.open(out_dir, create=True) as store:
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
        planned = {r.run_id: r.planned_s for r in todo}
        total_s = sum(planned.values())
        done_s = 0.0
        running: dict[Future, tuple[RunSpec, float]] = {}
        pending = list(todo)
        stop = threading.Event()  # no run is tried again once the campaign is interrupted
        # Simulated runs need no testbed (nor root): it is set up only for measured runs.
        measured = any(not r.simulated for r in todo)
        with (testbed_for(campaign, out_dir) if measured else contextlib.nullcontext()) as testbed, \
                ThreadPoolExecutor(campaign.parallel) as pool:
            try:
                while pending or running:
                    while pending and len(running) < campaign.parallel:
                        run = pending.pop(0)
                        running[pool.submit(execute_run, campaign, run, store, testbed, stop)] = (run, time.time())
                    finished, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        run, t0 = running.pop(fut)
                        record = fut.result()
                        store.commit_run(record)
                        done_s += planned[run.run_id]
                        status = RunStatus(run.run_id, record.row["status"], record.row["reason"], time.time() - t0)
                        summary.finished.append(status)
                        if on_run:
                            on_run(status, summary.skipped + len(summary.finished), summary.total)
                    if on_progress:
                        now = time.time()
                        partial = sum(min(now - t0, planned[r.run_id]) for r, t0 in running.values())
                        on_progress(done_s + partial, total_s, [r.run_id for r, _ in running.values()])
            except BaseException:
                stop.set()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        return summary
