"""Mann–Whitney U: exact small-sample distribution (by enumeration) and known published values."""

import itertools
import math

import numpy as np
import pytest

from cellperf.handoffs import mann_whitney_u
from cellperf.handoffs.rank_test import average_ranks


def exact_two_sided_p(x, y) -> float:
    """Exact permutation p-value of U for untied data: every split of the pooled ranks."""
    n_x, n = len(x), len(x) + len(y)
    u_obs = mann_whitney_u(x, y).u_x
    mean = n_x * (n - n_x) / 2
    extreme = total = 0
    for chosen in itertools.combinations(range(1, n + 1), n_x):
        u = sum(chosen) - n_x * (n_x + 1) / 2
        total += 1
        extreme += abs(u - mean) >= abs(u_obs - mean)
    return extreme / total


def test_textbook_example_u_and_p():
    # scipy.stats.mannwhitneyu documentation example (males vs females, Conover):
    # U1 = 17, exact two-sided p = 0.1111, asymptotic (continuity-corrected) p = 0.11134688653314041.
    males = [19, 22, 16, 29, 24]
    females = [20, 11, 17, 12]
    res = mann_whitney_u(males, females)
    assert (res.u_x, res.u_y) == (17.0, 3.0)
    assert res.p_value == pytest.approx(0.11134688653314041, rel=1e-12)
    assert exact_two_sided_p(males, females) == pytest.approx(0.1111, abs=1e-4)


def test_critical_value_table_n8_n8():
    # Published two-sided 5 % critical value for n1 = n2 = 8 is U = 13: U ≤ 13 rejects, 14 does not.
    assert exact_p_from_u(13, 8, 8) <= 0.05 < exact_p_from_u(14, 8, 8)
    # A sample at exactly that U: x_i = k_i − 0.5 lies above k_i of the y values 0..7.
    y = np.arange(8.0)
    x = np.array([0, 0, 0, 1, 2, 2, 4, 4]) - 0.5
    res = mann_whitney_u(x, y)
    assert res.u_x == 13.0
    assert res.p_value == pytest.approx(exact_p_from_u(13, 8, 8), abs=0.01)


def exact_p_from_u(u_min: float, n_x: int, n_y: int) -> float:
    """Exact two-sided P(U ≤ u_min or U ≥ n_x·n_y − u_min) by enumeration."""
    n = n_x + n_y
    hits = total = 0
    for chosen in itertools.combinations(range(1, n + 1), n_x):
        u = sum(chosen) - n_x * (n_x + 1) / 2
        total += 1
        hits += u <= u_min or u >= n_x * n_y - u_min
    return hits / total


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_normal_approximation_close_to_exact_for_n10(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.8, 1, 10)
    y = rng.normal(0, 1, 10)
    assert mann_whitney_u(x, y).p_value == pytest.approx(exact_two_sided_p(x, y), abs=0.01)


def test_ties_use_average_ranks_and_corrected_variance():
    ranks, ties = average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0]))
    assert ranks.tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]
    assert sorted(ties.tolist()) == [1, 1, 3]
    x, y = [1, 2, 2, 3], [2, 3, 3, 4, 5]
    res = mann_whitney_u(x, y)
    # Hand computation: pooled ranks 1, 3, 3, 3, 6, 6, 6, 8, 9; R_x = 1 + 3 + 3 + 6 = 13 → U_x = 3.
    assert res.u_x == 3.0
    var = 4 * 5 / 12 * (10 - ((3**3 - 3) + (3**3 - 3)) / (9 * 8))
    z = (abs(3 - 10) - 0.5) / math.sqrt(var)
    assert res.z == pytest.approx(-z)
    assert res.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_symmetry_identical_samples_and_nan():
    x, y = [5.0, 6.0, 7.0], [1.0, 2.0, 9.0, np.nan]
    a, b = mann_whitney_u(x, y), mann_whitney_u(y, x)
    assert (a.u_x, a.p_value) == (b.u_y, b.p_value)
    assert a.n_y == 3
    same = mann_whitney_u([2, 2, 2], [2, 2])
    assert (same.p_value, same.prob_x_greater) == (1.0, 0.5)
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])


def test_large_shift_is_significant():
    rng = np.random.default_rng(5)
    res = mann_whitney_u(rng.normal(0, 1, 200), rng.normal(1, 1, 200))
    assert res.p_value < 1e-10 and res.prob_x_greater < 0.3
