"""Run a measurement campaign into a results store, resumably.

Every test of a campaign: capture both ends, collect the radio log, analyse each run as it
finishes and commit it to OUT/results.duckdb (per-packet tables as Parquet in OUT/runs/). Kill
it at any moment and start it again: finished runs are kept and skipped, failed ones are tried
again. Exit status 3 when a run failed. Tests of type "simulate" run `cellperf simulate`'s
scenario in virtual time instead (no capture, no root). The campaign format is in docs/campaigns.md.

Examples:
  sudo cellperf run campaign.toml --out results/
  cellperf run campaign.toml --check
  sudo cellperf run campaign.toml --out results/ --json > summary.json
  cellperf report results/ -o report.html
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.cli import file_path, folder_path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from cellperf.campaign import Summary


def print_summary(summary: Summary, console: Console) -> None:
    from rich.table import Table

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
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from cellperf.campaign import load_campaign, run_campaign

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign_file", metavar="CAMPAIGN_FILE", type=file_path(Path), help="The campaign (TOML).")
    parser.add_argument("--out", dest="out_dir", metavar="DIR", type=folder_path(Path),
                        help="Results folder (default: the campaign's name). Run again with the same folder to resume.")
    parser.add_argument("--check", action="store_true", help="Validate the campaign file (also against this host's kernel: congestion controls, MSS, windows) and list its runs; run nothing.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the summary as one JSON document.")


def run(args: argparse.Namespace) -> None:
    if args.check:
        from cellperf.campaign import load_campaign

        campaign = load_campaign(args.campaign_file)
        measured = sum(r.duration_s for r in campaign.runs if not r.simulated)
        simulated = sum(r.duration_s for r in campaign.runs if r.simulated)
        if args.as_json:
            print(json.dumps({"name": campaign.name, "runs": [r.run_id for r in campaign.runs],
                              "planned_s": measured, "simulated_s": simulated}))
        else:
            import textwrap

            from cellperf.cli import terminal_width

            verdict = (f"{args.campaign_file}: campaign {campaign.name} valid; {len(campaign.runs)} runs, "
                       f"{measured:.0f} s of tests" + (f", {simulated:.0f} s simulated in virtual time (no root "
                                                        "needed for those)" if simulated else ""))
            print("\n".join(textwrap.wrap(verdict, terminal_width(), break_long_words=False, break_on_hyphens=False)))
            _print_plan(campaign.runs)
        return
    summary = execute(args.campaign_file, args.out_dir, args.as_json)
    if args.as_json:
        print(json.dumps(summary.to_json()))
    else:
        from rich.console import Console

        print_summary(summary, Console())
    if summary.failed:
        sys.exit(3)


#: Lines of `run --check`'s plan before it groups the rest.
PLAN_LINES = 40


def _print_plan(runs) -> None:
    """The runs, one line each (network, scenario, test, repetition, seconds), or for a longer
    campaign one line per network, scenario and test with its number of runs; --json lists
    every run id."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault((r.network.name, r.scenario, r.test.name), []).append(r)
    each = len(runs) <= PLAN_LINES
    for head in ("network", "scenario", "test", "run" if each else "runs", "test s"):
        table.add_column(head, overflow="fold", justify="right" if head in ("run", "runs", "test s") else "left")
    if each:
        for r in runs:
            table.add_row(r.network.name, r.scenario, r.test.name, str(r.repetition), f"{r.duration_s:g}")
    else:
        for (network, scenario, test), rs in list(groups.items())[:PLAN_LINES]:
            table.add_row(network, scenario, test, str(len(rs)), f"{sum(r.duration_s for r in rs):g}")
    Console(width=min(Console().width, 80)).print(table)
    if not each and len(groups) > PLAN_LINES:
        print(f"... and {len(groups) - PLAN_LINES} more groups; --json lists every run")
