"""`cellperf hops` on this host's loopback (the target is the first hop, answering port
unreachable through the socket's error queue) and its bad inputs, one line each."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cellperf


@pytest.mark.parametrize("target", ["127.0.0.1", "::1"])
def test_loopback_is_one_hop_and_its_rows(target):
    """IPv4 (ICMP port unreachable) and IPv6 (ICMPv6 type 1 code 4) alike."""
    from cellperf.agents.hops import HOP_COLUMNS, hop_rows

    doc = json.loads(cellperf("hops", target, "--count", "3", "--interval", "0.05", "--timeout", "0.5",
                              "--json").stdout)
    assert (doc["test"], doc["target"], doc["reached"], doc["path_hops"]) == ("hops", target, True, 1)
    h = doc["hops"][0]
    assert (h["ttl"], h["responder"], h["sent"], h["answered"], h["reached"]) == (1, target, 3, 3, True)
    assert 0 <= h["rtt_ms"]["min"] <= h["rtt_ms"]["median"] <= h["rtt_ms"]["max"] < 50
    rows = hop_rows(doc)
    assert [tuple(r) for r in rows] == [HOP_COLUMNS]
    assert (rows[0]["responders"], rows[0]["rtt_median_ms"]) == (1, h["rtt_ms"]["median"])


@pytest.mark.parametrize("args, code, needle", [
    (["0.0.0.0"], 1, "TARGET: 0.0.0.0 is not a unicast address"),
    (["127.0.0.1", "--port", "65000"], 2, "--port"),
    (["127.0.0.1", "--max-hops", "65"], 2, "--max-hops"),
    (["127.0.0.1", "--log", "hops.txt"], 1, "--log hops.txt: use a .parquet or .csv file name"),
])
def test_bad_values_are_one_line(args, code, needle):
    p = cellperf("hops", *args, check=False)
    assert p.returncode == code and needle in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) <= 2 and "Traceback" not in p.stderr  # argparse adds its usage line
