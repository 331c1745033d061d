"""The 3G profiles at the speeds of seed 000 §3.1 (`evdo-car`, `evdo-train`, `wibro-subway`,
...: cellperf.emulate.mobility): handoff rate, fade rate and fade duration as straight lines
through the `-stationary` and `-mobile` calibrations, depth unchanged. With real packets, in a
campaign: tests/campaign/test_speed_scenarios.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cellperf.emulate.mobility import JOURNEYS, REFERENCE_KMH
from cellperf.emulate.profiles import SPEED_PROFILE_NAMES, profile


def test_every_speed_variant_passes_the_rust_checks():
    assert len(SPEED_PROFILE_NAMES) == len(REFERENCE_KMH) * len(JOURNEYS) == 16
    for name in SPEED_PROFILE_NAMES:
        cfg = profile(name)
        cfg.check()
        json.loads(cfg.spec_json([{"mn_netns": "/run/netns/x", "mn_tun": "a", "cn_tun": "b"}]))


def test_at_the_reference_speed_a_variant_is_the_mobile_profile():
    # WiBro's -mobile was calibrated on the subway (000 §4.3), at its 38 km/h mean.
    assert profile("wibro-subway") == profile("wibro-mobile")


def test_handoffs_and_fades_scale_with_speed_depth_does_not():
    train, car = profile("evdo-train"), profile("evdo-car")
    # Handoffs: 25 s at 88 km/h (002 §1) → 25 × 88 / 300 s on the KTX, 22 s in the car.
    assert train.handoffs["random"]["mean_interval_s"] == pytest.approx(7.333333)
    assert car.handoffs["random"]["mean_interval_s"] == pytest.approx(22.0)
    # Fades: 0.1/s stationary, 0.2/s at 88 km/h → 0.1 + 0.1 × 300/88 = 0.4409/s on the KTX; the
    # time in fades stays the mobile profile's 0.9/5 = 18 %, so each lasts 0.18/0.4409 s.
    arq = train.downlink.arq
    assert 1 / arq["fade_every_s"] == pytest.approx(0.1 + 0.1 * 300 / 88, rel=1e-5)
    assert arq["fade_s"] / arq["fade_every_s"] == pytest.approx(0.18, rel=1e-5)
    # Depth: every transmission in a fade fails (the default fade error 1), at every speed.
    assert "fade_error" not in arq and "fade_error" not in car.downlink.arq
    # HSDPA's two-state channel: 0 transitions/s stationary (a constant link), 1/s at 100 km/h.
    hsdpa = profile("hsdpa-train").downlink.rate
    assert (hsdpa["good_to_bad_per_s"], hsdpa["good_bps"], hsdpa["bad_bps"]) == (3.0, 1_300_000, 300_000)
    # UMTS walking: a handover per minute at 30 km/h → one per 6 minutes at 5 km/h; the gap stays 4 s.
    walk = profile("umts-walk").handoffs["random"]
    assert (walk["mean_interval_s"], walk["inter_bs_outage_s"]) == (360.0, 4.0)


def _chain(cfg) -> tuple[np.ndarray, np.ndarray]:
    """(stationary distribution, mean sojourn in slots) of a profile's DRC chain."""
    model = cfg.downlink.rate["model"]
    k = len(model["states"])
    p = np.zeros((k, k))
    for t in model["transitions"]:
        p[t["context"][0], t["next"]] = t["p"]
    w, v = np.linalg.eig(p.T)
    pi = np.real(v[:, np.argmin(abs(w - 1))])
    return pi / pi.sum(), 1 / (1 - np.diag(p))


def test_the_drc_chain_changes_faster_on_the_train_around_the_same_rates():
    (pi_car, stay_car), (pi_train, stay_train) = _chain(profile("evdo-car")), _chain(profile("evdo-train"))
    # Same stationary distribution (mean DRC, modal fraction: the depth); sojourns shorter by
    # the ratio of the move factors (1/6 + 5/6 × v/88).
    assert pi_train == pytest.approx(pi_car, abs=1e-9)
    factor = lambda kmh: 1 / 6 + 5 / 6 * kmh / 88
    assert stay_car / stay_train == pytest.approx(np.full(len(pi_car), factor(300) / factor(100)), rel=1e-4)


def test_unknown_speed_variant_is_one_line():
    from cellperf.errors import UserError

    with pytest.raises(UserError, match="unknown profile 'lte-train'.*evdo-car") as e:
        profile("lte-train")
    assert "\n" not in str(e.value)
