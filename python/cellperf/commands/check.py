"""Verify a store: every table and Parquet file read, rows consistent.

Reads the whole store in DIR (a campaign's --out, or an import's folder) read-only: the
database opens and its schema is exactly a version's; every table and every per-packet
Parquet file reads to its last value (checksums, compressed pages); a file has the rows its
footer counts, all of its folder's run; every row of a run table has a `runs` row. Lists what
is damaged. A damaged file fails only the queries that read it, and the report marks its run
(docs/store.md); restore it from a copy, or mark its run failed and run the campaign or
import again (docs/store.md).

Exit status: 0 the store is whole, 1 damage found (or no store in DIR).

Examples:
  cellperf check results/
  cellperf check results/ --json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.cli import folder_path, terminal_width

#: The human form fits 80 columns (a path is folded, not cut).
WIDTH = 80


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_dir", metavar="DIR", type=folder_path(Path), help="The results folder.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the verdict as one JSON document.")


def run(args: argparse.Namespace) -> None:
    from cellperf.store.verify import verify_store

    verdict = verify_store(args.store_dir)
    if args.as_json:
        print(json.dumps(verdict.to_json()))
    else:
        print_verdict(verdict, min(terminal_width(), WIDTH))
    if verdict.damaged:
        sys.exit(1)


def print_verdict(verdict, width: int) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from cellperf.store.schema import SCHEMA_VERSION

    version = "unknown" if verdict.schema_version is None else verdict.schema_version
    current = " (current)" if verdict.schema_version == SCHEMA_VERSION else f" (this cellperf: {SCHEMA_VERSION})"
    print(f"store: {verdict.root}")
    print(f"schema version {version}{current}, {verdict.runs} runs, {verdict.tables} tables, "
          f"{verdict.parquet_files} Parquet files")
    if not verdict.damaged:
        print("no damage found")
        return
    console = Console(width=width, highlight=False, soft_wrap=False)
    table = Table(box=box.SIMPLE, header_style="bold", title=f"damaged: {len(verdict.problems)} (paths: --json)",
                  title_justify="left", pad_edge=False)
    table.add_column("run", overflow="fold")
    table.add_column("what", overflow="fold")
    table.add_column("problem", overflow="fold")
    for p in verdict.problems:
        table.add_row(p.run_id or "", p.what, p.problem)
    console.print(table)
