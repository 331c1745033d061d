"""`cellperf analyze` on the shapes of public captures that tools like tcpdump and Wireshark
test themselves with (issue 17's corpus findings), crafted so that every count is known;
tshark is the independent reference where it has one."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from tests.analysis.pcapcraft import (ACK, FIN, PSH, SYN, Pcap, ethernet, ip_fragments, pcapng, tcp_packet,
                                      udp_datagram, udp_packet)
from tests.conftest import cellperf, cellperf_json

C, S = "10.1.0.1", "10.2.0.2"
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")


def tshark_count(path, display_filter: str) -> int:
    out = subprocess.run(["tshark", "-r", str(path), "-Y", display_filter, "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return len(out.split())


def tshark_sum(path, field: str) -> int:
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", field],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return sum(int(x.split(",")[0]) for x in out.split())


def exchange(t0: float = 0.0, *, syn_data: bytes = b"", segments: int = 4, size: int = 100) -> list[tuple[float, bytes]]:
    """A client C:40000 → server S:80 connection: handshake (data on the SYN if given),
    `segments` data segments from the client, each ACKed, then FIN both ways."""
    ids = iter(range(1, 10_000))
    out = [(t0, tcp_packet(C, 40000, S, 80, 1000, 0, SYN, data=syn_data, ip_id=next(ids))),
           (t0 + 0.01, tcp_packet(S, 80, C, 40000, 7000, 1001 + len(syn_data), SYN | ACK, ip_id=next(ids)))]
    seq, t = 1001 + len(syn_data), t0 + 0.02
    for _ in range(segments):
        out.append((t, tcp_packet(C, 40000, S, 80, seq, 7001, ACK | PSH, data=b"d" * size, ip_id=next(ids))))
        seq += size
        out.append((t + 0.01, tcp_packet(S, 80, C, 40000, 7001, seq, ACK, ip_id=next(ids))))
        t += 0.02
    out.append((t, tcp_packet(C, 40000, S, 80, seq, 7001, FIN | ACK, ip_id=next(ids))))
    out.append((t + 0.01, tcp_packet(S, 80, C, 40000, 7001, seq + 1, FIN | ACK, ip_id=next(ids))))
    return out


def write(tmp_path, name: str, records, linktype: int = 101):
    p = Pcap(linktype=linktype)
    for t, pkt in records:
        p.add(t, pkt)
    return p.write(tmp_path / name)


def one_line_error(path, *args) -> str:
    r = cellperf("analyze", path, *args, check=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


@needs_tshark
@pytest.mark.parametrize("field", [0x30000001, 0x24000001])
def test_link_type_field_with_fcs_bits_is_read_like_libpcap(tmp_path, field):
    recs = [(t, ethernet(pkt, fcs=True)) for t, pkt in exchange()]
    path = write(tmp_path, "fcs.pcap", recs, linktype=field)
    (f,) = cellperf_json("analyze", path)["flows"]
    assert (f["packets"], f["bytes"]) == (12, tshark_sum(path, "ip.len"))
    assert f["tcp"]["unique_bytes"] == 400


@needs_tshark
def test_data_on_a_syn_is_no_retransmission(tmp_path):
    path = write(tmp_path, "tfo.pcap", exchange(syn_data=b"s" * 50))
    (f,) = cellperf_json("analyze", path)["flows"]
    assert tshark_count(path, "tcp.analysis.retransmission") == 0
    assert f["retransmissions"]["total"] == 0
    assert f["tcp"]["unique_bytes"] == 450


@needs_tshark
def test_syn_retransmissions_are_reported_apart(tmp_path):
    recs = exchange(t0=3.0)
    syn, synack = recs[0][1], recs[1][1]
    resent = lambda pkt, ident: pkt[:4] + struct.pack("!H", ident) + pkt[6:]  # noqa: E731 (new IP id)
    # The SYN sent at 0, 1 and 3 s; the SYN/ACK twice.
    recs = [(0.0, resent(syn, 900)), (1.0, resent(syn, 901)), (3.015, resent(synack, 902))] + recs
    path = write(tmp_path, "synretx.pcap", sorted(recs, key=lambda r: r[0]))
    (f,) = cellperf_json("analyze", path)["flows"]
    want = tshark_count(path, "tcp.analysis.retransmission && tcp.flags.syn == 1")
    assert want == 3
    assert (f["retransmissions"]["syn"], f["retransmissions"]["total"]) == (want, 0)


@needs_tshark
def test_every_fragment_counts_its_ip_bytes(tmp_path):
    recs = []
    for i in range(10):
        dgram = udp_datagram(5004, 6000, bytes([i]) * 3000)
        frags = ip_fragments(C, S, 17, dgram, ip_id=100 + i)
        if i % 2:
            frags.reverse()  # the first fragment last
        for k, frag in enumerate(frags):
            recs.append((i * 0.02 + k * 1e-4, frag))
    path = write(tmp_path, "frag.pcap", recs)
    rep = cellperf_json("analyze", path)
    (f,) = rep["flows"]
    assert (f["packets"], f["bytes"]) == (30, tshark_sum(path, "ip.len")) == (30, 10 * 3068)
    assert rep["captures"][0]["counts"]["later_fragments"] == 20
    assert not rep["warnings"]
    # A later fragment without its first one is in no flow, and said so.
    path = write(tmp_path, "orphan.pcap", recs[1:])  # datagram 0's first fragment left out
    r = cellperf("analyze", path, "--json")
    assert "2 IP fragments came without their datagram's first fragment" in r.stderr


def test_capture_duplicates_are_counted_apart(tmp_path):
    recs = exchange()
    # The same frames recorded twice, 5 µs apart: data segments 1 and 3, one ACK.
    dups = [(recs[i][0] + 5e-6, recs[i][1]) for i in (2, 3, 6)]
    path = write(tmp_path, "dups.pcap", sorted(recs + dups, key=lambda r: r[0]))
    rep = cellperf_json("analyze", path)
    (f,) = rep["flows"]
    assert (f["capture_duplicates"], f["packets"]) == (3, 12)
    assert f["retransmissions"]["total"] == 0
    assert f["tcp"]["dup_acks"] == 0
    assert rep["captures"][0]["counts"]["capture_duplicates"] == 3
    # A real resend (new IP id) 200 ms later stays a retransmission.
    t, pkt = recs[2]
    resend = (t + 0.2, pkt[:4] + struct.pack("!H", 4444) + pkt[6:])
    path = write(tmp_path, "resend.pcap", sorted(recs + [resend], key=lambda r: r[0]))
    (f,) = cellperf_json("analyze", path)["flows"]
    assert (f["capture_duplicates"], f["retransmissions"]["total"]) == (0, 1)


def test_datagrams_sharing_an_ip_id_are_not_capture_duplicates(tmp_path):
    # Seen in an emulated WiBro run: Linux gave two CBR datagrams (sequence 0x2b3, 0x2b4) the
    # same IP id, and the link's ARQ delivered them 6 µs apart; a true copy has the same
    # content too.
    def dgram(seq: int) -> bytes:
        return udp_packet(S, 50358, C, 60547, b"CPF1" + seq.to_bytes(8, "big") + bytes(1428), ip_id=0x4D27, ttl=63)

    recs = [(1.0, dgram(0x2B3)), (1.000006, dgram(0x2B4)), (1.000012, dgram(0x2B4))]
    (f,) = cellperf_json("analyze", write(tmp_path, "sameid.pcap", recs))["flows"]
    assert (f["packets"], f["capture_duplicates"]) == (2, 1)


def test_resend_of_data_sent_before_the_capture_began(tmp_path):
    # The capture starts mid-connection: the server's ACK of 5001 comes first, then the
    # client resends 3001.. (the original was before the capture) and sends 5001.. new.
    recs = [(0.00, tcp_packet(S, 80, C, 40000, 7001, 5001, ACK, ip_id=1)),
            (0.01, tcp_packet(C, 40000, S, 80, 3001, 7001, ACK, data=b"r" * 1000, ip_id=2)),
            (0.02, tcp_packet(C, 40000, S, 80, 5001, 7001, ACK, data=b"n" * 1000, ip_id=3)),
            (0.03, tcp_packet(S, 80, C, 40000, 7001, 6001, ACK, ip_id=4))]
    (f,) = cellperf_json("analyze", write(tmp_path, "mid.pcap", recs))["flows"]
    rx = f["retransmissions"]
    assert (rx["total"], rx["spurious"], rx["original_not_captured"]) == (1, 1, 1)
    assert f["tcp"]["unique_bytes"] == 1000


def test_pcapng_with_only_an_unsupported_link_type_names_it(tmp_path):
    path = tmp_path / "dvb.pcapng"
    path.write_bytes(pcapng(exchange(), linktype=147))
    err = one_line_error(path)
    assert "link type 147" in err and "12 packets" in err


def test_damaged_section_header_and_first_record_name_the_byte(tmp_path):
    good = pcapng(exchange())
    bad = tmp_path / "shb.pcapng"
    bad.write_bytes(good[:8] + b"\x01\x02\x03\x04" + good[12:])
    err = one_line_error(bad)
    assert "byte 0" in err and "section header" in err
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(Pcap(records=exchange()).to_bytes()[:24 + 16 + 10])
    err = one_line_error(cut)
    assert "byte 24" in err and "truncated" in err


def test_damaged_pcapng_block_is_one_short_warning(tmp_path):
    recs = exchange()
    good = pcapng(recs[:4])
    block = pcapng(recs[4:5])[len(pcapng([])):]
    damaged = block[:-4] + struct.pack("<I", 999)  # trailing length disagrees
    path = tmp_path / "block.pcapng"
    path.write_bytes(good + damaged + b"\x5a" * 200_000)
    r = cellperf("analyze", path, "--json")
    (line,) = [x for x in r.stderr.splitlines() if "damaged pcapng block" in x]
    assert len(line) < 250, line
    assert f"byte {len(good)}" in line


def test_capture_named_like_an_agent_log_is_read_as_a_capture(tmp_path):
    path = write(tmp_path, "trace.csv", exchange())
    (f,) = cellperf_json("analyze", path)["flows"]
    assert f["tcp"]["unique_bytes"] == 400


def test_a_resent_syn_with_data_is_no_retransmission_with_two_captures(tmp_path):
    # TCP Fast Open: the client's SYN with 50 bytes is lost after the MN's capture and sent
    # again 1 s later; then 4 segments of 100 bytes, each ACKed.
    mn, cn = Pcap(), Pcap()
    recs = exchange(t0=1.0, syn_data=b"s" * 50)
    syn = recs[0][1]
    mn.add(0.0, syn[:4] + struct.pack("!H", 900) + syn[6:])  # the first SYN: at the MN only
    for t, pkt in recs:
        from_client = pkt[12:16] == bytes([10, 1, 0, 1])
        here, there = (mn, cn) if from_client else (cn, mn)
        hops = bytearray(pkt)
        hops[8] = 60  # TTL at the far capture (the checksum is not checked)
        here.add(t + (0 if from_client else 3.0), pkt)
        there.add(t + 0.005 + (3.0 if from_client else 0), bytes(hops))
    for p in (mn, cn):
        p.records.sort(key=lambda r: r[0])
    flows = cellperf_json("analyze", "--mn", mn.write(tmp_path / "mn.pcap"), "--cn", cn.write(tmp_path / "cn.pcap"))["flows"]
    f = next(f for f in flows if f["sport"] == 40000)
    rx = f["retransmissions"]
    assert (rx["method"], rx["syn"], rx["total"]) == ("two-sided", 1, 0)
    assert f["tcp"]["unique_bytes"] == 450
