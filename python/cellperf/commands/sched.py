"""`cellperf sched`: trace-driven, full-buffer Proportional Fair vs Round Robin
(METHODS §8, seed 002 §6)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import polars as pl
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cellperf.channel import read_trace
from cellperf.channel.sched import DEFAULT_REPEATS, compare, handoff_slots_for, handoff_times_from_file
from cellperf.channel.traces import atomic_write


def _parse_users(text: str) -> int:
    lo, sep, hi = text.partition("..")
    try:
        if sep and int(lo) != 1:
            raise click.BadParameter("the range starts at 1 (e.g. 1..8)")
        return int(hi if sep else lo)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not N or 1..N") from None


@click.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--users", "users_text", default="1..4", show_default=True, help="Compare for 1..N users (N or 1..N). User u follows trace u mod T.")
@click.option("--alpha", type=float, default=1 / 1000, show_default=True, help="PF averaging weight α.")
@click.option("--slots", type=int, default=None, help="Slots per run (default: the shortest trace, at most 1,000,000 as in 002).")
@click.option("--repeats", type=int, default=DEFAULT_REPEATS, show_default=True, help="Runs with fresh random start slots, averaged.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random start slots.")
@click.option("--handoffs", "handoffs_file", type=click.Path(dir_okay=False), help="Radio log (bs_id,sector_id changes) or CSV of handoff instants (time_s): reset a user's PF average at each.")
@click.option("--handoff-interval", "handoff_interval_s", type=float, help="Instead: reset each user's PF average every this many seconds (002: 20–30 s between handoffs).")
@click.option("--rate-table", metavar="drc|FILE", help="Map the state column to rates: 'drc' (EV-DO DRC) or a CSV state,rate_bps.")
@click.option("--slot-ms", type=float, default=None, help="Slot length in ms (default 1.667, EV-DO).")
@click.option("--figures", "figures_dir", type=click.Path(file_okay=False), help="Write gain_vs_users.csv (002 Fig. 6) into this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(traces, users_text, alpha, slots, repeats, seed, handoffs_file, handoff_interval_s, rate_table, slot_ms, figures_dir, as_json) -> None:
    """Compare PF and RR slot scheduling on rate traces, every user always backlogged.

    Reports per-user and system throughput, the gain T_PF/T_RR and Jain's fairness for
    1..N users. With handoffs (from --handoffs, from bs_id/sector_id columns in the
    traces, or --handoff-interval), also the PF gain when each handoff resets the user's
    average, as a new sector would.

    \b
    Examples:
      cellperf sched drc1.csv drc2.csv drc3.csv drc4.csv --rate-table drc --users 1..4
      cellperf sched mobile.parquet --handoffs radio.csv --json
      cellperf sched synth.csv --handoff-interval 25 --repeats 10 --seed 1
    """
    max_users = _parse_users(users_text)
    if handoffs_file and handoff_interval_s is not None:
        raise click.UsageError("give --handoffs or --handoff-interval, not both")
    loaded = [read_trace(p, slot_ms=slot_ms, rate_table=rate_table) for p in traces]
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
            max_users=max_users,
            alpha=alpha,
            slots=slots,
            repeats=repeats,
            seed=seed,
            handoff_slots=handoff_slots,
            handoff_interval_s=handoff_interval_s,
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
    if as_json:
        click.echo(json.dumps(result))
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
