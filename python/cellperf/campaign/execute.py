"""One run of a campaign: its test on the testbed or its simulation (`measure_run`), then its
analysis into a record for the store (`finish_run`). The same functions run on this host
(cellperf.campaign.runner) and on a Dask worker (cellperf.campaign.cluster)."""

from __future__ import annotations

import errno
import os
import platform
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from cellperf import __version__
from cellperf.campaign.analyse import analyse_run, member_ports
from cellperf.campaign.clocks import min_one_way_delays
from cellperf.campaign.failures import recorded_failure
from cellperf.campaign.radio import cut_csv
from cellperf.campaign.spec import Campaign, RunSpec
from cellperf.campaign.testbed import Outcome
from cellperf.store import RunRecord, disk_full, staging_dir


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


@dataclass
class Measured:
    """A run's test done (or failed), not yet analysed: what its analysis needs."""

    run: RunSpec
    folder: Path
    outcome: Outcome
    reason: str | None  # the test's failure
    attempts: list[dict]  # a real network's attempts (run_attempts rows)
    control_port: int | None
    tables: dict = field(default_factory=dict)  # a simulated run's rows


def measure_run(campaign: Campaign, run: RunSpec, runs_dir: Path, testbed, stop: threading.Event,
                test_over: Callable[[], None] = lambda: None) -> Measured:
    """Runs one run's test on the testbed (or its simulation) in a fresh staging folder; a
    failure becomes the reason (never an exception), except a full disk, which stops the
    campaign. On a real network a run that failed for a network reason is tried again
    (`[testbed] retries`, `retry_wait`), unless `stop` is set meanwhile (the campaign is
    interrupted); every attempt is kept in `run_attempts`. The emulated testbed calls
    `test_over` when the test's command has ended, before its link drains and goes down."""
    real = campaign.testbed.kind == "real" and not run.simulated
    attempts = []
    while True:
        folder = staging_dir(runs_dir, f"{run.run_id}-{os.getpid()}")
        started = time.time()
        outcome, tables = Outcome(started, started), {}
        with recorded_failure(folder, runs_dir.parent) as failure:
            if run.simulated:
                from cellperf.campaign.simulated import simulate_run

                t0 = time.monotonic()
                outcome, tables = simulate_run(run, folder)
                outcome.phases["simulate"] = time.monotonic() - t0
            else:
                outcome = testbed.run(run, folder, test_over)
            failure.reason = outcome.error
        if failure.reason and os.strerror(errno.ENOSPC) in failure.reason:
            # A child (capture, emulator, probe) ran out of space: every later run would too.
            raise disk_full(runs_dir.parent)
        if real:
            attempts.append({"run_id": run.run_id, "attempt": len(attempts) + 1, "started_at": _iso(outcome.started_at),
                             "ended_at": _iso(max(outcome.ended_at, outcome.started_at)),
                             "status": "failed" if failure.reason else "ok", "reason": failure.reason})
        if not real or failure.reason is None or len(attempts) > campaign.testbed.retries \
                or not network_failure(failure.reason):
            break
        if stop.wait(campaign.testbed.retry_wait_s):  # (the next attempt's folder replaces this one's)
            break
    # A page load has no agents' control connection (a page server may even share its port).
    port = None if run.test.type == "web" else getattr(testbed, "port", None) or _port(campaign)
    return Measured(run, folder, outcome, failure.reason, attempts, port, tables)


def finish_run(campaign: Campaign, m: Measured) -> RunRecord:
    """Analyses a measured run (off the testbed: the next run's test may be running) and
    makes its record; an analysis that fails makes the run `failed` with the reason."""
    run, outcome, phases = m.run, m.outcome, m.outcome.phases
    tables, analysis, reason = m.tables, {}, m.reason
    if not run.simulated and m.folder is not None:  # (a run the cluster lost has no folder)
        with recorded_failure(m.folder, m.folder.parent.parent) as failure:
            with phases.timed("radio_log"):
                if campaign.radio_log.kind == "csv":
                    cut_csv(campaign.radio_log.path, outcome.started_at, outcome.ended_at, m.folder / "radio.csv")
            if reason is None:
                with phases.timed("analysis"):
                    tables, analysis = _analyse(campaign, run, m.folder, outcome, m.control_port)
        reason = reason or failure.reason
    tables = tables if not reason else {}
    if not reason and outcome.result:
        owd = min_one_way_delays(run.run_id, outcome.result, outcome.clocks_synced)
        if owd.height:
            tables["min_owd"] = owd
    if m.attempts:
        tables["run_attempts"] = pl.DataFrame(m.attempts)
    row = {
        "run_id": run.run_id, "network": run.network.name, "scenario": run.scenario, "test": run.test.name,
        "test_type": run.test.type, "direction": run.options.get("direction"), "repetition": run.repetition,
        "profile": run.profile, "config": run.config(campaign), "config_sha256": run.config_sha256(campaign),
        "status": "failed" if reason else "ok", "reason": reason, "host": socket.gethostname(),
        "kernel": platform.release(), "versions": _versions(),
        "started_at": _iso(outcome.started_at), "ended_at": _iso(max(outcome.ended_at, outcome.started_at)),
        "duration_s": (outcome.result or {}).get("duration_s"), "mn_addr": outcome.mn_addr,
        "cn_addr": outcome.cn_addr, "result": outcome.result, "emulator": outcome.emulator,
        "analysis": analysis or None, "phases": phases.rounded(), "clock_sync": outcome.clock_sync,
    }
    return RunRecord(row, tables, m.folder)


def execute_run(campaign: Campaign, run: RunSpec, runs_dir: Path, testbed, stop: threading.Event) -> RunRecord:
    """One whole run: its test, then its analysis."""
    return finish_run(campaign, measure_run(campaign, run, runs_dir, testbed, stop))


def _analyse(campaign: Campaign, run: RunSpec, folder: Path, outcome: Outcome, control_port: int | None) -> tuple[dict, dict]:
    """The analysis of a measured run's captures, and its application's tables."""
    tables, analysis = analyse_run(
        run, folder, interval_s=campaign.interval_s, mn_addr=outcome.mn_addr, clocks_synced=outcome.clocks_synced,
        control_port=control_port, ports=member_ports(run, outcome.result),
        mn_addrs=(outcome.emulator or {}).get("mn_addrs"))
    analysis["warnings"] = outcome.warnings + analysis.get("warnings", [])
    if campaign.testbed.kind == "emulated" and run.mobile and "handoffs" in tables:
        # No GPS on the emulated testbed: the route map's positions come from a synthetic drive
        # over the radio log's span (cellperf.emulate.route).
        from cellperf.emulate.route import speed_kmh, synthetic_route

        times = pl.read_csv(folder / "radio.csv", columns=["time_s"])["time_s"]
        tables["positions"] = synthetic_route(times.min(), times.max(), speed_kmh(run.profile, run.speed)).with_columns(
            run_id=pl.lit(run.run_id))
    if run.test.type == "web":
        from cellperf.campaign.web import web_tables

        tables.update(web_tables(run, outcome.result, folder))
    elif run.test.type == "stream":
        from cellperf.campaign.apps import stream_tables

        tables.update(stream_tables(run, outcome.result, folder))
    elif run.test.type == "interactive":
        from cellperf.campaign.apps import interactive_tables

        tables.update(interactive_tables(run, outcome.result, folder))
    elif run.test.type == "hops":
        from cellperf.campaign.apps import hops_tables

        tables.update(hops_tables(run, outcome.result))
    return tables, analysis


def _port(campaign: Campaign) -> int | None:
    if campaign.testbed.kind != "real" or campaign.testbed.server is None:
        return None
    server = campaign.testbed.server
    tail = server.rsplit("]", 1)[-1] if server.startswith("[") else server
    return int(tail.rsplit(":", 1)[1]) if tail.count(":") == 1 and tail.rsplit(":", 1)[1].isdigit() else 5250
