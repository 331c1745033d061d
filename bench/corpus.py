#!/usr/bin/env python3
"""Benchmark of corpus analysis: `cellperf import --captures` of a corpus of at least 200 runs
with 1 worker (in the importing process) and with 2 (a local Dask cluster), against a shell
loop of `cellperf analyze` over the same runs, all measured in this run.

The corpus is real: an emulated campaign (needs root: `cellperf emulate` in network
namespaces; real kernel TCP and UDP, both ends captured by the emulator, its radio log) of
`--seconds`-long runs, each run's folder then replicated until there are `--runs` of them
(each replica's pcaps differ in one unused header field, so each is a run of its own by
content; the analysis sees the same packets).

Ways: `--workers 1` (in the importing process), `--workers 2` (a LocalCluster started by the
import), and `--cluster` on a real `dask scheduler` with 1 and with 2 `dask worker` processes
started beforehand (the steady state of a running cluster). Prints, per way: wall time of the
whole command, its CPU time (with its children; a running cluster's workers are not), runs/s
and packets/s over the analysis (cluster start excluded, given apart), the importing
process's own time per run
(`driver_ms_per_run`: hashing aside, what it spends not waiting for workers: receiving rows,
committing them), and the speed-up of 2 workers over 1. Imports run `--repeat` times
(alternating) and the median is reported; the shell loop runs once. The load average is
printed beside each figure: on a shared machine, compare ratios measured together.

`--ways` picks some of the ways (`1`, `2`, `cluster-1`, `cluster-2`, `loop`: the shell loop).

    sudo .venv/bin/python bench/corpus.py [--runs 200] [--seconds 30] [--repeat 3] [--keep DIR] [--ways 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The corpus is made by the tests' helpers (the same captures the import tests use).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.campaign.capture_corpus import (  # noqa: E402
    as_captures, campaign_text, dask_processes, replicate_corpus, run_campaign)

CELLPERF = str(Path(sys.executable).with_name("cellperf"))
WAYS = ("1", "2", "cluster-1", "cluster-2", "loop")

def _measure(argv: list[str]) -> tuple[str, float, float]:
    """Runs a command; returns (stdout, wall seconds, CPU seconds of it and its children)."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read().decode()
        if p.returncode != 0:
            sys.exit(f"{' '.join(argv[:3])} ... failed: {err.strip()}")
        out.seek(0)
        return out.read().decode(), wall, usage.ru_utime + usage.ru_stime


def _import(corpus: Path, store: Path, workers: int) -> dict:
    shutil.rmtree(store, ignore_errors=True)
    load = os.getloadavg()[0]
    stdout, wall, cpu = _measure([CELLPERF, "import", str(store), "--captures", str(corpus), "--workers", str(workers),
                                  "--interval", "1", "--json"])
    doc = json.loads(stdout)
    return {**doc["corpus"], "command_s": wall, "cpu_s": cpu, "runs": doc["runs_done"], "load_before": load,
            "load": os.getloadavg()[0]}


def _on_cluster(corpus: Path, store: Path, workers: int) -> dict:
    """The import on a real `dask scheduler` with `workers` single-threaded `dask worker`
    processes on this machine (started and warmed before the clock starts, stopped after)."""
    with dask_processes(workers) as (address, _):
        shutil.rmtree(store, ignore_errors=True)
        load = os.getloadavg()[0]
        stdout, wall, _ = _measure([CELLPERF, "import", str(store), "--captures", str(corpus), "--cluster", address,
                                    "--interval", "1", "--json"])
        # No CPU time: the workers are not children of the import.
        return {**json.loads(stdout)["corpus"], "command_s": wall, "load_before": load, "load": os.getloadavg()[0]}


def _shell_loop(corpus: Path, out: Path) -> dict:
    runs = sorted(p for p in corpus.iterdir() if p.is_dir())
    script = (f'for d in "{corpus}"/*/; do "{CELLPERF}" analyze --mn "$d/mn.pcap" --cn "$d/cn.pcap" --interval 1 '
              f'--out "{out}/$(basename "$d")" > /dev/null || exit 1; done')
    load = os.getloadavg()[0]
    _, wall, cpu = _measure(["sh", "-c", script])
    return {"runs": len(runs), "command_s": wall, "cpu_s": cpu, "runs_per_s": len(runs) / wall,
            "load_before": load, "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=30, help="Length of each emulated run (the demo's: 30 s).")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="Keep the corpus and stores here.")
    ap.add_argument("--ways", default=",".join(WAYS),
                    help=f"Comma-separated ways to measure (default: all of {','.join(WAYS)}).")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ways = [w for w in args.ways.split(",") if w]
    if unknown := set(ways) - set(WAYS):
        sys.exit(f"bench/corpus.py: --ways: unknown {', '.join(sorted(unknown))}; known: {', '.join(WAYS)}")
    if os.geteuid() != 0:
        sys.exit("bench/corpus.py: needs root (the corpus is captured through the emulator)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="cellperf-corpus-"))
    try:
        campaign = work / "campaign"
        campaign.mkdir(parents=True, exist_ok=True)
        if not (campaign / "out").exists():
            print(f"capturing the emulated campaign ({args.seconds}-s runs) ...", file=sys.stderr)
            run_campaign(campaign, campaign_text(args.seconds, (("WiBro", "wibro"), ("HSDPA", "hsdpa"))))
        corpus = work / "corpus"
        if not corpus.exists():
            shutil.rmtree(work / "captures", ignore_errors=True)
            as_captures(campaign / "out", work / "captures")
            replicate_corpus(work / "captures", corpus, args.runs)
        size = sum(f.stat().st_size for f in corpus.rglob("*.pcap"))
        print(f"corpus: {args.runs} runs, {size / 1e6:.0f} MB of pcap, from "
              f"{len(list((work / 'captures').iterdir()))} emulated runs", file=sys.stderr)
        results: dict[str, list[dict]] = {w: [] for w in ways if w != "loop"}
        for _ in range(args.repeat):
            for way in results:
                workers = int(way[-1])
                if way.startswith("cluster"):
                    results[way].append(_on_cluster(corpus, work / f"store-c{workers}", workers))
                else:
                    results[way].append(_import(corpus, work / f"store-{workers}", workers))
        loop = None
        if "loop" in ways:
            shutil.rmtree(work / "loop", ignore_errors=True)
            loop = _shell_loop(corpus, work / "loop")
        med = {w: {k: statistics.median(r.get(k, float("nan")) for r in rs) for k in
                   ("command_s", "cpu_s", "wall_s", "startup_s", "runs_per_s", "packets_per_s", "driver_ms_per_run",
                    "process_cpu_ms_per_run", "load_before", "load")}
               for w, rs in results.items()}
        for w in med:
            med[w]["packets"] = results[w][0]["packets"]
            med[w]["cpu_ms_per_run"] = 1000 * med[w]["cpu_s"] / args.runs
        out = {"runs": args.runs, "repeat": args.repeat, "cpus": os.cpu_count(), "ways": med, "shell_loop": loop,
               "each": results}
        if {"1", "2"} <= set(med):
            out["speedup_2_over_1"] = med["2"]["runs_per_s"] / med["1"]["runs_per_s"]
            out["speedup_2_over_1_command"] = med["1"]["command_s"] / med["2"]["command_s"]
        if {"cluster-1", "cluster-2"} <= set(med):
            out["speedup_cluster_2_over_1"] = med["cluster-2"]["runs_per_s"] / med["cluster-1"]["runs_per_s"]
        if {"cluster-1", "2"} <= set(med):
            out["speedup_2_over_cluster_1"] = med["2"]["runs_per_s"] / med["cluster-1"]["runs_per_s"]
        if loop and "2" in med:
            out["import_2_over_shell_loop"] = loop["command_s"] / med["2"]["command_s"]
        if args.json:
            print(json.dumps(out, indent=2))
            return
        print(f"{'way':<28}{'command s':>10}{'CPU s':>7}{'CPU ms/run':>11}{'runs/s':>8}{'packets/s':>10}"
              f"{'driver ms':>10}{'drv CPU ms':>11}{'load':>12}")
        names = {"1": "import --workers 1", "2": "import --workers 2 (Dask)", "cluster-1": "--cluster, 1 dask worker",
                 "cluster-2": "--cluster, 2 dask workers"}
        for key, r in med.items():
            cpu = (f"{r['cpu_s']:>7.1f}{r['cpu_ms_per_run']:>11.1f}" if r["cpu_s"] == r["cpu_s"]
                   else f"{'–':>7}{'–':>11}")
            print(f"{names[key]:<28}{r['command_s']:>10.2f}{cpu}{r['runs_per_s']:>8.1f}"
                  f"{r['packets_per_s']:>10.0f}{r['driver_ms_per_run']:>10.1f}{r['process_cpu_ms_per_run']:>11.1f}"
                  f"{r['load_before']:>6.2f}-{r['load']:<5.2f}")
        if loop:
            print(f"{'shell loop of analyze':<28}{loop['command_s']:>10.2f}{loop['cpu_s']:>7.1f}"
                  f"{1000 * loop['cpu_s'] / loop['runs']:>11.1f}{loop['runs_per_s']:>8.1f}{'':>10}{'':>10}{'':>11}"
                  f"{loop['load_before']:>6.2f}-{loop['load']:<5.2f}")
        for key, what in (("speedup_2_over_1", "2 workers (LocalCluster) over 1 (in the importing process)"),
                          ("speedup_2_over_cluster_1", "2 workers (LocalCluster) over 1 dask worker (running cluster)"),
                          ("speedup_cluster_2_over_1", "2 dask workers over 1 on a running cluster"),
                          ("import_2_over_shell_loop", "import --workers 2 over the shell loop (whole commands)")):
            if key in out:
                print(f"speed-up, {what}: {out[key]:.2f}x")
        print(f"runs/s over the analysis; drv CPU: the importing process's CPU per run (its Dask scheduler "
              f"too; in-process: the analysis too); medians of {args.repeat}; {os.cpu_count()} CPUs; "
              "load average before-after each (1 min; a shared machine)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
