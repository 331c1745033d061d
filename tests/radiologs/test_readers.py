"""Radio-log and position readers on published samples (gpsd's and gpxpy's, see data/README.md)
and on files made to the documented formats of G-NetTrack Pro and MobileInsight."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from cellperf.errors import UserError
from cellperf.handoffs import detect_handoffs
from cellperf.radiologs import read_positions, read_radio, sniff_positions, sniff_radio

DATA = Path(__file__).resolve().parent / "data"


def _gpsd_fixes(name: str) -> pl.DataFrame:
    """gpsd's own decoding of a log: its TPV reports with a fix."""
    rows = [json.loads(line) for line in (DATA / name).read_text().splitlines()]
    tpv = [r for r in rows if r.get("class") == "TPV" and r.get("mode", 0) >= 2]
    return pl.DataFrame({"time_s": [datetime.fromisoformat(r["time"].replace("Z", "+00:00")).timestamp() for r in tpv],
                         "lat": [r["lat"] for r in tpv], "lon": [r["lon"] for r in tpv]})


def test_nmea_fixes_agree_with_gpsds_decoding_of_the_same_log():
    path = DATA / "magellan-ec10.nmea"
    assert sniff_positions(path) == "nmea"
    ours = read_positions(path, "nmea")
    theirs = _gpsd_fixes("magellan-ec10.gpsd.jsonl")
    # The log goes from no fix to a 2D fix and back: 21 RMC sentences with status A.
    assert ours.height == theirs.height == 21
    assert ours["time_s"].to_list() == theirs["time_s"].to_list()
    assert (ours["lat"] - theirs["lat"]).abs().max() < 1e-6 and (ours["lon"] - theirs["lon"]).abs().max() < 1e-6
    assert ours["speed_mps"].to_list() == [0.0] * 21


def test_nmea_without_a_fix_is_refused():
    path = DATA / "holux-gm-210-nofix.nmea"
    assert sniff_positions(path) == "nmea"
    with pytest.raises(UserError, match="holux-gm-210-nofix.nmea: no position fix"):
        read_positions(path, "nmea")


def test_gpsd_json_takes_tpv_reports_with_a_fix():
    path = DATA / "bu303-moving.gpsd.jsonl"
    assert sniff_positions(path) == "gpsd"
    df = read_positions(path, "gpsd")
    first = json.loads(next(line for line in path.read_text().splitlines() if '"TPV"' in line))
    assert df.height == 12
    assert df.row(0) == (datetime(2005, 6, 9, 14, 34, 44, 280000, tzinfo=timezone.utc).timestamp(),
                         first["lat"], first["lon"], first["altMSL"], first["speed"])


def test_gpx_track_points_match_the_xml():
    path = DATA / "around-visnjan-with-car.gpx"
    assert sniff_positions(path) == "gpx"
    df = read_positions(path, "gpx")
    ns = {"g": "http://www.topografix.com/GPX/1/1"}
    points = ET.parse(path).getroot().findall(".//g:trkpt", ns)
    assert df.height == len(points) == 104
    assert df["lat"].to_list() == [float(p.get("lat")) for p in points]
    assert df["alt_m"][0] == 211.15
    assert df["time_s"][-1] - df["time_s"][0] == (6 * 60 + 24 * 60 + 24) - (6 * 60 + 15 * 60 + 50)


def test_gnettrack_log_file_cells_signals_and_local_time():
    path = DATA / "gnettrack.txt"
    assert sniff_radio(path) == "gnettrack"
    radio, pos = read_radio(path, "gnettrack", "Asia/Seoul")
    # 07:15:50 in Seoul (UTC+9) is 22:15:50 UTC the day before.
    assert radio["time_s"][0] == datetime(2020, 12, 17, 22, 15, 50, tzinfo=timezone.utc).timestamp()
    assert radio.select("bs_id", "sector_id").rows() == [("1001", "1")] * 2 + [("1001", "2")] * 2 + [("1002", "1")] * 2
    assert radio["rsrp_dbm"].to_list() == [-95, -97, -101, -104, -99, -96]
    assert radio["dl_bitrate_bps"][0] == 15.2e6 and radio["technology"].unique().to_list() == ["LTE"]
    h = detect_handoffs(radio)
    assert h["kind"].to_list() == ["inter-sector", "inter-BS"]
    assert pos.height == 6 and pos["speed_mps"][1] == pytest.approx(22 / 3.6)


def test_gnettrack_comma_form_with_hex_ids():
    path = DATA / "gnettrack-ucc.csv"
    assert sniff_radio(path) == "gnettrack"
    radio, pos = read_radio(path, "gnettrack", "UTC")
    assert radio["bs_id"].unique().to_list() == [str(0x1F4A3)]
    assert radio["sector_id"].to_list() == ["2", "2", "2", "3", "3", "3"]
    assert detect_handoffs(radio)["kind"].to_list() == ["inter-sector"]
    assert pos.height == 6


@pytest.mark.parametrize("name", ["mobileinsight.xml", "mobileinsight.jsonl"])
def test_mobileinsight_serving_cells_and_measurements(name):
    path = DATA / name
    assert sniff_radio(path) == "mobileinsight"
    radio, pos = read_radio(path, "mobileinsight", "UTC")
    assert pos is None
    assert radio.select("bs_id", "sector_id", "technology").rows() == [
        (str(0x1A2B3), "1", "LTE"), (str(0x1A2B3), "1", "LTE"), (str(0x1A2B3), "1", "LTE"),
        (str(0x1A2B3), "2", "LTE"), (str(0x1A2B3), "2", "LTE"), (str(0x0123), str(0x4567), "UMTS")]
    assert radio["rsrp_dbm"].to_list() == [None, -96.25, -101.5, None, -94.0, None]
    assert radio["time_s"][0] == datetime(2016, 7, 14, 0, 21, 43, 120000, tzinfo=timezone.utc).timestamp()
    assert detect_handoffs(radio)["kind"].to_list() == ["inter-sector", "inter-technology"]


def test_both_mobileinsight_encodings_read_the_same():
    a, _ = read_radio(DATA / "mobileinsight.xml", "mobileinsight")
    b, _ = read_radio(DATA / "mobileinsight.jsonl", "mobileinsight")
    assert a.equals(b)


def test_unknown_formats_name_the_known_ones(tmp_path):
    odd = tmp_path / "radio.log"
    odd.write_text("when;cell\n1;2\n")
    with pytest.raises(UserError, match=r"radio.log: unknown radio-log format; known: cellperf .*gnettrack .*mobileinsight"):
        sniff_radio(odd)
    with pytest.raises(UserError, match=r"radio.log: unknown position-track format; known: nmea .*gpx .*gpsd"):
        sniff_positions(odd)


@pytest.mark.parametrize("name", ["mobileinsight-phy.xml", "mobileinsight-phy.jsonl"])
def test_mobileinsight_pdsch_transport_blocks_give_frames_errors_and_fer(name):
    # Three LTE_PHY_PDSCH_Stat_Indication messages: 3 blocks (1 CRC fail), 4 (none), 4 (2 fail);
    # the last after a handover to sector 2. The CQI reports in the file carry no frames.
    radio, _ = read_radio(DATA / name, "mobileinsight")
    blocks = radio.filter(pl.col("frames").is_not_null())
    assert blocks.select("sector_id", "frames", "frame_errors").rows() == [("1", 3, 1), ("1", 4, 0), ("2", 4, 2)]
    assert blocks["fer"].to_list() == [1 / 3, 0.0, 0.5]
    assert blocks["time_s"][0] == datetime(2016, 7, 14, 0, 21, 43, 200000, tzinfo=timezone.utc).timestamp()


def test_a_pdsch_block_with_an_unknown_crc_result_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "mi.jsonl"
    line = (DATA / "mobileinsight-phy.jsonl").read_text().splitlines()[1].replace('"Fail"', '"Maybe"')
    bad.write_text(line + "\n")
    with pytest.raises(UserError, match=r"mi.jsonl: a LTE_PHY_PDSCH_Stat_Indication message has CRC Result 'Maybe'"):
        read_radio(bad, "mobileinsight")
