"""Handoff detection and classification from crafted radio logs (docs/methods.md §6)."""

import polars as pl
import pytest

from cellperf.errors import UserError
from cellperf.handoffs import detect_handoffs, dwell_times, handoff_counts, read_radio_log

LOG = """time_s,bs_id,sector_id,technology,rate_bps,state
1000.0,17,1,WiBro,1000000,connected
1001.0,17,1,WiBro,1000000,connected
1002.0,17,2,WiBro,900000,connected
1003.5,,,WiBro,0,outage
1004.0,23,2,WiBro,800000,connected
1030.0,23,2,HSDPA,700000,connected
1031.0,23,2,HSDPA,700000,connected
1060.0,23,3,HSDPA,700000,connected
"""


def test_detects_and_classifies_every_change(tmp_path):
    path = tmp_path / "radio.csv"
    path.write_text(LOG)
    h = detect_handoffs(read_radio_log(path))
    assert h["time_s"].to_list() == [1002.0, 1004.0, 1030.0, 1060.0]
    assert h["last_old_s"].to_list() == [1001.0, 1002.0, 1004.0, 1031.0]
    assert h["kind"].to_list() == ["inter-sector", "inter-BS", "inter-technology", "inter-sector"]
    # The outage row is skipped: the inter-BS handoff goes from 17/2 to 23/2.
    assert h.row(1, named=True)["from_bs_id"] == "17"
    assert h.row(1, named=True)["to_bs_id"] == "23"
    assert handoff_counts(h) == {"inter-BS": 1, "inter-sector": 2, "inter-technology": 1}


def test_dwell_times_between_handoffs(tmp_path):
    path = tmp_path / "radio.csv"
    path.write_text(LOG)
    d = dwell_times(detect_handoffs(read_radio_log(path)))
    assert d["values_s"] == [2.0, 26.0, 30.0]
    assert (d["count"], d["mean_s"], d["median_s"], d["max_s"]) == (3, 58 / 3, 26.0, 30.0)
    assert dwell_times(detect_handoffs(read_radio_log(path)).head(1))["mean_s"] is None


def test_clock_offset_and_unsorted_rows_without_technology():
    df = pl.DataFrame({"time_s": [5.0, 1.0, 3.0], "bs_id": ["B", "A", "A"], "sector_id": [1, 1, 1]})
    h = detect_handoffs(df, clock_offset_s=-0.5)
    assert h["time_s"].to_list() == [4.5]
    assert h["kind"].to_list() == ["inter-BS"]
    assert "from_technology" not in h.columns


def test_ids_compare_as_text_and_numbers_are_read_as_text(tmp_path):
    path = tmp_path / "radio.csv"
    path.write_text("time_s,bs_id,sector_id\n0,7,1\n1,07,1\n2,07,1\n")
    assert detect_handoffs(read_radio_log(path))["time_s"].to_list() == [1.0]


def test_jsonl_log(tmp_path):
    path = tmp_path / "radio.jsonl"
    path.write_text(
        '{"time_s": 0.0, "bs_id": "A", "sector_id": "1"}\n{"time_s": 1.0, "bs_id": "A", "sector_id": "2"}\n'
    )
    assert detect_handoffs(read_radio_log(path))["kind"].to_list() == ["inter-sector"]


def test_log_without_id_columns_names_the_file(tmp_path):
    path = tmp_path / "rates.csv"
    path.write_text("time_s,rate_bps\n0,100\n")
    with pytest.raises(UserError, match=r"rates.csv: radio log lacks column\(s\) bs_id, sector_id"):
        read_radio_log(path)


def test_bad_times_and_missing_file(tmp_path):
    path = tmp_path / "radio.csv"
    path.write_text("time_s,bs_id,sector_id\nnoon,1,1\n")
    with pytest.raises(UserError, match="time_s must hold Unix epoch seconds"):
        read_radio_log(path)
    with pytest.raises(UserError, match="no such file"):
        read_radio_log(tmp_path / "nope.csv")
