"""The demo: emulated EV-DO, HSDPA, WiBro; a campaign; report.html.

EV-DO, HSDPA and WiBro links emulated (stationary, and mobile with handoffs), UDP CBR, TCP
bulk and VoIP tests through cellperf's own agents, both ends captured, analysed, stored in
results.duckdb and shown in report.html. About six minutes; --quick under one. Needs root
(network namespaces and TUN devices). Run it again to resume an interrupted demo. The campaign
file is cellperf/campaigns/demo.toml: copy it to start your own.

Examples:
  sudo cellperf demo
  sudo cellperf demo --quick --out /tmp/demo
  cellperf query cellperf-demo \\
       "SELECT network, scenario, test, status FROM runs"
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from cellperf.cli import folder_path
from cellperf.errors import UserError

CAMPAIGNS = Path(__file__).resolve().parent.parent / "campaigns"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", dest="out_dir", metavar="DIR", type=folder_path(Path),
                        help="Results folder (default: ./cellperf-demo, or ./cellperf-demo-quick with --quick).")
    parser.add_argument("--quick", action="store_true", help="6-s runs, six at a time: under a minute.")
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help="Print the summary and the paths as one JSON document.")


def run(args: argparse.Namespace) -> None:
    if os.geteuid() != 0:
        raise UserError("cellperf demo needs root: it builds an emulated testbed in network namespaces (run it with sudo)")
    from rich.console import Console

    from cellperf.commands.run import execute, print_summary
    from cellperf.progress import Progress
    from cellperf.report import build_report

    spec = CAMPAIGNS / ("demo-quick.toml" if args.quick else "demo.toml")
    out = args.out_dir or Path("cellperf-demo-quick" if args.quick else "cellperf-demo")
    t0 = time.monotonic()
    summary = execute(spec, out, args.as_json)
    with Progress("report", unit="steps", enabled=not args.as_json) as progress:
        report = build_report(out, out / "report.html", progress=progress)
    elapsed = time.monotonic() - t0
    if args.as_json:
        print(json.dumps({**summary.to_json(), "report": report["report"], "elapsed_s": elapsed}))
        return
    console = Console()
    print_summary(summary, console)
    console.print(f"report:  [bold]{report['report']}[/] (open it in a browser; it works offline)")
    console.print(f"query:   cellperf query {out} \"SELECT * FROM runs\"   ({elapsed:.0f} s in all)")
