"""Make the HTML report of a results store (and PNG/PDF figures).

The report of a campaign's results store (DIR, default the current folder): one HTML file with
interactive figures that opens offline, after seed 000 chapter 4 — throughput series with
handoffs, IQR box plots, second-order difference plots, jitter and loss CDFs, TCP
box-whiskers, ACK compression, retransmission classes, VoIP delay/loss/R series and R CDFs,
a summary table per network, the other seeds' studies, and for simulated runs (campaign tests
of type "simulate") seed 001's Tables 2/3 and Figs. 5-7.

Examples:
  cellperf report results/
  cellperf report results/ -o ~/campaign.html --figures paper-figures/
  cellperf report --json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellperf.cli import file_path, folder_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_dir", metavar="DIR", nargs="?", default=Path("."), type=Path,
                        help="The campaign's results folder (its --out). [default: .]")
    parser.add_argument("-o", "--output", metavar="FILE", type=file_path(Path),
                        help="HTML file to write (default: DIR/report.html).")
    parser.add_argument("--figures", dest="figures_dir", metavar="DIR", type=folder_path(Path),
                        help="Also write each figure as PNG and PDF here (needs Chromium).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print what was written as one JSON document.")


def run(args: argparse.Namespace) -> None:
    # The report stack (plotly, duckdb, polars) costs ~0.5 s to import: not for --help.
    from cellperf.progress import Progress
    from cellperf.report import build_report

    with Progress("report", unit="steps", enabled=not args.as_json) as progress:
        result = build_report(args.store_dir, args.output, figures_dir=args.figures_dir, progress=progress)
    if args.as_json:
        print(json.dumps(result))
    else:
        print(f"report: {result['report']} ({len(result['items'])} figures and tables)")
        if args.figures_dir is not None:
            print(f"figures: {len(result['figures'])} files in {args.figures_dir}/")
