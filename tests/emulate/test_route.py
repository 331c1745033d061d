"""The synthetic route of emulated mobile runs (seed 000 Fig. 3.1 without GPS): a ring around
Daejeon driven at the profile's speed, positions where a car that never stopped would be."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cellperf.emulate.route import CENTRE, M_PER_DEG, RING_RADIUS_M, speed_kmh, synthetic_route


def _metres(a_lat, a_lon, b_lat, b_lon):
    dy = (b_lat - a_lat) * M_PER_DEG
    dx = (b_lon - a_lon) * M_PER_DEG * math.cos(math.radians(CENTRE[0]))
    return np.hypot(dx, dy)


def test_speed_of_each_profile():
    assert speed_kmh("evdo-train") == 300.0 and speed_kmh("umts-walk") == 5.0
    assert speed_kmh("evdo-mobile") == 88.0 and speed_kmh("wibro-mobile") == 38.0
    assert speed_kmh("lte-mobile") == 100.0 and speed_kmh(None) == 100.0


def test_positions_every_second_on_the_ring_at_the_speed():
    t0 = 1_795_745_542.5
    r = synthetic_route(t0, t0 + 10.25, 90.0)
    assert r["time_s"].to_list() == [t0 + k for k in range(11)] + [t0 + 10.25]
    assert set(r["source"]) == {"synthetic"} and set(r["speed_mps"]) == {25.0}
    lat, lon = r["lat"].to_numpy(), r["lon"].to_numpy()
    # On the ring, 25 m of arc per second (the chord of 25 m on an 8-km circle is 25 m less 0.2 mm).
    assert _metres(CENTRE[0], CENTRE[1], lat, lon) == pytest.approx(np.full(12, RING_RADIUS_M), rel=1e-6)
    assert _metres(lat[:-1], lon[:-1], lat[1:], lon[1:])[:10] == pytest.approx(np.full(10, 25.0), rel=1e-6)
    # Where the car is depends on the time only: a later run continues the drive.
    later = synthetic_route(t0 + 5, t0 + 6, 90.0)
    assert later["lat"][0] == pytest.approx(lat[5], abs=1e-9) and later["lon"][0] == pytest.approx(lon[5], abs=1e-9)
