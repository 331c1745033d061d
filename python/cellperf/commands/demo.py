"""`cellperf demo`: the main job on a fresh machine — emulated testbed, a short campaign,
analysis, `report.html` and `results.duckdb`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click
from rich.console import Console

from cellperf.commands.run import execute, print_summary
from cellperf.errors import UserError
from cellperf.report import build_report

CAMPAIGNS = Path(__file__).resolve().parent.parent / "campaigns"


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Results folder (default: ./cellperf-demo, or ./cellperf-demo-quick with --quick).")
@click.option("--quick", is_flag=True, help="6-s runs, six at a time: under a minute.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary and the paths as one JSON document.")
def command(out_dir, quick, as_json) -> None:
    """Run the demonstration: EV-DO, HSDPA and WiBro emulated links (stationary, and mobile
    with handoffs), UDP CBR, TCP bulk and VoIP tests through cellperf's own agents, both
    ends captured, analysed, stored in results.duckdb and shown in report.html. About
    four minutes; --quick under one. Needs root (network namespaces and TUN devices).
    Run it again to resume an interrupted demo. The campaign file is
    cellperf/campaigns/demo.toml: copy it to start your own.

    \b
    Examples:
      sudo cellperf demo
      sudo cellperf demo --quick --out /tmp/demo
      cellperf query cellperf-demo "SELECT network, scenario, test, status FROM runs"
    """
    if os.geteuid() != 0:
        raise UserError("cellperf demo needs root: it builds an emulated testbed in network namespaces (run it with sudo)")
    spec = CAMPAIGNS / ("demo-quick.toml" if quick else "demo.toml")
    out = out_dir or Path("cellperf-demo-quick" if quick else "cellperf-demo")
    t0 = time.monotonic()
    summary = execute(spec, out, as_json)
    report = build_report(out, out / "report.html")
    elapsed = time.monotonic() - t0
    if as_json:
        click.echo(json.dumps({**summary.to_json(), "report": report["report"], "elapsed_s": elapsed}))
        return
    console = Console()
    print_summary(summary, console)
    console.print(f"report:  [bold]{report['report']}[/] (open it in a browser; it works offline)")
    console.print(f"query:   cellperf query {out} \"SELECT * FROM runs\"   ({elapsed:.0f} s in all)")
