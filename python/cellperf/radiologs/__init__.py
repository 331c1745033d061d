"""Radio logs and position tracks from the tools drive testers use, read into cellperf's
radio-log columns (docs/import.md, docs/methods.md §1):

    time_s (Unix epoch s), bs_id, sector_id, technology, and where the tool logs them
    rsrp_dbm, rsrq_db, rssi_dbm, sinr_db, rate_bps

and positions: time_s, lat, lon (WGS 84 degrees), alt_m, speed_mps.

A file's format is recognised from its content (`sniff_radio`, `sniff_positions`) before
anything is imported; `read_radio` / `read_positions` read it. Each format has its module.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cellperf.errors import UserError, os_reason
from cellperf.radiologs import cellperf_csv, gnettrack, gpsd, gpx, mobileinsight, nmea

#: Radio-log formats: name → module with `sniff(head: str, path) -> bool` and
#: `read(path, tz) -> (radio, positions | None)`.
RADIO_FORMATS = {"cellperf": cellperf_csv, "gnettrack": gnettrack, "mobileinsight": mobileinsight}
#: Position formats: name → module with `sniff(head, path)` and `read(path, tz) -> positions`.
POSITION_FORMATS = {"nmea": nmea, "gpx": gpx, "gpsd": gpsd}

def _head(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(8192).decode("utf-8", errors="replace").lstrip("\ufeff")
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None


def _sniff(path: Path, formats: dict, what: str) -> str:
    head = _head(path)
    for name, module in formats.items():
        if module.sniff(head, path):
            return name
    known = ", ".join(f"{n} ({m.DESCRIPTION})" for n, m in formats.items()) or "none"
    raise UserError(f"{path}: unknown {what} format; known: {known}")


def sniff_radio(path: Path) -> str:
    """The radio-log format of `path`; UserError naming the known ones."""
    return _sniff(path, RADIO_FORMATS, "radio-log")


def sniff_positions(path: Path) -> str:
    return _sniff(path, POSITION_FORMATS, "position-track")


def read_radio(path: Path, fmt: str, tz: str = "UTC") -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(radio log, positions it carries or None)."""
    return RADIO_FORMATS[fmt].read(path, tz)


def read_positions(path: Path, fmt: str, tz: str = "UTC") -> pl.DataFrame:
    return POSITION_FORMATS[fmt].read(path, tz)
