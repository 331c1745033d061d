"""Recorded links: a bundle's contents, its traces for mahimahi.

A bundle is what `cellperf record` writes (docs/formats.md, "Recording bundle"); a folder of
CellReplay's traces (up-delay-light-pdo, down-heavy-pdo, ...) is read too. Replay one with
`cellperf emulate --replay BUNDLE` (docs/emulator.md, "Replaying a recorded link").

Examples:
  cellperf replay info home-lte/
  cellperf replay info traces/tmobile/driving --json
  # then: mm-delay D mm-link mm/uplink.trace mm/downlink.trace
  cellperf replay export home-lte/ --mahimahi mm/
"""

from __future__ import annotations

import argparse
import json
import shlex

from cellperf.cli import add_subcommand, add_subcommands, folder_path


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = add_subcommands(parser)
    p = add_subcommand(sub, "info", info)
    p.add_argument("bundle", metavar="BUNDLE", type=folder_path(), help="The bundle folder (or a CellReplay trace folder).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the summary as one JSON document.")
    p = add_subcommand(sub, "export", export)
    p.add_argument("bundle", metavar="BUNDLE", type=folder_path(), help="The bundle folder (or a CellReplay trace folder).")
    p.add_argument("--mahimahi", metavar="DIR", type=folder_path(), required=True,
                   help="Folder to write downlink.trace and uplink.trace to (created if missing).")


def run(args: argparse.Namespace) -> None:
    args.subcommand(args)
