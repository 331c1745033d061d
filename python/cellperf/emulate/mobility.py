"""Speed variants of the 3G profiles (seed 000 §3.1: car, KTX train, subway): `evdo-car`,
`hsdpa-train`, `wibro-subway`, `umts-walk`, ...

A family's `-mobile` profile was calibrated at one speed (REFERENCE_KMH, from the seed that gave
its numbers). What happens per metre travelled scales with speed: cells crossed (handoffs),
shadowed stretches crossed (deep fades) and fast-fading's Doppler (the rate channel's changes).
Each such rate is therefore a straight line through two calibrated points, the `-stationary`
profile's value at 0 km/h and the `-mobile` profile's at the reference speed:

    rate(v) = rate_stationary + (rate_mobile - rate_stationary) * v / v_ref

A fade's mean duration is such that the fraction of time spent in deep fades stays the
`-mobile` profile's at every speed (the same shadowed fraction of the route, crossed faster),
and a fade's depth (the error probability in it, the rate channel's levels) does not change
with speed: 000 §4.1 found car and KTX throughput fluctuating alike ("irrespective of degree of
mobility, its impact is consistent"). Handoff outages are signalling times and stay as they
are. docs/emulator.md "Speed variants" has the table and the sources.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from cellperf.emulate.spec import DirectionConfig, EmulationConfig


@dataclass(frozen=True)
class Journey:
    kmh: float
    source: str


#: Speeds of seed 000 §3.1's scenarios (and 004 §III's pedestrian one).
JOURNEYS = {
    "walk": Journey(5.0, "004 §III.2.1 pedestrian scenario (5 km/h: choice, a walking pace)"),
    "subway": Journey(38.0, "000 §3.1 Seoul line 6: 35.1 km, 38 stations, 1-2 min apart (derived mean)"),
    "car": Journey(100.0, "000 §3.1 car on the highway around Daejeon, about 100 km/h"),
    "train": Journey(300.0, "000 §3.1 KTX train, about 300 km/h"),
}

#: The speed each 3G family's `-mobile` profile was calibrated at (docs/emulator.md).
REFERENCE_KMH = {
    "evdo": 88.0,  # 002 §1: sector hand-offs every 20-30 s at 50-60 mph (80-97 km/h)
    "hsdpa": 100.0,  # 000 §3.1: HSDPA measured in the car at about 100 km/h
    "wibro": 38.0,  # 000 §4.3: 17 handoffs on the subway (mean speed above)
    "umts": 30.0,  # 004 §III.2.2: the vehicular scenario's 30 km/h average
}

#: The `-stationary` profiles' DRC move probability per slot against the `-mobile` one's
#: (profiles.py `drc_chain`: 0.005 and 0.03): the EV-DO rate channel's value at 0 km/h.
EVDO_STATIONARY_MOVE_RATIO = 0.005 / 0.03


def line(at_0: float, at_ref: float, kmh: float, ref_kmh: float) -> float:
    """The straight line through (0, at_0) and (ref_kmh, at_ref), at kmh."""
    return at_0 + (at_ref - at_0) * kmh / ref_kmh


def at_speed(family: str, stationary: EmulationConfig, mobile: EmulationConfig, kmh: float) -> EmulationConfig:
    """The family's `-mobile` link moved to `kmh` (see the module's docstring)."""
    ref = REFERENCE_KMH[family]
    scale = kmh / ref
    cfg = mobile
    if mobile.handoffs:
        random = dict(mobile.handoffs["random"])
        random["mean_interval_s"] = round(random["mean_interval_s"] / scale, 6)
        cfg = cfg.with_(handoffs={**mobile.handoffs, "random": random})

    def direction(still: DirectionConfig, moving: DirectionConfig) -> DirectionConfig:
        out = moving
        if moving.arq and moving.arq.get("fade_every_s"):
            rate = line(1 / still.arq["fade_every_s"], 1 / moving.arq["fade_every_s"], kmh, ref)
            faded = moving.arq["fade_s"] / moving.arq["fade_every_s"]
            out = replace(out, arq={**moving.arq, "fade_every_s": round(1 / rate, 6), "fade_s": round(faded / rate, 6)})
        return replace(out, rate=_rate_channel(still.rate, moving.rate, kmh, ref))

    return cfg.with_(downlink=direction(stationary.downlink, mobile.downlink),
                     uplink=direction(stationary.uplink, mobile.uplink))


def _rate_channel(still: dict, moving: dict, kmh: float, ref: float) -> dict:
    """The rate channel's changes at `kmh`, its levels (depth) as on the move."""
    if moving["kind"] == "gilbert_elliott":
        # A constant stationary link changes at rate 0.
        at_0 = {k: still.get(k, 0.0) if still["kind"] == "gilbert_elliott" else 0.0
                for k in ("good_to_bad_per_s", "bad_to_good_per_s")}
        return {**moving, **{k: round(line(at_0[k], moving[k], kmh, ref), 6) for k in at_0}}
    if moving["kind"] == "markov":
        # Multiplying every move probability by one factor keeps a birth-death chain's
        # stationary distribution (the DRC's mean and modal fraction) and divides its
        # sojourns by the factor.
        factor = line(EVDO_STATIONARY_MOVE_RATIO, 1.0, kmh, ref)
        model = copy.deepcopy(moving["model"])
        for t in model["transitions"]:
            here = t["context"][0]
            moves = [p * factor if j != here else 0.0 for j, p in zip(t["next"], t["p"])]
            t["p"] = [p if j != here else 1.0 - sum(moves) for j, p in zip(t["next"], moves)]
        model["source"] = {**model["source"], "speed_kmh": kmh}
        return {**moving, "model": model}
    return moving
