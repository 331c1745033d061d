"""Channel-rate traces: statistics, Markov models, synthetic traces.

docs/methods.md §7, seed 002 §5. Formats and definitions: docs/channel.md.

Examples:
  cellperf channel stats drc.csv --rate-table drc
  cellperf channel stats evdo.down --slot-ms 10 --json
  cellperf channel fit drc.csv --rate-table drc -o model.json
  cellperf channel generate model.json --slots 2160000 --seed 1 \\
       -o synth.parquet --mahimahi synth.down
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellperf.cli import add_subcommand, add_subcommands, file_path, folder_path
from cellperf.validate import number_arg
from cellperf.errors import UserError, os_reason

TRACE_HELP = ("Per-slot trace: CSV/Parquet (slot|time_s, rate_bps|state [, sinr_db, bs_id, sector_id]), mahimahi trace, "
              "radio log, or MobileInsight log (its LTE CQI reports, per 1-ms subframe).")


def trace_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate-table", metavar="drc|FILE",
                        help="Map the state column to rates: 'drc' (EV-DO DRC) or a CSV state,rate_bps.")
    parser.add_argument("--slot-ms", metavar="MS", type=number_arg(lo=0, lo_open=True, hi=60000, unit="ms"), default=None, help="Slot length in ms (default 1.667, EV-DO).")


def _fmt(x, spec=".3f", none="–"):
    return none if x is None else format(x, spec)


def stats(args: argparse.Namespace) -> None:
    """Mean, spread, modal fraction, entropy, sojourns, Markov depth and memory of each trace.

    Per trace and per window: mean and std of the rate, modal fraction, entropy H(X),
    mean sojourn (overall and per state), normalized conditional entropy for Markov depth
    n = 1..4 and for lags 1..1000 slots, SINR–rate correlation (if the trace has sinr_db),
    and the one-step Markov fit's sojourn RMSE (002 eq. 4).

    Examples:
      cellperf channel stats drc.csv --rate-table drc --window 5
      cellperf channel stats drc1.csv drc2.csv --rate-table drc \\
           --figures figs/ --json
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from cellperf.channel import read_trace
    from cellperf.channel.analysis import figure_tables, trace_stats
    from cellperf.channel.figures import channel_stats_items
    from cellperf.report import export_figures
    from cellperf.channel.traces import atomic_write
    from cellperf.progress import Progress

    figures_dir = args.figures_dir
    results = []
    # Each trace, then two files (PNG, PDF) per figure.
    with Progress("channel stats", total=len(args.traces), unit="steps", enabled=not args.as_json) as progress:
        for path in args.traces:
            progress.advance(0, detail=Path(path).name)
            trace = read_trace(path, slot_ms=args.slot_ms, rate_table=args.rate_table)
            results.append(trace_stats(trace, window_s=args.window_s))
            progress.advance()
        if figures_dir:
            directory = Path(figures_dir)
            directory.mkdir(parents=True, exist_ok=True)
            tables = figure_tables(results)
            for name, table in tables.items():
                atomic_write(directory / f"{name}.csv", table.write_csv)
            items = channel_stats_items(tables)
            progress.set_total(len(args.traces) + 2 * len(items))
            figures = export_figures(items, directory, progress=progress)
    if args.as_json:
        print(json.dumps({"traces": results}))
        return
    console = Console()
    for r in results:
        table = Table(title=f"{r['name']}: {r['slots']} slots of {r['slot_s'] * 1000:g} ms ({r['duration_s']:.1f} s)", box=box.SIMPLE)
        table.add_column("statistic")
        table.add_column("value", justify="right")
        table.add_row("mean rate", f"{r['mean_rate_bps'] / 1e3:,.1f} kb/s")
        table.add_row("std of rate", f"{r['std_rate_bps'] / 1e3:,.1f} kb/s")
        table.add_row("modal fraction", f"{r['modal_fraction']:.3f} (at {r['modal_rate_bps'] / 1e3:,.1f} kb/s)")
        table.add_row("entropy", f"{r['entropy_bits']:.3f} bits")
        table.add_row("mean sojourn", f"{r['mean_sojourn_slots']:.1f} slots ({r['mean_sojourn_ms']:.1f} ms)")
        table.add_row("H(X|past n)/H(X), n=1..4", "  ".join(_fmt(c) for c in r["cond_entropy_by_depth"]))
        lags = {e["lag_slots"]: e["normalized"] for e in r["cond_entropy_by_lag"]}
        table.add_row("H(X+d|X)/H(X+d), d=1,10,100,1000", "  ".join(_fmt(lags.get(d)) for d in (1, 10, 100, 1000)))
        table.add_row("Markov sojourn RMSE (002 eq. 4)", _fmt(r["markov_rmse"], ".2e"))
        if r["sinr_rate_correlation"] is not None:
            table.add_row("SINR–rate correlation", _fmt(r["sinr_rate_correlation"]))
        if r["handoffs"]:
            table.add_row("handoffs", str(r["handoffs"]))
        table.add_row("windows", f"{len(r['windows'])} (up to {r['window_s']:g} s each)")
        console.print(table)
        # A measured log has a state per distinct rate (hundreds): the most frequent are shown.
        shown = sorted(sorted(r["states"], key=lambda s: -s["fraction"])[:MAX_STATES], key=lambda s: s["state"])
        title = "per state" if len(shown) == len(r["states"]) else \
            f"the {len(shown)} most frequent of {len(r['states'])} states (--json lists all)"
        states = Table(box=box.SIMPLE, title=title)
        for col in ("state", "rate kb/s", "fraction", "sojourn (slots)", "Markov 1/(1-Pii)"):
            states.add_column(col, justify="right")
        for s in shown:
            states.add_row(str(s["state"]), f"{s['rate_bps'] / 1e3:,.1f}", f"{s['fraction']:.4f}", f"{s['mean_sojourn_slots']:.1f}", _fmt(s["markov_sojourn_slots"], ".1f"))
        console.print(states)
    if figures_dir:
        console.print(f"figures (PNG, PDF) and their data (CSV) written to {figures_dir}/: "
                      + ", ".join(sorted({f.stem for f in figures})))


#: States listed per trace by `channel stats` (the most frequent; --json has every one).
MAX_STATES = 20


def fit(args: argparse.Namespace) -> None:
    """Fit a Markov rate model to a trace and write it as a model file (JSON, version 1).

    The model feeds `cellperf channel generate` and the emulator (`cellperf emulate`).

    Examples:
      cellperf channel fit drc.csv --rate-table drc -o evdo.json
      cellperf channel fit evdo.down --slot-ms 10 --order 2 -o vz.json
    """
    from cellperf.channel import read_trace
    from cellperf.channel.analysis import describe_model, fit_model
    from cellperf.channel.traces import atomic_write

    output = args.output
    t = read_trace(args.trace, slot_ms=args.slot_ms, rate_table=args.rate_table)
    text = fit_model(t, args.order)
    info = describe_model(text, output)
    atomic_write(Path(output), lambda tmp: Path(tmp).write_text(text))
    summary = {"model": output, "trace": t.name, "slots": t.slots, **info}
    if args.as_json:
        print(json.dumps(summary))
        return
    _print_model(summary, f"{output}: order-{info['order']} model of {t.name} ({t.slots} slots)")


def _print_model(info: dict, title: str, observed: dict | None = None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE)
    for col in ("state", "rate kb/s", "fitted share", "stationary", "sojourn 1/(1-Pii)"):
        table.add_column(col, justify="right")
    if observed:
        table.add_column("generated share", justify="right")
        table.add_column("generated sojourn", justify="right")
    sojourn = info["markov_sojourn_slots"] or [None] * len(info["rates_bps"])
    for i, (rate, frac, pi) in enumerate(zip(info["rates_bps"], info["fractions"], info["stationary"])):
        if frac == 0 and pi < 1e-12 and not (observed and i in observed):
            continue
        row = [str(i), f"{rate / 1e3:,.1f}", f"{frac:.4f}", f"{pi:.4f}", _fmt(sojourn[i], ".1f")]
        if observed:
            o = observed.get(i)
            row += [_fmt(o and o["fraction"], ".4f"), _fmt(o and o["mean_sojourn_slots"], ".1f")]
        table.add_row(*row)
    Console().print(table)


def generate_command(args: argparse.Namespace) -> None:
    """Generate a synthetic trace from a model file, seeded.

    The summary compares the generated trace with the model (state shares, sojourns):
    they agree within sampling error.

    Examples:
      cellperf channel generate evdo.json --slots 600000 --seed 7 -o synth.csv
      cellperf channel generate evdo.json --slots 60000 -o s.parquet \\
           --mahimahi s.down
    """
    from cellperf.channel import write_trace
    from cellperf.channel.analysis import describe_model, generate, trace_stats

    model, slots, seed, output, mahimahi = args.model, args.slots, args.seed, args.output, args.mahimahi
    path = Path(model)
    if not path.is_file():
        raise UserError(f"{model}: no such file")
    try:
        text = path.read_text()
    except OSError as e:
        raise UserError(f"{model}: cannot read ({os_reason(e)})") from None
    except UnicodeDecodeError:
        raise UserError(f"{model}: not a model file (binary; expected the JSON of `cellperf channel fit`)") from None
    trace = generate(text, slots, seed, model)
    write_trace(output, trace, mahimahi=mahimahi)
    info = describe_model(text, model)
    st = trace_stats(trace, window_s=trace.slots * trace.slot_s, lags=[1])
    observed = {s["state"]: s for s in st["states"]}
    summary = {
        "model": model,
        "output": output,
        "mahimahi": mahimahi,
        "slots": slots,
        "seed": seed,
        "mean_rate_bps": st["mean_rate_bps"],
        "model_mean_rate_bps": sum(p * r for p, r in zip(info["stationary"], info["rates_bps"])),
        "state_fraction": [observed[i]["fraction"] if i in observed else 0.0 for i in range(len(info["rates_bps"]))],
        "mean_sojourn_by_state": [observed[i]["mean_sojourn_slots"] if i in observed else None for i in range(len(info["rates_bps"]))],
        "model_stationary": info["stationary"],
        "model_sojourn_slots": info["markov_sojourn_slots"],
    }
    if args.as_json:
        print(json.dumps(summary))
        return
    _print_model(info, f"{output}: {slots} slots from {model}, seed {seed}", observed)
    print(f"mean rate {st['mean_rate_bps'] / 1e3:,.1f} kb/s (model {summary['model_mean_rate_bps'] / 1e3:,.1f} kb/s)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    subcommands = add_subcommands(parser)
    p = add_subcommand(subcommands, "stats", stats)
    p.add_argument("traces", metavar="TRACE", nargs="+", type=file_path(), help=TRACE_HELP)
    trace_options(p)
    p.add_argument("--window", dest="window_s", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=1e7, unit="seconds"), default=3600.0,
                   help="Window length in seconds for per-window statistics.")
    p.add_argument("--figures", dest="figures_dir", metavar="DIR", type=folder_path(),
                   help="Write 002 Figs. 1–5 as PNG and PDF (needs Chromium) and the data behind them as CSV into this directory.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")

    p = add_subcommand(subcommands, "fit", fit)
    p.add_argument("trace", metavar="TRACE", type=file_path(), help=TRACE_HELP)
    trace_options(p)
    p.add_argument("--order", type=number_arg(lo=1, hi=8, integer=True), default=1, help="Markov order (slots of history).")
    p.add_argument("-o", "--output", required=True, metavar="FILE", type=file_path(), help="Model file to write (JSON).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the model's summary as JSON.")

    p = add_subcommand(subcommands, "generate", generate_command)
    p.add_argument("model", metavar="MODEL", type=file_path(), help="Model file (JSON) of `cellperf channel fit`.")
    p.add_argument("--slots", type=number_arg(lo=1, hi=1e10, integer=True), required=True, help="Number of slots to generate.")
    p.add_argument("--seed", type=number_arg(lo=0, hi=2**63 - 1, integer=True), default=0, help="Random seed (same seed, same trace).")
    p.add_argument("-o", "--output", required=True, metavar="FILE", type=file_path(),
                   help="Trace to write: .csv or .parquet (slot,time_s,state,rate_bps).")
    p.add_argument("--mahimahi", metavar="FILE", type=file_path(),
                   help="Also write the trace in mahimahi format (one ms per 1500-byte opportunity).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print a summary as JSON.")


def run(args: argparse.Namespace) -> None:
    args.subcommand(args)
