"""Shares and Jain's index compare only data flows that compete: active at the same time
(spans overlapping for half the shorter one), never cellperf's control connections (known
by their hello, on any port), never a connection's lesser direction (docs/analysis.md)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess

import pytest

from tests.analysis.pcapcraft import ACK, PSH, SYN, Pcap, tcp_packet
from tests.conftest import cellperf_json

MN, CN = "10.0.0.2", "192.0.2.7"
HELLO = json.dumps({"type": "hello", "version": 2, "client_nonce": "00" * 32}, separators=(",", ":")).encode()


def connection(p: Pcap, t0: float, port: int, *, server_port: int = 9000, seconds: float = 2.0,
               first: bytes = b"GET", segments: int = 40, size: int = 1000) -> None:
    """A connection MN:port → CN:server_port: the MN's first payload `first`, then the CN
    sends `segments` segments of `size` bytes spread over `seconds`, each ACKed."""
    ids = iter(range((port % 600) * 100, (port % 600) * 100 + 100))
    p.add(t0, tcp_packet(MN, port, CN, server_port, 100, 0, SYN, ip_id=next(ids)))
    p.add(t0 + 0.01, tcp_packet(CN, server_port, MN, port, 500, 101, SYN | ACK, ip_id=next(ids), ttl=60))
    p.add(t0 + 0.02, tcp_packet(MN, port, CN, server_port, 101, 501, ACK | PSH, data=first, ip_id=next(ids)))
    seq, mine = 501, 101 + len(first)
    for k in range(segments):
        t = t0 + 0.03 + k * seconds / segments
        p.add(t, tcp_packet(CN, server_port, MN, port, seq, mine, ACK | PSH, data=b"d" * size, ip_id=next(ids), ttl=60))
        seq += size
        p.add(t + 0.001, tcp_packet(MN, port, CN, server_port, mine, seq, ACK, ip_id=next(ids)))


def control(p: Pcap, t0: float, port: int, seconds: float, server_port: int = 7777) -> None:
    """An agents' control connection on a port other than 5250: the probe's hello first."""
    frame = struct.pack("!I", 1 + len(HELLO)) + b"\x01" + HELLO
    connection(p, t0, port, server_port=server_port, seconds=seconds, first=frame, segments=4, size=300)


def analyze(tmp_path, p: Pcap) -> dict:
    p.records.sort(key=lambda r: r[0])
    return cellperf_json("analyze", p.write(tmp_path / "mn.pcap"), "--side", "mn")


def test_tests_one_after_another_are_not_compared(tmp_path):
    p = Pcap()
    for k, t0 in enumerate((0.0, 5.0)):
        control(p, t0, 41000 + k, seconds=2.5)
        connection(p, t0 + 0.2, 42000 + k)
    rep = analyze(tmp_path, p)
    assert rep["concurrent"] == []
    # Each control connection's two entries (the hello up, the server's answers down).
    assert sorted(f["dport"] for f in rep["flows"] if f["control"] and f["direction"] == "downlink") == [41000, 41001]


def test_one_download_with_its_control_connection_is_no_competition(tmp_path):
    p = Pcap()
    control(p, 0.0, 41000, seconds=2.5)
    connection(p, 0.2, 42000)
    rep = analyze(tmp_path, p)
    assert rep["concurrent"] == []
    ctl = [(f["src"], f["sport"]) for f in rep["flows"] if f["control"]]
    assert sorted(ctl) == sorted([(CN, 7777), (MN, 41000)])


def test_one_test_with_two_streams_is_two_competing_flows(tmp_path):
    p = Pcap()
    control(p, 0.0, 41000, seconds=2.5)
    connection(p, 0.2, 42000, size=1000)
    connection(p, 0.21, 42001, size=500)
    rep = analyze(tmp_path, p)
    (c,) = rep["concurrent"]
    assert c["direction"] == "downlink" and len(c["flows"]) == 2
    assert sorted(round(x, 3) for x in c["shares"]) == [0.333, 0.667]
    assert abs(c["jain"] - 0.9) < 1e-3  # (1 + 0.5)² / (2 · (1 + 0.25))


def test_a_campaign_runs_shares_follow_the_same_rule():
    import polars as pl

    from cellperf.campaign.analyse import _with_studies

    def row(fid, role, goodput, start, end):
        return {"flow_id": fid, "role": role, "proto": "tcp", "direction": "downlink", "goodput_bps": goodput,
                "start_s": start, "end_s": end}

    # Two tests one after another (flows 1 and 2), then one with two streams (3 and 4), and
    # a control connection throughout: no share across tests, none for the control.
    flows = pl.DataFrame([row(0, "control", 1e4, 0.0, 30.0), row(1, "data", 3e6, 0.0, 10.0),
                          row(2, "data", 1e6, 10.5, 20.0), row(3, "data", 2e6, 21.0, 29.0),
                          row(4, "data", 1e6, 21.1, 29.0)])
    out = _with_studies(flows, saturating=False).sort("flow_id")
    assert out["share"].to_list() == pytest.approx([None, 1.0, 1.0, 2 / 3, 1 / 3], nan_ok=True)
    assert out["jain"].to_list() == pytest.approx([None, 1.0, 1.0, 0.9, 0.9], nan_ok=True)


def test_competing_groups_overlap_rule():
    from cellperf.studies import competing_groups

    # Overlap of half the shorter span competes (exactly 50 %: yes; 40 %: no); touching
    # spans do not; an unknown span competes with everything of its key.
    g = competing_groups([(0, 10), (5, 20), (20, 30), (26, 40)])
    assert (g[0] == g[1], g[1] == g[2], g[2] == g[3]) == (True, False, False)
    g = competing_groups([(0, 10), (0, 10), (None, None)], keys=["down", "up", "up"])
    assert (g[0] == g[1], g[1] == g[2]) == (False, True)


@pytest.mark.netns
@pytest.mark.skipif(not all(shutil.which(t) for t in ("tcpdump", "ethtool")), reason="needs tcpdump and ethtool")
def test_a_real_test_with_two_streams_and_its_control_connection(tmp_path):
    # cellperf server on a port other than 5250, a probe's tcp-bulk download with -P 2:
    # exactly the two data connections compete; the control connection is known by its hello.
    from cellperf.testbed.veth import Bottleneck, VethTestbed
    from tests.conftest import CELLPERF

    token = tmp_path / "token"
    token.write_bytes(b"competition")
    with VethTestbed(downlink=Bottleneck("20mbit", "20kbit", latency_ms=20)) as tb:
        srv = tb.popen(tb.cn, [CELLPERF, "server", "--listen", f"{tb.CN_ADDR}:6111", "--token-file", str(token),
                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert srv.stdout.readline(), srv.stderr.read()
        mn, cn = tmp_path / "mn.pcap", tmp_path / "cn.pcap"
        with tb.capture(mn, cn, snaplen=128):
            tb.sh(tb.mn, f"{CELLPERF} probe {tb.CN_ADDR}:6111 --token-file {token} -t tcp-bulk -P 2 "
                         "--direction down --duration 2 --json", timeout=60)
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn)
    (c,) = rep["concurrent"]
    assert c["direction"] == "downlink" and len(c["flows"]) == 2
    control = {f["flow_id"] for f in rep["flows"] if f["control"]}
    assert len(control) == 1 and not control & set(c["flows"])
    assert all(f["dport"] == 6111 or f["sport"] == 6111 for f in rep["flows"] if f["control"])
