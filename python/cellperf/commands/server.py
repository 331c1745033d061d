"""Serve `cellperf probe` tests until stopped: the agent at the CN.

Each client authenticates with the shared token (HMAC challenge; the token never crosses the
network), and each test is held to --max-rate, --max-duration and --max-tests. Data goes only
to the address of the control connection that asked. Stop it with Ctrl-C.

Examples:
  cellperf server --token-file /etc/cellperf/token
  CELLPERF_TOKEN=s3cret cellperf server --listen 0.0.0.0:5250 --max-rate 50M
  cellperf server --token-file t --log-dir /var/log/cellperf
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.agents import DEFAULT_PORT, MAX_DURATION_S, MAX_TESTS, parse_rate, read_token, serve
from cellperf.cli import file_path, folder_path
from cellperf.errors import UserError
from cellperf.validate import number_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", metavar="HOST:PORT", default=f"[::]:{DEFAULT_PORT}",
                        help="Control address; [::] takes IPv4 too.")
    parser.add_argument("--token-file", metavar="FILE", type=file_path(Path), help="Shared token (else $CELLPERF_TOKEN).")
    parser.add_argument("--max-rate", metavar="RATE", default="100M", help="Per test, bit/s (k/M/G), up to 1T: all directions and streams together, TCP included.")
    parser.add_argument("--max-duration", metavar="SECONDS", default=600.0, type=number_arg(lo=0, hi=MAX_DURATION_S, lo_open=True, unit="seconds"), help="Longest test, seconds (at most 86400).")
    parser.add_argument("--max-tests", metavar="N", default=16, type=number_arg(lo=1, hi=MAX_TESTS, integer=True), help="Tests running at once (1..1024).")
    parser.add_argument("--log-dir", metavar="DIR", type=folder_path(Path), help="Write a per-packet CSV log per test here.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the listening address as one JSON line.")


def run(args: argparse.Namespace) -> None:
    token = read_token(args.token_file)
    rate = parse_rate(args.max_rate, "--max-rate")
    max_duration, max_tests, log_dir = args.max_duration, args.max_tests, args.log_dir
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--log-dir {log_dir}: cannot create ({e.strerror})") from None

    def ready(address: str) -> None:
        if args.as_json:
            print(json.dumps({"listening": address, "max_rate_bps": rate, "max_duration_s": max_duration,
                              "max_tests": max_tests}), flush=True)
        else:
            print(f"cellperf server listening on {address} (max {rate:.3g} bit/s, {max_duration:g} s, {max_tests} tests)",
                  flush=True)

    try:
        serve(args.listen, token, rate, max_duration, max_tests, log_dir, ready)
    except KeyboardInterrupt:
        print("cellperf server: stopped", file=sys.stderr)
