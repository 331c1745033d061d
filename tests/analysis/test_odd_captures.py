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


def tshark_conversation_frames(path, kind: str) -> int:
    """Frames of the one conversation tshark's `-z conv,KIND` lists (its byte counts are
    rounded to kB)."""
    out = subprocess.run(["tshark", "-r", str(path), "-q", "-z", f"conv,{kind}"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    (row,) = [line for line in out.splitlines() if "<->" in line]
    # "A <-> B   0 0 bytes   30 30 kB   30 30 kB   start duration": the total frames.
    return int(row.split("<->")[1].split()[-5])


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
    # As tshark's IPv4 conversation counts them (every fragment); its UDP conversation
    # counts one frame per datagram, the one that completed the reassembly (docs/analysis.md).
    assert (tshark_conversation_frames(path, "ip"), tshark_conversation_frames(path, "udp")) == (30, 10)
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


def test_every_packet_of_one_host_captured_twice_is_capture_duplicates(tmp_path):
    # Public captures: every packet the client sent recorded twice, 100-240 µs apart (same
    # IP id, TTL, sequence and ACK numbers); a burst of segments 40 µs apart puts up to five
    # other packets between a segment and its copy.
    recs = exchange(segments=2)[:-2]  # the FINs come after the burst
    seq, ids = 1201, iter(range(500, 600))
    for k in range(6):
        recs.append((0.1 + k * 40e-6, tcp_packet(C, 40000, S, 80, seq, 7001, ACK, data=b"b" * 100, ip_id=next(ids))))
        seq += 100
    recs += [(0.12, tcp_packet(S, 80, C, 40000, 7001, seq, ACK, ip_id=next(ids))),
             (0.20, tcp_packet(C, 40000, S, 80, seq, 7001, FIN | ACK, ip_id=next(ids))),
             (0.21, tcp_packet(S, 80, C, 40000, 7001, seq + 1, FIN | ACK, ip_id=next(ids)))]
    client = [(t, p) for t, p in recs if p[12:16] == bytes([10, 1, 0, 1])]
    gaps = [100e-6, 240e-6, 170e-6, 130e-6, 200e-6]
    copies = [(t + gaps[i % len(gaps)], p) for i, (t, p) in enumerate(client)]
    path = write(tmp_path, "twice.pcap", sorted(recs + copies, key=lambda r: r[0]))
    rep = cellperf_json("analyze", path)
    (f,) = rep["flows"]
    assert (f["capture_duplicates"], f["packets"]) == (len(client), len(recs))
    rx = f["retransmissions"]
    assert (rx["total"], rx["rto"], rx["syn"]) == (0, 0, 0)
    assert f["tcp"]["unique_bytes"] == 200 + 600
    assert rep["captures"][0]["counts"]["capture_duplicates"] == len(client)


@needs_tshark
def test_resend_below_a_sequence_number_the_sender_used_in_a_pure_ack(tmp_path):
    # One-sided, at the client: the server sends data the client ACKs with its own next
    # sequence number; bytes below it were sent even when the capture missed them.
    # (1) the capture begins mid-connection: the client's pure ACK says seq 5001, then it
    # resends 3001..; (2) the capture missed 1201..1301: a pure ACK says 1301, then the
    # client resends 1201.. 300 ms later.
    # The server's ACKs never cover the resent bytes (it has not received them).
    mid = [(0.00, tcp_packet(S, 80, C, 40000, 7001, 2001, ACK, data=b"s" * 100, ip_id=1)),
           (0.01, tcp_packet(C, 40000, S, 80, 5001, 7101, ACK, ip_id=2)),
           (0.30, tcp_packet(C, 40000, S, 80, 3001, 7101, ACK, data=b"r" * 1000, ip_id=3)),
           (0.31, tcp_packet(S, 80, C, 40000, 7101, 2001, ACK, ip_id=4)),
           (0.32, tcp_packet(C, 40000, S, 80, 5001, 7101, ACK, data=b"n" * 100, ip_id=5))]
    recs = exchange(segments=2)[:-2]
    recs += [(0.10, tcp_packet(S, 80, C, 40000, 7001, 1201, ACK, data=b"s" * 100, ip_id=901)),
             (0.11, tcp_packet(C, 40000, S, 80, 1301, 7101, ACK, ip_id=902)),
             (0.40, tcp_packet(C, 40000, S, 80, 1201, 7101, ACK, data=b"r" * 100, ip_id=903)),
             (0.41, tcp_packet(S, 80, C, 40000, 7101, 1301, ACK, ip_id=904))]
    for name, records in (("mid.pcap", mid), ("missed.pcap", recs)):
        path = write(tmp_path, name, records)
        want = tshark_count(path, "tcp.analysis.retransmission && tcp.srcport == 40000")
        assert want == 1
        f = next(f for f in cellperf_json("analyze", path)["flows"] if f["sport"] == 40000)
        rx = f["retransmissions"]
        assert (rx["total"], rx["original_not_captured"]) == (want, 1)


@needs_tshark
def test_a_resent_syn_with_data_is_a_setup_resend_only(tmp_path):
    recs = exchange(t0=1.0, syn_data=b"s" * 50)
    syn = recs[0][1]
    recs = [(0.0, syn[:4] + struct.pack("!H", 900) + syn[6:])] + recs  # sent at 0 and 1 s
    path = write(tmp_path, "tforetx.pcap", recs)
    assert tshark_count(path, "tcp.analysis.retransmission && tcp.flags.syn == 1") == 1
    (f,) = cellperf_json("analyze", path)["flows"]
    rx = f["retransmissions"]
    assert (rx["syn"], rx["total"], rx["rto"]) == (1, 0, 0)
    assert f["tcp"]["unique_bytes"] == 450


def test_syn_resends_are_in_one_entry_of_a_connection(tmp_path):
    # A request/response connection (two entries): the SYN resent once, the SYN/ACK once;
    # the sum over the entries is 2.
    recs = exchange(t0=3.0)[:-2]
    syn, synack = recs[0][1], recs[1][1]
    resent = lambda pkt, ident: pkt[:4] + struct.pack("!H", ident) + pkt[6:]  # noqa: E731
    recs += [(3.5, tcp_packet(S, 80, C, 40000, 7001, 1401, ACK | PSH, data=b"a" * 300, ip_id=700)),
             (3.51, tcp_packet(C, 40000, S, 80, 1401, 7301, ACK, ip_id=701))]
    recs = [(0.0, resent(syn, 900)), (3.015, resent(synack, 902))] + recs
    path = write(tmp_path, "two.pcap", sorted(recs, key=lambda r: r[0]))
    flows = cellperf_json("analyze", path)["flows"]
    assert len(flows) == 2
    syns = {f["sport"]: f["retransmissions"]["syn"] for f in flows}
    assert syns == {40000: 2, 80: 0}


@pytest.mark.parametrize("syns", [True, False])
def test_captures_on_both_sides_of_a_sequence_rewriting_middlebox(tmp_path, syns):
    # A firewall between the captures adds 0x9000_0000 to the client's sequence numbers and
    # 0x1234_5678 to the server's (and takes them off the ACKs going back). The client sends
    # a 100-byte request, the server 10 segments of 500 bytes; segment 4 is lost after the
    # server's capture and resent after 3 duplicate ACKs.
    kc, ks = 0x9000_0000, 0x1234_5678
    at_c, at_s = Pcap(), Pcap()  # the client's capture (MN) and the server's (CN)
    ids = iter(range(1, 1000))

    def send(t, src_is_client, seq, ack, flags, data=b"", arrive=True):
        ident = next(ids)
        src, sport, dst, dport = (C, 40000, S, 80) if src_is_client else (S, 80, C, 40000)
        own, other = (kc, ks) if src_is_client else (ks, kc)
        there = ((seq + own) % 2**32, (ack - other) % 2**32 if flags & ACK else ack)
        here, far = (at_c, at_s) if src_is_client else (at_s, at_c)
        here.add(t, tcp_packet(src, sport, dst, dport, seq, ack, flags, data=data, ip_id=ident, ttl=64))
        if arrive:
            far.add(t + 0.02, tcp_packet(src, sport, dst, dport, *there, flags, data=data, ip_id=ident, ttl=62))

    # `send` takes the numbers as the sender's capture shows them.
    send(0.0, True, 1000, 0, SYN)
    send(0.03, False, 7000, 1001 + kc, SYN | ACK)
    send(0.06, True, 1001, 7001 + ks, ACK)
    send(0.07, True, 1001, 7001 + ks, ACK | PSH, data=b"q" * 100)
    seq = 7001
    for k in range(10):
        send(0.1 + k * 0.001, False, seq, 1101 + kc, ACK, data=b"r" * 500, arrive=k != 4)
        seq += 500
    for k in range(10):  # the client's ACKs: cumulative up to the hole, then duplicates
        acked = 7001 + 500 * min(k + 1, 4) if k < 4 else 7001 + 2000
        send(0.125 + k * 0.001, True, 1101, acked + ks, ACK)
    send(0.2, False, 7001 + 2000, 1101 + kc, ACK, data=b"r" * 500)
    send(0.23, True, 1101, 12001 + ks, ACK)
    for p in (at_c, at_s):
        p.records.sort(key=lambda r: r[0])
        if not syns:  # captures begun after the handshake: no offset is learned
            p.records = [(t, pkt) for t, pkt in p.records if not pkt[33] & SYN]
    mn, cn = at_c.write(tmp_path / "mn.pcap"), at_s.write(tmp_path / "cn.pcap")
    flows = cellperf_json("analyze", "--mn", mn, "--cn", cn, "--mn-addr", C)["flows"]
    by_dir = {f["direction"]: f for f in flows}
    assert sorted(by_dir) == ["downlink", "uplink"]
    up, down = by_dir["uplink"], by_dir["downlink"]
    rx = down["retransmissions"]
    # The one resend is all there is, whether the copies pair or not.
    assert (up["retransmissions"]["total"], rx["method"], rx["total"], rx["normal"]) == (0, "two-sided", 1, 1)
    assert (up["tcp"]["data_matched"], down["tcp"]["data_matched"]) == ((1, 10) if syns else (0, 0))


def test_ipv4_total_length_below_its_header_length_is_malformed(tmp_path):
    bad = bytearray(udp_packet(C, 5004, S, 6000, b"x" * 40, ip_id=77))
    bad[2:4] = struct.pack("!H", 10)  # total length 10, header 20
    path = write(tmp_path, "short.pcap", exchange() + [(1.0, bytes(bad))])
    rep = cellperf_json("analyze", path)
    assert [f["proto"] for f in rep["flows"]] == ["tcp"]
    assert rep["captures"][0]["counts"]["malformed"] == 1


@pytest.mark.parametrize("version,message", [((1, 0), "archaic pcap file format"),
                                             ((3, 0), "unsupported pcap file version 3.0"),
                                             ((2, 5), "unsupported pcap file version 2.5")])
def test_pcap_versions_libpcap_refuses_are_refused(tmp_path, version, message):
    data = bytearray(Pcap(records=exchange()).to_bytes())
    data[4:8] = struct.pack("<HH", *version)
    path = tmp_path / "old.pcap"
    path.write_bytes(bytes(data))
    err = one_line_error(path)
    assert str(path) in err and message in err


def test_pcapng_of_another_major_version_is_refused(tmp_path):
    data = bytearray(pcapng(exchange()))
    data[12:14] = struct.pack("<H", 2)
    path = tmp_path / "v2.pcapng"
    path.write_bytes(bytes(data))
    err = one_line_error(path)
    assert str(path) in err and "unsupported pcapng version 2.0" in err


def test_damage_is_reported_at_the_damaged_block_and_says_why(tmp_path):
    good = pcapng(exchange())
    # The section header's length says 52 (it is 28): the damage is at byte 0, not at the
    # "block" its wrong length would make start at byte 52.
    path = tmp_path / "shblen.pcapng"
    path.write_bytes(good[:4] + struct.pack("<I", 52) + good[8:])
    err = one_line_error(path)
    assert "byte 0:" in err and "section header" in err and "byte 52" not in err
    # An enhanced packet block whose captured length exceeds the block.
    head = len(pcapng([]))
    first_len = struct.unpack("<I", good[head + 4:head + 8])[0]
    epb = bytearray(good[head:head + first_len])
    epb[20:24] = struct.pack("<I", 5000)
    path = tmp_path / "caplen.pcapng"
    path.write_bytes(good[:head] + bytes(epb) + good[head + first_len:])
    err = one_line_error(path)
    assert f"byte {head}:" in err and "captured length 5000 exceeds" in err
    # A pcap record whose captured length exceeds what the file holds, and one beyond any
    # snapshot length.
    pc = Pcap(records=exchange()).to_bytes()
    for caplen, says in ((5000, "captured length 5000 exceeds the"), (10**8, "captured length 100000000 exceeds")):
        path = tmp_path / f"rec{caplen}.pcap"
        path.write_bytes(pc[:24 + 8] + struct.pack("<I", caplen) + pc[24 + 12:])
        err = one_line_error(path)
        assert "byte 24:" in err and says in err


def test_a_resent_syn_with_data_is_no_retransmission_with_two_captures(tmp_path):
    # TCP Fast Open: the client's SYN with 50 bytes is lost after the MN's capture and sent
    # again 1 s later; then 4 segments of 100 bytes, each ACKed. The CN's clock is 3 s ahead.
    mn, cn = Pcap(), Pcap()
    recs = exchange(t0=1.0, syn_data=b"s" * 50)
    syn = recs[0][1]
    mn.add(0.0, syn[:4] + struct.pack("!H", 900) + syn[6:])  # the first SYN: at the MN only
    for t, pkt in recs:
        from_client = pkt[12:16] == bytes([10, 1, 0, 1])
        here, there = (mn, cn) if from_client else (cn, mn)
        far = bytearray(pkt)
        far[8] = 60  # TTL at the far capture (checksums are not checked)
        here.add(t + (0 if from_client else 3.0), pkt)
        there.add(t + 0.005 + (3.0 if from_client else 0), bytes(far))
    for p in (mn, cn):
        p.records.sort(key=lambda r: r[0])
    flows = cellperf_json("analyze", "--mn", mn.write(tmp_path / "mn.pcap"), "--cn", cn.write(tmp_path / "cn.pcap"))["flows"]
    f = next(f for f in flows if f["sport"] == 40000)
    rx = f["retransmissions"]
    assert (rx["method"], rx["syn"], rx["total"]) == ("two-sided", 1, 0)
    assert f["tcp"]["unique_bytes"] == 450
