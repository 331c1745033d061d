"""A sender behind its schedule hands the kernel several datagrams in one UDP GSO send; a
capture on the sending host, or on a veth path that carries the buffer whole, records one
frame holding them all (seen in a campaign: one 2,962-B frame, UDP length 2 x 1460 + 8).
The analysis takes such a frame apart into its probe datagrams, as the kernel cuts it;
read as one datagram, every later one in it looked lost before the capture."""

from __future__ import annotations

import struct

from tests.analysis.pcapcraft import Pcap, udp_packet
from tests.conftest import cellperf_json

T0 = 1_700_000_000.0
SIZE = 1460


def _probe(seq: int) -> bytes:
    return b"CPF1" + struct.pack("!QQ", seq, int((T0 + seq * 0.01) * 1e9)) + b"\0" * (SIZE - 20)


def _stream(batches: list[list[int]], *, delay: float = 0.0, ttl: int = 61) -> Pcap:
    """An uplink probe stream, one frame per batch of sequence numbers: each batch's
    datagrams in one payload, the IPv4 ids counting on from the batch's first."""
    cap, ip_id = Pcap(), 100
    for batch in batches:
        t = T0 + batch[0] * 0.01 + delay
        payload = b"".join(_probe(s) for s in batch)
        cap.add(t, udp_packet("10.0.0.2", 5000, "192.0.2.7", 9000, payload, ip_id=ip_id, ttl=ttl))
        ip_id += len(batch)
    return cap


def test_a_gso_frame_at_the_receiver_is_its_datagrams(tmp_path):
    # 20 probes; 6 and 7 came in one frame, 12-14 in another; 18 is lost.
    batches = [[s] for s in range(6)] + [[6, 7]] + [[s] for s in range(8, 12)] + [[12, 13, 14]] + [[15], [16], [19]]
    rep = cellperf_json("analyze", _stream(batches).write(tmp_path / "cn.pcap"), "--side", "cn")
    (f,) = rep["flows"]
    assert f["udp_view"] == "receiver" and rep["warnings"] == []
    assert (f["udp"]["packets_sent"], f["udp"]["packets_received"], f["udp"]["packets_lost"]) == (20, 18, 2)
    assert f["packets"] == 18 and f["bytes"] == 18 * (SIZE + 28)


def test_a_gso_frame_at_the_sender_matches_the_receivers_datagrams(tmp_path):
    """The MN's capture holds the GSO frames; the CN's the datagrams the kernel cut from
    them, each with the next IPv4 id: every one matched, none lost."""
    batches = [[s] for s in range(5)] + [[5, 6, 7, 8]] + [[s] for s in range(9, 15)]
    mn = _stream(batches, ttl=64).write(tmp_path / "mn.pcap")
    cn = _stream([[s] for s in range(15)], delay=0.05).write(tmp_path / "cn.pcap")
    rep = cellperf_json("analyze", "--mn", mn, "--cn", cn)
    (f,) = rep["flows"]
    assert f["direction"] == "uplink" and f["loss_rate"] == 0.0, f
    assert f["udp"]["packets_sent"] == 15 and f["udp"]["packets_received"] == 15
    # Send times are the MN capture's: the batch left at once, its last datagram 30 ms
    # after its schedule, and so 30 ms above the others' delay (excess: no clock sync).
    owd = f["udp"]["owd_ms"]
    assert owd["samples"] == 15 and owd["median"] < 0.01 and abs(owd["max"] - 30.0) < 0.01, owd
