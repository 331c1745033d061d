"""cellperf's own radio log (the emulator's `radio.csv`, a campaign's `{ csv = ... }`): CSV or
JSON lines with time_s, bs_id, sector_id (docs/campaigns.md), read by
`cellperf.handoffs.read_radio_log`."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cellperf.handoffs import read_radio_log

DESCRIPTION = "CSV or JSON lines with time_s, bs_id, sector_id"


def sniff(head: str, path: Path) -> bool:
    first = head.splitlines()[0] if head else ""
    if first.startswith("{"):
        return all(f'"{c}"' in first for c in ("time_s", "bs_id", "sector_id"))
    return {"time_s", "bs_id", "sector_id"} <= {c.strip() for c in first.split(",")}


def read(path: Path, tz: str) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    return read_radio_log(path), None
