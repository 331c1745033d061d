#!/usr/bin/env python3
"""Benchmark of a campaign's cost per run: where a run's wall time goes, and how a campaign
spreads over Dask workers (issue 34).

`overhead` (needs root): a campaign of short tests on the emulated testbed (`--profile`,
default umts: UDP CBR down, TCP bulk down, VoIP with each of `--codecs` (g711; a call named
voip-CODEC when more than one), `--seconds` each, `--repetitions` times, with captures) and a simulated test; prints per test the median seconds of each phase as the runs
stored them (`runs.phases`: link and namespaces up, the test, the drain of its connections,
teardown, radio log, analysis; the commit from `--json`), each run's own wall time (test start
to analysis done), and the campaign's wall time per run (what a long campaign pays: the
analysis and the commit of a run overlap the next run's test); then, with tshark, each run's
`test` phase split by its MN capture (start-up, control round trips, data, tail, after; a
VoIP call's data are its first packet sent to its last echo back: what the link makes the
call take, apart from the overhead around it).

`grid`: a `--grid`-run simulated campaign (`--grid-virtual` s of virtual time a run) with
`--workers 1` and with `--workers 2` (a local Dask cluster), and the speed-up: of the wall
time, and of the runs alone (the first run's start to the last run's end: the cluster's
start-up, ~1.5 s, left out).

`parallel` (needs root): the overhead campaign's emulated runs with `parallel = 2` on this
host against `--workers 2`.

The load average is printed beside each figure: on a shared machine compare figures measured
together.

    sudo .venv/bin/python bench/campaign.py [--sections overhead,grid,parallel] [--profile umts]
        [--seconds 2] [--repetitions 3] [--codecs g711,g729] [--grid 200] [--grid-virtual 60] [--keep DIR]
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

# The campaigns are the tests' (tests/campaign/test_overhead.py, test_cluster.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.campaign.test_cluster import simulated_grid  # noqa: E402
from tests.campaign.test_overhead import short_tests  # noqa: E402

CELLPERF = str(Path(sys.executable).with_name("cellperf"))
SECTIONS = ("overhead", "grid", "parallel")
PHASES = ("link_up", "test", "drain", "teardown", "radio_log", "analysis", "simulate", "commit")


def emulated_campaign(profile: str, seconds: float, repetitions: int, parallel: int = 1, simulate: bool = True,
                      codecs: tuple[str, ...] = ("g711",)) -> str:
    """The tests' UDP CBR and TCP bulk downloads, a VoIP call per codec and (with `simulate`)
    a 300-s simulated cell."""
    text = short_tests(profile, seconds, repetitions, parallel)
    for codec in codecs:
        name = f'name = "voip-{codec}"\n' if len(codecs) > 1 else ""
        text += f'\n[[tests]]\n{name}type = "voip"\ncodec = "{codec}"\n'
    if simulate:
        text += '\n[[tests]]\nname = "cell"\ntype = "simulate"\nusers = 3\nduration = 300\n'
    return text


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def run(spec: Path, out: Path, *extra: str) -> tuple[dict, float]:
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    p = subprocess.run([CELLPERF, "run", str(spec), "--out", str(out), "--json", *extra], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode not in (0, 3):
        sys.exit(f"cellperf run {spec} failed: {p.stderr.strip()}")
    return json.loads(p.stdout), wall


def test_of(run_id: str) -> str:
    return run_id.split(".")[2]


def print_phases(summary: dict, wall: float) -> None:
    by_test: dict[str, list[dict]] = {}
    for r in summary["runs"]:
        by_test.setdefault(test_of(r["run_id"]), []).append(r)
    cols = [p for p in PHASES if any(p in (r["phases"] or {}) for r in summary["runs"])]
    print(f"{'test':<16}{'runs':>5}" + "".join(f"{c:>10}" for c in cols) + f"{'run s':>9}")
    for test, rs in by_test.items():
        med = [statistics.median((r["phases"] or {}).get(c, 0.0) for r in rs) for c in cols]
        print(f"{test:<16}{len(rs):>5}" + "".join(f"{m:>10.3f}" for m in med)
              + f"{statistics.median(r['seconds'] for r in rs):>9.2f}")
    failed = summary["runs_failed"]
    print(f"campaign: {len(summary['runs'])} runs in {wall:.1f} s ({wall / max(1, len(summary['runs'])):.2f} s a run, "
          f"start-up included), {len(failed)} failed; {load()}")
    for f in failed:
        print(f"  failed {f['run_id']}: {f['reason']}")


def print_cadence(store: Path) -> None:
    """Wall time per emulated run as the campaign spends it: from the run's start to the next
    run's, of any kind (a run's drain and teardown overlap the next one's link coming up; a
    simulated run after it is not its time), medians per test; the campaign's last run is
    left out (nothing follows it)."""
    from cellperf.store import Store

    with Store.open(store, read_only=True) as s:
        rows = s.frame("SELECT run_id, epoch(started_at) AS t, phases LIKE '%link_up%' AS emulated FROM runs "
                       "ORDER BY started_at").rows()
    per_test: dict[str, list[float]] = {}
    for (run_id, t, emulated), (_, t_next, _) in zip(rows, rows[1:]):
        if emulated:
            per_test.setdefault(test_of(run_id), []).append(t_next - t)
    print("wall time per run (start to the next run's start, s): " + ", ".join(
        f"{test} {statistics.median(v):.2f} ({len(v)})" for test, v in per_test.items()))


def test_phase_split(store: Path, summary: dict) -> None:
    """Each emulated run's `test` phase split by its MN capture (tshark): the command's start
    to the probe's first packet, its SYN or a download's UDP hello sent before it (start-up),
    from there to the first data packet (control round trips), the
    data, the last data packet to the probe's FIN (report, late packets), the FIN to the
    command's end (the probe after its test)."""
    from cellperf.store import Store

    with Store.open(store, read_only=True) as s:
        started = dict(s.frame("SELECT run_id, epoch(started_at) AS t FROM runs").iter_rows())
    print(f"{'run':<34}{'start-up':>9}{'rounds':>8}{'data':>7}{'tail':>7}{'after':>7}{'test':>7}")
    for r in summary["runs"]:
        ph = r["phases"] or {}
        pcap = store / "runs" / r["run_id"] / "mn.pcap"
        if "test" not in ph or not pcap.exists():
            continue
        fields = ("frame.time_epoch", "ip.src", "tcp.srcport", "tcp.dstport", "tcp.len", "udp.payload", "tcp.flags.fin")
        out = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", *(a for f in fields for a in ("-e", f))],
                             capture_output=True, text=True).stdout
        pk = [dict(zip(fields, line.split("\t"))) for line in out.splitlines()]
        if not pk:
            continue
        # The probe's first packet opens the capture; its first TCP packet is its control SYN.
        first_tcp = next((q for q in pk if q["tcp.srcport"]), None)
        if first_tcp is None:
            continue
        mn, ctrl = first_tcp["ip.src"], first_tcp["tcp.srcport"]
        on_ctrl = lambda q: ctrl in (q["tcp.srcport"], q["tcp.dstport"])
        # Data: the probe's and the server's packets (CPF1, echoes CPE1), not the UDP hellos,
        # whatever their size (G.729's are a hello's); TCP segments with payload but the
        # first the probe sends on each data connection (its cookie, or `data_connection`).
        introduced: set[str] = set()

        def is_data(q: dict) -> bool:
            if q["udp.payload"]:
                return q["udp.payload"].replace(":", "")[:8] in ("43504631", "43504531")
            if int(q["tcp.len"] or 0) == 0:
                return False
            if q["ip.src"] == mn and q["tcp.srcport"] not in introduced:
                introduced.add(q["tcp.srcport"])
                return False
            return True

        data = [float(q["frame.time_epoch"]) for q in pk if not on_ctrl(q) and is_data(q)]
        fin = [float(q["frame.time_epoch"]) for q in pk if on_ctrl(q) and q["tcp.flags.fin"] in ("1", "True")
               and q["ip.src"] == mn]
        if not data or not fin:
            continue
        syn, t0 = float(pk[0]["frame.time_epoch"]), started[r["run_id"]] + ph["link_up"]
        print(f"{r['run_id']:<34}{syn - t0:>9.3f}{min(data) - syn:>8.3f}{max(data) - min(data):>7.3f}"
              f"{fin[0] - max(data):>7.3f}{t0 + ph['test'] - fin[0]:>7.3f}{ph['test']:>7.3f}")


def overhead(work: Path, a) -> None:
    spec = work / "overhead.toml"
    spec.write_text(emulated_campaign(a.profile, a.seconds, a.repetitions, codecs=tuple(a.codecs.split(","))))
    print(f"== overhead: {a.profile}, {a.seconds:g}-s tests x {a.repetitions}, captures on ({load()})")
    summary, wall = run(spec, work / "overhead")
    print_phases(summary, wall)
    print_cadence(work / "overhead")
    if shutil.which("tshark"):
        test_phase_split(work / "overhead", summary)


def grid(work: Path, a) -> None:
    spec = work / "grid.toml"
    # 001's cell for --grid-virtual s of virtual time (60: a CPU-bound run of ~35 ms here,
    # docs/scale.md).
    spec.write_text(simulated_grid(a.grid, a.grid_virtual))
    print(f"== grid: {a.grid} simulated runs of {a.grid_virtual:g} s of virtual time ({load()})")
    walls, spans = {}, {}
    for n in (1, 2):
        summary, wall = run(spec, work / f"grid-{n}", "--workers", str(n))
        busy = sum(r["seconds"] for r in summary["runs"])
        walls[n], spans[n] = wall, runs_span(work / f"grid-{n}")
        print(f"--workers {n}: {wall:.1f} s wall, {spans[n]:.1f} s of them the runs (first start to last end),\n"
              f"  {busy:.1f} s of runs in the workers, {len(summary['runs_failed'])} failed; {load()}")
    print(f"2 workers over 1: {walls[1] / walls[2]:.2f}x (wall), {spans[1] / spans[2]:.2f}x (the runs)")


def runs_span(out: Path) -> float:
    """Seconds from the first run's start to the last run's end, as the store has them."""
    from cellperf.store import Store

    with Store.open(out, read_only=True) as s:
        return s.frame("SELECT epoch(max(ended_at)) - epoch(min(started_at)) AS s FROM runs")["s"][0]


def parallel(work: Path, a) -> None:
    print(f"== parallel: emulated runs, parallel = 2 against --workers 2 ({load()})")
    spec = work / "parallel.toml"
    spec.write_text(emulated_campaign(a.profile, a.seconds, a.repetitions, parallel=2, simulate=False))
    for label, extra in (("parallel = 2", ()), ("--workers 2", ("--workers", "2"))):
        summary, wall = run(spec, work / label.replace(" ", "").replace("=", ""), *extra)
        print(f"-- {label}")
        print_phases(summary, wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default="overhead,grid")
    ap.add_argument("--profile", default="umts")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--codecs", default="g711", help="VoIP calls of the overhead campaign, one per codec (g711, g729).")
    ap.add_argument("--grid", type=int, default=200)
    ap.add_argument("--grid-virtual", type=float, default=60.0, help="Virtual seconds of each grid run.")
    ap.add_argument("--keep", type=Path, help="Keep the stores in DIR.")
    a = ap.parse_args()
    sections = a.sections.split(",")
    if unknown := set(sections) - set(SECTIONS):
        ap.error(f"--sections: unknown {', '.join(sorted(unknown))} (choose from {', '.join(SECTIONS)})")
    work = a.keep or Path(tempfile.mkdtemp(prefix="cellperf-bench-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for name in sections:
            globals()[name](work, a)
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
