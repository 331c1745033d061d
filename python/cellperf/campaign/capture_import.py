"""One imported run of captures, analysed into a store record: the work a Dask worker (or
the importing process itself) does per run (docs/import.md).

`analyse_capture(job)` is a pure function of the job's files and options: it stages the
run's folder inside the store's `runs/` (captures linked or copied in, the radio log in
cellperf's columns as `radio.csv`), runs the campaign's own analysis
(`cellperf.campaign.analyse.analyse_run`: the same tables and per-packet Parquet files as a
campaign run), reads the position track, and returns the `RunRecord`. It never touches the
database: the importing process commits records, one writer. A problem with the run's files
becomes a `failed` record with the reason, never an exception.

`analyse_batch(jobs)` is the unit of work handed out (one Dask task, or a step of the
importing process): several runs, so the scheduler's and the transport's cost per task is
spread over them. Each finished run's record is kept in its staging folder
(`record.pickle`), so a batch given again after its worker died redoes only the run that was
in flight. The batch's run-table rows come back joined, one Arrow table per table, for the
writer to insert as they are.
"""

from __future__ import annotations

import errno
import glob
import os
import pickle
import platform
import shutil
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa

from cellperf import __version__
from cellperf.campaign.analyse import analyse_run
from cellperf.campaign.captures import CaptureRun, content_identity, describe
from cellperf.campaign.clocks import min_one_way_delays_from_flows
from cellperf.campaign.failures import recorded_failure
from cellperf.campaign.spec import Network, RunSpec, TestSpec
from cellperf.errors import UserError, os_reason
from cellperf.store import STAGING_PREFIX, RunRecord, disk_full, staging_dir

#: A finished run's record, in its staging folder until the writer commits the run.
RECORD_FILE = "record.pickle"


@dataclass(frozen=True)
class Job:
    """What a worker needs for one run (small and picklable: paths, not data)."""

    run: CaptureRun
    run_id: str
    test: str
    repetition: int
    quick: str  # `captures.quick_key`: the files' path, size and mtime, and the options
    runs_dir: Path
    interval_s: float
    tz: str


def _place(src: Path, dst: Path, placed: dict[str, str]) -> None:
    """The file's content in the run's folder: a hard link when on the same file system (free),
    else a copy with the file's permission bits. A symbolic link is followed on purpose: the
    folder gets the content it points to, wherever that is, never a link out of the store
    (docs/import.md). `placed` maps the copy's path to the user's, for messages."""
    try:
        real = src.resolve(strict=True)
        try:
            os.link(real, dst)
        except OSError:
            shutil.copy(real, dst)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise disk_full(dst.parent) from None
        raise UserError(f"{src}: cannot copy into {dst.parent} ({os_reason(e)})") from None
    placed[str(dst)] = str(src)


def _users_paths(reason: str | None, placed: dict[str, str]) -> str | None:
    """A failure's reason naming the user's files, not their copies in the staging folder."""
    for copy, original in placed.items():
        reason = reason and reason.replace(copy, original)
    return reason


def _logs(job: Job, folder: Path, warnings: list[str], placed: dict[str, str]) -> pl.DataFrame | None:
    """Writes the radio log as `radio.csv` (cellperf's columns) and returns the positions of the
    GPS track, or else those the radio log carries."""
    from cellperf.radiologs import read_positions, read_radio

    run, positions, source = job.run, None, None
    if run.radio is not None and run.radio_format == "cellperf":
        _place(run.radio, folder / "radio.csv", placed)  # already in cellperf's columns
    elif run.radio is not None:
        _place(run.radio, folder / f"radio-source{run.radio.suffix}", placed)
        radio, positions = read_radio(run.radio, run.radio_format, job.tz)
        radio.write_csv(folder / "radio.csv")
        source = run.radio_format if positions is not None else None
    if run.gps is not None:
        _place(run.gps, folder / f"gps{run.gps.suffix}", placed)
        positions, source = read_positions(run.gps, run.gps_format, job.tz), run.gps_format
    if positions is None:
        return None
    if positions.height < 2:
        warnings.append(f"{run.gps or run.radio}: a single position fix; no route to draw")
    return positions.with_columns(source=pl.lit(source))


def _direction(flows: pl.DataFrame | None) -> str | None:
    """`down` or `up` after the data flows' bytes; None without data flows."""
    if flows is None:
        return None
    data = flows.filter(pl.col("role") == "data")
    if data.height == 0:
        return None
    by = dict(data.group_by("direction").agg(pl.col("bytes").sum()).iter_rows())
    return "down" if by.get("downlink", 0) >= by.get("uplink", 0) else "up"


def analyse_capture(job: Job) -> RunRecord:
    """The store record of one imported run (ok or failed); its files staged in the store."""
    t0 = time.time()
    run = job.run
    folder = staging_dir(job.runs_dir, f"{job.run_id}-{socket.gethostname()}-{os.getpid()}")
    tables: dict = {}
    analysis: dict = {"warnings": []}
    identity, digests = job.quick, {}  # until the files are read
    options = {"codec": run.codec} if run.codec else {}
    placed: dict[str, str] = {}
    with recorded_failure(folder, job.runs_dir) as failure:
        identity, digests = content_identity(run, job.interval_s, job.tz)
        for role in ("mn", "cn"):
            if getattr(run, role) is not None:
                _place(getattr(run, role), folder / f"{role}.pcap", placed)
        positions = _logs(job, folder, analysis["warnings"], placed)
        spec = RunSpec(job.run_id, Network(run.network, None, 0, None, {}), run.scenario,
                       TestSpec(job.test, run.test_type, {}), job.repetition, options, 0.0)
        tables, summary = analyse_run(spec, folder, interval_s=job.interval_s, mn_addr=run.mn_addr,
                                      clocks_synced=run.synced_clocks, control_port=run.control_port)
        summary["warnings"] = analysis["warnings"] + summary["warnings"]
        analysis = summary
        if positions is not None:
            tables["positions"] = positions.with_columns(run_id=pl.lit(job.run_id))
        owd = min_one_way_delays_from_flows(job.run_id, tables.get("flows"), run.synced_clocks)
        if owd.height:
            tables["min_owd"] = owd
    reason = _users_paths(failure.reason, placed)
    captures = analysis.get("captures") or []
    first = [c["first_ts_s"] for c in captures if c.get("first_ts_s") is not None]
    last = [c["last_ts_s"] for c in captures if c.get("last_ts_s") is not None]
    started = min(first) if first else t0
    ended = max(last) if last else started
    duration = ended - started if first else None
    analysis["import"] = {"seconds": time.time() - t0, "host": socket.gethostname(), "pid": os.getpid()}
    config = {"network": run.network, "scenario": run.scenario, "test": job.test,
              "test_type": analysis.get("test_type", run.test_type), "repetition": job.repetition,
              "options": options, "duration_s": duration, "interval_s": job.interval_s, "testbed": "imported",
              "imported": {"tool": "captures", **describe(run), "sha256": digests, "quick": job.quick,
                           "tz": job.tz}}
    row = {
        "run_id": job.run_id, "network": run.network, "scenario": run.scenario, "test": job.test,
        "test_type": config["test_type"], "direction": _direction(tables.get("flows")), "repetition": job.repetition,
        "profile": None, "config": config, "config_sha256": identity,
        "status": "failed" if reason else "ok", "reason": reason, "host": socket.gethostname(),
        "kernel": platform.release(), "versions": {"cellperf": __version__},
        "started_at": datetime.fromtimestamp(started, timezone.utc),
        "ended_at": datetime.fromtimestamp(ended, timezone.utc),
        "duration_s": duration, "mn_addr": run.mn_addr, "cn_addr": None,
        "result": None, "emulator": None, "analysis": analysis,
    }
    return RunRecord(row, tables if not reason else {}, folder)


@dataclass
class Batch:
    """Analysed runs: their records (rows; tables moved out) and their run-table rows joined,
    one Arrow table per table, with a run_id column (docs/scale.md)."""

    records: list[RunRecord]
    tables: dict[str, pa.Table]


def analyse_batch(jobs: list[Job]) -> Batch:
    """The runs of `jobs` analysed one after the other (those a dead worker of this batch
    finished are taken as it left them)."""
    records = []
    for job in jobs:
        record = finished_record(job)
        if record is None:
            record = analyse_capture(job)
            _keep(record)
        records.append(record)
    by_table: dict[str, list[pl.DataFrame]] = {}
    for record in records:
        for name, table in record.tables.items():
            by_table.setdefault(name, []).append(table)
        record.tables = {}
    tables = {name: (pl.concat(parts, how="diagonal_relaxed") if len(parts) > 1 else parts[0]).to_arrow()
              for name, parts in by_table.items()}
    return Batch(records, tables)


def _keep(record: RunRecord) -> None:
    """Writes the record into its staging folder (atomically: whole or absent)."""
    folder = record.staging_dir
    tmp = folder / f".{RECORD_FILE}"
    try:
        with open(tmp, "wb") as f:
            pickle.dump(record, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / RECORD_FILE)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise disk_full(folder) from None
        raise UserError(f"{folder}: cannot write ({os_reason(e)})") from None


def finished_record(job: Job) -> RunRecord | None:
    """The record of the job's run that an earlier attempt finished and left staged, if any."""
    for kept in job.runs_dir.glob(f"{glob.escape(f'{STAGING_PREFIX}{job.run_id}-')}*/{RECORD_FILE}"):
        try:
            with open(kept, "rb") as f:
                record = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError):
            continue
        imported = record.row.get("config", {}).get("imported", {})
        if record.row.get("run_id") == job.run_id and imported.get("quick") == job.quick:
            return record
    return None
