"""Radio logs and position tracks are read a line at a time, with a cap on a line's length
(issue 31 item 7: a 200-MB NMEA file of one line took 994 MB to import). The memory is
Python's own allocations, traced: the file is never held whole."""

from __future__ import annotations

import tracemalloc

import pytest

from cellperf.errors import UserError
from cellperf.radiologs import read_positions, read_radio
from cellperf.textlines import MAX_LINE_BYTES, lines

RMC = "$GPRMC,120000,A,5230.000,N,01320.000,E,10.0,90.0,010524,,,A*6E"
LONG = 20 * 1024 * 1024


def test_a_line_at_the_cap_is_read_and_one_byte_more_is_refused_with_its_number(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"a\r\n" + b"x" * MAX_LINE_BYTES + b"\r\n" + b"y" * (MAX_LINE_BYTES + 1) + b"\n")
    got = []
    with pytest.raises(UserError, match=rf"^{path}:3: a line longer than 64 KiB: not a test log$"):
        for number, line in lines(path, "a test log"):
            got.append((number, len(line)))
    assert got == [(1, 1), (2, MAX_LINE_BYTES)]


@pytest.mark.parametrize("fmt,reader,what", [("nmea", read_positions, "NMEA"), ("gpsd", read_positions, "gpsd"),
                                             ("mobileinsight", read_radio, "MobileInsight"),
                                             ("gnettrack", read_radio, "G-NetTrack"),
                                             ("cellperf", read_radio, "radio log")])
def test_one_huge_line_is_refused_without_reading_the_file_whole(tmp_path, fmt, reader, what):
    path = tmp_path / f"track.{fmt}"
    first = {"nmea": RMC, "gpsd": '{"class":"TPV","mode":3}', "mobileinsight": '{"type_id":"x"}',
             "gnettrack": "Timestamp\tLongitude\tLatitude", "cellperf": "time_s,bs_id,sector_id"}[fmt]
    with open(path, "w") as f:
        f.write(first + "\n" + "$" * LONG + "\n")
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match=rf"^{path}:2: a line longer than \d+ KiB: not a.* {what}"):
            reader(path, fmt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, peak  # the line is 20 MiB; its first MiB at most is read
