"""gpsd's JSON reports (`gpspipe -w`, one object a line): TPV reports with `mode` 2 (2D fix)
or 3 (3D fix) give time, lat, lon, altitude (`altMSL`, else `alt`, else `altHAE`) and speed
(m/s); mode 0/1 means no fix; other classes (SKY, VERSION, DEVICES, WATCH) are skipped.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from cellperf.textlines import lines

DESCRIPTION = "gpsd JSON, TPV reports (gpspipe -w)"


def sniff(head: str, path: Path) -> bool:
    return any(line.startswith("{") and '"class"' in line for line in head.splitlines()[:20])


def read(path: Path, tz: str):
    from cellperf.radiologs.positions import positions_frame

    cols = {"time_s": [], "lat": [], "lon": [], "alt_m": [], "speed_mps": []}
    for _, line in lines(path, "a gpsd log"):
        if b'"TPV"' not in line:
            continue
        try:
            tpv = json.loads(line.decode("utf-8", errors="replace"))
            if tpv.get("mode", 0) < 2 or "time" not in tpv:
                continue
            t = datetime.fromisoformat(tpv["time"].replace("Z", "+00:00")).timestamp()
        except (ValueError, TypeError, AttributeError):
            continue  # a damaged line, as a killed gpspipe leaves
        alt = next((tpv[k] for k in ("altMSL", "alt", "altHAE") if k in tpv), None)
        for k, v in (("time_s", t), ("lat", tpv.get("lat")), ("lon", tpv.get("lon")), ("alt_m", alt),
                     ("speed_mps", tpv.get("speed"))):
            cols[k].append(v)
    return positions_frame(cols, path)
