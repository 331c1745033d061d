"""Results of older campaigns measured with iperf3 (`-J`) or D-ITG (`ITGDec -l`) imported into a
campaign's store, as runs beside those `cellperf run` makes (docs/campaigns.md, "Importing").

The files are read by `cellperf.agents.interop` (the same reader as `cellperf interop`); each
file becomes one run: a `runs` row (status ok, the tool's result document, the file's
SHA-256 as its configuration hash), its `flows` (one per stream the tool summarised), its
`intervals`, and for D-ITG the per-packet log as the run's `agent_log.parquet`. The file
itself is copied into the run's folder, so the store stands alone.

Run ids follow the campaign's `NETWORK.SCENARIO.TEST.REPETITION`; a file is identified by its
content: importing it again is a no-op, and a new file of the same network, scenario and test
becomes the next repetition. Every file is read before anything is written, so a bad file
stops the import with one line and stores nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from cellperf import __version__
from cellperf.agents.interop import DEFAULT_INTERVAL_S, Imported, read_ditg, read_iperf3
from cellperf.campaign.analyse import _with_direction
from cellperf.campaign.spec.values import identifier, scenario_label
from cellperf.errors import UserError, os_reason
from cellperf.store import RunRecord, Store, write_parquet

TOOLS = ("iperf3", "ditg")


@dataclass
class Source:
    tool: str  # iperf3 | ditg
    path: Path


@dataclass
class ImportedRun:
    run_id: str
    file: str
    status: str  # imported | already stored


def _interval_s(imported: Imported) -> float:
    """The series' interval: the step between a flow's interval starts (iperf3's `-i`, or
    D-ITG's chosen interval); the whole test when there is a single interval."""
    iv = pl.from_arrow(imported.intervals).sort("flow_id", "start_s")
    steps = iv.select(pl.col("start_s").diff().over("flow_id")).drop_nulls()["start_s"]
    steps = steps.filter(steps > 0)
    return float(steps.median()) if steps.len() else float(imported.document["duration_s"])


def _flow_rows(imported: Imported, tool: str) -> pl.DataFrame:
    """One `flows` row per stream the tool summarised. iperf3 sums parallel streams (-P) of a
    direction into one summary: that row takes the direction's first stream id."""
    doc = imported.document
    iv = pl.from_arrow(imported.intervals)
    udp = doc["test"] == "udp-cbr"
    rows = []
    for key, s in doc["streams"].items():
        if tool == "iperf3":
            up = key == "up"
            flow_id = iv.filter(pl.col("uplink") == up)["flow_id"].min()
        else:  # "ditg:STEM/FLOW/DIRECTION"
            flow_id, up = int(key.rsplit("/", 2)[1]), key.endswith("/up")
        jitter, owd, rtt = s.get("jitter_ms") or {}, s.get("owd_ms") or {}, s.get("rtt_ms") or {}
        rows.append({
            "flow_id": flow_id, "role": "data", "proto": "udp" if udp else "tcp",
            "direction": "uplink" if up else "downlink",
            "packets": s.get("packets_received"), "bytes": s.get("bytes_received"), "duration_s": s.get("duration_s"),
            "goodput_bps": s.get("throughput_bps"), "throughput_bps": s.get("throughput_bps"),
            "rtt_median_ms": rtt.get("median"), "loss_rate": s.get("loss_rate"),
            "jitter_median_ms": jitter.get("median"), "jitter_p95_ms": jitter.get("p95"),
            "owd_median_ms": owd.get("median"), "owd_kind": owd.get("kind"),
            "retx_total": s.get("retransmits"), "retx_method": "iperf3 sender (TCP_INFO)" if s.get("retransmits") is not None else None,
            "detail": json.dumps({"imported": s}),
        })
    return pl.DataFrame(rows, schema_overrides={"flow_id": pl.UInt32, "packets": pl.UInt64, "bytes": pl.UInt64,
                                                "retx_total": pl.UInt64, "rtt_median_ms": pl.Float64,
                                                "jitter_median_ms": pl.Float64, "jitter_p95_ms": pl.Float64,
                                                "owd_median_ms": pl.Float64, "owd_kind": pl.String,
                                                "retx_method": pl.String}, infer_schema_length=None)


def _read(source: Source, *, direction: str, date: dt.date | None, interval_s: float) -> Imported:
    if source.tool == "iperf3":
        return read_iperf3(source.path)
    return read_ditg(source.path, date=date, direction=direction, interval_s=interval_s)


def ensure_campaign(store: Store, name: str | None, sources: list[str]) -> None:
    """A store made by an import alone records an `imported` campaign listing its sources;
    a campaign's store keeps its own record."""
    if store.campaign() is None:
        listing = "\n".join(f"# {s}" for s in sources)
        store.set_campaign({
            "name": name or store.root.resolve().name, "description": "imported results",
            "testbed": "imported", "spec_toml": f"# imported by cellperf import\n{listing}\n",
            "spec_sha256": hashlib.sha256(listing.encode()).hexdigest(),
            "created_at": datetime.now(timezone.utc), "cellperf_version": __version__})


def import_results(store_dir: Path, sources: list[Source], *, network: str, scenario: str = "stationary",
                   test: str | None = None, ditg_direction: str = "up", date: dt.date | None = None,
                   interval_s: float = DEFAULT_INTERVAL_S, campaign: str | None = None) -> list[ImportedRun]:
    """Imports every file of `sources` into the store at `store_dir` (created if absent)."""
    try:
        identifier(network, "network")
    except ValueError as e:
        raise UserError(f"--network: '{network}' {e}") from None
    if test is not None:
        try:
            identifier(test, "test")
        except ValueError as e:
            raise UserError(f"--test: '{test}' {e}") from None
    try:
        scenario_label(scenario)
    except ValueError as e:
        raise UserError(f"--scenario: {e}") from None
    if not sources:
        raise UserError("give at least one file: --iperf3 FILE or --ditg FILE")
    # Everything is read first: a bad file stops the import before anything is stored.
    read = []
    for source in sources:
        imported = _read(source, direction=ditg_direction, date=date, interval_s=interval_s)
        read.append((source, imported, hashlib.sha256(source.path.read_bytes()).hexdigest()))

    out: list[ImportedRun] = []
    with Store.open(store_dir, create=True) as store:
        ensure_campaign(store, campaign, [f"{s.tool} {s.path}" for s in sources])
        for source, imported, digest in read:
            doc = imported.document
            known = store.frame("SELECT run_id FROM runs WHERE config_sha256 = ?", [digest])
            if known.height:
                out.append(ImportedRun(known["run_id"][0], str(source.path), "already stored"))
                continue
            test_name = test or f"{source.tool}-{doc['test']}-{doc['direction']}"
            prefix = f"{network}.{scenario}.{test_name}."
            taken = store.frame("SELECT run_id FROM runs WHERE starts_with(run_id, ?)", [prefix])["run_id"]
            repetition = 1 + max((int(r[len(prefix):]) for r in taken if r[len(prefix):].isdigit()), default=0)
            run_id = f"{prefix}{repetition}"
            out.append(ImportedRun(run_id, str(source.path), "imported"))
            store.commit_run(_record(store, run_id, source, imported, digest, network=network, scenario=scenario,
                                     test=test_name, repetition=repetition))
    return out


def _record(store: Store, run_id: str, source: Source, imported: Imported, digest: str, *, network: str,
            scenario: str, test: str, repetition: int) -> RunRecord:
    doc = imported.document
    intervals = _with_direction(pl.from_arrow(imported.intervals))
    started = intervals["start_ts"].min()
    interval_s = _interval_s(imported)
    folder = store.staging_dir(f"{run_id}-import")
    try:
        shutil.copyfile(source.path, folder / source.path.name)
    except OSError as e:
        raise UserError(f"{folder}: cannot copy {source.path} ({os_reason(e)})") from None
    tables = {"intervals": intervals.with_columns(run_id=pl.lit(run_id), near_handoff=pl.lit(False)),
              "flows": _flow_rows(imported, source.tool).with_columns(run_id=pl.lit(run_id))}
    if imported.log is not None:
        write_parquet(pl.from_arrow(imported.log).with_columns(run_id=pl.lit(run_id)), folder / "agent_log.parquet")
    direction = {"up": "up", "down": "down", "both": "both"}[doc["direction"]]
    config = {"network": network, "scenario": scenario, "test": test, "test_type": doc["test"],
              "repetition": repetition, "options": {"direction": direction}, "duration_s": doc["duration_s"],
              "interval_s": interval_s, "testbed": "imported",
              "imported": {"tool": source.tool, "file": source.path.name, "sha256": digest}}
    row = {
        "run_id": run_id, "network": network, "scenario": scenario, "test": test, "test_type": doc["test"],
        "direction": direction, "repetition": repetition, "profile": None, "config": config,
        "config_sha256": digest, "status": "ok", "reason": None,
        "versions": {"cellperf": __version__, source.tool: doc["source"].get("version")},
        "started_at": started, "ended_at": started + dt.timedelta(seconds=doc["duration_s"]),
        "duration_s": doc["duration_s"], "cn_addr": (doc.get("server") or "").rsplit(":", 1)[0].split("/")[0] or None,
        "result": doc, "analysis": {"warnings": [], "imported_from": str(source.path)},
    }
    return RunRecord(row, tables, folder)
