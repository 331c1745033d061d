"""E-model reference values: docs/methods.md §5, seed 000 eq. 3.1, ITU-T G.107 (06/2015)."""

import numpy as np
import pytest

from cellperf.voice import (
    CODECS,
    G107Params,
    g107_components,
    mos_from_r,
    r_g107,
    r_simple,
    rating,
    satisfaction_band,
)


@pytest.mark.parametrize(
    ("delay_ms", "loss", "expected"),
    [(0, 0, 94.2), (150, 0.01, 86.41), (200, 0.02, 79.03)],
)
def test_simple_model_reference_values(delay_ms, loss, expected):
    assert r_simple(delay_ms, loss, "g711") == pytest.approx(expected, abs=0.005)


def test_simple_model_delay_knee_at_177_3_ms():
    # Below the knee Id grows 0.024 per ms; above it 0.134 per ms.
    r = r_simple([100, 101, 300, 301], [0, 0, 0, 0])
    assert r[0] - r[1] == pytest.approx(0.024)
    assert r[2] - r[3] == pytest.approx(0.134)


def test_simple_model_g729a_fit():
    # 94.2 − 11 − 40·ln(1 + 10·0.05) at zero delay.
    assert r_simple(0, 0.05, "g729a") == pytest.approx(94.2 - 11 - 40 * np.log(1.5))


def test_simple_model_clamps_to_zero():
    assert r_simple(2000, 1.0) == 0.0


def test_simple_model_refuses_codecs_without_a_fit():
    with pytest.raises(ValueError, match="g107"):
        r_simple(0, 0, "gsm-fr")


def test_g107_defaults_give_93_2():
    assert r_g107(0, 0) == pytest.approx(93.2, abs=0.05)
    parts = g107_components(0, 0, 0, 0, 1, 0, 4.3)
    # The defaults' signal-to-noise and simultaneous impairment (G.107 Appendix values).
    assert parts["ro"] == pytest.approx(94.77, abs=0.01)
    assert parts["is"] == pytest.approx(1.41, abs=0.01)


def test_g107_delay_200_ms_no_loss():
    assert r_g107(200, 0) == pytest.approx(85.8, abs=0.05)


def test_g107_loss_2_percent_random_g711():
    # Ie,eff = 95·2/(2 + 4.3) = 30.16 → R = 93.2 − 30.16.
    assert r_g107(0, 0.02, "g711") == pytest.approx(63.0, abs=0.1)


def test_g107_burst_ratio_and_plc():
    random_loss = r_g107(0, 0.02, "g711", burst_ratio=1.0)
    bursty = r_g107(0, 0.02, "g711", burst_ratio=2.0)
    assert bursty < random_loss
    assert r_g107(0, 0.02, "g711-plc") > random_loss
    # Codec impairment without loss: R drops by exactly Ie.
    assert r_g107(0, 0, "g729a") == pytest.approx(r_g107(0, 0) - CODECS["g729a"].ie)


def test_g107_idd_zero_below_mt_and_parameters_matter():
    parts = g107_components([50, 100, 150], [50, 100, 150], [100, 200, 300], 0, 1, 0, 4.3)
    assert list(parts["idd"][:2]) == [0.0, 0.0] and parts["idd"][2] > 0
    assert r_g107(200, 0, params=G107Params(a=5)) == pytest.approx(r_g107(200, 0) + 5)
    assert r_g107(0, 0, params=G107Params(a=10)) == 100.0  # clamped
    assert r_g107(200, 0, params=G107Params(mt=300)) > r_g107(200, 0)


def test_vectorised_and_nan_passes_through():
    r = r_g107([0, np.nan, 200], [0, 0.01, 0])
    assert np.isnan(r[1]) and r[0] == pytest.approx(93.2, abs=0.05)


@pytest.mark.parametrize(
    ("r", "mos"),
    [(-5, 1.0), (0, 1.0), (50, 2.575), (70, 3.597), (90, 4.339), (100, 4.5), (120, 4.5)],
)
def test_mos_from_r(r, mos):
    assert mos_from_r(r) == pytest.approx(mos, abs=1e-9)


def test_satisfaction_bands_at_edges():
    bands = satisfaction_band([95, 90, 89.9, 80, 70, 60, 50, 49.9, np.nan])
    assert list(bands) == [
        "very satisfied",
        "very satisfied",
        "satisfied",
        "satisfied",
        "some users dissatisfied",
        "many users dissatisfied",
        "nearly all users dissatisfied",
        "not recommended",
        None,
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delay_ms": -1, "loss": 0}, "delay must be >= 0"),
        ({"delay_ms": 10, "loss": 1.5}, r"loss must be a fraction in \[0, 1\]"),
        ({"delay_ms": 10, "loss": -0.1}, r"loss must be a fraction in \[0, 1\]"),
        ({"delay_ms": 10, "loss": 0, "codec_name": "opus"}, "unknown codec 'opus'"),
        ({"delay_ms": 10, "loss": 0, "model": "pesq"}, "unknown model"),
        ({"delay_ms": 10, "loss": 0.01, "burst_ratio": 2}, "needs the g107 model"),
        ({"delay_ms": 10, "loss": 0.01, "model": "g107", "burst_ratio": 0}, "burst ratio must be > 0"),
    ],
)
def test_bad_input_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rating(**kwargs)
