"""`cellperf run`: run a measurement campaign into a results store, resumably."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from cellperf.campaign import Summary, load_campaign, run_campaign


def print_summary(summary: Summary, console: Console) -> None:
    done = sum(r.status == "ok" for r in summary.finished)
    console.print(f"[bold]{summary.total}[/] runs: {done} done now, {summary.skipped} already stored, "
                  f"{len(summary.failed)} failed")
    if summary.removed_debris:
        console.print(f"removed {len(summary.removed_debris)} unfinished run folder(s) of an interrupted campaign")
    if summary.failed:
        t = Table("failed run", "reason", header_style="bold red")
        for r in summary.failed:
            t.add_row(r.run_id, r.reason or "")
        console.print(t)
    console.print(f"results: {summary.out_dir / 'results.duckdb'}")


def execute(campaign_file: Path, out_dir: Path | None, as_json: bool) -> Summary:
    """Loads, runs and reports a campaign (shared with `cellperf demo`)."""
    campaign = load_campaign(campaign_file)
    out = out_dir or Path(campaign.name)
    err = Console(stderr=True)
    live = err.is_terminal and not as_json
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[runs]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err,
                        disable=not live)
    task = progress.add_task(f"{campaign.name}", total=None, runs="")

    def on_progress(done_s, total_s, running):
        progress.update(task, completed=done_s, total=total_s)

    def on_run(status, index, count):
        mark = "[green]ok[/]" if status.status == "ok" else f"[red]failed[/]: {status.reason}"
        progress.update(task, runs=f"{index}/{count} runs")
        if not as_json:
            progress.console.print(f"[{index}/{count}] {status.run_id} {mark} ({status.seconds:.1f} s)",
                                   highlight=False)

    with progress:
        summary = run_campaign(campaign, out, on_progress=on_progress, on_run=on_run)
    return summary


@click.command()
@click.argument("campaign_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Results folder (default: the campaign's name). Run again with the same folder to resume.")
@click.option("--check", is_flag=True, help="Validate the campaign file and list its runs; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
def command(campaign_file, out_dir, check, as_json) -> None:
    """Run every test of a campaign: capture both ends, collect the radio log, analyse each
    run as it finishes and commit it to OUT/results.duckdb (per-packet tables as Parquet in
    OUT/runs/). Kill it at any moment and start it again: finished runs are kept and
    skipped, failed ones are tried again. The campaign format is in docs/campaigns.md.

    \b
    Examples:
      sudo cellperf run campaign.toml --out results/
      cellperf run campaign.toml --check
      sudo cellperf run campaign.toml --out results/ --json > summary.json
      cellperf report results/ -o report.html
    """
    if check:
        campaign = load_campaign(campaign_file)
        if as_json:
            click.echo(json.dumps({"name": campaign.name, "runs": [r.run_id for r in campaign.runs],
                                   "planned_s": sum(r.duration_s for r in campaign.runs)}))
        else:
            click.echo(f"{campaign_file}: valid; {len(campaign.runs)} runs, "
                       f"{sum(r.duration_s for r in campaign.runs):.0f} s of tests")
        return
    summary = execute(campaign_file, out_dir, as_json)
    if as_json:
        click.echo(json.dumps(summary.to_json()))
    else:
        print_summary(summary, Console())
    if summary.failed:
        sys.exit(3)
