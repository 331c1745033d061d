"""Burst ratio from loss patterns with known answers (G.107 §7.5, G.113 Appendix I)."""

import numpy as np
import pytest

from cellperf.voice import burst_ratio, burst_ratio_by_group


def test_single_burst():
    # 10 of 50 lost in one run: mean burst 10, random expectation 1/(1 − 0.2) = 1.25 → 8.
    lost = np.zeros(50, bool)
    lost[5:15] = True
    assert burst_ratio(lost) == pytest.approx(8.0)


def test_isolated_losses_are_less_bursty_than_random():
    lost = np.zeros(100, bool)
    lost[::10] = True  # 10 % loss, every burst of length 1
    assert burst_ratio(lost) == pytest.approx(0.9)


def test_undefined_without_loss_or_with_total_loss():
    assert np.isnan(burst_ratio(np.zeros(20, bool)))
    assert np.isnan(burst_ratio(np.ones(20, bool)))
    assert np.isnan(burst_ratio([]))


def test_bursts_split_at_group_boundaries():
    lost = np.array([0, 1, 1, 1, 1, 0, 0, 0], bool)
    group = np.array([0, 0, 0, 1, 1, 1, 1, 2])
    # group 0: one burst of 2 in 3 packets → 2·(1/3); group 1: one burst of 2 in 4 → 2·(1/2).
    ratio = burst_ratio_by_group(lost, group)
    assert ratio[0] == pytest.approx(2 / 3)
    assert ratio[1] == pytest.approx(1.0)
    assert np.isnan(ratio[2])


def test_random_loss_has_burst_ratio_near_one():
    rng = np.random.default_rng(7)
    lost = rng.random(200_000) < 0.05
    assert burst_ratio(lost) == pytest.approx(1.0, abs=0.02)


def test_gilbert_loss_matches_markov_burst_ratio():
    # Two-state Markov loss: P(good→lost) = p, P(lost→good) = q; BurstR = 1 / (p + q).
    p, q = 0.02, 0.25
    rng = np.random.default_rng(11)
    # Vectorised Markov chain: run lengths are geometric, so draw them and tile.
    good_runs = rng.geometric(p, 40_000)
    bad_runs = rng.geometric(q, 40_000)
    runs = np.column_stack([good_runs, bad_runs]).ravel()
    state = np.repeat(np.tile([False, True], runs.size // 2), runs)
    assert burst_ratio(state) == pytest.approx(1 / (p + q), rel=0.03)
