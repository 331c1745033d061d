"""Benchmark: cellperf's agents against iperf3 on the same loopback path, in one run.

Prints, for each tool: maximum UDP and TCP throughput, CPU seconds per Gbit moved (client
plus server), and cellperf's CBR send-time error at 1000 packets/s (p50/p99), then the
ratios cellperf / iperf3. Targets (issue 4): throughput ≥ iperf3's; CBR p99 ≤ 50 µs.

    .venv/bin/python bench/agents.py [--duration 5]

iperf3 reports no send-time error of its own; the CBR row is cellperf's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cellperf.agents import run_probe

TOKEN = b"bench-token"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def iperf3_run(args: list[str], duration: float) -> tuple[float, float]:
    """(bit/s at the receiver, CPU s of client + server)."""
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    s0 = proc_cpu_s(server.pid)
    client = subprocess.Popen(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(duration), "-J", *args],
                              stdout=subprocess.PIPE, text=True)
    out, _ = client.communicate()
    s1 = proc_cpu_s(server.pid) if server.poll() is None else s0
    server.wait(timeout=10)
    doc = json.loads(out)
    end = doc["end"]
    bps = end["sum"]["bits_per_second"] if "-u" in args else end["sum_received"]["bits_per_second"]
    cpu_client = doc["end"]["cpu_utilization_percent"]["host_total"] / 100 * duration
    return bps, cpu_client + (s1 - s0)


def cellperf_run(address: str, server_pid: int, test: str, options: dict) -> tuple[dict, float]:
    """(result document, CPU s of probe + server)."""
    s0, c0 = proc_cpu_s(server_pid), self_cpu_s()
    r = run_probe(address, TOKEN, test, options)
    cpu = (self_cpu_s() - c0) + (proc_cpu_s(server_pid) - s0)
    if r.error:
        sys.exit(f"bench/agents.py: cellperf {test}: {r.error}")
    return r.document, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    a = ap.parse_args()
    if shutil.which("iperf3") is None:
        sys.exit("bench/agents.py: iperf3 not installed (apt-get install iperf3)")
    d = a.duration
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "token"
        tok.write_bytes(TOKEN)
        cellperf = str(Path(sys.executable).parent / "cellperf")
        srv = subprocess.Popen([cellperf, "server", "--listen", "127.0.0.1:0", "--token-file", str(tok), "--json",
                                "--max-rate", "1000G", "--max-duration", "600"], stdout=subprocess.PIPE, text=True)
        address = json.loads(srv.stdout.readline())["listening"]
        try:
            rows = []
            # UDP at full speed: 1460 B payload, a rate no host reaches, for `d` seconds.
            ip_udp, ip_udp_cpu = iperf3_run(["-u", "-b", "0", "-l", "1460"], d)
            cp, cp_cpu = cellperf_run(address, srv.pid, "udp-cbr", {"rate_bps": 40e9, "duration_s": d, "timeout_s": 1.0})
            cp_udp = cp["throughput_bps"]
            rows.append(("UDP max throughput (Gbit/s)", cp_udp / 1e9, ip_udp / 1e9))
            rows.append(("UDP CPU s per Gbit", cp_cpu / (cp_udp * d / 1e9), ip_udp_cpu / (ip_udp * d / 1e9)))
            rows.append(("UDP loss at max rate", cp["loss_rate"], None))
            ip_tcp, ip_tcp_cpu = iperf3_run([], d)
            cp, cp_cpu = cellperf_run(address, srv.pid, "tcp-bulk", {"duration_s": d})
            cp_tcp = cp["throughput_bps"]
            rows.append(("TCP max throughput (Gbit/s)", cp_tcp / 1e9, ip_tcp / 1e9))
            rows.append(("TCP CPU s per Gbit", cp_cpu / (cp_tcp * d / 1e9), ip_tcp_cpu / (ip_tcp * d / 1e9)))
            # CBR at 1000 packets/s: lateness of each send against its absolute deadline.
            cp, _ = cellperf_run(address, srv.pid, "udp-cbr", {"rate_bps": 1460 * 8 * 1000, "duration_s": d})
            lat = cp["send_lateness_us"]
            rows.append(("CBR 1k pkt/s send error p50 (µs)", lat["median"], None))
            rows.append(("CBR 1k pkt/s send error p99 (µs)", lat["p99"], None))
        finally:
            srv.terminate()
            srv.wait(timeout=10)
    print(f"{'metric':38} {'cellperf':>10} {'iperf3':>10} {'ratio':>8}")
    for name, ours, theirs in rows:
        ratio = f"{ours / theirs:8.2f}" if theirs else f"{'-':>8}"
        print(f"{name:38} {ours:10.4g} {'-' if theirs is None else format(theirs, '10.4g'):>10} {ratio}")


if __name__ == "__main__":
    main()
