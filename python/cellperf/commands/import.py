"""Import captures with radio and GPS logs, or iperf3/D-ITG results.

Everything goes into a results store (STORE_DIR, created if absent; usually a campaign's --out).

Captures: a folder with one folder per run (RUN/mn.pcap and/or RUN/cn.pcap, pcapng too;
optional RUN/radio.* and RUN/gps.*), or a manifest .csv for other layouts (docs/import.md).
Each run is analysed as a campaign run is and stored the same way, so `cellperf report`
and `cellperf query` show it like any other. Importing again skips what is stored (content
hashes); a killed import resumes. A corpus of more than a few runs is analysed on a local
Dask cluster (--workers), or on a running one (--cluster tcp://HOST:8786; the store and the
captures must then be at the same paths on every worker, e.g. a shared file system).

Radio logs: G-NetTrack Pro CSV, MobileInsight decoded XML/JSON, cellperf's radio.csv.
Positions: NMEA 0183, GPX, gpsd JSON (or those the radio log carries).

iperf3/D-ITG: one run per file, with flows, per-interval series and (D-ITG) the per-packet log.

Exit status: 0 all imported, 1 bad input (nothing stored), 3 some runs failed (the rest stored).

Examples:
  cellperf import results/ --captures drive-2024-05/ --network KT-HSDPA \\
       --scenario mobile
  cellperf import results/ --captures runs.csv --workers 2
  cellperf import results/ --captures /nfs/corpus/ --cluster tcp://10.0.0.5:8786
  cellperf import results/ --network SKT-WiBro --scenario mobile \\
       --iperf3 run-*.json
  cellperf import results/ --network KT-HSDPA --ditg recv.txt \\
       --direction up --date 2009-05-14
  cellperf report results/
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.agents.interop import DEFAULT_INTERVAL_S
from cellperf.cli import file_path, folder_path, iso_date
from cellperf.errors import UserError
from cellperf.validate import number_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_dir", metavar="STORE_DIR", type=folder_path(Path), help="The results folder.")
    parser.add_argument("--captures", metavar="FOLDER|MANIFEST.csv", type=Path,
                        help="Runs of captures: one folder per run (RUN/mn.pcap, RUN/cn.pcap, RUN/radio.*, "
                             "RUN/gps.*) or a manifest (docs/import.md).")
    parser.add_argument("--iperf3", dest="iperf3_files", metavar="FILE", nargs="+", action="extend", default=[],
                        type=file_path(Path),
                        help="Output of `iperf3 -c SERVER -J` (one or more; repeatable); the client is the mobile node.")
    parser.add_argument("--ditg", dest="ditg_files", metavar="FILE", nargs="+", action="extend", default=[],
                        type=file_path(Path), help="Per-packet text of `ITGDec RECV_LOG -l FILE` (one or more; repeatable).")
    parser.add_argument("--network", help="Network label of the imported runs (as a campaign's [[networks]] name); "
                                          "captures: default 'imported'.")
    parser.add_argument("--scenario", default="stationary",
                        help="Scenario label: stationary, mobile or any other (subway, KTX, campus, ...), as a campaign's.")
    parser.add_argument("--test", dest="test_name", metavar="NAME",
                        help="Test label (default: captures 'capture'; iperf3/D-ITG TOOL-TYPE-DIRECTION).")
    parser.add_argument("--test-type", default="auto", metavar="TYPE",
                        help="Captures: the test the run made (udp-cbr, tcp-bulk, voip, ...; default auto: "
                             "the protocol of the largest flow).")
    parser.add_argument("--codec", metavar="CODEC",
                        help="Captures, --test-type voip: the call's codec, g711 or g729 (default: told from the "
                             "packets' size and interval, as the VoIP test sends them).")
    parser.add_argument("--mn-addr", metavar="ADDR", help="Captures: the mobile node's address, when the TTL rule cannot tell.")
    parser.add_argument("--synced-clocks", action="store_true",
                        help="Captures: the MN and CN clocks agree (GPS), so one-way delays are raw, not excess.")
    parser.add_argument("--control-port", type=number_arg(lo=1, hi=65535, integer=True, unit="a port"), metavar="PORT",
                        help="Captures: TCP port of an agents' control connection, kept out of the test's data "
                             "(they are known by their hello on any port; this marks a port's connections too).")
    parser.add_argument("--tz", default="UTC", metavar="ZONE",
                        help="Captures: time zone of radio logs that write local time without a zone "
                             "(G-NetTrack), e.g. Asia/Seoul.")
    parser.add_argument("--workers", type=number_arg(lo=1, hi=512, integer=True, unit="workers"), metavar="N",
                        help="Captures: analyse on a local Dask cluster of N processes (default: one per core "
                             "for more than 4 runs; 1: in this process).")
    parser.add_argument("--cluster", metavar="tcp://HOST:PORT", help="Captures: a running Dask scheduler to analyse on.")
    parser.add_argument("--direction", dest="ditg_direction", default="up", choices=["up", "down"],
                        help="D-ITG: up if its sender was the mobile node, down if its receiver was.")
    parser.add_argument("--date", type=iso_date, metavar="YYYY-MM-DD",
                        help="D-ITG: day the test started (default: the file's date).")
    parser.add_argument("--interval", metavar="SECONDS", default=None,
                        type=number_arg(lo=0, lo_open=True, hi=86400, unit="seconds"),
                        help=f"Interval of the series, seconds (default {DEFAULT_INTERVAL_S:g}; iperf3 keeps its own -i intervals).")
    parser.add_argument("--campaign", dest="campaign_name", metavar="NAME",
                        help="Campaign name when STORE_DIR has no store yet (default: its folder name).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the imported runs as one JSON document.")


def run(args: argparse.Namespace) -> None:
    interval = args.interval if args.interval is not None else DEFAULT_INTERVAL_S
    if args.captures is not None:
        if args.iperf3_files or args.ditg_files:
            raise UserError("give --captures or --iperf3/--ditg, not both (run the import twice)")
        return _captures(args, interval)
    from cellperf.campaign.imports import Source, import_results

    if args.network is None:
        raise UserError("--network: required with --iperf3 and --ditg")
    sources = [Source("iperf3", p) for p in args.iperf3_files] + [Source("ditg", p) for p in args.ditg_files]
    runs = import_results(args.store_dir, sources, network=args.network, scenario=args.scenario, test=args.test_name,
                          ditg_direction=args.ditg_direction, date=args.date, interval_s=interval,
                          campaign=args.campaign_name)
    if args.as_json:
        print(json.dumps({"store": str(args.store_dir), "runs": [r.__dict__ for r in runs]}))
        return
    for r in runs:
        print(f"{r.file}: {r.status} as {r.run_id}")
    print(f"results: {args.store_dir / 'results.duckdb'}")


def _check_zone(tz: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(f"--tz: unknown time zone '{tz}' (e.g. UTC, Europe/Dublin, Asia/Seoul)") from None
    return tz


def _captures(args: argparse.Namespace, interval: float) -> None:
    from rich.console import Console

    from cellperf.campaign.captures import CaptureRun
    from cellperf.campaign.corpus import import_captures
    from cellperf.campaign.spec.values import identifier
    from cellperf.commands.run import print_summary

    if not args.captures.exists():
        raise UserError(f"--captures {args.captures}: no such file or folder")
    test = args.test_name or "capture"
    try:
        identifier(test, "test")
    except ValueError as e:
        raise UserError(f"--test: '{test}' {e}") from None
    defaults = CaptureRun(name="", mn=None, cn=None, network=args.network or "imported", scenario=args.scenario,
                          test_type=args.test_type, mn_addr=args.mn_addr, synced_clocks=args.synced_clocks,
                          control_port=args.control_port, codec=args.codec)
    from cellperf.progress import Progress

    def on_run(status, index, count):
        progress.update(index, detail=status.run_id)
        if status.status != "ok":
            progress.note(f"{status.run_id}: failed: {status.reason}")

    with Progress("import", unit="runs", enabled=not args.as_json) as progress:
        summary, stats = import_captures(
            args.store_dir, args.captures, defaults, test=test, interval_s=interval, tz=_check_zone(args.tz),
            workers=args.workers, cluster=args.cluster, campaign=args.campaign_name,
            on_start=progress.set_total, on_run=on_run)
    if summary.finished and not any(r.status == "ok" for r in summary.finished) and not summary.skipped:
        first = summary.failed[0]
        more = f" (and {len(summary.failed) - 1} more runs failed)" if len(summary.failed) > 1 else ""
        raise UserError(f"{first.reason}{more}; nothing stored")
    done = sum(r.status == "ok" for r in summary.finished)
    if args.as_json:
        print(json.dumps({**summary.to_json(), "corpus": stats.to_json(done)}))
    else:
        print_summary(summary, Console())
    if summary.failed:
        sys.exit(3)
