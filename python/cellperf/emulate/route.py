"""A synthetic route for emulated mobile runs, so that the route map (seed 000 Fig. 3.1) and its
handoffs work without GPS: the mobile node drives a ring road around Daejeon (000 §3.1: the car
"on a highway around the city of Daejeon", driven without stop) at its profile's speed.

**Choice**: the ring is a circle of RING_RADIUS_M around the city centre, driven clockwise from
its western point at Unix time 0, so a run's positions are where a car that never stopped would
be at the run's times: a campaign's runs follow one another along the road, as the thesis' sets
did. The speed is the scenario's or the profile's (`speed = "train"`, `evdo-train`: 300 km/h,
mobility.JOURNEYS; a family's `-mobile`: the speed it was calibrated at,
mobility.REFERENCE_KMH), else DEFAULT_KMH.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from cellperf.emulate.mobility import JOURNEYS, REFERENCE_KMH

#: Daejeon's centre (City Hall) and the ring's radius (choice: about the city's beltway).
CENTRE = (36.3504, 127.3845)
RING_RADIUS_M = 8000.0
#: A speed when the profile gives none (LTE, NR, a link table): 000 §3.1's car.
DEFAULT_KMH = 100.0
#: Metres per degree of latitude (WGS 84 mean; the ring is small enough for a flat projection).
M_PER_DEG = 111_320.0
STEP_S = 1.0


def speed_kmh(profile: str | None, journey: str | None = None) -> float:
    """The speed of a run on `profile` in a scenario of `journey` (a campaign scenario's speed)."""
    if journey in JOURNEYS:
        return JOURNEYS[journey].kmh
    family, _, mobility = (profile or "").rpartition("-")
    if mobility in JOURNEYS:
        return JOURNEYS[mobility].kmh
    if mobility == "mobile" and family in REFERENCE_KMH:
        return REFERENCE_KMH[family]
    return DEFAULT_KMH


def synthetic_route(start_s: float, end_s: float, kmh: float, step_s: float = STEP_S) -> pl.DataFrame:
    """Positions every step_s from start_s to end_s (Unix s), in the `positions` columns."""
    t = np.append(np.arange(start_s, end_s, step_s), end_s)
    v = kmh / 3.6
    angle = math.pi - v * t / RING_RADIUS_M  # from the west point, clockwise: the angle falls
    lat = CENTRE[0] + RING_RADIUS_M * np.sin(angle) / M_PER_DEG
    lon = CENTRE[1] + RING_RADIUS_M * np.cos(angle) / (M_PER_DEG * math.cos(math.radians(CENTRE[0])))
    return pl.DataFrame({"time_s": t, "lat": lat, "lon": lon, "alt_m": None, "speed_mps": v, "source": "synthetic"},
                        schema={"time_s": pl.Float64, "lat": pl.Float64, "lon": pl.Float64, "alt_m": pl.Float64,
                                "speed_mps": pl.Float64, "source": pl.Utf8})
