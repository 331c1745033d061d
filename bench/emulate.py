#!/usr/bin/env python3
"""Benchmark of `cellperf emulate` (issue 3): sustained forwarding and release accuracy.

Measured in one run on this machine:
  1. TCP and UDP through an emulated link with no rate limit (10 Gb/s constant, unbounded
     queue): Mb/s, packets/s, CPU seconds per second of each direction's thread;
  2. the same iperf3 runs over a veth pair between two namespaces (the kernel forwarding
     by itself, the peer) and the ratio emulator / veth;
  3. release-time error (write time − due time from the model) percentiles at 100 Mb/s.
Targets: ≥ 1 Gb/s of 1500-byte packets; p99 release error ≤ 0.2 ms at 100 Mb/s.

    sudo .venv/bin/python bench/emulate.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CELLPERF = str(Path(sys.executable).parent / "cellperf")
PORT = 5399


def iperf3_args(udp: bool, seconds: int, host: str) -> list[str]:
    args = ["iperf3", "-c", host, "-p", str(PORT), "-t", str(seconds), "-J"]
    return args + (["-u", "-b", "0", "-l", "1472"] if udp else [])


def emulated(udp: bool, seconds: int, rate: str) -> tuple[dict, dict]:
    cmd = " ".join(iperf3_args(udp, seconds, "$CELLPERF_CN"))
    out = subprocess.run([CELLPERF, "emulate", "--downlink", rate, "--uplink", rate, "--json", "--", "sh", "-c", f"{cmd} > /tmp/cellperf-bench-iperf.json"],
                         capture_output=True, text=True, check=True)
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    return json.loads(Path("/tmp/cellperf-bench-iperf.json").read_text()), stats


def veth(udp: bool, seconds: int) -> dict:
    ns = f"cpbench{os.getpid()}"
    sh = lambda *a: subprocess.run(a, check=True, capture_output=True)
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", f"vb{os.getpid()}h", "type", "veth", "peer", "name", f"vb{os.getpid()}n")
        sh("ip", "link", "set", f"vb{os.getpid()}n", "netns", ns)
        sh("ip", "addr", "add", "10.232.0.1/30", "dev", f"vb{os.getpid()}h")
        sh("ip", "link", "set", f"vb{os.getpid()}h", "up")
        sh("ip", "-n", ns, "addr", "add", "10.232.0.2/30", "dev", f"vb{os.getpid()}n")
        sh("ip", "-n", ns, "link", "set", f"vb{os.getpid()}n", "up")
        out = subprocess.run(["ip", "netns", "exec", ns, *iperf3_args(udp, seconds, "10.232.0.1")], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)
    finally:
        subprocess.run(["ip", "link", "del", f"vb{os.getpid()}h"], capture_output=True)
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def rate_of(doc: dict, udp: bool) -> float:
    """Received rate: TCP's receiver sum; UDP's sent rate less the loss the server saw."""
    end = doc["end"]
    if udp:
        return end["sum"]["bits_per_second"] * (1 - end["sum"]["lost_percent"] / 100)
    return end["sum_received"]["bits_per_second"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=10)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/emulate.py needs root (namespaces)")
    server = subprocess.Popen(["iperf3", "-s", "-p", str(PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        print(f"{'test':<34}{'Mb/s':>9}{'pkt/s':>10}{'CPU up':>8}{'CPU down':>9}{'veth Mb/s':>11}{'ratio':>7}")
        for udp in (False, True):
            doc, stats = emulated(udp, a.seconds, "10gbit")
            peer = veth(udp, a.seconds)
            d = stats["duration_s"]
            # Forwarded rate as the emulator counted it (iperf3's UDP client reports what it sent).
            mbps = (stats["uplink"]["bytes_out"] + stats["downlink"]["bytes_out"]) * 8 / d / 1e6 if udp else rate_of(doc, udp) / 1e6
            peer_mbps = rate_of(peer, udp) / 1e6
            pps = (stats["uplink"]["packets_out"] + stats["downlink"]["packets_out"]) / d
            name = "UDP 1472 B, unlimited link" if udp else "TCP, unlimited link"
            print(f"{name:<34}{mbps:>9.0f}{pps:>10.0f}{stats['uplink']['cpu_s'] / d:>8.2f}{stats['downlink']['cpu_s'] / d:>9.2f}"
                  f"{peer_mbps:>11.0f}{mbps / peer_mbps:>7.2f}")
            print(f"{'':<34}target ≥ 1000 Mb/s: {'met' if mbps >= 1000 else 'NOT met'}; "
                  f"vs the issue's 1700 Mb/s bare TUN copy loop: {mbps / 1700:.2f}")
        # Release accuracy at 100 Mb/s: UDP at 90 Mb/s through a 100 Mb/s link.
        cmd = f"iperf3 -c $CELLPERF_CN -p {PORT} -u -b 90M -l 1472 -t {a.seconds} > /dev/null"
        out = subprocess.run([CELLPERF, "emulate", "--downlink", "100mbit", "--uplink", "100mbit", "--json", "--", "sh", "-c", cmd],
                             capture_output=True, text=True, check=True)
        st = json.loads(out.stdout.strip().splitlines()[-1])["uplink"]
        p50, p90, p99, p999, mx = st["release_error_us"]
        print(f"release error at 100 Mb/s ({st['packets_out']} packets): p50 {p50:.0f} us, p90 {p90:.0f} us, "
              f"p99 {p99:.0f} us, p99.9 {p999:.0f} us, max {mx:.0f} us; target p99 ≤ 200 us: {'met' if p99 <= 200 else 'NOT met'}")
        print("mahimahi: not built here (no peer ratio).")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
