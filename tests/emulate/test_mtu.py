"""The link MTU and path-MTU discovery as settings of the emulated link (seed 004 §II.A), on
real packets: a 576-byte MTU makes the MN's kernel fragment 1400-byte datagrams in three, the
analysis counts them, and path-MTU discovery off clears DF on the MN's packets."""

from __future__ import annotations

import pytest

from tests.conftest import cellperf_json
from tests.emulate.conftest import emulate, read_pcap

pytestmark = [pytest.mark.netns, pytest.mark.usefixtures("nothing_left_behind")]

#: Five 1400-byte and five 100-byte datagrams to the CN's discard port, 20 ms apart.
SEND = ("import os, socket, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for n in [1400] * 5 + [100] * 5:\n"
        "    s.sendto(b'x' * n, (os.environ['CELLPERF_CN'], 9)); time.sleep(0.02)\n"
        "time.sleep(0.3)\n")


def _df(records) -> set[bool]:
    """DF of the unfragmented IPv4 UDP packets (offset 0, more-fragments clear): in this
    test, the MN's (the CN answers with ICMP)."""
    flags = [int.from_bytes(pkt[6:8], "big") for _, pkt in records if pkt[0] >> 4 == 4 and pkt[9] == 17]
    return {f & 0x4000 != 0 for f in flags if f & 0x3FFF == 0}


@pytest.mark.parametrize("pmtu", ["on", "off"])
def test_small_mtu_fragments_and_pmtu_sets_df(tmp_path, pmtu):
    p = emulate("--downlink", "10mbit", "--uplink", "10mbit", "--mtu", "576", "--pmtu-discovery", pmtu,
                "--pcap-dir", str(tmp_path), "--", "python3", "-c", SEND)
    assert p.returncode == 0, p.stderr
    mn_packets = read_pcap(tmp_path / "mn.pcap")
    assert max(len(pkt) for _, pkt in mn_packets) <= 576
    flows = cellperf_json("analyze", "--mn", tmp_path / "mn.pcap", "--cn", tmp_path / "cn.pcap")["flows"]
    (up,) = [f for f in flows if f["proto"] == "udp" and f["dport"] == 9]
    # 1408-byte UDP datagrams over 556 bytes of IP payload per fragment: 552 + 552 + 304.
    assert up["fragments"] == {"side": "cn", "datagrams": 5, "fragments": 15, "per_datagram": 3.0, "incomplete": 0}
    assert up["packets"] == 5 * 3 + 5
    assert _df(mn_packets) == {pmtu == "on"}
