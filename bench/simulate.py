"""Virtual-time speed of `cellperf simulate`, and ns-3 3.37 on an equivalent topology.

1. Seed 001's scenario (3 users, PF, two-state channel at 1 transition/s, 1000 s): wall time
   and simulated seconds per wall second (target: the 1000 s in under 1 s, >= 1000x real time).
2. 32 users on an LTE-like 1-ms slot (two-state 20/2 Mb/s channels, 1500-B packets, 100 s):
   simulated seconds per wall second, and user-slots per wall second beside run 1's (the work
   should scale with users x slots).
3. ns-3 3.37 (Debian's libns3-dev; installed and compiled here when root, else skipped with
   the reason): the same three flows (TCP NewReno, classic recovery, no SACK/timestamps, ACK per
   segment, min RTO 1 s, IW 1, ssthresh 16, 250-B packets, 10-packet BS queue) over two wired
   hops of 100 Mb/s / 10 ms and one link per user whose rate follows the two-state chain at a
   third of 1 Mb/s / 100 kb/s (each user's round-robin share of a busy cell), against
   `cellperf simulate --scheduler none` with the same channel: ratio of wall times and of
   goodputs (ns-3's payload goodput scaled to whole packets, as cellperf counts them); and a
   constant-rate run where both must agree to the PPP header (0.8 %).

Medians of 3 runs each. The machine may be shared: the load average is printed with the result.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cellperf.simulate import runner
from cellperf.simulate.scenario import build

HERE = Path(__file__).resolve().parent
NS3_SOURCE = HERE / "ns3" / "seed001_rr.cc"
NS3_LIBS = ["ns3-core", "ns3-network", "ns3-internet", "ns3-point-to-point", "ns3-applications", "ns3-traffic-control"]
REPEATS = 3


def timed_simulation(options: dict) -> tuple[float, float, dict]:
    """Median wall time and median CPU time of REPEATS runs, and the last outcome. On a shared
    host the CPU time is the one-core figure; the wall time also holds the waits for a core."""
    scenario = build(options)
    walls, cpus, outcome = [], [], None
    for _ in range(REPEATS):
        cpu = time.process_time()
        outcome = runner.run(scenario)
        cpus.append(time.process_time() - cpu)
        walls.append(outcome.wall_s)
    return statistics.median(walls), statistics.median(cpus), outcome.to_json()


def ns3_binary() -> tuple[Path | None, str]:
    """The compiled ns-3 peer (cached by source hash), or None and why not."""
    if shutil.which("pkg-config") is None or subprocess.run(["pkg-config", "--exists", "ns3-core"]).returncode:
        if os.geteuid() != 0:
            return None, "libns3-dev is not installed and installing it needs root"
        r = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "libns3-dev", "g++", "pkg-config"],
                           capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if r.returncode:
            return None, f"apt-get install libns3-dev failed: {r.stderr.strip().splitlines()[-1:]}"
    version = subprocess.run(["pkg-config", "--modversion", "ns3-core"], capture_output=True, text=True).stdout.strip()
    digest = hashlib.sha256(NS3_SOURCE.read_bytes()).hexdigest()[:12]
    binary = Path(tempfile.gettempdir()) / f"cellperf-bench-ns3-{version}-{digest}"
    if not binary.exists():
        cflags = subprocess.run(["pkg-config", "--cflags", "ns3-core"], capture_output=True, text=True).stdout.split()
        # The libraries by name: the .pc files also list libgsl.so, which only libgsl-dev ships.
        libs = [f"-l{name}" for name in NS3_LIBS]
        r = subprocess.run(["g++", "-O2", "-std=c++17", "-o", str(binary) + ".part", str(NS3_SOURCE), *cflags, *libs],
                           capture_output=True, text=True)
        if r.returncode:
            return None, f"compiling the ns-3 peer failed: {r.stderr.strip().splitlines()[-1:]}"
        os.replace(str(binary) + ".part", binary)
    return binary, f"ns-3 {version}"


def run_ns3(binary: Path, args: list[str]) -> tuple[float, list[float]]:
    """Median wall time and the per-flow payload goodputs (bit/s) of the last run."""
    walls, goodputs = [], []
    for _ in range(REPEATS):
        started = time.perf_counter()
        out = subprocess.run([str(binary), *args], capture_output=True, text=True, check=True).stdout
        walls.append(time.perf_counter() - started)
        goodputs = [float(line.split()[3]) for line in out.splitlines() if line.startswith("flow ")]
    return statistics.median(walls), goodputs


def main() -> None:
    print(f"bench/simulate.py (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; medians of {REPEATS})")
    seed001 = {"users": 3, "scheduler": "pf", "channel": ["ge:good=1mbit,bad=100kbit,switch=1"], "duration": 1000}
    wall, cpu, out = timed_simulation(seed001)
    slots_3 = 1000 * 600 * 3
    print(f"seed 001, 3 users, PF, 1000 s: {wall:.3f} s wall, {cpu:.3f} s CPU: {1000 / cpu:.0f} simulated s per CPU s "
          f"({'meets' if cpu < 1 else 'misses'} the < 1 s target), {slots_3 / cpu / 1e6:.1f} M user-slots/s")
    lte = {"users": 32, "scheduler": "pf", "slot": "1ms", "channel": ["ge:good=20mbit,bad=2mbit,switch=1,slot=1ms"],
           "packet": "1500", "queue": "packets=50", "duration": 100}
    wall32, cpu32, out32 = timed_simulation(lte)
    slots_32 = 100 * 1000 * 32
    total = sum(f["goodput_bps"] for f in out32["runs"][0]["flows"])
    print(f"32 users, 1-ms slot, PF, 100 s: {wall32:.3f} s wall, {cpu32:.3f} s CPU: {100 / cpu32:.0f} simulated s per "
          f"CPU s, {slots_32 / cpu32 / 1e6:.1f} M user-slots/s (cell goodput {total / 1e6:.1f} Mb/s)")

    binary, why = ns3_binary()
    if binary is None:
        print(f"ns-3 comparison skipped: {why}")
        return
    packet, payload = 250, 210
    for label, channel, ns3_args in (
        ("two-state 333/33 kb/s, 1 tr/s", "ge:good=333333bit,bad=33333bit,switch=1",
         ["--good=333333", "--bad=33333", "--switch=1"]),
        ("constant 183 kb/s", "183333bit", ["--good=183333", "--bad=183333"]),
    ):
        ours_wall, _, ours = timed_simulation({"users": 3, "scheduler": "none", "channel": [channel], "tcp": "newreno",
                                            "duration": 1000})
        ns3_wall, ns3_goodputs = run_ns3(binary, ["--duration=1000", *ns3_args])
        ours_g = statistics.mean(f["goodput_bps"] for f in ours["runs"][0]["flows"])
        # ns-3 counts payload bytes (packet − 40 B of headers); cellperf counts whole packets.
        ns3_g = statistics.mean(ns3_goodputs) * packet / payload
        print(f"vs {why}, {label}, 3 flows x 1000 s: cellperf {ours_wall:.3f} s, ns-3 {ns3_wall:.2f} s wall "
              f"(ns-3/cellperf {ns3_wall / ours_wall:.0f}x); goodput per flow cellperf {ours_g / 1e3:.1f}, "
              f"ns-3 {ns3_g / 1e3:.1f} kb/s (ratio {ours_g / ns3_g:.3f})")


if __name__ == "__main__":
    sys.exit(main())
