"""A TCP connection with data both ways is two flow entries, one per data direction, each
with its own figures and a shared connection_id (issue 17 item 1): a crafted HTTP-like
exchange whose every event is known; the real iperf3 control connection is checked in
test_real_captures.py."""

from __future__ import annotations

import pytest

from tests.analysis.pcapcraft import ACK, FIN, PSH, SYN, Pcap, tcp_packet
from tests.conftest import cellperf_json

MN, CN = "10.0.0.2", "192.0.2.7"


class Exchange:
    """Packets of one connection MN:40000 ↔ CN:80, each with the time it left its sender
    and the time it reached the far capture (None: lost). Both clocks agree; TTL 64 at the
    sender's capture, 60 at the receiver's."""

    def __init__(self):
        self.mn, self.cn = Pcap(), Pcap()
        self.ids = {True: 100, False: 5000}

    def send(self, from_mn: bool, t: float, seq: int, ack: int, flags: int, length: int = 0,
             arrive: float | None = 0.05):
        self.ids[from_mn] += 1
        ends = (MN, 40000, CN, 80) if from_mn else (CN, 80, MN, 40000)
        pkt = lambda ttl: tcp_packet(*ends, seq, ack, flags, data=b"h" * length, ip_id=self.ids[from_mn], ttl=ttl)  # noqa: E731
        here, there = (self.mn, self.cn) if from_mn else (self.cn, self.mn)
        here.add(t, pkt(64))
        if arrive is not None:
            there.add(t + arrive, pkt(60))

    def write(self, folder):
        for p in (self.mn, self.cn):
            p.records.sort(key=lambda r: r[0])
        return self.mn.write(folder / "mn.pcap"), self.cn.write(folder / "cn.pcap")


@pytest.fixture
def http_like(tmp_path):
    """The MN sends a 300-byte request in three segments, the second lost and resent; the CN
    answers 800 bytes in four segments, the third lost and resent."""
    x = Exchange()
    up, down = True, False
    x.send(up, 0.00, 1000, 0, SYN)
    x.send(down, 0.06, 9000, 1001, SYN | ACK)
    x.send(up, 0.12, 1001, 9001, ACK)
    x.send(up, 0.12, 1001, 9001, ACK | PSH, 100)
    x.send(up, 0.121, 1101, 9001, ACK | PSH, 100, arrive=None)  # lost
    x.send(up, 0.122, 1201, 9001, ACK | PSH, 100)
    x.send(down, 0.171, 9001, 1101, ACK)
    x.send(down, 0.173, 9001, 1101, ACK)  # duplicate ACK
    x.send(up, 0.50, 1101, 9001, ACK | PSH, 100)  # RTO resend: normal
    x.send(down, 0.551, 9001, 1301, ACK | PSH, 200)
    x.send(down, 0.552, 9201, 1301, ACK | PSH, 200)
    x.send(down, 0.553, 9401, 1301, ACK | PSH, 200, arrive=None)  # lost
    x.send(down, 0.554, 9601, 1301, ACK | PSH, 200)
    x.send(up, 0.603, 1301, 9401, ACK)
    x.send(up, 0.605, 1301, 9401, ACK)  # duplicate ACK
    x.send(down, 1.00, 9401, 1301, ACK | PSH, 200)  # RTO resend: normal
    x.send(up, 1.051, 1301, 9801, ACK)
    x.send(up, 1.10, 1301, 9801, FIN | ACK)
    x.send(down, 1.151, 9801, 1302, FIN | ACK)
    x.send(up, 1.202, 1302, 9802, ACK)
    (tmp_path / "x").mkdir()
    return x.write(tmp_path / "x")


def test_two_entries_share_the_connection_and_each_has_its_loss(http_like):
    mn, cn = http_like
    flows = cellperf_json("analyze", "--mn", mn, "--cn", cn)["flows"]
    assert len(flows) == 2 and flows[0]["connection_id"] == flows[1]["connection_id"]
    up, down = sorted(flows, key=lambda f: f["direction"], reverse=True)
    assert (up["direction"], up["src"], up["sport"]) == ("uplink", MN, 40000)
    assert (down["direction"], down["src"], down["sport"]) == ("downlink", CN, 80)
    for f, unique, data_packets in ((up, 300, 4), (down, 800, 5)):
        rx = f["retransmissions"]
        assert (rx["method"], rx["total"], rx["normal"], rx["spurious"], rx["unavoidable"]) == (
            "two-sided", 1, 1, 0, 0), f["direction"]
        assert (f["tcp"]["unique_bytes"], f["tcp"]["data_packets"], f["tcp"]["dup_acks"]) == (unique, data_packets, 1)
        assert f["rtt_ms"]["samples"] >= 1
        assert f["ack_compression"] is not None
    # Each entry counts its own direction's packets at its sender's capture.
    assert (up["packets"], down["packets"]) == (11, 9)


def test_one_capture_gives_both_directions_too(http_like):
    mn, _ = http_like
    flows = cellperf_json("analyze", mn, "--side", "mn")["flows"]
    assert sorted(f["direction"] for f in flows) == ["downlink", "uplink"]
    by = {f["direction"]: f["retransmissions"] for f in flows}
    # At the MN: its own resend (the original never acknowledged: RTO); the CN's resend
    # arrives as a late hole fill.
    assert (by["uplink"]["method"], by["uplink"]["total"], by["uplink"]["rto"]) == ("one-sided", 1, 1)
    assert by["downlink"]["total"] == 1
