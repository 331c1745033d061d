"""Recorded links: a bundle's contents, its traces for mahimahi.

A bundle is what `cellperf record` writes (docs/formats.md, "Recording bundle"); a folder of
CellReplay's traces (up-delay-light-pdo, down-heavy-pdo, ...) is read too. Replay one with
`cellperf emulate --replay BUNDLE` (docs/emulator.md, "Replaying a recorded link"); score its
replays against the live network with `check` (docs/emulator.md, "Replay fidelity").

Examples:
  cellperf replay info home-lte/
  cellperf replay info traces/tmobile/driving --json
  # then: mm-delay D mm-link mm/uplink.trace mm/downlink.trace
  cellperf replay export home-lte/ --mahimahi mm/
  sudo cellperf replay check home-lte/ --server cn --token-file t --http cn:8090
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import threading
from pathlib import Path

from cellperf.cli import add_subcommand, add_subcommands, folder_path
from cellperf.errors import UserError
from cellperf.validate import number_arg


def host_port(text: str) -> str:
    """HOST:PORT with a port 1-65535 ([v6]:PORT for IPv6)."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"'{text}' is not HOST:PORT")
    return text


def info(args: argparse.Namespace) -> None:
    """Check a bundle and say what it holds: directions, duration, trains, opportunities.

    Every file is read; a bad one is named with its line, exit 1.

    Examples:
      cellperf replay info home-lte/
      cellperf replay info home-lte/ --json
    """
    from cellperf.replay.bundle import check

    summary = check(args.bundle)
    if args.as_json:
        print(json.dumps(summary))
        return
    state = "" if summary["complete"] else " (cut short)"
    print(f"{summary['path']}: {summary['kind']}, {summary['duration_s']:.1f} s{state}")
    for name, d in summary["directions"].items():
        b = d["base_delay_ms"]
        loss = f"{d['lost']}/{d['sent']} lost" if d["sent"] else "no loss series"
        # Three short lines a direction: the listing fits 80 columns (a 0-s total prints 0.0, not -0.0).
        print(f"  {name}: {d['trains']} trains, {d['light_opportunities']} light opportunities, "
              f"base delay {b['min']:.1f}-{b['max']:.1f} ms")
        print(f"    {d['heavy_opportunities']} heavy opportunities ({d['heavy_mbps']:.2f} Mb/s)")
        print(f"    {loss}; {d['outages']} outages ({abs(d['outage_s']):.1f} s)")


def export(args: argparse.Namespace) -> None:
    """Write a bundle's saturator (heavy) traces in mahimahi's format, and the command to use.

    DIR/downlink.trace and DIR/uplink.trace hold one millisecond per line (mm-link's format).
    The printed mm-delay is the mean of the two directions' smallest recorded base delays:
    what `cellperf emulate --replay BUNDLE --replay-mode heavy` replays, as mahimahi would.

    Examples:
      cellperf replay export home-lte/ --mahimahi mm/
    """
    from cellperf.replay.bundle import check, export_mahimahi, mahimahi_delay_ms

    summary = check(args.bundle)
    written = export_mahimahi(args.bundle, args.mahimahi)
    print(f"wrote {', '.join(str(p) for p in written.values())}")
    if set(written) == {"downlink", "uplink"}:
        up, down = (shlex.quote(str(written[d])) for d in ("uplink", "downlink"))
        print(f"mm-delay {mahimahi_delay_ms(summary)} mm-link {up} {down}")


def check(args: argparse.Namespace) -> None:
    """Score replays of a bundle against the live network it recorded.

    Runs the scorecard's workloads (pings, 10- and 100-packet trains, a VoIP call, 30-s bulk
    TCP, with --http 10 KB-10 MB downloads, with --web the 004 pages in Chromium) at SERVER
    over the live network, then behind `cellperf emulate --replay BUNDLE` in full and heavy
    mode (against servers on this host), in turn, --rounds times; prints per workload the relative error of the means and the EMD over the
    live mean (CellReplay's measures) and the issue's targets. Needs root (the replays).
    With --store, the samples go into a results store too, where `cellperf report` draws the
    live-vs-replay CDFs and the scorecard.

    Examples:
      sudo cellperf replay check home-lte/ --server cn.example.net --token-file t
      sudo cellperf replay check home-lte/ --server cn --token-file t \\
          --http cn:8090 --rounds 3 --json
      sudo cellperf replay check home-lte/ --server cn --token-file t \\
          --store results/ --label "home LTE, evening"; cellperf report results/
      cellperf replay downloads --listen 0.0.0.0:8090     # at the CN, for --http
      cellperf web pages pages/ && \\
          cellperf web serve pages/ --listen 0.0.0.0:8080     # at the CN, for --web
    """
    from cellperf.agents import read_token
    from cellperf.replay import scorecard
    from cellperf.replay.bundle import check as check_bundle
    from cellperf.replay.workloads import DEFAULT_PLAN, QUICK_PLAN

    check_bundle(args.bundle)
    token = read_token(args.token_file)
    if os.geteuid() != 0:
        raise UserError("replay check: needs root (the replays run in cellperf emulate)")
    plan = QUICK_PLAN if args.quick else DEFAULT_PLAN
    say = (lambda line: print(f"cellperf replay check: {line}", file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="cellperf-check-") as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_bytes(token + b"\n")
        token_file.chmod(0o600)
        with scorecard.local_servers(token_file) as (port, http_port, web_port):
            runs = {"live": lambda: scorecard.run_workloads([], args.server, token_file, plan, args.http,
                                                            web_at=args.web)}
            for mode in scorecard.MODES:
                runs[mode] = lambda mode=mode: scorecard.run_workloads(
                    scorecard.replay_prefix(args.bundle, mode), f"$CELLPERF_CN:{port}", token_file, plan,
                    args.http and f"$CELLPERF_CN:{http_port}", web_at=args.web and f"$CELLPERF_CN:{web_port}")
            results = scorecard.alternate(runs, args.rounds, say)
    card = scorecard.score(results["live"], {m: results[m] for m in scorecard.MODES})
    if args.store:
        from cellperf.replay.results import store_check

        store_check(args.store, args.bundle, args.label or "", results)
    if args.as_json:
        print(json.dumps({"card": card, "results": results}))
    else:
        print(scorecard.table(card))


def downloads(args: argparse.Namespace) -> None:
    """Serve the scorecard's downloads (GET /N answers N bytes) until Ctrl-C.

    Run it at the CN beside `cellperf server` for `cellperf replay check --http`.

    Examples:
      cellperf replay downloads --listen 0.0.0.0:8090
    """
    from cellperf.replay.workloads import serve_downloads

    host, _, port = args.listen.rpartition(":")
    try:
        server = serve_downloads((host.strip("[]"), int(port)))
    except OSError as e:
        raise UserError(f"--listen {args.listen}: {e.strerror}") from None
    print(f"serving downloads on {args.listen}", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = add_subcommands(parser)
    p = add_subcommand(sub, "info", info)
    p.add_argument("bundle", metavar="BUNDLE", type=folder_path(), help="The bundle folder (or a CellReplay trace folder).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the summary as one JSON document.")
    p = add_subcommand(sub, "export", export)
    p.add_argument("bundle", metavar="BUNDLE", type=folder_path(), help="The bundle folder (or a CellReplay trace folder).")
    p.add_argument("--mahimahi", metavar="DIR", type=folder_path(), required=True,
                   help="Folder to write downlink.trace and uplink.trace to (created if missing).")
    p = add_subcommand(sub, "check", check)
    p.add_argument("bundle", metavar="BUNDLE", type=folder_path(), help="The bundle folder (or a CellReplay trace folder).")
    p.add_argument("--server", metavar="SERVER", required=True,
                   help="The `cellperf server` at the CN, HOST[:PORT] (default port 5250).")
    p.add_argument("--token-file", metavar="FILE", type=Path, help="Its token (else $CELLPERF_TOKEN).")
    p.add_argument("--http", metavar="HOST:PORT", type=host_port,
                   help="`cellperf replay downloads` at the CN: adds the downloads.")
    p.add_argument("--web", metavar="HOST:PORT", type=host_port,
                   help="`cellperf web serve` of the 004 pages (`cellperf web pages`) at the CN: adds page loads.")
    p.add_argument("--rounds", metavar="N", type=number_arg(lo=1, hi=100, integer=True), default=1,
                   help="Live, full, heavy in turn, N times over.")
    p.add_argument("--quick", action="store_true", help="Shorter workloads (about 1 min a run, not 3.5).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the scorecard and samples as JSON.")
    p.add_argument("--store", metavar="DIR", type=folder_path(),
                   help="Also keep the samples in this results store (created if missing) for `cellperf report`.")
    p.add_argument("--label", metavar="TEXT", help="The check's name in the report (default: the bundle).")
    p = add_subcommand(sub, "downloads", downloads)
    p.add_argument("--listen", metavar="HOST:PORT", default="0.0.0.0:8090", type=host_port,
                   help="Address to serve on (default 0.0.0.0:8090).")


def run(args: argparse.Namespace) -> None:
    args.subcommand(args)
