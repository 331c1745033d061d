"""`cellperf analyze` on crafted two-sided captures whose every event is known, so each
count is asserted exactly (docs/methods.md §3–§4)."""

from __future__ import annotations

import struct

import pytest

from tests.analysis.pcapcraft import Pcap, TcpRun, udp_packet
from tests.conftest import cellperf, cellperf_json


@pytest.fixture
def tcp_run(tmp_path):
    """A downlink connection with one retransmission of each class and one ACK-compression event."""
    r = TcpRun(skew=3.0)
    r.data(0.00, 1, 100, 0.05)
    r.ack(0.051, 101, 0.10)
    r.data(0.01, 101, 100, None)  # lost
    r.data(0.02, 201, 100, 0.07)
    r.ack(0.071, 101, 0.12)  # duplicate ACK
    r.data(0.30, 101, 100, 0.35)  # normal: the first copy was lost
    r.ack(0.351, 301, 0.40)
    r.data(0.41, 301, 100, 0.46)
    r.ack(0.461, 401, None)  # the only ACK covering 301..401 is lost
    r.data(0.80, 301, 100, 0.85)  # unavoidable
    r.ack(0.851, 401, 0.90)
    r.data(0.91, 401, 100, 0.96)
    r.ack(0.961, 501, 1.50)  # arrives late
    r.data(1.30, 401, 100, 1.35)  # spurious: neither data nor ACK lost
    r.ack(1.351, 501, 1.55)
    r.data(1.60, 501, 100, None)  # lost
    r.data(2.00, 501, 100, None)  # normal, lost again
    r.data(2.80, 501, 100, 2.85)  # normal and serial
    r.ack(2.851, 601, 2.90)
    for i in range(5):
        r.data(3.00 + i / 100, 601 + 100 * i, 100, 3.05 + i / 100)
    sent = [3.10, 3.12, 3.14, 3.16, 3.18, 3.20]
    got = [3.30, 3.301, 3.302, 3.303, 3.40, 3.42]  # ACKs 2-4 arrive bunched: one event
    for i, (s, g) in enumerate(zip(sent, got)):
        r.ack(s, min(701 + 100 * i, 1101), g)
    (tmp_path / "tcp").mkdir()
    return r.write(tmp_path / "tcp")


def test_two_sided_classes_are_exact(tcp_run):
    mn, cn = tcp_run
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn)
    (f,) = rep["flows"]
    assert (f["proto"], f["direction"], f["direction_basis"]) == ("tcp", "downlink", "ttl")
    assert (f["src"], f["sport"], f["dst"], f["dport"]) == ("192.0.2.7", 80, "10.0.0.2", 40000)
    rx = f["retransmissions"]
    assert rx["method"] == "two-sided"
    assert (rx["total"], rx["normal"], rx["spurious"], rx["unavoidable"], rx["serial"]) == (5, 3, 1, 1, 1)
    assert rx["rate"] == pytest.approx(5 / 16)
    ac = f["ack_compression"]
    assert ac["acks"] == 12
    assert ac["compressed_fraction"] == pytest.approx(4 / 12)
    assert ac["event_fraction"] == pytest.approx(3 / 12)
    assert f["tcp"]["unique_bytes"] == 1100
    assert f["tcp"]["data_matched"] == 13  # 16 sent, 3 lost
    # RTT at the sender (Karn): samples only from segments never retransmitted.
    assert f["rtt_ms"]["samples"] > 0


def test_one_sided_fallback_says_so(tcp_run):
    mn, cn = tcp_run
    f = cellperf_json("analyze", cn, "--side", "cn")["flows"][0]
    rx = f["retransmissions"]
    assert rx["method"] == "one-sided"
    assert (rx["total"], rx["rto"], rx["fast"], rx["spurious"], rx["serial"]) == (5, 5, 0, 0, 1)
    assert rx["normal"] is None and rx["unavoidable"] is None
    assert f["ack_compression"] is None
    # At the receiver, resent bytes it had already acknowledged show as spurious.
    rx = cellperf_json("analyze", mn, "--side", "mn")["flows"][0]["retransmissions"]
    assert (rx["total"], rx["spurious"], rx["rto"]) == (3, 2, 1)


def test_out_writes_parquet_tables(tcp_run, tmp_path):
    import polars as pl

    mn, cn = tcp_run
    cellperf("analyze", "--mn", mn, "--cn", cn, "--out", tmp_path / "res")
    retx = pl.read_parquet(tmp_path / "res" / "tcp_retransmissions.parquet")
    assert sorted(retx["class"].to_list()) == ["normal"] * 3 + ["spurious", "unavoidable"]
    assert retx["serial"].sum() == 1
    assert retx["rel_seq"].to_list() == [100, 300, 400, 500, 500]  # offsets from the first byte (seq 1)
    cellperf("analyze", cn, "--side", "cn", "--out", tmp_path / "one")
    one = pl.read_parquet(tmp_path / "one" / "tcp_retransmissions.parquet")
    assert one["method"].unique().to_list() == ["one-sided"]
    assert one["rel_seq"].to_list() == [100, 300, 400, 500, 500]
    pk = pl.read_parquet(tmp_path / "res" / "packets.parquet")
    assert pk.height == (16 + 13) + (13 + 14)  # CN: data sent, ACKs arrived; MN: the reverse
    assert pk.filter(pl.col("uplink"))["payload_len"].sum() == 0
    acks = pl.read_parquet(tmp_path / "res" / "ack_compression.parquet")
    assert acks.height == 12 and acks["in_event"].sum() == 3
    assert (tmp_path / "res" / "report.json").exists()
    assert not [p for p in (tmp_path / "res").iterdir() if p.name.startswith(".")]


def _probe(seq: int, send_ns: int) -> bytes:
    return b"CPF1" + struct.pack("!QQ", seq, send_ns) + b"\0" * 140


@pytest.fixture
def udp_run(tmp_path):
    """An uplink probe stream, 20 ms spacing: 2 of 10 lost, one duplicated, one reordered."""
    mn, cn = Pcap(), Pcap()
    t0 = 1_700_000_000.0
    arrivals = {0: 0.030, 1: 0.050, 2: 0.072, 5: 0.130, 6: 0.175, 7: 0.171, 8: 0.190, 9: 0.210}
    for seq in range(10):
        send = t0 + seq * 0.02
        pkt = lambda ttl: udp_packet("10.0.0.2", 5000, "192.0.2.7", 9000, _probe(seq, int(send * 1e9)),  # noqa: E731
                                     ip_id=seq + 1, ttl=ttl)
        mn.add(send, pkt(64))
        if seq in arrivals:
            cn.add(t0 + arrivals[seq], pkt(61))
    cn.add(t0 + 0.211, udp_packet("10.0.0.2", 5000, "192.0.2.7", 9000, _probe(9, int((t0 + 0.18) * 1e9)),
                                  ip_id=10, ttl=61))  # duplicate of 9
    cn.records.sort(key=lambda r: r[0])
    (tmp_path / "udp").mkdir()
    return mn.write(tmp_path / "udp" / "mn.pcap"), cn.write(tmp_path / "udp" / "cn.pcap")


def test_udp_two_sided(udp_run):
    mn, cn = udp_run
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn, "--synced-clocks")
    (f,) = rep["flows"]
    assert (f["proto"], f["direction"], f["udp_view"]) == ("udp", "uplink", "two-sided")
    u = f["udp"]
    assert (u["packets_sent"], u["packets_received"], u["packets_lost"]) == (10, 8, 2)
    assert f["loss_rate"] == pytest.approx(0.2)
    assert (u["duplicates"], u["reordered"]) == (1, 1)
    assert u["gaps"]["count"] == 1 and u["gaps"]["lost_in_gaps"] == 2
    assert u["gaps"]["max_ms"] == pytest.approx(58.0, abs=1e-3)  # float seconds in the fixture
    assert f["owd_ms"]["kind"] == "raw"
    assert f["owd_ms"]["min"] == pytest.approx(30.0, abs=1e-3) and f["owd_ms"]["max"] == pytest.approx(55.0, abs=1e-3)


def test_udp_receiver_only_uses_probe_headers(udp_run):
    _, cn = udp_run
    f = cellperf_json("analyze", cn, "--side", "cn")["flows"][0]
    assert f["udp_view"] == "receiver"
    assert f["loss_rate"] == pytest.approx(0.2)
    assert f["udp"]["duplicates"] == 1
    assert f["owd_ms"]["kind"] == "excess" and f["owd_ms"]["min"] == 0.0


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.pcap", "missing.pcap: no such file"),
        (lambda d: _write(d / "empty.pcap", b""), "empty.pcap: empty file, not a capture"),
        (lambda d: _write(d / "text.pcap", b"hello, not a capture at all"), "not a pcap or pcapng capture"),
        (lambda d: _write(d / "lt.pcap", struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147)),
         "unsupported link type 147"),
        (lambda d: _write(d / "hdr.pcap", struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)), "no packets"),
    ],
)
def test_bad_input_is_one_line(tmp_path, make, message):
    p = cellperf("analyze", make(tmp_path), check=False)
    assert p.returncode == 1
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cellperf: error: ") and message in lines[0], p.stderr


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_no_tcp_or_udp(tmp_path):
    icmp = Pcap()
    icmp.add(1.0, bytes.fromhex("45000054000040004001f7a60a0000020a000001") + b"\x08\x00" + b"\0" * 62)
    p = cellperf("analyze", icmp.write(tmp_path / "icmp.pcap"), check=False)
    assert p.returncode == 1 and "no TCP or UDP packets (1 frames: 1 other IP" in p.stderr


def test_truncated_capture_keeps_what_was_read(tcp_run, tmp_path):
    mn, cn = tcp_run
    data = cn.read_bytes()
    cut = _write(tmp_path / "cut.pcap", data[:-30])
    p = cellperf("analyze", cut, "--side", "cn", "--json", check=False)
    assert p.returncode == 0
    assert "cellperf: warning:" in p.stderr and "truncated record" in p.stderr and "byte " in p.stderr
    import json

    assert json.loads(p.stdout)["captures"][0]["packets"] == 29 - 1


def test_unrelated_captures(tcp_run, udp_run):
    p = cellperf("analyze", "--mn", tcp_run[0], "--cn", udp_run[1], check=False)
    assert p.returncode == 1
    assert "no flow appears in both" in p.stderr and len(p.stderr.strip().splitlines()) == 1
