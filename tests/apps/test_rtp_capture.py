"""RTP streams found in real captures (seed 004 §VI.C): a stream with a fast start and a three-
packet bandwidth probe on another SSRC, through `cellperf emulate` (jitter from its frame
timing), captured at both ends; cellperf's analysis of each capture agrees with tshark's RTP
analysis (`-z rtp,streams`), finds the SSRC change and its header-compression cost, the burst,
and the RTCP receiver reports with their round trip at the CN."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import CELLPERF

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        pytest.skip("needs root and /dev/net/tun (network namespaces)")
    tmp = tmp_path_factory.mktemp("rtp")
    token = tmp / "token"
    token.write_text("rtp-capture-token\n")
    server = subprocess.Popen([CELLPERF, "stream", "serve", "--listen", "0.0.0.0:0", "--token-file", str(token),
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(json.loads(server.stdout.readline())["listening"].rsplit(":", 1)[1])
        out = tmp / "play.json"
        # 400 kb/s of 1000-B packets (20 ms apart), 4 s, the first second of media 5× faster;
        # UMTS-like 384 kb/s down would queue the burst: 2 Mb/s keeps it a burst at the MN too.
        p = subprocess.run([CELLPERF, "emulate", "--delay", "30", "--downlink", "2mbit", "--uplink", "1mbit",
                            "--pcap-dir", str(tmp), "--", "sh", "-c", '"$@" > "$0"', str(out), CELLPERF, "stream",
                            "play", f"$CELLPERF_CN:{port}", "--token-file", str(token), "--rate", "400k", "--packet",
                            "1000", "--duration", "4", "--fast-start", "1", "--probe-packets", "3", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
    return tmp, json.loads(out.read_text())


def _tshark_streams(pcap) -> dict[int, dict]:
    """tshark's RTP streams of a capture by SSRC: packets, lost, max delta, max and mean jitter (ms)."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    streams = {}
    number = r"\s+([\d.]+)"
    for line in out.splitlines():
        # SSRC, payload (words), packets, lost (share), min/mean/max delta, min/mean/max jitter.
        m = re.search(r"(0x[0-9A-Fa-f]{8})\s+.+?\s+(\d+)\s+(-?\d+) \([^)]*\)" + number * 6, line)
        if m:
            streams[int(m.group(1), 16)] = {"packets": int(m.group(2)), "lost": int(m.group(3)),
                                            "max_delta": float(m.group(6)), "mean_jitter": float(m.group(8)),
                                            "max_jitter": float(m.group(9))}
    return streams


def test_the_stream_probe_and_reports_are_found(captures):
    from cellperf.apps.stream import rtp_rows

    folder, doc = captures
    assert doc["fast_start_s"] == 1 and doc["probe_packets"] == 3 and doc["rtcp_reports"] >= 2
    assert doc["received"] == doc["expected"] == 200
    for side in ("mn", "cn"):
        rows = sorted(rtp_rows(folder / f"{side}.pcap", side), key=lambda r: r["packets"])
        probe, media = rows[0], rows[-1]
        assert len(rows) == 2, rows
        assert (probe["packets"], probe["ssrc_changes"], probe["burst_s"]) == (3, 0, None)
        assert (media["packets"], media["lost"], media["payload_type"]) == (200, 0, 33)
        # One SSRC change on the 5-tuple (probe → media): one context refresh of 40 B (IPv4).
        assert (media["ssrc_changes"], media["refresh_bytes"]) == (1, 40)
        # The fast start gains 0.8 s on the media clock (1 s of media sent in 0.2 s).
        assert 0.7 <= media["burst_lead_s"] <= 0.85, media
        assert media["burst_s"] < 0.5 and media["burst_bps"] > 1.5e6, media
        assert media["receiver_reports"] >= 2 and media["rr_cumulative_lost"] == 0
        if side == "cn":  # RTCP's round trip: the link's 60 ms and the report's wait for a frame
            assert 60 <= media["rtcp_rtt_ms"] < 120, media
        else:
            assert media["rtcp_rtt_ms"] is None


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_cellperf_agrees_with_tshark(captures):
    from cellperf import _native

    folder, _ = captures
    for side in ("mn", "cn"):
        mine = {s["ssrc"]: s for s in json.loads(_native.rtp_streams(str(folder / f"{side}.pcap")))["streams"]}
        theirs = _tshark_streams(folder / f"{side}.pcap")
        assert set(theirs) == set(mine), (theirs, list(mine))
        for ssrc, t in theirs.items():
            m = mine[ssrc]
            assert (m["packets"], m["lost"]) == (t["packets"], t["lost"]), (side, m, t)
            # tshark prints 3 decimals.
            assert m["max_delta_ms"] == pytest.approx(t["max_delta"], abs=2e-3), (side, m, t)
            assert m["max_jitter_ms"] == pytest.approx(t["max_jitter"], abs=2e-3), (side, m, t)
            assert m["mean_jitter_ms"] == pytest.approx(t["mean_jitter"], abs=2e-3), (side, m, t)


def test_stream_rtp_prints_them_in_80_columns(captures):
    folder, _ = captures
    p = subprocess.run([CELLPERF, "stream", "rtp", str(folder / "cn.pcap")], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "2 RTP streams in cn.pcap" and all(len(x) <= 80 for x in lines), lines
    assert any(x.startswith("  after   SSRC 0x") and x.endswith("one context refresh, 40 B") for x in lines), lines
    assert any(x.startswith("  burst   0.") and "0.8" in x for x in lines), lines
    assert lines[-1].startswith("  round trip (arrival − LSR − DLSR): median ")
    bad = subprocess.run([CELLPERF, "stream", "rtp", str(folder / "none.pcap")], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip().endswith("none.pcap: no such file"), bad.stderr
