"""Import iperf3 and D-ITG results into a campaign's results store.

Results measured with iperf3 or D-ITG go into the results store in STORE_DIR (created if
absent; usually a campaign's --out), one run per file, with flows, per-interval series and
(D-ITG) the per-packet log, so `cellperf report` and `cellperf query` show them beside the
campaign's own runs. Importing a file again does nothing.

Examples:
  cellperf import results/ --network SKT-WiBro --scenario mobile --iperf3 old/run-*.json
  cellperf import results/ --network KT-HSDPA --ditg recv.txt --direction down --date 2009-05-14
  cellperf report results/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellperf.agents.interop import DEFAULT_INTERVAL_S
from cellperf.cli import file_path, folder_path, iso_date
from cellperf.validate import number_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_dir", metavar="STORE_DIR", type=folder_path(Path), help="The results folder.")
    parser.add_argument("--iperf3", dest="iperf3_files", metavar="FILE", nargs="+", action="extend", default=[],
                        type=file_path(Path),
                        help="Output of `iperf3 -c SERVER -J` (one or more; repeatable); the client is the mobile node.")
    parser.add_argument("--ditg", dest="ditg_files", metavar="FILE", nargs="+", action="extend", default=[],
                        type=file_path(Path), help="Per-packet text of `ITGDec RECV_LOG -l FILE` (one or more; repeatable).")
    parser.add_argument("--network", required=True,
                        help="Network label of the imported runs (as a campaign's [[networks]] name).")
    parser.add_argument("--scenario", default="stationary", help="stationary or mobile.")
    parser.add_argument("--test", dest="test_name", metavar="NAME",
                        help="Test label (default: TOOL-TYPE-DIRECTION, e.g. iperf3-udp-cbr-down).")
    parser.add_argument("--direction", dest="ditg_direction", default="up", choices=["up", "down"],
                        help="D-ITG: up if its sender was the mobile node, down if its receiver was.")
    parser.add_argument("--date", type=iso_date, metavar="YYYY-MM-DD",
                        help="D-ITG: day the test started (default: the file's date).")
    parser.add_argument("--interval", metavar="SECONDS", default=DEFAULT_INTERVAL_S, type=number_arg(lo=0, lo_open=True, hi=86400, unit="seconds"),
                        help="D-ITG: interval of the series, seconds (iperf3 keeps its own -i intervals).")
    parser.add_argument("--campaign", dest="campaign_name", metavar="NAME",
                        help="Campaign name when STORE_DIR has no store yet (default: its folder name).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the imported runs as one JSON document.")


def run(args: argparse.Namespace) -> None:
    from cellperf.campaign.imports import Source, import_results

    sources = [Source("iperf3", p) for p in args.iperf3_files] + [Source("ditg", p) for p in args.ditg_files]
    runs = import_results(args.store_dir, sources, network=args.network, scenario=args.scenario, test=args.test_name,
                          ditg_direction=args.ditg_direction, date=args.date, interval_s=args.interval,
                          campaign=args.campaign_name)
    if args.as_json:
        print(json.dumps({"store": str(args.store_dir), "runs": [r.__dict__ for r in runs]}))
        return
    for r in runs:
        print(f"{r.file}: {r.status} as {r.run_id}")
    print(f"results: {args.store_dir / 'results.duckdb'}")
