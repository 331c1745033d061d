"""Near-handoff interval selection and group statistics on crafted interval tables."""

import numpy as np
import polars as pl
import pytest

from cellperf.errors import UserError
from cellperf.handoffs import compare_near_handoffs, near_handoff


def test_near_handoff_overlap_rule():
    start = np.arange(0, 50, 5.0)
    near = near_handoff(start, start + 5, [22.0], window_s=5)
    # [17, 27] overlaps [15, 20), [20, 25), [25, 30) only.
    assert np.flatnonzero(near).tolist() == [3, 4, 5]
    # Touching: an interval ending exactly at h − w does not overlap; one starting at h + w does.
    assert near_handoff([10.0, 27.0], [17.0, 30.0], [22.0], 5).tolist() == [False, True]
    assert not near_handoff(start, start + 5, [], 5).any()
    assert near_handoff(start, start + 5, [2.0, 48.0], 0).tolist() == [True] + [False] * 8 + [True]


def test_compare_counts_quantiles_cdf_and_test():
    start = np.arange(0, 100, 5.0)
    metric = np.full(20, 90.0)
    metric[[3, 4, 5]] = [70.0, 60.0, 80.0]
    metric[10] = np.nan  # no-data window: counted apart
    table = pl.DataFrame({"start_s": start, "r": metric}).with_columns(pl.col("r").fill_nan(None))
    res = compare_near_handoffs(table, [22.0], ["r"], start_col="start_s", end_col=None, interval_s=5)
    assert (res["intervals_near"], res["intervals_other"]) == (3, 17)
    r = res["metrics"]["r"]
    assert r["no_data"] == 1
    assert r["near"]["n"] == 3 and r["other"]["n"] == 16
    assert r["near"]["median"] == 70.0 and r["other"]["median"] == 90.0
    assert r["near"]["quantiles"]["p25"] == 65.0
    assert r["near"]["cdf"] == {"x": [60.0, 70.0, 80.0], "p": [1 / 3, 2 / 3, 1.0]}
    assert r["mann_whitney"]["u_x"] == 0.0
    assert r["mann_whitney"]["p_value"] < 0.01


def test_no_handoffs_means_no_test():
    table = pl.DataFrame({"start_s": [0.0, 5.0], "r": [90.0, 91.0]})
    res = compare_near_handoffs(table, [], ["r"], start_col="start_s", end_col=None, interval_s=5)
    assert res["metrics"]["r"]["mann_whitney"] is None
    assert res["metrics"]["r"]["near"]["n"] == 0


def test_bad_tables():
    table = pl.DataFrame({"start_s": ["a"], "r": [1.0]})
    with pytest.raises(UserError, match="timestamp or Unix epoch seconds"):
        compare_near_handoffs(table, [0.0], ["r"], start_col="start_s", end_col=None, interval_s=5)
    table = pl.DataFrame({"start_s": [0.0], "r": [1.0]})
    with pytest.raises(UserError, match="no metric column 'jitter'"):
        compare_near_handoffs(table, [0.0], ["jitter"], start_col="start_s", end_col=None, interval_s=5)
    with pytest.raises(UserError, match="end column or a positive interval"):
        compare_near_handoffs(table, [0.0], ["r"], start_col="start_s", end_col=None)
