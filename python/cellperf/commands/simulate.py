"""TCP over a PF/RR-scheduled cell in virtual time (no root).

Seed 001's topology: N fixed hosts → wired hops → base station (a queue per user) → a shared
downlink scheduled slot by slot (PF or RR) → N mobile hosts, one bulk TCP flow each, ACKs back
over each user's uplink. The cell is the very model `cellperf emulate` runs in real time (same
elements, scheduler and seeds), here on a virtual clock with a TCP model (Reno, NewReno, Cubic,
Vegas, Westwood+; one for all users or one each) in place of the kernel. Defaults are seed 001's values and the choices of
docs/simulate.md. A TOML scenario takes the long options' names as keys (`wired_hops = 2`);
options given on the command line override it.

Examples:
  cellperf simulate --users 3 --scheduler pf \\
       --channel ge:good=1mbit,bad=100kbit,switch=0.1 \\
       --duration 1000 --seed 1
  cellperf simulate scenario.toml --repetitions 5 --json
  # cwnd.parquet, rtt.parquet, flows.parquet
  cellperf simulate --scheduler rr --tcp cubic --out run1
  # one variant per user, in one cell
  cellperf simulate --users 2 --tcp reno --tcp westwood
  cellperf simulate --profile evdo-stationary --users 4 --wired-hops 0 \\
       --duration 60
  # Tables 2/3 beside the paper, Figs. 5-7
  cellperf simulate --seed001 --repetitions 4 --figures figs
"""

from __future__ import annotations

import argparse
import json
import sys

from cellperf.cli import file_path, folder_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario_file", metavar="SCENARIO", nargs="?", type=file_path(),
                        help="TOML scenario (keys: the long options below with _ for -).")
    cell = parser.add_argument_group("cell (defaults: seed 001)")
    cell.add_argument("--users", metavar="N", help="Users (one flow each) [default: 3].")
    cell.add_argument("--scheduler", metavar="pf|rr|none", help="Downlink scheduler; none: each user its own link [default: pf].")
    cell.add_argument("--alpha", metavar="A", help="PF averaging weight α [default: 0.001].")
    cell.add_argument("--slot", metavar="T", help="Scheduler slot [default: 1/600 s, EV-DO].")
    cell.add_argument("--scheduling", metavar="backlog|channel",
                      help="What the scheduler sees: users with data queued (PF averages what was carried), or the "
                      "channel reports alone as under full buffer (an empty user's slot goes unused, PF averages "
                      "its reported rate) [default: backlog].")
    cell.add_argument("--channel", metavar="SPEC", action="append",
                      help="Downlink channel, once or once per user; the forms of 'cellperf emulate --downlink' "
                      "(ge:good=..,bad=..,switch=PER_S, a mahimahi trace, slots:FILE, markov:MODEL.json, a rate, "
                      "replay:BUNDLE with --scheduler none) "
                      "[default: ge:good=1mbit,bad=100kbit,switch=1].")
    cell.add_argument("--uplink", metavar="SPEC", help="Each user's uplink (same forms) [default: 100mbit].")
    cell.add_argument("--queue", metavar="SPEC", help="Base-station queue per user: packets=N, bytes=N, codel, unbounded [default: packets=10].")
    cell.add_argument("--profile", metavar="NAME", help="Instead of --channel/--uplink/--queue: a 'cellperf emulate' profile's air links.")
    cell.add_argument("--wired-hops", metavar="N", help="Wired hops between fixed host and base station [default: 2].")
    cell.add_argument("--wired-rate", metavar="RATE", help="Rate of each wired hop [default: 100mbit].")
    cell.add_argument("--wired-delay", metavar="T", help="One-way delay of each wired hop [default: 10ms].")
    tcp = parser.add_argument_group("TCP (defaults: seed 001 and docs/simulate.md)")
    tcp.add_argument("--tcp", metavar="VARIANT", action="append",
                     help="reno, newreno, cubic, vegas or westwood (Westwood+); once for every user, or once per "
                     "user in user order [default: reno].")
    tcp.add_argument("--packet", metavar="SIZE", help="Data packet size: 2000bit, 250B, 1500 (bytes) [default: 2000bit].")
    tcp.add_argument("--initial-ssthresh", metavar="N", help="Segments, or off [default: 16].")
    tcp.add_argument("--initial-window", metavar="N", help="Segments [default: 1].")
    tcp.add_argument("--rwnd", metavar="N", help="Receiver window, segments [default: unlimited].")
    tcp.add_argument("--delayed-ack", metavar="T|off", help="Delayed-ACK timeout, or off [default: off].")
    tcp.add_argument("--min-rto", metavar="T", help="Minimum retransmission timeout [default: 1s].")
    tcp.add_argument("--initial-rto", metavar="T", help="Retransmission timeout before the first RTT sample [default: 1s].")
    tcp.add_argument("--rto", metavar="rfc6298|classic|linux",
                     help="RTO estimator: RFC 6298 (SRTT + 4 RTTVAR), classic RFC 793 (2 SRTT), or Linux's "
                     "(SRTT + max(4 RTTVAR, --min-rto)) [default: rfc6298].")
    tcp.add_argument("--rto-timer", metavar="ack|segment",
                     help="The timer runs from the last new ACK (RFC 6298) or from the oldest segment's "
                     "transmission [default: ack].")
    tcp.add_argument("--timeout-recovery", metavar="go-back-n|one-segment",
                     help="After a timeout resend everything from the first unacknowledged segment, or that "
                     "segment only [default: go-back-n].")
    tcp.add_argument("--recovery", metavar="classic|linux",
                     help="Loss recovery: classic (duplicate ACKs, no SACK; --timeout-recovery applies) or linux "
                     "(SACK with RACK loss marking, PRR, spurious timeouts undone by timestamps and F-RTO) "
                     "[default: classic].")
    tcp.add_argument("--byte-counting", metavar="on|off",
                     help="Grow the window per segment acknowledged (RFC 3465, as Linux) rather than per ACK "
                     "[default: off].")
    run = parser.add_argument_group("run")
    run.add_argument("--duration", metavar="T", help="Simulated time per repetition [default: 1000 s].")
    run.add_argument("--seed", metavar="N", help="Seed of the first repetition; repetition k uses seed + k [default: 1].")
    run.add_argument("--repetitions", metavar="N", help="Runs with successive seeds; the summary gives their spread [default: 1].")
    parser.add_argument("--seed001", action="store_true",
                        help="Run seed 001's nine cells (PF and RR at 0.1, 1, 5 transitions/s, 3 sources) with the other "
                        "options and print Tables 2 and 3 beside the paper's.")
    parser.add_argument("--figures", dest="figures_dir", metavar="DIR", type=folder_path(),
                        help="With --seed001: write Figs. 5-7 (PNG and PDF) and seed001.csv here.")
    parser.add_argument("--out", metavar="DIR", type=folder_path(),
                        help="Write cwnd.parquet, rtt.parquet (over time) and flows.parquet (per flow and seed) here.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def _options(args: argparse.Namespace) -> dict:
    from cellperf.simulate.scenario import DEFAULTS, read_toml

    options = read_toml(args.scenario_file) if args.scenario_file else {}
    options["_from_file"] = {k for k in options if not k.startswith("_")}
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            options[key] = value
            options["_from_file"].discard(key)
    return options


def run(args: argparse.Namespace) -> None:
    from cellperf.errors import UserError
    from cellperf.simulate import runner
    from cellperf.simulate.scenario import build

    if args.seed001:
        return _seed001(args)
    if args.figures_dir:
        raise UserError("--figures: draws seed 001's figures; give --seed001 too")
    scenario = build(_options(args))
    outcome = runner.run(scenario, record=bool(args.out))
    if args.out:
        _write_tables(outcome, args.out)
    if args.as_json:
        print(json.dumps(outcome.to_json()))
        return
    _print_summary(outcome)


def _seed001(args: argparse.Namespace) -> None:
    from pathlib import Path

    from cellperf.errors import UserError
    from cellperf.simulate import seed001

    options = _options(args)
    given = [k for k in seed001.OWN_OPTIONS if k in options and k != "_from_file"]
    if given or args.out:
        what = "--out" if args.out else given[0].replace("_", "-")
        raise UserError(f"--seed001 sets the users, scheduler and channel of each cell itself; drop {what}")
    from cellperf.progress import Progress

    # The cells, then two files (PNG, PDF) per figure.
    with Progress("seed 001", total=len(seed001.PAPER), unit="steps", enabled=not args.as_json) as progress:
        result = seed001.reproduce(options, record=bool(args.figures_dir), progress=progress)
        if args.figures_dir:
            import polars as pl

            from cellperf.channel.traces import atomic_write
            from cellperf.report import export_figures
            from cellperf.report.simulated import figure_items

            directory = Path(args.figures_dir)
            directory.mkdir(parents=True, exist_ok=True)
            atomic_write(directory / "seed001.csv", pl.DataFrame(seed001.table_rows(result)).write_csv)
            items = figure_items(result)
            progress.set_total(len(seed001.PAPER) + 2 * len(items))
            export_figures(items, directory, progress=progress)
    if args.as_json:
        print(json.dumps({"cells": result["cells"], "verdicts": seed001.verdicts(result["cells"])}))
        return
    seed001.print_tables(result, int(options.get("repetitions") or 1))


def _write_tables(outcome, out: str) -> None:
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cellperf.errors import UserError, os_reason

    try:
        os.makedirs(out, exist_ok=True)
        flows = [{**f, "seed": r["seed"]} for r in outcome.runs for f in r["flows"]]
        tables = {**outcome.tables, "flows": pa.Table.from_pylist(flows)}
        for name, table in tables.items():
            # Written aside then renamed: a killed run leaves no half-written table.
            path = os.path.join(out, f"{name}.parquet")
            pq.write_table(table, path + ".part")
            os.replace(path + ".part", path)
    except OSError as e:
        raise UserError(f"--out: cannot write into {out} ({os_reason(e)})") from None


def _print_summary(outcome) -> None:
    o = outcome.scenario.options
    runs = len(outcome.runs)
    cell = "own links" if o["scheduler"] == "none" else f"{o['scheduler'].upper()}"
    seeds = f"seed {o['seed']}" if runs == 1 else f"seeds {o['seed']}..{o['seed'] + runs - 1}"
    print(f"cellperf simulate: {o['users']} users, {cell}, {o['tcp']}, {o['duration']:g} s x {runs} ({seeds}); "
          f"{outcome.wall_s:.2f} s wall")
    spread = outcome.spread()
    sd_head = " (sd)" if runs > 1 else ""
    print(f"{'user':>4} {'tcp':<8} {'goodput kb/s' + sd_head:>18} {'thrpt kb/s':>10} {'rexmit':>7} {'TO':>5} "
          f"{'RTT ms':>7} {'p95 ms':>7} {'cwnd':>5}")
    for row, flows in zip(spread, zip(*(r["flows"] for r in outcome.runs))):
        g = row["goodput_bps"]
        good = f"{g['mean'] / 1e3:.1f}" + (f" ({g['sd'] / 1e3:.1f})" if runs > 1 else "")
        p95 = [f["rtt_p95_s"] for f in flows if f["rtt_p95_s"] is not None]
        rtt = row["rtt_mean_s"]
        print(f"{row['user']:>4} {flows[0]['variant']:<8} {good:>18} {row['throughput_bps']['mean'] / 1e3:>10.1f} "
              f"{row['retransmissions']['mean']:>7.0f} {row['timeouts']['mean']:>5.0f} "
              f"{(rtt['mean'] * 1e3 if rtt else float('nan')):>7.0f} "
              f"{(sum(p95) / len(p95) * 1e3 if p95 else float('nan')):>7.0f} {row['cwnd_mean']['mean']:>5.1f}")
    total = sum(r["goodput_bps"]["mean"] for r in spread)
    print(f"total goodput {total / 1e3:.1f} kb/s; dropped packets per run "
          f"{sum(r['dropped_packets'] for r in outcome.runs) / runs:.0f}", file=sys.stdout)
