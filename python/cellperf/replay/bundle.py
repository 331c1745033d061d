"""A recording bundle (docs/formats.md, "Recording bundle") or a CellReplay trace folder, read
and checked by the emulator's own reader (cellperf-link's `replay_bundle`, the one parser of
the format), and its heavy traces written for mahimahi."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cellperf import _native
from cellperf.errors import UserError, os_reason

DIRECTIONS = ("downlink", "uplink")


def check(path) -> dict:
    """Reads every file of the bundle at `path`; returns what it holds:
    `{"path", "kind", "duration_s", "complete", "directions": {"downlink": {"trains",
    "light_opportunities", "heavy_opportunities", "heavy_mbps", "base_delay_ms": {"min",
    "mean", "max"}, "offset_sizes", "loss_windows", "sent", "lost", "outages", "outage_s"},
    "uplink": ...}}`. A bad bundle raises UserError naming the file and line."""
    try:
        return json.loads(_native.check_replay_bundle(os.fspath(path)))
    except _native.InputError as e:
        raise UserError(str(e)) from None


def export_mahimahi(path, folder) -> dict[str, Path]:
    """Writes each direction's heavy trace as FOLDER/DIRECTION.trace (one millisecond per line,
    what mm-link reads); returns the files written by direction. A file is written whole or
    not at all."""
    summary = check(path)
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out}: cannot create the folder ({os_reason(e)})") from None
    written = {}
    for direction in DIRECTIONS:
        if direction not in summary["directions"]:
            continue
        target = out / f"{direction}.trace"
        try:
            _native.export_replay_heavy(os.fspath(path), direction, os.fspath(target))
        except _native.InputError as e:
            raise UserError(str(e)) from None
        written[direction] = target
    return written


def mahimahi_delay_ms(summary: dict) -> int:
    """mm-delay's one delay for both directions: the mean of the directions' smallest base
    delays (so the round trip is the sum of the two smallest), whole milliseconds."""
    lows = [d["base_delay_ms"]["min"] for d in summary["directions"].values()]
    return round(sum(lows) / len(lows))
