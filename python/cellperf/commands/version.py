"""Print the versions of cellperf, its compiled core and Python.

Examples:
  cellperf version
  cellperf version --json       # for bug reports and campaign records
"""

import argparse
import json
import platform

from cellperf import _native


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    info = {"cellperf": _native.__version__, "python": platform.python_version()}
    print(json.dumps(info) if args.as_json else "\n".join(f"{k} {v}" for k, v in info.items()))
