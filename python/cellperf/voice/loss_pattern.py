"""Burst ratio (G.107 BurstR) from an observed loss pattern, vectorised over groups.

G.107 §7.5 / G.113 Appendix I: BurstR = (mean length of the observed loss bursts) /
(mean burst length expected for random loss at the same loss rate). With random loss at
probability p a burst has geometric length, mean 1 / (1 − p), so

    BurstR = mean_burst_length · (1 − p)

BurstR = 1 for random loss, > 1 for bursty loss, < 1 for loss more spread out than random.
It is undefined (NaN) when nothing or everything was lost: with no loss it does not affect R,
and with total loss there is no burst structure to measure.
"""

from __future__ import annotations

import numpy as np


def burst_ratio_by_group(lost, group) -> np.ndarray:
    """BurstR per group of packets in sending order.

    `lost` is one bool per packet in sending order; `group` gives each packet's group code
    (0..G−1, e.g. its window). A burst is a run of consecutive lost packets of the same group,
    so a burst that spans a window boundary counts in both windows. Returns an array of length
    G (NaN for groups with no loss, total loss, or no packets).
    """
    lost = np.asarray(lost, dtype=bool)
    group = np.asarray(group, dtype=np.int64)
    if lost.shape != group.shape:
        raise ValueError("lost and group must have the same length")
    n_groups = int(group.max()) + 1 if group.size else 0
    starts = lost.copy()
    starts[1:] &= ~lost[:-1] | (group[1:] != group[:-1])
    sent = np.bincount(group, minlength=n_groups).astype(np.float64)
    losses = np.bincount(group, weights=lost, minlength=n_groups)
    bursts = np.bincount(group, weights=starts, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (losses / bursts) * (1 - losses / sent)
    return np.where((losses > 0) & (losses < sent), ratio, np.nan)


def burst_ratio(lost) -> float:
    """BurstR of one loss pattern (bools in sending order); NaN with no loss or total loss."""
    lost = np.asarray(lost, dtype=bool)
    if lost.size == 0:
        return float("nan")
    return float(burst_ratio_by_group(lost, np.zeros(lost.size, dtype=np.int64))[0])
