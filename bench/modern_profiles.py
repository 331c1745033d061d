#!/usr/bin/env python3
"""The LTE and NR profiles as shipped, measured through `cellperf emulate` (issue 30 §4).

1. TCP: for each profile, real pings (10, 0.2 s apart) on the idle link, then a 15-s iperf3
   download over one connection, or `--parallel N` (the host's default congestion control,
   net.ipv4.tcp_congestion_control: CUBIC unless the host chose another) with pings 0.2 s apart
   beside it, then a 10-s upload: goodput each way and the RTT idle and under the download's
   load, the downlink rate the link offered during the download (the radio log's mean: a
   two-state channel holds a state for seconds, so one 15-s download sees mostly one of them,
   and which one follows the seed, `--seed`), and a verdict per figure against the published
   range (PUBLISHED: 10th-90th percentile of per-second figures; "in", "low", "high", or "-"
   where no source has one).
2. Same profile, two clocks: a 30-s kernel Reno download through `cellperf emulate --profile P`
   and `cellperf simulate --profile P` on the same profile and seed, set to what the kernel does
   (1500-B packets, initial window 10, no initial ssthresh, min RTO 200 ms, delayed ACKs 40 ms:
   the settings of tests/emulate/test_simulate_crosscheck.py, the 3G-like cell's agreement
   test, whose bound is 15 %), once with the model's classic recovery and once with Linux's
   (`--recovery linux --byte-counting on --rto linux --rwnd 2200`: SACK, RACK, PRR, spurious
   timeouts undone, the kernel's window growth, RTO and in-flight limit).

    sudo .venv/bin/python bench/modern_profiles.py [--tcp-only | --agreement-only] [--profile P ...] [--seed N]
                                                   [--parallel N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CELLPERF = str(Path(sys.executable).parent / "cellperf")
PORT = 5401
TCP_PROFILES = ("lte-stationary", "lte-mobile", "nr-stationary", "nr-mobile", "nr-mmwave-stationary", "nr-mmwave-mobile")
AGREEMENT_PROFILES = ("lte-stationary", "lte-mobile", "nr-stationary", "nr-mmwave-stationary")
AGREEMENT_S, SEED = 30, 3
#: The simulator set to the kernel where it can be (tests/emulate/test_simulate_crosscheck.py).
KERNEL_LIKE = ("--users", "1", "--scheduler", "none", "--wired-hops", "0", "--packet", "1500", "--tcp", "reno",
               "--initial-window", "10", "--initial-ssthresh", "off", "--min-rto", "200ms", "--delayed-ack", "40ms")
CLASSIC = ()
#: Linux's recovery, growth and RTO, and its in-flight limit here: the sender's buffer (tcp_wmem's
#: 4 MB) held 1,300-2,800 segments unacknowledged, median ~2,150 (`ss -ti` every 0.5 s during a
#: 15-s nr-stationary download; docs/emulator.md "Same profile, two clocks").
LINUX = ("--recovery", "linux", "--byte-counting", "on", "--rto", "linux", "--rwnd", "2200")
G = "5Gophers 1.0 (Narayanan et al., WWW 2020: the paper's released data)"
M = "Ghoshal et al., 5G-MeMU 2022 (released data)"
#: The published ranges each profile is held to: 10th-90th percentile of the per-second figures
#: (Mb/s, ms) of the named files, read from the datasets as released (docs/emulator.md "LTE and
#: NR against published figures"). "down N" is N connections; the datasets have 1 and 8.
PUBLISHED = {
    "lte-stationary": {"rtt idle": (27.6, 89.3, f"{M}: static LTE pings")},
    "lte-mobile": {"rtt idle": (27.9, 41.9, f"{M}: driving LTE pings")},
    "nr-stationary": {"down 1": (9.9, 61.8, f"{G}: Sprint mid-band, 1 connection"),
                      "down 8": (172.4, 633.0, f"{G}: Sprint mid-band, 8 connections"),
                      "rtt idle": (21.3, 35.1, f"{G}: 5G pings to the first hop (the mmWave carriers': none for Sprint)")},
    "nr-mobile": {"down 8": (101.7, 481.4, f"{G}: Sprint while driving, 8 connections")},
    "nr-mmwave-stationary": {"down 1": (357.0, 440.0, f"{G}: mmWave line of sight, 1 connection"),
                             "down 8": (858.0, 2024.0, f"{G}: mmWave line of sight, 8 connections"),
                             "up": (38.3, 160.3, f"{M}: static mmWave uplink"),
                             "rtt idle": (11.6, 19.3, f"{M}: static 5G pings")},
    "nr-mmwave-mobile": {"down 8": (73.4, 807.0, f"{G}: walking, 8 connections (5G and its 4G fallback)"),
                         "up": (0.0, 124.6, f"{M}: walking mmWave uplink"),
                         "rtt idle": (11.8, 20.2, f"{M}: walking 5G pings")},
}
#: Figures with no distribution to hold a row to, printed beside the rows.
CITED = {
    "lte": "Huang et al., MobiSys 2012 (4GTest, >3000 users; abstract): median downlink 13 Mb/s, uplink 6 Mb/s",
}


def verdict(profile: str, measure: str, value: float) -> str:
    if measure not in PUBLISHED.get(profile, {}):
        return "-"
    low, high, _ = PUBLISHED[profile][measure]
    return "low" if value < low else "high" if value > high else "in"


def rtts_ms(text: str) -> list[float]:
    return [float(t) for t in re.findall(r"time=([0-9.]+) ms", text)]


class Iperf3Server:
    """iperf3 servers on PORT (downloads) and PORT + 1 (uploads): one server is still busy
    with a download's end for a moment after the client has its result."""

    def __enter__(self):
        self.procs = [subprocess.Popen(["iperf3", "-s", "-p", str(port)], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL) for port in (PORT, PORT + 1)]
        time.sleep(1.0)
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.terminate()
            proc.wait()


def emulate(profile: str, script: str, *options: str) -> None:
    p = subprocess.run([CELLPERF, "emulate", "--profile", profile, *options, "--", "sh", "-c", script],
                       capture_output=True, text=True, timeout=300)
    if p.returncode:
        raise SystemExit(f"cellperf emulate --profile {profile} failed: {p.stderr.strip()}")


def received_mbps(path: Path) -> float:
    doc = json.loads(path.read_text())
    if "error" in doc:
        raise SystemExit(f"iperf3 ({path.name}) failed: {doc['error']}")
    return doc["end"]["sum_received"]["bits_per_second"] / 1e6


def offered_mbps(radio_log: Path, download: Path) -> float:
    """The mean downlink rate the radio log shows over the download's seconds."""
    start = json.loads(download.read_text())["start"]["timestamp"]["timesecs"]
    rows = [line.split(",") for line in radio_log.read_text().splitlines()[1:]]
    rates = [float(r[4]) for r in rows if start <= float(r[0]) < start + 15]
    return statistics.mean(rates) / 1e6


def tcp_row(profile: str, seed: list[str], parallel: int) -> str:
    with tempfile.TemporaryDirectory() as tmp, Iperf3Server():
        out = Path(tmp)
        script = (f"ping -n -c 10 -i 0.2 $CELLPERF_CN > {out}/idle.txt; "
                  f"ping -n -c 70 -i 0.2 $CELLPERF_CN > {out}/loaded.txt & "
                  f"iperf3 -c $CELLPERF_CN -p {PORT} -R -P {parallel} -t 15 -J > {out}/down.json; wait; "
                  f"iperf3 -c $CELLPERF_CN -p {PORT + 1} -t 10 -J > {out}/up.json")
        emulate(profile, script, "--radio-log", f"{out}/radio.csv", *seed)
        down, up = (received_mbps(out / f"{d}.json") for d in ("down", "up"))
        offered = offered_mbps(out / "radio.csv", out / "down.json")
        idle, loaded = rtts_ms((out / "idle.txt").read_text()), rtts_ms((out / "loaded.txt").read_text())
    idle_ms = statistics.median(idle)
    verdicts = [verdict(profile, m, v) for m, v in ((f"down {parallel}", down), ("up", up), ("rtt idle", idle_ms))]
    return (f"{profile:<22}{parallel:>4}{offered:>9.1f}{down:>10.1f}{up:>8.1f}{idle_ms:>10.1f}"
            f"{statistics.median(loaded):>10.1f}{max(loaded):>9.0f}  " + " ".join(f"{v:>4}" for v in verdicts))


def agreement_row(profile: str) -> str:
    with tempfile.TemporaryDirectory() as tmp, Iperf3Server():
        out = Path(tmp) / "down.json"
        emulate(profile, f"iperf3 -c $CELLPERF_CN -p {PORT} -R -C reno -t {AGREEMENT_S} -J > {out}", "--seed", str(SEED))
        # iperf3 counts payload: 1448 of each 1500-B packet with timestamps on.
        kernel = json.loads(out.read_text())["end"]["sum_received"]["bits_per_second"] * 1500 / 1448
    cells = []
    for recovery in (CLASSIC, LINUX):
        sim = subprocess.run([CELLPERF, "simulate", "--profile", profile, *KERNEL_LIKE, *recovery,
                              "--duration", str(AGREEMENT_S), "--seed", str(SEED), "--json"],
                             capture_output=True, text=True, check=True)
        flow = json.loads(sim.stdout)["runs"][0]["flows"][0]
        ratio = flow["goodput_bps"] / kernel
        cells.append(f"{flow['goodput_bps'] / 1e6:>10.2f}{ratio:>7.3f}{'' if abs(ratio - 1) <= 0.15 else '!':<2}"
                     f"{flow['retransmissions']:>7}{flow['timeouts']:>4}/{flow.get('undone_timeouts', 0):<3}")
    return f"{profile:<22}{kernel / 1e6:>10.2f}" + "".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tcp-only", action="store_true")
    ap.add_argument("--agreement-only", action="store_true")
    ap.add_argument("--profile", action="append", help="only this profile (repeatable)")
    ap.add_argument("--seed", help="the emulator's seed for the TCP rows (the agreement rows use their own)")
    ap.add_argument("--parallel", type=int, default=1, metavar="N", help="TCP connections in the download (default 1)")
    a = ap.parse_args()
    if a.parallel < 1:
        ap.error("--parallel: at least 1 connection")
    wanted = (lambda p: p in a.profile) if a.profile else (lambda p: True)
    if os.geteuid() != 0:
        sys.exit("bench/modern_profiles.py needs root (namespaces)")
    print(f"load average {os.getloadavg()[0]:.2f} at the start; congestion control "
          f"{Path('/proc/sys/net/ipv4/tcp_congestion_control').read_text().strip()}")
    if not a.agreement_only:
        print(f"{'profile':<22}{'conn':>4}{'offered':>9}{'down Mb/s':>10}{'up Mb/s':>8}{'RTT idle':>10}{'RTT load':>10}"
              f"{'max ms':>9}  down   up  rtt  (against PUBLISHED)")
        for p in filter(wanted, TCP_PROFILES):
            print(tcp_row(p, ["--seed", a.seed] if a.seed else [], a.parallel), flush=True)
        for p in filter(wanted, TCP_PROFILES):
            for measure, (low, high, source) in PUBLISHED.get(p, {}).items():
                print(f"  {p} {measure}: {low:g}-{high:g} ({source})")
        for family, text in CITED.items():
            print(f"  {family}: {text}")
    if not a.tcp_only:
        print(f"Reno, {AGREEMENT_S} s: kernel (emulate) and model (simulate) goodput, Mb/s; the model's ratio to the "
              "kernel ('!' beyond 15 %), retransmissions, timeouts/undone; classic recovery, then Linux's")
        print(f"{'profile':<22}{'kernel':>10}" + f"{'classic':>10}{'ratio':>9}{'retx':>7}{'to/undo':>8}"
              + f"{'linux':>10}{'ratio':>9}{'retx':>7}{'to/undo':>8}")
        for p in filter(wanted, AGREEMENT_PROFILES):
            print(agreement_row(p), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
