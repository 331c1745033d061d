#!/usr/bin/env python3
"""Benchmark of `cellperf analyze` against tshark (TCP analysis fields) and `tcptrace -l`,
all measured in this run on the same real capture.

The capture is real kernel TCP (iperf3, downlink) through a tbf bottleneck between network
namespaces, taken by tcpdump at both ends with full packets (needs root); the same tools
then run on a copy cut to `--snaplen` bytes per packet (what TCP analysis usually
captures), which separates reading 1.5 kB records from analysing headers. Prints wall time,
packets/s and peak memory of each tool, the ratios, and cellperf's peak memory on half the
captures: neither with one capture nor with two (read in step, each packet forgotten once
paired; the TCP state and pairing on a second thread) should it grow with the captures; the line says by how much it does per packet
(target: under 1 byte).

Every tool but tshark runs `--repeat` times (alternating) and the median is reported, with
its CPU time (user + system) beside the wall time, so that a busy machine shows. The line
"cellperf engine" is the native analysis alone (the `_native.analyze_captures` call, timed
inside a Python process): the CLI adds the interpreter's start-up and its imports to it.
The line "dd" reads the capture and does nothing else: no tool that reads the whole file
can beat it (the kernel's cost of handing over 1 GB of page cache is most of it).

    .venv/bin/python bench/analyze.py [--seconds 15] [--rate 600mbit] [--snaplen 128] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cellperf.testbed.veth import Bottleneck, VethTestbed

CELLPERF = str(Path(sys.executable).with_name("cellperf"))


ENGINE = """
import sys, time
from cellperf import _native
caps = [(p, s) for p, s in zip(sys.argv[1::2], sys.argv[2::2])]
t = time.perf_counter()
_native.analyze_captures(caps, 5.0, None, False, False)
print(time.perf_counter() - t)
"""


def measure(args: list[str]) -> tuple[float, float, float]:
    """Runs a command alone; returns (wall seconds, CPU seconds, peak RSS in MiB) of that child."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            os.execvp(args[0], args)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench: {' '.join(args)} failed")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def engine_seconds(captures: list[tuple[Path, str]]) -> float:
    """Wall time of the native analysis call alone, in a fresh process."""
    args = [sys.executable, "-c", ENGINE] + [str(x) for c in captures for x in c]
    return float(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def make_capture(folder: Path, seconds: int, rate: str) -> tuple[Path, Path]:
    mn, cn = folder / "mn.pcap", folder / "cn.pcap"
    with VethTestbed(downlink=Bottleneck(rate, "256kbit", latency_ms=10)) as tb:
        tb.popen(tb.cn, ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        with tb.capture(mn, cn):
            tb.sh(tb.mn, f"iperf3 -c {tb.CN_ADDR} -R -t {seconds} -C cubic >/dev/null", timeout=seconds + 60)
    return mn, cn


def count_packets(pcap: Path) -> int:
    out = subprocess.run(["capinfos", "-c", "-M", str(pcap)], capture_output=True, text=True, check=True).stdout
    return int(out.strip().splitlines()[-1].split()[-1])


def run_variant(label: str, mn: Path, cn: Path, skip_tshark: bool, repeat: int) -> dict:
    """Times every tool on one pair of captures and prints the figures and ratios."""
    n = count_packets(cn)
    n_mn = count_packets(mn)
    half = cn.with_name(f"{cn.stem}-half.pcap")
    subprocess.run(["editcap", "-r", str(cn), str(half), f"1-{n // 2}"], check=True)
    mn_half = mn.with_name(f"{mn.stem}-half.pcap")
    subprocess.run(["editcap", "-r", str(mn), str(mn_half), f"1-{n_mn // 2}"], check=True)
    print(f"\n== {label}: {n} packets at the CN ({cn.stat().st_size / 2**20:.0f} MiB), {n_mn} at the MN")
    runs = {
        "cellperf analyze (one capture)": [CELLPERF, "analyze", str(cn), "--side", "cn", "--json"],
        "cellperf analyze (half capture)": [CELLPERF, "analyze", str(half), "--side", "cn", "--json"],
        "cellperf analyze (two captures)": [CELLPERF, "analyze", "--mn", str(mn), "--cn", str(cn), "--json"],
        "cellperf analyze (two half captures)": [CELLPERF, "analyze", "--mn", str(mn_half), "--cn", str(half), "--json"],
        "tcptrace -l": ["tcptrace", "-l", str(cn)],
        # Reading the file and nothing else: the floor under any tool that reads it all.
        "dd (read the file, no analysis)": ["dd", f"if={cn}", "of=/dev/null", "bs=4M", "status=none"],
    }
    # Warm the page cache so every tool reads from memory, as the second reader would.
    for p in (mn, cn, half, mn_half):
        subprocess.run(["cat", str(p)], stdout=subprocess.DEVNULL, check=True)
    # The cut copies were just written: their pages are written back first, not while timed.
    os.sync()
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
    engine: dict[str, list[float]] = {"one capture": [], "two captures": []}
    for _ in range(repeat):
        for name, args in runs.items():
            samples[name].append(measure(args))
        engine["one capture"].append(engine_seconds([(cn, "cn")]))
        engine["two captures"].append(engine_seconds([(mn, "mn"), (cn, "cn")]))
    if not skip_tshark:
        samples["tshark (TCP analysis fields)"] = [measure([
            "tshark", "-r", str(cn), "-T", "fields", "-e", "frame.number", "-e", "tcp.analysis.retransmission",
            "-e", "tcp.analysis.fast_retransmission", "-e", "tcp.analysis.ack_rtt", "-e", "tcp.analysis.duplicate_ack",
        ])]
    results = {}
    for name, runs_of in samples.items():
        wall = statistics.median(w for w, _, _ in runs_of)
        cpu = statistics.median(c for _, c, _ in runs_of)
        rss = max(r for _, _, r in runs_of)
        pkts = (n + n_mn if "two" in name else n) // (2 if "half" in name else 1)
        results[name] = {"seconds": wall, "cpu_seconds": cpu, "runs": len(runs_of), "packets": pkts,
                         "packets_per_s": pkts / wall, "peak_rss_mib": rss}
        print(f"{name:36s} {wall:8.3f} s (cpu {cpu:6.3f} s, {len(runs_of)} runs) "
              f"{pkts / wall / 1e6:8.2f} M packets/s  peak {rss:7.1f} MiB", flush=True)
    for what, times in engine.items():
        sec = statistics.median(times)
        pkts = n if what == "one capture" else n + n_mn
        results[f"cellperf engine ({what})"] = {"seconds": sec, "packets": pkts, "packets_per_s": pkts / sec}
        print(f"{'cellperf engine (' + what + ')':36s} {sec:8.3f} s {'':25s}{pkts / sec / 1e6:8.2f} M packets/s")
    one = results["cellperf analyze (one capture)"]
    print(f"reading the file alone  : {results['dd (read the file, no analysis)']['seconds']:.3f} s "
          f"= {n / results['dd (read the file, no analysis)']['seconds'] / 1e6:.2f} M packets/s at most")
    print(f"cellperf vs tcptrace -l : {results['tcptrace -l']['seconds'] / one['seconds']:.1f}x faster (target >= 2x)")
    if "tshark (TCP analysis fields)" in results:
        print(f"cellperf vs tshark      : {results['tshark (TCP analysis fields)']['seconds'] / one['seconds']:.0f}x faster"
              " (target >= 100x)")
    eng = results["cellperf engine (one capture)"]
    print(f"cellperf one capture    : {one['packets_per_s'] / 1e6:.2f} M packets/s CLI, "
          f"{eng['packets_per_s'] / 1e6:.2f} engine (target >= 5)")
    two, eng2 = results["cellperf analyze (two captures)"], results["cellperf engine (two captures)"]
    print(f"cellperf two captures   : {two['packets_per_s'] / 1e6:.2f} M packets/s CLI, "
          f"{eng2['packets_per_s'] / 1e6:.2f} engine (target >= 5 CLI at snaplen 128), "
          f"{two['packets_per_s'] / one['packets_per_s']:.2f}x the one-capture rate (target >= 0.5)")
    h, h2 = results["cellperf analyze (half capture)"], results["cellperf analyze (two half captures)"]
    growth = lambda a, b: (b['peak_rss_mib'] - a['peak_rss_mib']) * 2**20 / (b['packets'] - a['packets'])
    print(f"cellperf peak memory    : one capture {h['peak_rss_mib']:.1f} MiB on half, {one['peak_rss_mib']:.1f} MiB on all "
          f"({growth(h, one):.1f} B per packet more); two captures {h2['peak_rss_mib']:.1f} MiB on halves, "
          f"{two['peak_rss_mib']:.1f} MiB on all ({growth(h2, two):.1f} B per packet more; target < 1)")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--rate", default="600mbit")
    ap.add_argument("--snaplen", type=int, default=128, help="also run on a copy cut to this many bytes (0: no)")
    ap.add_argument("--keep", type=Path, help="keep the captures in this folder")
    ap.add_argument("--skip-tshark", action="store_true", help="tshark is slow: leave it out")
    ap.add_argument("--repeat", type=int, default=3, help="runs of every tool but tshark (median reported)")
    a = ap.parse_args()
    for tool in ("tshark", "tcptrace", "capinfos", "editcap", "iperf3", "tcpdump"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench: {tool} not found (scripts/dev setup installs it)")
    # The CLI runs as installed from a wheel, whose modules pip compiles at install time
    # (this machine sets PYTHONDONTWRITEBYTECODE, which would recompile them on every run).
    import cellperf

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(cellperf.__file__).parent)], check=True)
    folder = a.keep or Path(tempfile.mkdtemp(prefix="cellperf-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    mn, cn = folder / "mn.pcap", folder / "cn.pcap"
    if not (mn.exists() and cn.exists()):
        print(f"making a capture: iperf3 downlink through tbf {a.rate} for {a.seconds} s ...", flush=True)
        make_capture(folder, a.seconds, a.rate)
    variants = [("full packets", mn, cn)]
    if a.snaplen:
        cut = []
        for p in (mn, cn):
            q = p.with_name(f"{p.stem}-s{a.snaplen}.pcap")
            subprocess.run(["editcap", "-F", "pcap", "-s", str(a.snaplen), str(p), str(q)], check=True)
            cut.append(q)
        variants.append((f"snaplen {a.snaplen}", *cut))
    results = {}
    for label, v_mn, v_cn in variants:
        results[label] = run_variant(label, v_mn, v_cn, a.skip_tshark, a.repeat)
    (folder / "bench-analyze.json").write_text(json.dumps(results, indent=2))
    if not a.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    main()
