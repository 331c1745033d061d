"""Crafts small pcap files of raw IPv4 TCP/UDP packets with exactly the events a test needs."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08


def _checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _ip(src: str, dst: str, proto: int, payload: bytes, ip_id: int, ttl: int, frag: int = 0x4000) -> bytes:
    """An IPv4 packet; `frag` is the flags-and-offset field (DF by default)."""
    a = bytes(int(x) for x in src.split("."))
    b = bytes(int(x) for x in dst.split("."))
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ip_id, frag, ttl, proto, 0, a, b)
    hdr = hdr[:10] + struct.pack("!H", _checksum(hdr)) + hdr[12:]
    return hdr + payload


def ip_fragments(src, dst, proto: int, payload: bytes, *, ip_id: int, mtu: int = 1500, ttl: int = 64) -> list[bytes]:
    """`payload` (a whole UDP or TCP datagram) as IPv4 fragments of at most `mtu` bytes."""
    step = (mtu - 20) // 8 * 8
    out = []
    for off in range(0, len(payload), step):
        more = off + step < len(payload)
        out.append(_ip(src, dst, proto, payload[off:off + step], ip_id, ttl, (0x2000 if more else 0) | off // 8))
    return out


def udp_datagram(sport, dport, payload: bytes) -> bytes:
    """A UDP header and payload (checksum 0: none)."""
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def ethernet(ip_packet: bytes, fcs: bool = False) -> bytes:
    """An Ethernet II frame around an IPv4 packet, with a 4-byte FCS when asked."""
    frame = b"\x02\0\0\0\0\x01" + b"\x02\0\0\0\0\x02" + b"\x08\x00" + ip_packet
    return frame + (struct.pack("<I", 0xDEADBEEF) if fcs else b"")


def tcp_packet(src, sport, dst, dport, seq, ack, flags, *, data=b"", ip_id=0, ttl=64, window=1000,
               ts=None, sack=()) -> bytes:
    opts = b""
    if ts is not None:
        opts += struct.pack("!BBBBII", 1, 1, 8, 10, ts[0], ts[1])
    if sack:
        opts += struct.pack("!BBBB", 1, 1, 5, 2 + 8 * len(sack)) + b"".join(struct.pack("!II", l, r) for l, r in sack)
    off = (20 + len(opts)) // 4
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, window, 0, 0) + opts + data
    return _ip(src, dst, 6, tcp, ip_id, ttl)


def udp_packet(src, sport, dst, dport, payload: bytes, *, ip_id=0, ttl=64) -> bytes:
    return _ip(src, dst, 17, udp_datagram(sport, dport, payload), ip_id, ttl)


@dataclass
class Pcap:
    """Records (time in seconds, frame bytes); written with nanosecond stamps and the
    link-type field `linktype` (LINKTYPE_RAW: raw IP packets)."""

    records: list[tuple[float, bytes]] = field(default_factory=list)
    linktype: int = 101

    def add(self, t: float, pkt: bytes) -> None:
        self.records.append((t, pkt))

    def to_bytes(self) -> bytes:
        out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, self.linktype)]
        for t, pkt in self.records:
            sec = int(t)
            ns = round((t - sec) * 1e9)
            out.append(struct.pack("<IIII", sec, ns, len(pkt), len(pkt)) + pkt)
        return b"".join(out)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.to_bytes())
        return path


def _ng_block(kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", kind, n) + body + struct.pack("<I", n)


def pcapng(records: list[tuple[float, bytes]], linktype: int = 101) -> bytes:
    """A pcapng file: one section, one interface (microseconds), an enhanced packet block
    per record."""
    out = [_ng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
           _ng_block(1, struct.pack("<HHI", linktype, 0, 65535))]
    for t, pkt in records:
        us = round(t * 1e6)
        out.append(_ng_block(6, struct.pack("<IIIII", 0, us >> 32, us & 0xFFFFFFFF, len(pkt), len(pkt)) + pkt))
    return b"".join(out)


class TcpRun:
    """A downlink TCP connection CN:80 → MN:40000 captured at both ends.

    Every call says when a packet left and when (if ever) it reached the far capture; the
    CN's clock runs `skew` seconds ahead of the MN's, and each router hop lowers the TTL.
    """

    MN, CN = "10.0.0.2", "192.0.2.7"

    def __init__(self, skew: float = 3.0, *, ports: tuple[int, int] = (80, 40000), into: TcpRun | None = None):
        """`ports` = (CN's, MN's); `into` another run whose captures this connection shares."""
        self.mn, self.cn = (into.mn, into.cn) if into else (Pcap(), Pcap())
        self.skew = skew
        self.cport, self.mport = ports
        self.ids = {"mn": 100 + 20000 * (into is not None), "cn": 5000 + 20000 * (into is not None)}

    def _next_id(self, who: str) -> int:
        self.ids[who] += 1
        return self.ids[who]

    def data(self, t_sent: float, seq: int, length: int, t_arrive: float | None):
        pkt = lambda ttl: tcp_packet(self.CN, self.cport, self.MN, self.mport, seq, 1, ACK | PSH, data=b"x" * length,  # noqa: E731
                                     ip_id=ident, ttl=ttl)
        ident = self._next_id("cn")
        self.cn.add(t_sent + self.skew, pkt(64))
        if t_arrive is not None:
            self.mn.add(t_arrive, pkt(60))

    def ack(self, t_sent: float, ack: int, t_arrive: float | None, sack=()):
        ident = self._next_id("mn")
        pkt = lambda ttl: tcp_packet(self.MN, self.mport, self.CN, self.cport, 1, ack, ACK, ip_id=ident, ttl=ttl, sack=sack)  # noqa: E731
        self.mn.add(t_sent, pkt(64))
        if t_arrive is not None:
            self.cn.add(t_arrive + self.skew, pkt(60))

    def write(self, folder: Path) -> tuple[Path, Path]:
        for p in (self.mn, self.cn):
            p.records.sort(key=lambda r: r[0])
        return self.mn.write(folder / "mn.pcap"), self.cn.write(folder / "cn.pcap")
