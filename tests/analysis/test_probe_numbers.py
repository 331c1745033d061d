"""A probe stream seen at its receiver counts missing sequence numbers as losses, unless the
numbers are too far apart to be one stream's (a stray or damaged header): then losses are not
counted, with a warning, instead of a loss entry for every number in between."""

from __future__ import annotations

import struct

import pytest

from tests.analysis.pcapcraft import Pcap, udp_packet
from tests.conftest import cellperf_json

T0 = 1_700_000_000.0


def _receiver_capture(path, seqs: list[int]):
    """An uplink cellperf probe stream as the CN's capture saw it: one datagram per seq, 20 ms apart."""
    cap = Pcap()
    for i, seq in enumerate(seqs):
        send = T0 + i * 0.02
        payload = b"CPF1" + struct.pack("!QQ", seq, int(send * 1e9)) + b"\0" * 140
        cap.add(send + 0.03, udp_packet("10.0.0.2", 5000, "192.0.2.7", 9000, payload, ip_id=i + 1, ttl=61))
    return cap.write(path)


@pytest.mark.parametrize(("last", "lost"), [(100, 80), (2**22 + 20, 2**22)])
def test_missing_numbers_are_losses(tmp_path, last, lost):
    rep = cellperf_json("analyze", _receiver_capture(tmp_path / "cn.pcap", [*range(20), last]), "--side", "cn")
    (f,) = rep["flows"]
    assert f["udp_view"] == "receiver" and rep["warnings"] == []
    assert (f["udp"]["packets_sent"], f["udp"]["packets_received"], f["udp"]["packets_lost"]) == (last + 1, 21, lost)


@pytest.mark.parametrize("last", [2**22 + 21, 2**40, 2**64 - 1])
def test_numbers_too_far_apart_are_no_stream(tmp_path, last):
    rep = cellperf_json("analyze", _receiver_capture(tmp_path / "cn.pcap", [*range(20), last]), "--side", "cn")
    (f,) = rep["flows"]
    assert f["udp_view"] == "receiver" and f["loss_rate"] is None
    assert (f["udp"]["packets_sent"], f["udp"]["packets_received"]) == (None, 21)
    span = min(last + 1, 2**64 - 1)
    assert rep["warnings"] == [f"flow {f['flow_id']}: the sequence numbers of its 21 probe headers span {span} "
                               "(stray or damaged headers?); its losses are not counted"]
