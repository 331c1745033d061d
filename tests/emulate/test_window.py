"""`--window` is the receive window the seeds set (000 Table 4.1b, 004's RWIN), not Linux's
doubled socket buffer: a 64K download through a slow link advertises 64 KB, so it never
overflows a 64 KB bottleneck queue, and a 2 KB-larger queue is all it takes."""

from __future__ import annotations

import json
import struct

import pytest

from tests.agents.conftest import CELLPERF, Server
from tests.emulate.conftest import emulate, read_pcap

pytestmark = pytest.mark.netns


def advertised_windows(pcap, control_port: int) -> list[int]:
    """The receive window (scaled) of every TCP segment the MN sent on the test's data
    connection (the server's port other than `control_port` that the MN sent most segments
    to), from its capture (raw IPv4 records): the window-scale shift is its SYN's."""
    shifts, windows, client = {}, {}, None
    for _, pkt in read_pcap(pcap):
        ihl = (pkt[0] & 0x0F) * 4
        if pkt[9] != 6:
            continue
        tcp = pkt[ihl:]
        dport, flags, window = struct.unpack_from("!H", tcp, 2)[0], tcp[13], struct.unpack_from("!H", tcp, 14)[0]
        if client is None and flags & 0x12 == 0x02:
            client = pkt[12:16]  # the MN opens the connections: its first SYN names it
        if dport == control_port or pkt[12:16] != client:
            continue
        if flags & 0x02:  # SYN: find the window-scale option
            opts, i = tcp[20:(tcp[12] >> 4) * 4], 0
            while i < len(opts) and opts[i] != 0:
                if opts[i] == 1:
                    i += 1
                    continue
                if opts[i] == 3:
                    shifts[dport] = opts[i + 2]
                i += opts[i + 1]
            continue
        windows.setdefault(dport, []).append(window)
    if not windows:
        return []
    data_port = max(windows, key=lambda p: len(windows[p]))
    return [w << shifts.get(data_port, 0) for w in windows[data_port]]


def test_a_64k_window_advertises_64_kb_and_never_overflows_a_64_kb_queue(tmp_path):
    server = Server(tmp_path, listen="0.0.0.0:0")
    try:
        port = int(server.address.rsplit(":", 1)[1])
        p = emulate("--downlink", "2mbit", "--uplink", "2mbit", "--delay", "25", "--queue", "bytes=66000",
                    "--pcap-dir", str(tmp_path), "--json", "--",
                    *CELLPERF, "probe", f"$CELLPERF_CN:{port}", "--token-file", str(server.token_file),
                    "-t", "tcp-bulk", "--direction", "down", "--duration", "4", "--window", "64K", "--json")
    finally:
        server.stop()
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    stats = json.loads(lines[-1])
    windows = advertised_windows(tmp_path / "mn.pcap", port)
    assert len(windows) > 300  # 4 s at 2 Mb/s: ~700 segments, an ACK for every one or two
    # Without the clamp Linux advertises 80-116 KB for a 64 KB buffer; the kernel resets the
    # clamp now and then, and the receiver puts it back after its next read.
    over = [w for w in windows if w > 65536]
    assert len(over) <= len(windows) // 100, sorted(over)[-5:]
    assert max(windows) >= 60000  # the window opens to what was asked
    # 64 KB of payload in flight plus headers fits a 66,000-byte queue: nothing dropped.
    assert stats["downlink"]["dropped_packets"] == 0, stats
