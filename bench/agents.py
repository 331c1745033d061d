"""Benchmark: cellperf's agents against iperf3 on the same loopback path, in one run.

For UDP at full speed (1460 B payload) and bulk TCP (one stream), each tool runs `--repeats`
times, alternating which goes first, and the script prints per tool the median and the
spread (min–max) of: throughput at the receiver, CPU seconds per Gbit delivered (client +
server, user + system), and for UDP the sending rate and the loss. Then cellperf's CBR
send-time error at 1000 packets/s (p50/p99 of each run), and the ratios of the medians
cellperf / iperf3. Targets (issue 4): throughput ≥ iperf3's; CBR p99 ≤ 50 µs.

    .venv/bin/python bench/agents.py [--duration 5] [--repeats 5] [--only udp|tcp]

Both tools measure UDP throughput at the receiver (iperf3: `end.sum_received`; its
`end.sum` is the sending rate). iperf3 reports no send-time error of its own; the CBR rows
are cellperf's alone. The host is shared: the spread shows how much one run can mislead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cellperf.agents import run_probe

TOKEN = b"bench-token"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAYLOAD = 1460


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def iperf3_run(udp: bool, duration: float) -> dict:
    """One iperf3 run: received and sent bit/s, loss, CPU s of client + server."""
    port = free_port()
    c0 = children_cpu_s()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    args = ["-u", "-b", "0", "-l", str(PAYLOAD)] if udp else []
    client = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(duration), "-J", *args],
                            capture_output=True, text=True)
    server.wait(timeout=10)
    cpu = children_cpu_s() - c0
    end = json.loads(client.stdout)["end"]
    received = end["sum_received"]
    out = {"rx_bps": received["bits_per_second"], "cpu_s": cpu, "rx_bits": received["bytes"] * 8}
    if udp:
        sent = end["sum_sent"]
        out["tx_bps"] = sent["bits_per_second"]
        out["loss"] = received["lost_packets"] / max(sent["packets"], 1)
    return out


def cellperf_run(address: str, server_pid: int, test: str, options: dict) -> tuple[dict, float]:
    """(result document, CPU s of probe + server)."""
    s0, c0 = proc_cpu_s(server_pid), self_cpu_s()
    r = run_probe(address, TOKEN, test, options)
    cpu = (self_cpu_s() - c0) + (proc_cpu_s(server_pid) - s0)
    if r.error:
        sys.exit(f"bench/agents.py: cellperf {test}: {r.error}")
    return r.document, cpu


def cellperf_udp(address: str, pid: int, d: float) -> dict:
    doc, cpu = cellperf_run(address, pid, "udp-cbr", {"rate_bps": 40e9, "duration_s": d, "timeout_s": 1.0})
    rx_bits = doc["throughput_bps"] * doc["duration_s"]
    return {"rx_bps": doc["throughput_bps"], "cpu_s": cpu, "rx_bits": rx_bits, "loss": doc["loss_rate"],
            "tx_bps": doc["packets_sent"] * PAYLOAD * 8 / d}


def cellperf_tcp(address: str, pid: int, d: float) -> dict:
    doc, cpu = cellperf_run(address, pid, "tcp-bulk", {"duration_s": d})
    return {"rx_bps": doc["throughput_bps"], "cpu_s": cpu, "rx_bits": doc["throughput_bps"] * doc["duration_s"]}


def spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", choices=("udp", "tcp"), help="Measure one protocol (and skip the CBR runs).")
    a = ap.parse_args()
    if shutil.which("iperf3") is None:
        sys.exit("bench/agents.py: iperf3 not installed (apt-get install iperf3)")
    d = a.duration
    runs: dict[tuple[str, str], list[dict]] = {}
    cbr: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "token"
        tok.write_bytes(TOKEN)
        cellperf = str(Path(sys.executable).parent / "cellperf")
        srv = subprocess.Popen([cellperf, "server", "--listen", "127.0.0.1:0", "--token-file", str(tok), "--json",
                                "--max-rate", "1000G", "--max-duration", "600"], stdout=subprocess.PIPE, text=True)
        address = json.loads(srv.stdout.readline())["listening"]
        try:
            for i in range(a.repeats):
                for proto in [a.only] if a.only else ["udp", "tcp"]:
                    tools = [("iperf3", lambda: iperf3_run(proto == "udp", d)),
                             ("cellperf", lambda: (cellperf_udp if proto == "udp" else cellperf_tcp)(address, srv.pid, d))]
                    for name, fn in tools if i % 2 == 0 else tools[::-1]:
                        r = fn()
                        runs.setdefault((proto, name), []).append(r)
                        print(f"  run {i + 1} {proto} {name}: {r['rx_bps'] / 1e9:.3f} Gbit/s received, "
                              f"{r['cpu_s'] / (r['rx_bits'] / 1e9):.3f} CPU s/Gbit", file=sys.stderr)
                if a.only:
                    continue
                # CBR at 1000 packets/s: lateness of each send against its absolute deadline.
                doc, _ = cellperf_run(address, srv.pid, "udp-cbr", {"rate_bps": PAYLOAD * 8 * 1000, "duration_s": d})
                cbr.append(doc["send_lateness_us"])
        finally:
            srv.terminate()
            srv.wait(timeout=10)

    rows = []
    for proto in [a.only] if a.only else ["udp", "tcp"]:
        P = proto.upper()
        metrics = [(f"{P} received (Gbit/s)", lambda r: r["rx_bps"] / 1e9),
                   (f"{P} CPU s per Gbit received", lambda r: r["cpu_s"] / (r["rx_bits"] / 1e9))]
        if proto == "udp":
            metrics += [("UDP sent (Gbit/s)", lambda r: r["tx_bps"] / 1e9), ("UDP loss", lambda r: r["loss"])]
        for name, f in metrics:
            ours = spread([f(r) for r in runs[(proto, "cellperf")]])
            theirs = spread([f(r) for r in runs[(proto, "iperf3")]])
            rows.append((name, ours, theirs))
    if cbr:
        rows.append(("CBR 1k pkt/s send error p50 (µs)", spread([c["median"] for c in cbr]), None))
        rows.append(("CBR 1k pkt/s send error p99 (µs)", spread([c["p99"] for c in cbr]), None))

    def cell(s) -> str:
        return f"{s[0]:9.4g} [{s[1]:.3g}–{s[2]:.3g}]" if s else f"{'-':>9}"

    print(f"{a.repeats} runs of {d:g} s each; median [min–max]")
    print(f"{'metric':34} {'cellperf':>26} {'iperf3':>26} {'ratio':>7}")
    for name, ours, theirs in rows:
        ratio = f"{ours[0] / theirs[0]:7.2f}" if theirs and theirs[0] else f"{'-':>7}"
        print(f"{name:34} {cell(ours):>26} {cell(theirs):>26} {ratio}")


if __name__ == "__main__":
    main()
