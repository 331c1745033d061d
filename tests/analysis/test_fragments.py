"""IP fragmentation per flow (seed 004 §II.A) on crafted captures: fragmented datagrams,
fragments per datagram, and datagrams that cannot be reassembled (a middle or last fragment
lost; one whose first fragment is lost belongs to no flow)."""

from __future__ import annotations

import pytest

from tests.analysis.pcapcraft import Pcap, ip_fragments, udp_datagram, udp_packet
from tests.conftest import cellperf_json

MN, CN = "10.0.0.2", "192.0.2.7"


@pytest.fixture
def captures(tmp_path):
    """Four 1400-byte datagrams MN → CN over a 576-byte MTU (3 fragments each) and two small
    ones; on the way the second loses its middle fragment, the third its last, the fourth
    its first."""
    mn, cn = Pcap(), Pcap()
    t = 0.0
    for i in range(4):
        parts = ip_fragments(MN, CN, 17, udp_datagram(4000, 9000, bytes([i]) * 1400), ip_id=100 + i, mtu=576)
        assert len(parts) == 3
        lost = {1: 1, 2: 2, 3: 0}.get(i)
        for k, p in enumerate(parts):
            t += 0.01
            mn.add(t, p)
            if k != lost:
                cn.add(t + 0.05, p)
    for i in range(2):
        t += 0.01
        p = udp_packet(MN, 4000, CN, 9000, b"s" * 100, ip_id=200 + i)
        mn.add(t, p)
        cn.add(t + 0.05, p)
    return mn.write(tmp_path / "mn.pcap"), cn.write(tmp_path / "cn.pcap")


def test_fragments_counted_at_the_receiver(captures):
    mn, cn = captures
    (f,) = cellperf_json("analyze", "--mn", mn, "--cn", cn, "--mn-addr", MN)["flows"]
    # At the CN: datagrams 0-2 have their first fragment (3 + 2 + 2 fragments), 1 and 2 are
    # incomplete (a middle fragment's bytes missing; the last fragment missing).
    assert f["fragments"] == {"side": "cn", "datagrams": 3, "fragments": 7, "per_datagram": pytest.approx(7 / 3),
                              "incomplete": 2}


def test_fragments_at_one_capture(captures):
    mn, cn = captures
    (f,) = cellperf_json("analyze", mn, "--side", "mn", "--mn-addr", MN)["flows"]
    assert f["fragments"] == {"side": "mn", "datagrams": 4, "fragments": 12, "per_datagram": 3.0, "incomplete": 0}
    (f,) = cellperf_json("analyze", cn, "--side", "cn", "--mn-addr", MN)["flows"]
    assert (f["fragments"]["datagrams"], f["fragments"]["incomplete"]) == (3, 2)


def test_no_fragments_no_entry(tmp_path):
    p = Pcap()
    p.add(0.0, udp_packet(MN, 4000, CN, 9000, b"x" * 100, ip_id=1))
    (f,) = cellperf_json("analyze", p.write(tmp_path / "a.pcap"), "--side", "mn", "--mn-addr", MN)["flows"]
    assert f["fragments"] is None
