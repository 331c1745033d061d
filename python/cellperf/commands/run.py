"""Run a measurement campaign into a results store, resumably.

Every test of a campaign: capture both ends, collect the radio log, analyse each run as it
finishes and commit it to OUT/results.duckdb (per-packet tables as Parquet in OUT/runs/). Kill
it at any moment and start it again: finished runs are kept and skipped, failed ones are tried
again. Exit status 3 when a run failed. Tests of type "simulate" run `cellperf simulate`'s
scenario in virtual time instead (no capture, no root). The campaign format is in docs/campaigns.md;
running a campaign on several testbed hosts (Dask workers) in docs/scale.md.

Examples:
  sudo cellperf run campaign.toml --out results/
  cellperf run campaign.toml --check
  sudo cellperf run campaign.toml --out results/ --json > summary.json
  cellperf run grid.toml --out grid/ --workers 2  # a local Dask cluster
  sudo cellperf run campaign.toml --out /shared/results/ \\
       --cluster tcp://HOST:8786
  cellperf report results/ -o report.html
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.cli import file_path, folder_path
from cellperf.validate import number_arg

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


def execute(campaign_file: Path, out_dir: Path | None, as_json: bool, workers: int | None = None,
            cluster: str | None = None) -> Summary:
    """Loads, runs and reports a campaign (shared with `cellperf demo`): the progress of its
    runs (cellperf.progress, with the campaign's own ETA from the runs' planned times) and a
    line per finished run on stderr, neither with --json."""
    from cellperf.campaign import load_campaign, run_campaign
    from cellperf.progress import Progress

    campaign = load_campaign(campaign_file)
    out = out_dir or Path(campaign.name)

    def on_progress(p):
        running = p.running
        detail = running[0] + (f" and {len(running) - 1} more" if len(running) > 1 else "") if running else ""
        progress.set_total(p.total)
        progress.update(p.done + p.failed, detail=detail + (f" ({p.failed} failed)" if p.failed else ""),
                        left_s=p.eta_s())

    def on_run(status, index, count):
        mark = "ok" if status.status == "ok" else f"failed: {status.reason}"
        progress.note(f"[{index}/{count}] {status.run_id} {mark} ({status.seconds:.1f} s)")

    with Progress(f"run {campaign.name}", unit="runs", enabled=not as_json) as progress:
        return run_campaign(campaign, out, workers=workers, cluster=cluster, on_progress=on_progress, on_run=on_run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign_file", metavar="CAMPAIGN_FILE", type=file_path(Path), help="The campaign (TOML).")
    parser.add_argument("--out", dest="out_dir", metavar="DIR", type=folder_path(Path),
                        help="Results folder (default: the campaign's name). Run again with the same folder to resume.")
    parser.add_argument("--check", action="store_true", help="Validate the campaign file (also against this host's kernel: congestion controls, MSS, windows) and list its runs; run nothing.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the summary as one JSON document.")
    parser.add_argument("--workers", type=number_arg(lo=1, hi=512, integer=True, unit="workers"), metavar="N",
                        help="Run the runs on a local Dask cluster of N worker processes (docs/scale.md).")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="Run the runs on the Dask cluster whose scheduler is at ADDRESS, e.g. tcp://HOST:8786; "
                             "each worker runs whole runs, this process alone writes the store (docs/scale.md).")


def run(args: argparse.Namespace) -> None:
    if args.check:
        from cellperf.campaign import load_campaign

        campaign = load_campaign(args.campaign_file)
        from cellperf.campaign.progress import planned_wall_s

        measured = sum(r.duration_s for r in campaign.runs if not r.simulated)
        simulated = sum(r.duration_s for r in campaign.runs if r.simulated)
        slots = args.workers or campaign.parallel
        wall = planned_wall_s(campaign.runs, slots)
        if args.as_json:
            print(json.dumps({"name": campaign.name, "runs": [r.run_id for r in campaign.runs],
                              "planned_s": measured, "simulated_s": simulated, "planned_wall_s": wall}))
        else:
            import textwrap

            from cellperf.cli import terminal_width

            verdict = (f"{args.campaign_file}: campaign {campaign.name} valid; {len(campaign.runs)} run{'' if len(campaign.runs) == 1 else 's'}, "
                       f"{measured:.0f} s of tests" + (f", {simulated:.0f} s simulated in virtual time (no root "
                                                        "needed for those)" if simulated else ""))
            print("\n".join(textwrap.wrap(verdict, terminal_width(), break_long_words=False, break_on_hyphens=False)))
            from cellperf.progress import clock

            print(f"planned wall time: {clock(wall, hours=True)} with set-up and analysis, {slots} run(s) at a time")
            _print_plan(campaign.runs)
        return
    summary = execute(args.campaign_file, args.out_dir, args.as_json, args.workers, args.cluster)
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
