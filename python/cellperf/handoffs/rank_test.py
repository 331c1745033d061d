"""Mann–Whitney U (Wilcoxon rank-sum) test in numpy: no scipy.

Two-sided, normal approximation with the tie correction of the variance and a continuity
correction of 0.5: the textbook large-sample form, as R's `wilcox.test(correct = TRUE)` and
scipy's `mannwhitneyu(method="asymptotic")` compute it. Accurate for n_x, n_y ≳ 8; below that
an exact table is better, and `tests/handoffs/test_rank_test.py` checks this approximation
against the exact permutation distribution.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class MannWhitney:
    n_x: int
    n_y: int
    u_x: float  # number of pairs (x_i, y_j) with x_i > y_j, ties counted as one half
    u_y: float  # n_x·n_y − u_x
    z: float  # standardised u_x (with continuity correction); > 0 when x tends to be larger
    p_value: float  # two-sided
    prob_x_greater: float  # u_x / (n_x·n_y): P(X > Y) + P(X = Y)/2, the common-language effect size

    def as_dict(self) -> dict:
        return asdict(self)


def average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks with ties given their average rank, and the size of every tie group."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)
    first = last - counts + 1
    return ((first + last) / 2.0)[inverse], counts


def mann_whitney_u(x, y) -> MannWhitney:
    """Two-sided Mann–Whitney U test of x against y (NaN values are dropped).

    ValueError when either sample is empty after dropping NaN.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x = x[~np.isnan(x)]
    y = y[~np.isnan(y)]
    n_x, n_y = x.size, y.size
    if n_x == 0 or n_y == 0:
        raise ValueError("Mann–Whitney U needs at least one value in each sample")
    n = n_x + n_y
    ranks, ties = average_ranks(np.concatenate([x, y]))
    u_x = float(ranks[:n_x].sum() - n_x * (n_x + 1) / 2)
    mean = n_x * n_y / 2
    tie_term = float(np.sum(ties.astype(np.float64) ** 3 - ties)) / (n * (n - 1)) if n > 1 else 0.0
    variance = n_x * n_y / 12 * ((n + 1) - tie_term)
    if variance <= 0:  # every value equal: no evidence either way
        z, p = 0.0, 1.0
    else:
        z = math.copysign(max(abs(u_x - mean) - 0.5, 0.0), u_x - mean) / math.sqrt(variance)
        p = min(1.0, math.erfc(abs(z) / math.sqrt(2)))
    return MannWhitney(n_x, n_y, u_x, n_x * n_y - u_x, z, p, u_x / (n_x * n_y))
