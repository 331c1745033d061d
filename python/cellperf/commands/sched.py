"""Compare PF and RR scheduling on rate traces, all users backlogged.

Trace-driven, full-buffer Proportional Fair vs Round Robin (docs/methods.md §8, seed 002 §6). Reports
per-user and system throughput, the gain T_PF/T_RR and Jain's fairness for 1..N users. With
handoffs (from --handoffs, from bs_id/sector_id columns in the traces, or --handoff-interval),
also the PF gain when each handoff resets the user's average, as a new sector would.

Examples:
  cellperf sched drc1.csv drc2.csv drc3.csv drc4.csv --rate-table drc \\
       --users 1..4
  cellperf sched drc1.csv drc2.csv --rate-table drc --handoffs radio.csv --json
  cellperf sched synth.csv --handoff-interval 25 --repeats 10 --seed 1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellperf.channel.sched import DEFAULT_REPEATS
from cellperf.cli import file_path, folder_path
from cellperf.validate import number_arg
from cellperf.commands.channel import TRACE_HELP, trace_options


def _parse_users(text: str) -> int:
    lo, sep, hi = text.partition("..")
    try:
        if sep and int(lo) != 1:
            raise argparse.ArgumentTypeError("the range starts at 1 (e.g. 1..8)")
        return int(hi if sep else lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or 1..N") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", metavar="TRACE", nargs="+", type=file_path(), help=TRACE_HELP)
    parser.add_argument("--users", dest="max_users", metavar="N|1..N", default="1..4", type=_parse_users,
                        help="Compare for 1..N users (N or 1..N). User u follows trace u mod T.")
    parser.add_argument("--alpha", type=number_arg(lo=0, lo_open=True, hi=1), default=1 / 1000, help="PF averaging weight α.")
    parser.add_argument("--slots", type=number_arg(lo=1, hi=1e10, integer=True), default=None,
                        help="Slots per run (default: the shortest trace, at most 1,000,000 as in 002).")
    parser.add_argument("--repeats", type=number_arg(lo=1, hi=100000, integer=True), default=DEFAULT_REPEATS, help="Runs with fresh random start slots, averaged.")
    parser.add_argument("--seed", type=number_arg(lo=0, hi=2**63 - 1, integer=True), default=0, help="Seed of the random start slots.")
    handoffs = parser.add_mutually_exclusive_group()
    handoffs.add_argument("--handoffs", dest="handoffs_file", metavar="FILE", type=file_path(),
                          help="Radio log (bs_id,sector_id changes) or CSV of handoff instants (time_s): "
                          "reset a user's PF average at each.")
    handoffs.add_argument("--handoff-interval", dest="handoff_interval_s", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=1e7, unit="seconds"),
                          help="Instead: reset each user's PF average every this many seconds (002: 20–30 s between handoffs).")
    trace_options(parser)
    parser.add_argument("--figures", dest="figures_dir", metavar="DIR", type=folder_path(),
                        help="Write 002 Fig. 6 as sched-gain.png/.pdf (needs Chromium) and its data as gain_vs_users.csv into this directory.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    import polars as pl
    from rich import box
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from cellperf.channel import read_trace
    from cellperf.channel.sched import compare, handoff_slots_for, handoff_times_from_file
    from cellperf.channel.figures import sched_items
    from cellperf.channel.traces import atomic_write
    from cellperf.report import export_figures

    alpha, repeats, handoffs_file, figures_dir = args.alpha, args.repeats, args.handoffs_file, args.figures_dir
    loaded = [read_trace(p, slot_ms=args.slot_ms, rate_table=args.rate_table) for p in args.traces]
    handoff_slots = [t.handoff_slots for t in loaded]
    if handoffs_file:
        times = handoff_times_from_file(handoffs_file)
        handoff_slots = [handoff_slots_for(t, times) for t in loaded]
    stderr = Console(stderr=True)
    # Only on a terminal: a non-interactive run's stderr keeps just the error line, if any.
    with Progress(transient=True, console=stderr, disable=not stderr.is_terminal) as bar:
        task = bar.add_task("PF vs RR runs", total=None)
        result = compare(
            loaded,
            max_users=args.max_users,
            alpha=alpha,
            slots=args.slots,
            repeats=repeats,
            seed=args.seed,
            handoff_slots=handoff_slots,
            handoff_interval_s=args.handoff_interval_s,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    result["handoffs_per_trace"] = [int(h.size) for h in handoff_slots]
    if figures_dir:
        directory = Path(figures_dir)
        directory.mkdir(parents=True, exist_ok=True)
        table = pl.DataFrame(
            {k: result[k] for k in ("users", "gain", "gain_std", "jain_pf", "jain_rr", "system_pf_bps", "system_rr_bps")}
        )
        if result["handoff"]:
            table = table.with_columns(
                pl.Series("gain_handoff", result["handoff"]["gain"], dtype=pl.Float64),
                pl.Series("jain_pf_handoff", result["handoff"]["jain_pf"], dtype=pl.Float64),
            )
        atomic_write(directory / "gain_vs_users.csv", table.write_csv)
        export_figures(sched_items(table), directory)
    if args.as_json:
        print(json.dumps(result))
        return
    title = (
        f"PF (α={alpha:g}) vs RR: {result['slots']} slots of {result['slot_s'] * 1000:g} ms, "
        f"{repeats} random starts, traces {', '.join(result['traces'])}"
    )
    table = Table(title=title, box=box.SIMPLE)
    for col in ("users", "PF kb/s", "RR kb/s", "gain PF/RR", "Jain PF", "Jain RR"):
        table.add_column(col, justify="right")
    if result["handoff"]:
        table.add_column("gain with resets", justify="right")
    fmt = lambda x, spec: "–" if x is None else format(x, spec)  # noqa: E731
    for i, n in enumerate(result["users"]):
        row = [
            str(n),
            f"{result['system_pf_bps'][i] / 1e3:,.1f}",
            f"{result['system_rr_bps'][i] / 1e3:,.1f}",
            fmt(result["gain"][i], ".3f"),
            fmt(result["jain_pf"][i], ".3f"),
            fmt(result["jain_rr"][i], ".3f"),
        ]
        if result["handoff"]:
            row.append(fmt(result["handoff"]["gain"][i], ".3f"))
        table.add_row(*row)
    console = Console()
    console.print(table)
    last = result["users"][-1] - 1
    per_user = ", ".join(
        f"{pf / 1e3:,.0f}/{rr / 1e3:,.0f}" for pf, rr in zip(result["per_user_pf_bps"][last], result["per_user_rr_bps"][last])
    )
    console.print(f"per-user kb/s with {result['users'][-1]} users (PF/RR): {per_user}")
    if result["handoff"]:
        h = result["handoff"]
        src = f"every {h['interval_s']:g} s" if h["source"] == "interval" else f"{sum(result['handoffs_per_trace'])} handoffs"
        console.print(f"handoff variant: PF average reset at each handoff ({src})")
