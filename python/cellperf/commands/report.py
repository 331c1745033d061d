"""`cellperf report`: results store → self-contained HTML report (and PNG/PDF figures)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cellperf.report import build_report


@click.command()
@click.argument("store_dir", required=False, default=".", type=click.Path(path_type=Path))
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path),
              help="HTML file to write (default: DIR/report.html).")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write each figure as PNG and PDF here (needs Chromium).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as one JSON document.")
def command(store_dir, output, figures_dir, as_json) -> None:
    """Make the report of a campaign's results store (DIR, default the current folder):
    one HTML file with interactive figures that opens offline, after seed 000 chapter 4 —
    throughput series with handoffs, IQR box plots, second-order difference plots, jitter and
    loss CDFs, TCP box-whiskers, ACK compression, retransmission classes, VoIP delay/loss/R
    series and R CDFs, and a summary table per network.

    \b
    Examples:
      cellperf report results/
      cellperf report results/ -o ~/campaign.html --figures paper-figures/
      cellperf report --json
    """
    result = build_report(store_dir, output, figures_dir=figures_dir)
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"report: {result['report']} ({len(result['items'])} figures and tables)")
        if figures_dir is not None:
            click.echo(f"figures: {len(result['figures'])} files in {figures_dir}/")
