"""RTT and loss to each router on the path (like mtr), without root.

docs/methods.md §2, seed 003 slides 9-10. UDP probes leave with TTL 1, 2, ... up to the target;
each router answers ICMP time exceeded where the TTL runs out, the target port unreachable.
The answers are read from the socket's error queue, as tracepath does: no raw socket, no root.
Each round sends one probe per hop, spread over --interval (1 s, as mtr: a Linux router answers
about one probe a second per source after a burst of six, so faster rounds show loss that is
the router's rate limit, not the path's). Per hop: the address that answered, probes sent and
answered, and the round trip's min / median / p95 / max. A target with an open UDP port in
--port .. --port+999 does not answer, as for traceroute. In a campaign `type = "hops"` runs
it from the emulated MN to the CN (docs/campaigns.md).

Examples:
  cellperf hops 127.0.0.1 --count 3 --interval 0.2   # this host: TTL 1
  cellperf hops 192.0.2.7
  cellperf hops cn.example.net --count 60 --json
  sudo cellperf emulate --profile umts-stationary -- \\
      cellperf hops '$CELLPERF_CN' --count 20 --log hops.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.cli import file_path
from cellperf.validate import number_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cellperf.agents.hops import (DEFAULT_COUNT, DEFAULT_INTERVAL_S, DEFAULT_MAX_HOPS, DEFAULT_TIMEOUT_S,
                                      FIRST_PORT, MAX_HOPS)

    parser.add_argument("target", metavar="TARGET", help="Address or name of the far end (the CN).")
    parser.add_argument("--count", metavar="N", type=number_arg(lo=1, hi=100_000, integer=True), default=DEFAULT_COUNT,
                        help="Rounds: probes per hop.")
    parser.add_argument("--interval", metavar="SECONDS", type=number_arg(lo=0.001, hi=60, unit="seconds"),
                        default=DEFAULT_INTERVAL_S, help="Time between rounds.")
    parser.add_argument("--max-hops", metavar="N", type=number_arg(lo=1, hi=MAX_HOPS, integer=True),
                        default=DEFAULT_MAX_HOPS, help="Highest TTL tried while the target has not answered.")
    parser.add_argument("--timeout", metavar="SECONDS", type=number_arg(lo=0, hi=60, unit="seconds"),
                        default=DEFAULT_TIMEOUT_S, help="Wait for answers after the last probe.")
    parser.add_argument("--port", metavar="PORT", type=number_arg(lo=1, hi=64536, integer=True), default=FIRST_PORT,
                        help="First destination port of the probes (each probe takes the next, over 1000).")
    parser.add_argument("--log", metavar="FILE", type=file_path(Path), help="One row per probe (.parquet or .csv).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    from cellperf.agents import check_log_path, write_log
    from cellperf.agents.hops import resolve, trace

    if args.log is not None:
        check_log_path(args.log)
    target = resolve(args.target)
    settings = {"count": args.count, "interval_s": args.interval, "max_hops": args.max_hops,
                "timeout_s": args.timeout, "first_port": args.port}
    doc, log = trace(target, **settings)
    if args.log is not None and log is not None:
        write_log(log, args.log, doc)
    if args.as_json:
        print(json.dumps(doc))
    else:
        print(_text(doc))
    sys.stdout.flush()


def _text(doc: dict) -> str:
    end = "reached" if doc["reached"] else "not reached"
    addresses = [(h["responder"] or "???") + (f" (+{len(h['responders']) - 1})" if len(h["responders"]) > 1 else "")
                 for h in doc["hops"]]
    width = max([7, *map(len, addresses)])
    lines = [f"hops to {doc['target']} ({end}): {doc['count']} rounds, {doc['interval_s']:g} s apart",
             f"{'TTL':>3}  {'address':<{width}} {'sent':>5} {'loss':>6}  min / median / p95 / max ms"]
    for h, address in zip(doc["hops"], addresses):
        rtt = h["rtt_ms"]
        times = "-" if rtt is None else f"{rtt['min']:.2f} / {rtt['median']:.2f} / {rtt['p95']:.2f} / {rtt['max']:.2f}"
        lines.append(f"{h['ttl']:>3}  {address:<{width}} {h['sent']:>5} {100 * h['loss_rate']:>5.1f}%  {times}")
    return "\n".join(lines)
