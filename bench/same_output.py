#!/usr/bin/env python3
"""Digest of what the native analysis gives for a set of captures, to check that a change to
the engine leaves its output as it was: run it with the build before and the build after,
and compare the two files (`cmp`).

For every capture given alone, and for every pair of captures that sit in one folder as
names that differ only in the first `mn` / `cn` (`mn.pcap`/`cn.pcap`, `x-mn.pcap`/`x-cn.pcap`): the report's JSON text and
every per-packet table (Arrow IPC bytes, hashed), without and with tables. A capture the
engine refuses gives its one-line message instead.

    .venv/bin/python bench/same_output.py OUT.txt CAPTURE_OR_FOLDER...
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pyarrow as pa

from cellperf import _native


def captures(args: list[str]) -> list[Path]:
    out = []
    for a in args:
        p = Path(a)
        if p.is_dir():
            out += sorted(x for x in p.rglob("*") if x.suffix in (".pcap", ".pcapng") and x.is_file())
        else:
            out.append(p)
    return out


def pairs(files: list[Path]) -> list[tuple[Path, Path]]:
    found = []
    for f in files:
        if "mn" in f.name:
            cn = f.with_name(f.name.replace("mn", "cn", 1))
            if cn.exists():
                found.append((f, cn))
    return found


def digest(caps: list[tuple[str, str]]) -> str:
    lines = []
    for tables in (False, True):
        try:
            text, batches = _native.analyze_captures(caps, 5.0, None, False, tables)
        except _native.InputError as e:
            return f"refused: {e}"
        lines.append(text)
        for name, batch in batches:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as w:
                w.write_batch(batch)
            lines.append(f"{name} {batch.num_rows} {hashlib.sha256(sink.getvalue()).hexdigest()}")
    return "\n".join(lines)


def main() -> None:
    out, *args = sys.argv[1:]
    files = captures(args)
    runs = [[(str(f), "mn")] for f in files] + [[(str(m), "mn"), (str(c), "cn")] for m, c in pairs(files)]
    with open(out, "w") as f:
        for caps in runs:
            f.write(f"== {' '.join(p for p, _ in caps)}\n{digest(caps)}\n")
    print(f"{len(runs)} analyses written to {out}")


if __name__ == "__main__":
    main()
