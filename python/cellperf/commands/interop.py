"""Read iperf3 and D-ITG results into cellperf's result tables.

The probe's result document, the per-interval series, and for D-ITG the per-packet log, so
campaigns measured with those tools analyse like cellperf's own.

Examples:
  cellperf interop iperf3 run-17.json
  cellperf interop iperf3 run-17.json --json --out imported/run-17
  cellperf interop ditg recv.txt --direction up --date 2009-05-14 \\
       --out imported/voip-3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cellperf.agents.interop import DEFAULT_INTERVAL_S, Imported, read_ditg, read_iperf3, write_imported
from cellperf.cli import add_subcommand, add_subcommands, file_path, folder_path, iso_date
from cellperf.validate import number_arg
from cellperf.units import format_rate


def _show(imported: Imported, as_json: bool, out: Path | None) -> None:
    files = write_imported(imported, out) if out is not None else []
    doc = imported.document
    if as_json:
        print(json.dumps(doc))
        return
    from rich.console import Console
    from rich.table import Table

    src = doc["source"]
    t = Table(title=f"{src['tool']} {doc['test']} ({doc['direction']}) from {src['file']}", show_header=False)
    t.add_row("duration", f"{doc['duration_s']:.2f} s")
    t.add_row("throughput", format_rate(doc["throughput_bps"]))
    if doc.get("packets_sent") is not None:
        t.add_row("packets sent / received", f"{doc['packets_sent']} / {doc['packets_received']}")
        t.add_row("loss", f"{100 * doc['loss_rate']:.3f} %")
    if doc.get("retransmits") is not None:
        t.add_row("TCP retransmissions", str(doc["retransmits"]))
    for key, name in (("jitter_ms", "jitter"), ("owd_ms", "one-way delay (raw)"), ("rtt_ms", "sender RTT")):
        s = doc.get(key)
        if s:
            parts = [f"{k} {s[k]:.3f}" for k in ("min", "median", "p95", "max", "mean", "rfc3550") if s.get(k) is not None]
            t.add_row(name, " / ".join(parts) + " ms")
    t.add_row("intervals", f"{imported.intervals.num_rows} rows")
    if imported.log is not None:
        t.add_row("per-packet log", f"{imported.log.num_rows} rows")
    for f in files:
        t.add_row("wrote", str(f))
    Console().print(t)


def iperf3(args: argparse.Namespace) -> None:
    """Read `iperf3 -c SERVER -J` output (TCP or UDP, -R, --bidir, -P).

    FILE is the output of `iperf3 -c SERVER -J`. The client is the mobile node: what it sent
    is `up`.

    Examples:
      iperf3 -c cn -u -b 2M -t 60 -R -J > down.json && \\
           cellperf interop iperf3 down.json
      cellperf interop iperf3 run-17.json --out imported/down
    """
    _show(read_iperf3(args.file), args.as_json, args.out)


def ditg(args: argparse.Namespace) -> None:
    """Read D-ITG's per-packet text (`ITGDec RECV_LOG -l FILE`, the receiver's log).

    FILE is the per-packet text of `ITGDec RECV_LOG -l FILE`.

    Examples:
      ITGDec recv.log -l recv.txt && \\
           cellperf interop ditg recv.txt --date 2009-05-14
      cellperf interop ditg recv.txt --direction up --json --out imported/voip-3
    """
    _show(read_ditg(args.file, date=args.date, direction=args.direction, interval_s=args.interval), args.as_json, args.out)


def _common(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("file", metavar="FILE", type=file_path(Path), help=what)
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the result document as one JSON line.")
    parser.add_argument("--out", metavar="DIR", type=folder_path(Path),
                        help="Write result.json, intervals.parquet (and agent_log.parquet) here.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    subcommands = add_subcommands(parser)
    _common(add_subcommand(subcommands, "iperf3", iperf3), "iperf3's JSON output.")
    p = add_subcommand(subcommands, "ditg", ditg)
    _common(p, "ITGDec's per-packet text.")
    p.add_argument("--direction", default="up", choices=["up", "down"],
                   help="up: D-ITG's sender was the mobile node; down: its receiver was.")
    p.add_argument("--date", type=iso_date, metavar="YYYY-MM-DD",
                   help="Day the test started (D-ITG logs times of day; default: the file's date).")
    p.add_argument("--interval", metavar="SECONDS", default=DEFAULT_INTERVAL_S, type=number_arg(lo=0, lo_open=True, hi=86400, unit="seconds"),
                   help="Interval series, seconds.")


def run(args: argparse.Namespace) -> None:
    args.subcommand(args)
