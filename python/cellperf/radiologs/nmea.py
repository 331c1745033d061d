"""NMEA 0183 position logs (a GPS receiver's serial output, `gpspipe -r`), read with pynmea2.

RMC sentences give the fix: UTC date and time, latitude, longitude, speed over ground
(knots → m/s) and the status (`A` valid, `V` no fix: dropped). GGA sentences of the same
time of day add the altitude (their fix quality 0 also means no fix). Any talker (GP, GN,
GL, ...). Lines that are not sentences (comments, binary noise) and sentences with a bad
checksum are skipped, as a receiver's log often has a partial first or last line.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pynmea2

from cellperf.errors import UserError
from cellperf.textlines import lines

DESCRIPTION = "NMEA 0183 sentences, RMC (+GGA)"
KNOT_MPS = 1852 / 3600


def sniff(head: str, path: Path) -> bool:
    return any(line.startswith("$") and line[3:6] in ("RMC", "GGA") for line in head.splitlines())


def read(path: Path, tz: str):
    from cellperf.radiologs.positions import positions_frame

    fixes: dict[float, list] = {}
    altitude: dict[str, float] = {}  # GGA altitude by time of day (GGA has no date)
    rmc = 0
    for _, raw in lines(path, "an NMEA log"):
        if not raw.startswith(b"$"):
            continue
        line = raw.decode("ascii", errors="replace")
        try:
            msg = pynmea2.parse(line.strip(), check=True)
        except (pynmea2.ParseError, ValueError, AttributeError, TypeError):
            continue
        if isinstance(msg, pynmea2.types.talker.GGA):
            if msg.gps_qual and msg.altitude is not None and msg.timestamp is not None:
                altitude[msg.timestamp.isoformat()] = float(msg.altitude)
        elif isinstance(msg, pynmea2.types.talker.RMC):
            rmc += 1
            if msg.status != "A" or msg.datestamp is None or msg.timestamp is None or not msg.lat:
                continue
            t = datetime.combine(msg.datestamp, msg.timestamp.replace(tzinfo=None), tzinfo=timezone.utc).timestamp()
            speed = float(msg.spd_over_grnd) * KNOT_MPS if msg.spd_over_grnd is not None else None
            fixes[t] = [msg.latitude, msg.longitude, msg.timestamp.isoformat(), speed]
    if not rmc:
        raise UserError(f"{path}: no RMC sentence (NMEA logs need RMC for the date and the fix status)")
    times = sorted(fixes)
    return positions_frame({"time_s": times, "lat": [fixes[t][0] for t in times], "lon": [fixes[t][1] for t in times],
                            "alt_m": [altitude.get(fixes[t][2]) for t in times],
                            "speed_mps": [fixes[t][3] for t in times]}, path)
