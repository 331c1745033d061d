"""Handover zones (seed 004 §IV.B 2.1; docs/methods.md §6) from a crafted radio log: the
device hovers between cells 1/1 and 1/2 (three handoffs in 5 s, the signal changing 1 dB at
each), crosses to 2/1 once with a 10-dB jump, and returns to 1/2 25 s later: a new zone."""

import io

import polars as pl

from cellperf.handoffs import check_radio_log, detect_handoffs
from cellperf.handoffs.zones import handover_zones

LOG = """time_s,bs_id,sector_id,rsrp_dbm
0,1,1,-90
10,1,1,-95
11,1,2,-94
12,1,2,
14,1,1,-93
16,1,2,-92
30,2,2,
40,1,2,-80
45,2,1,-70
70,1,2,-85
"""


def zones(text: str) -> pl.DataFrame:
    ids = {"bs_id": pl.String, "sector_id": pl.String}
    radio = check_radio_log(pl.read_csv(io.StringIO(text), schema_overrides=ids))
    return handover_zones(radio, detect_handoffs(radio))


def test_ping_pong_zone_a_clean_crossing_and_a_return_after_the_window():
    z = zones(LOG)
    assert z.select("cell_a", "cell_b", "start_s", "end_s", "handoffs", "a_to_b", "b_to_a", "pingpong").rows() == [
        ("1/1", "1/2", 11.0, 16.0, 3, 2, 1, True),
        # 1/2 → 2/2 at 30 (no signal at the new cell's first sample), back at 40: one zone, 10 s apart.
        ("1/2", "2/2", 30.0, 40.0, 2, 1, 1, True),
        ("1/2", "2/1", 45.0, 45.0, 1, 1, 0, False),
        # 25 s after the crossing: a new zone, named from the cell served first.
        ("2/1", "1/2", 70.0, 70.0, 1, 1, 0, False),
    ]
    # 1/1 → 1/2: −94 − (−95); back: −93 − (−94) (12 s has no signal, 11 s's is the last);
    # again −92 − (−93). 2/2 never had a signal: no difference. Then −70 − (−80), −85 − (−70).
    assert z["signal"].to_list() == ["rsrp_dbm", None, "rsrp_dbm", "rsrp_dbm"]
    assert z["signal_diff_db"].to_list() == [1.0, None, 10.0, 15.0]
    assert z["within_margin"].to_list() == [True, None, False, False]


def test_without_a_signal_column_zones_have_no_margin():
    z = zones("time_s,bs_id,sector_id\n0,1,1\n5,1,2\n8,1,1\n")
    assert z.select("handoffs", "pingpong", "signal", "signal_diff_db", "within_margin").rows() == [
        (2, True, None, None, None)]
