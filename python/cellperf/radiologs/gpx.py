"""GPX tracks (a handheld or phone GPS export), read with gpxpy: every track point with a
time, in every track and segment (route and way points have no times and are ignored)."""

from __future__ import annotations

from datetime import timezone
from pathlib import Path

import gpxpy
import gpxpy.gpx

from cellperf.errors import UserError, os_reason

DESCRIPTION = "GPX 1.0/1.1 track points with times"


def sniff(head: str, path: Path) -> bool:
    return "<gpx" in head[:4096]


def read(path: Path, tz: str):
    from cellperf.radiologs.positions import positions_frame

    try:
        with open(path, encoding="utf-8") as f:
            doc = gpxpy.parse(f)
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None
    except (gpxpy.gpx.GPXException, ValueError) as e:
        raise UserError(f"{path}: not a readable GPX file ({str(e).splitlines()[0]})") from None
    points = [p for track in doc.tracks for seg in track.segments for p in seg.points if p.time is not None]
    if not points:
        raise UserError(f"{path}: no position fix in the file (no track point with a time)")
    return positions_frame({
        # A time without a zone is UTC in GPX (its schema says so); gpxpy leaves it naive.
        "time_s": [(p.time if p.time.tzinfo else p.time.replace(tzinfo=timezone.utc)).timestamp() for p in points],
        "lat": [p.latitude for p in points], "lon": [p.longitude for p in points],
        "alt_m": [p.elevation for p in points], "speed_mps": [p.speed for p in points]}, path)
