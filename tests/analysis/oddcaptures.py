"""Generates a corpus of odd capture files: every link type and file variant cellperf
reads, the shapes that public test captures have (FCS bits in the link-type field, data on
a SYN, fragments, frames captured twice, a capture begun mid-connection), and damaged ones
(cut at every kind of boundary, wrong lengths, mutated bytes, not a capture at all).

    python -m tests.analysis.oddcaptures DIR     # writes DIR/*.pcap* and DIR/manifest.json

Each file has an expectation: "ok" (cellperf analyses it, exit 0), "refused" (one line,
exit 1) or "either" (damaged at random: one of the two, never anything else), and whether
its frame counts are comparable with tshark's (well-formed files only).
"""

from __future__ import annotations

import json
import random
import struct
import sys
from pathlib import Path

from tests.analysis.pcapcraft import (ACK, FIN, PSH, SYN, Pcap, _ng_block, ethernet, ip_fragments, pcapng,
                                      tcp_packet, udp_datagram, udp_packet)

C, S = "10.1.0.1", "10.2.0.2"


def connection(t0: float = 0.0, *, syn_data: bytes = b"", segments: int = 6, size: int = 200,
               isn: int = 1000) -> list[tuple[float, bytes]]:
    """A client → server TCP connection with data both ways, as raw IPv4 packets."""
    ids = iter(range(1, 100_000))
    out = [(t0, tcp_packet(C, 40000, S, 80, isn, 0, SYN, data=syn_data, ip_id=next(ids))),
           (t0 + 0.01, tcp_packet(S, 80, C, 40000, 7000, isn + 1 + len(syn_data), SYN | ACK, ip_id=next(ids)))]
    cseq, sseq, t = (isn + 1 + len(syn_data)) & 0xFFFFFFFF, 7001, t0 + 0.02
    for _ in range(segments):
        out.append((t, tcp_packet(C, 40000, S, 80, cseq, sseq, ACK | PSH, data=b"q" * size, ip_id=next(ids))))
        cseq = (cseq + size) & 0xFFFFFFFF
        out.append((t + 0.01, tcp_packet(S, 80, C, 40000, sseq, cseq, ACK | PSH, data=b"r" * size, ip_id=next(ids))))
        sseq += size
        t += 0.02
    out.append((t, tcp_packet(C, 40000, S, 80, cseq, sseq, FIN | ACK, ip_id=next(ids))))
    out.append((t + 0.01, tcp_packet(S, 80, C, 40000, sseq, cseq + 1, FIN | ACK, ip_id=next(ids))))
    return out


def udp_stream(n: int = 20) -> list[tuple[float, bytes]]:
    return [(0.5 + i * 0.02, udp_packet(C, 5004, S, 6000, struct.pack("!I", i) * 40, ip_id=500 + i)) for i in range(n)]


def ipv6_udp(n: int = 10) -> list[tuple[float, bytes]]:
    src, dst = bytes(15) + b"\x01", b"\x20\x01\x0d\xb8" + bytes(11) + b"\x02"
    out = []
    for i in range(n):
        udp = udp_datagram(5004, 6000, bytes([i]) * 100)
        out.append((i * 0.01, struct.pack("!IHBB", 0x60000000, len(udp), 17, 64) + src + dst + udp))
    return out


def _pcap(records, linktype=101, *, big=False, micro=False, snaplen=65535, wrap=lambda p: p) -> bytes:
    e = ">" if big else "<"
    magic = 0xA1B2C3D4 if micro else 0xA1B23C4D
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for t, pkt in records:
        frame = wrap(pkt)
        sec = int(t)
        frac = round((t - sec) * (1e6 if micro else 1e9))
        cap = frame[:snaplen]
        out.append(struct.pack(e + "IIII", sec, frac, len(cap), len(frame)) + cap)
    return b"".join(out)


def _links() -> dict[str, tuple[int, object]]:
    """Link types and how each wraps a raw IPv4 packet."""
    vlan = lambda p: ethernet(p)[:12] + b"\x81\x00\x00\x05" + ethernet(p)[12:]  # noqa: E731
    qinq = lambda p: ethernet(p)[:12] + b"\x88\xa8\x00\x01\x81\x00\x00\x05" + ethernet(p)[12:]  # noqa: E731
    return {
        "ethernet": (1, ethernet),
        "ethernet-vlan": (1, vlan),
        "ethernet-qinq": (1, qinq),
        "ethernet-fcs": (0x30000001, lambda p: ethernet(p, fcs=True)),
        "null-le": (0, lambda p: struct.pack("<I", 2) + p),
        "null-be": (0, lambda p: struct.pack(">I", 2) + p),
        "loop": (108, lambda p: struct.pack(">I", 2) + p),
        "sll": (113, lambda p: struct.pack(">HHH8sH", 0, 1, 6, b"\x02" * 8, 0x0800) + p),
        "sll2": (276, lambda p: struct.pack(">HHIHBB8s", 0x0800, 0, 1, 1, 0, 6, b"\x02" * 8) + p),
        "raw": (101, lambda p: p),
        "raw-bsd12": (12, lambda p: p),
        "ipv4": (228, lambda p: p),
    }


def generate(folder: Path, seed: int = 17) -> list[dict]:
    """Writes the corpus into `folder`; returns its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    manifest: list[dict] = []

    def add(name: str, data: bytes, expect: str, tshark: bool = False) -> None:
        (folder / name).write_bytes(data)
        manifest.append({"file": name, "expect": expect, "tshark": tshark})

    base = sorted(connection() + udp_stream(), key=lambda r: r[0])
    for name, (lt, wrap) in _links().items():
        add(f"link-{name}.pcap", _pcap(base, lt, wrap=wrap), "ok", tshark=True)
    add("ipv6.pcap", _pcap(ipv6_udp(), 229), "ok", tshark=True)
    add("big-endian-us.pcap", _pcap(base, big=True, micro=True), "ok", tshark=True)
    add("snaplen-54.pcap", _pcap(base, 1, wrap=ethernet, snaplen=54), "ok", tshark=True)
    add("snaplen-20.pcap", _pcap(base, snaplen=20), "refused")  # no TCP/UDP header captured
    add("pcapng.pcapng", pcapng(base), "ok", tshark=True)
    add("pcapng-two-sections.pcapng", pcapng(base[:10]) + pcapng(base[10:]), "ok", tshark=True)
    add("syn-data.pcap", _pcap(connection(syn_data=b"tfo" * 20)), "ok", tshark=True)
    add("seq-wrap.pcap", _pcap(connection(isn=0xFFFFFF00, segments=10)), "ok", tshark=True)
    frags = []
    for i in range(8):
        parts = ip_fragments(C, S, 17, udp_datagram(5004, 6000, bytes([i]) * 4000), ip_id=900 + i)
        if i % 2:
            parts.reverse()  # later fragments first
        frags += [(i * 0.05 + k * 1e-4, p) for k, p in enumerate(parts)]
    add("fragments.pcap", _pcap(frags), "ok", tshark=True)
    dup = sorted(base + [(t + 3e-6, p) for t, p in base[::3]], key=lambda r: r[0])
    add("duplicates.pcap", _pcap(dup), "ok", tshark=True)
    add("mid-connection.pcap", _pcap(connection()[5:]), "ok", tshark=True)
    odd_ip = [(0.0, tcp_packet(C, 1, S, 2, 5, 0, SYN)[:2] + b"\0\0" + tcp_packet(C, 1, S, 2, 5, 0, SYN)[4:])]
    add("ip-length-zero.pcap", _pcap(odd_ip + base), "ok")

    # Not captures, or captures with nothing cellperf can read.
    add("empty.pcap", b"", "refused")
    add("text.pcap", b"this is not a capture\n" * 10, "refused")
    add("header-only.pcap", _pcap([]), "refused")
    add("kuznetzov.pcap", struct.pack("<I", 0xA1B2CD34) + bytes(40), "refused")
    add("unsupported-link.pcap", _pcap(base, 147), "refused")
    add("pcapng-link-147.pcapng", pcapng(base, linktype=147), "refused")
    add("arp-only.pcap", _pcap([(0.0, b"\xff" * 12 + b"\x08\x06" + bytes(28))], 1), "refused")
    good = _pcap(base)
    add("cut-in-first-record.pcap", good[:24 + 16 + 7], "refused")
    add("cut-in-file-header.pcap", good[:13], "refused")
    ng = pcapng(base)
    add("pcapng-bad-section-header.pcapng", ng[:8] + b"\x01\x02\x03\x04" + ng[12:], "refused")

    # Damaged part-way: what comes before the damage is analysed, with a warning.
    for cut in (24 + 16 + 3, len(good) // 3, len(good) - 5):
        add(f"cut-at-{cut}.pcap", good[:cut], "either")
    for cut in (len(ng) // 2, len(ng) - 2):
        add(f"pcapng-cut-at-{cut}.pcapng", ng[:cut], "either")
    huge = bytearray(good)
    struct.pack_into("<I", huge, 24 + 16 + len(base[0][1]) + 8, 0x7FFFFFFF)  # second record's caplen
    add("caplen-huge.pcap", bytes(huge), "ok")
    blk = bytearray(ng)
    struct.pack_into("<I", blk, len(pcapng([])) + 4, 0xFFFFFFF0)  # first packet block's length
    add("pcapng-block-length.pcapng", bytes(blk) + b"\x5a" * 100_000, "either")
    add("pcapng-unknown-block.pcapng", ng + _ng_block(0x0BAD, b"x" * 40) + pcapng(base)[len(pcapng([])):], "ok")
    for i in range(30):
        b = bytearray(rng.choice([good, ng]))
        for _ in range(rng.randint(1, 12)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        add(f"mutant-{i:02d}.{'pcapng' if b[:4] == ng[:4] else 'pcap'}", bytes(b), "either")
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(f"{len(generate(Path(sys.argv[1])))} captures written to {sys.argv[1]}")
