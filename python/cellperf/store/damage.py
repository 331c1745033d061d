"""Damaged per-packet files of a store: found when a store is opened, so that one truncated
Parquet file fails only what reads it (docs/store.md, issue 31).

A Parquet file begins and ends with the magic `PAR1`, and its last 8 bytes give the length
of the footer (the schema and where every row group lies) before them. A file cut short by a
full disk, a killed copy or a half-synced folder loses that end: checking the frame is two
small reads per file, cheap enough at every open. A footer that is whole in length but
damaged inside is found by DuckDB itself when a view is built over the file (`unreadable`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from cellperf.errors import os_reason

MAGIC = b"PAR1"


@dataclass(frozen=True)
class DamagedFile:
    """A per-packet file left out of its view: which table, which run, and why."""

    path: Path
    table: str
    problem: str

    @property
    def run_id(self) -> str | None:
        """The run the file belongs to: its dataset partition `run=ID`, or its run folder
        `runs/ID/` in stores written before the dataset."""
        for part in reversed(self.path.parts[:-1]):
            if part.startswith("run="):
                return part.removeprefix("run=")
        return self.path.parent.name if self.path.parent.parent.name == "runs" else None


def frame_problem(path: Path) -> str | None:
    """Why `path` is not a whole Parquet file, judged by its frame (magic at both ends, a
    footer that fits), or None when the frame is whole."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(4)
            f.seek(max(size - 8, 0))
            tail = f.read(8)
    except OSError as e:
        return f"cannot read ({os_reason(e)})"
    if size == 0:
        return "empty"
    if head != MAGIC:
        return "not a Parquet file (no PAR1 at its start)"
    if size < 12 or tail[4:] != MAGIC:
        return f"truncated ({size} bytes, no Parquet footer at its end)"
    footer = int.from_bytes(tail[:4], "little")
    if footer + 12 > size:
        return f"damaged footer (says {footer} bytes in a file of {size})"
    return None


def unreadable(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """DuckDB's one-line reason why it cannot read `path`'s schema, or None."""
    try:
        con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)])
    except duckdb.Error as e:
        return f"unreadable ({one_line(e)})"
    return None


def tables_read_by(con: duckdb.DuckDBPyConnection, query: str, candidates: set[str]) -> set[str]:
    """Which of the tables or views `candidates` the query names (lower case), from DuckDB's
    own parse of it (`json_serialize_sql`; a column or a string of the same name is not a
    read). Statements it cannot serialise (EXPLAIN) are judged by the names as words."""
    try:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchall()[0][0])
    except (duckdb.Error, ValueError):
        tree = {"error": True}
    if tree.get("error"):
        return {name for name in candidates if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", query, re.I)}
    found = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
                found.add(node["table_name"].lower())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found & candidates


def one_line(e: BaseException) -> str:
    """An error's first line, with DuckDB's `Invalid Input Error:` kind dropped."""
    text = (str(e).splitlines() or [type(e).__name__])[0]
    return text.split(" Error: ", 1)[1] if " Error: " in text[:40] else text
