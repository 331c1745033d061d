"""004 Fig. 1: pings initiated by the CN (`cn-ping-sweep`) beside the MN's (`ping-sweep`), on
real packets: the probe behind `cellperf emulate` (20 ms each way), the server on the host."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.agents.conftest import CELLPERF, Server, emulate_plain_link

pytestmark = pytest.mark.netns


def _probe_payloads(pcap, src: str) -> list[tuple[float, bytes]]:
    """(time, UDP payload) of the capture's datagrams from `src`."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "frame.time_epoch", "-e", "ip.src",
                          "-e", "udp.payload", "udp"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        t, ip, payload = line.split("\t")
        if ip == src and payload:
            rows.append((float(t), bytes.fromhex(payload.replace(":", ""))))
    return rows


def test_pings_from_the_cn_and_from_the_mn_through_the_emulator(tmp_path):
    """Both measure the 40-ms round trip. The CN's are the server's own times, and the CN's
    capture shows its requests leaving (CPF1 datagrams CN → MN) and the MN's echoes (CPE1)
    coming back, with the round trips the server reported."""
    server = Server(tmp_path, listen="0.0.0.0:0")
    port = server.address.rsplit(":", 1)[1]
    try:
        args = f"--sizes 100,1000 --count 10 --interval 0.05 --clock-samples 0 --token-file {server.token_file} --json"
        script = (f'{CELLPERF[0]} probe $CELLPERF_CN:{port} -t cn-ping-sweep {args} > {tmp_path}/cn.json && '
                  f'{CELLPERF[0]} probe $CELLPERF_CN:{port} -t ping-sweep {args} > {tmp_path}/mn.json')
        p = emulate_plain_link(20, tmp_path / "caps", script)
        assert p.returncode == 0, p.stderr
    finally:
        server.stop()
    stats = json.loads(p.stdout.strip().splitlines()[-1])
    cn_ip, mn_ip = stats["cn_addrs"][0], stats["mn_addrs"][0]
    from_cn = json.loads((tmp_path / "cn.json").read_text())
    from_mn = json.loads((tmp_path / "mn.json").read_text())
    assert from_cn["direction"] == "cn_echo" and from_mn["direction"] == "echo"
    for doc in (from_cn, from_mn):
        for row in doc["sweep"]:
            assert row["packets_sent"] == row["packets_received"] == 10
            # 40 ms of link, plus the ends' scheduling on a busy 2-core host.
            assert 40.0 <= row["rtt_ms"]["median"] < 60.0, row
    # The CN's capture: the first sweep's requests from the CN's address and the echoes to it
    # (the MN's own pings come later, as CPF1 from the MN).
    (cn_pcap,) = (tmp_path / "caps").glob("cn*.pcap")
    key = lambda d: (int.from_bytes(d[4:12], "big"), len(d))
    sent = {key(d): t for t, d in _probe_payloads(cn_pcap, cn_ip) if d[:4] == b"CPF1"}
    echoed = {key(d): t for t, d in _probe_payloads(cn_pcap, mn_ip) if d[:4] == b"CPE1" and key(d) in sent}
    assert len(sent) == len(echoed) == 20
    # The server's medians per size against the capture's (the server times its packets in
    # user space, the capture in the kernel: a few ms apart at most on a busy host).
    for size, row in zip((100, 1000), from_cn["sweep"]):
        rtts = sorted(1e3 * (echoed[k] - sent[k]) for k in sent if k[1] == size)
        assert abs((rtts[4] + rtts[5]) / 2 - row["rtt_ms"]["median"]) < 5.0, (size, rtts, row)
