#!/usr/bin/env python3
"""How faithfully `cellperf emulate --replay` reproduces a recorded link (issue 29 §3-§4).

The "live" network is a black box: a `cellperf emulate` link whose parameters this bench draws
from a seed the recorder never sees (docs/emulator.md "Replay fidelity"). Per condition:
  stationary  lte-stationary's ARQ, uplink grants and radio states; a two-state (Gilbert-
              Elliott) channel each way, drawn rates, delay and base-delay wander;
  mobile      lte-mobile's, with handoffs at drawn times (drawn interruptions), more wander;
  crowded     stationary, sharing a proportional-fair cell with 2-3 background users who pull
              on/off TCP downloads, each on its own drawn channel;
  tbf         the kernel's token-bucket shaper (tc tbf: a 3-KB bucket, a 400-ms buffer) on a
              router namespace between MN and CN namespaces joined by veth pairs
              (cellperf.testbed.veth), drawn rates each way, the servers in the CN's namespace;
              the base delay (this kernel has no netem) from a `cellperf emulate` link in the
              MN's namespace with a drawn fixed delay and no rate limit (1 Gb/s), in series: a
              fixed-rate bottleneck with no scheduler, where a replay should be nearly exact.
The same seed gives the same channel from t = 0, so the recording and the live runs see the
same link. Steps: the scorecard's workloads (cellperf.replay.workloads: ping trains, 10/100-packet
trains, a VoIP call, 30-s bulk TCP, 10 KB-10 MB HTTP downloads, the 004 pages in Chromium) live;
`cellperf record` through the live link against `cellperf server`, asked to last as long as that
live run took (so a replay meets at each moment of the workloads the channel's same moment, as
the live runs do, and does not loop the recording); then the workloads replayed `full`, replayed
`heavy` and live again; the scorecard (cellperf.replay.scorecard, the one `cellperf replay check` prints), with the second
live run scored as a replay beside `full` and `heavy` ("live-2": the link's own variability). Last, replay CPU against
the recording's length: the same pings replayed on the recording tiled 1x, 4x and 16x.

    sudo .venv/bin/python bench/replay.py [--quick] [--conditions C,...] [--seed N] [--record SECONDS] [--json FILE]
        [--keep DIR] [--store DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from cellperf.agents import run_probe  # noqa: E402
from cellperf.replay import scorecard, workloads  # noqa: E402
from cellperf.replay.results import store_check  # noqa: E402

CELLPERF = scorecard.cellperf_command()
CONDITIONS = ("stationary", "mobile", "crowded", "tbf")
#: The recorder's train period: a 100-packet train on a 4 Mb/s uplink takes 290 ms.
RECORD_PERIOD = "500ms"
#: The tbf condition's bucket: two full-size frames, 3 ms at 8 Mb/s (a choice: a cell delivers
#: a few ms of its rate at once, not more); a 30-KB bucket passed a 10-packet train at the
#: veths' line rate (0.03 ms), which no cell does.
TBF_BURST = "3kb"
#: The tbf condition's buffer, as tbf's latency bound (ms): deep, as a cell's per-user buffers
#: are, so that it holds the recorder's 100-packet trains on the slowest drawn uplink (143 KB
#: at 4 Mb/s is 286 ms). With 100 ms each 100-packet train lost its last 26 (down) and 57 (up)
#: packets, the recording's loss series took that for the link's own loss (24 % and 52 %), and
#: `full` replayed it onto every workload (round nine).
TBF_QUEUE_MS = 400
#: The scorecard's columns: the replays, then a second live run (the link's own noise).
COMPARED = (*scorecard.MODES, scorecard.LIVE_AGAIN)


def rate(bps: float) -> str:
    return f"{bps / 1e3:.0f}kbit"


def ge(rng, good_lo: float, good_hi: float) -> str:
    """A two-state channel: good rate drawn in [lo, hi] Mb/s, bad 25-50 % of it, 0.5-2
    switches a second."""
    good = rng.uniform(good_lo, good_hi) * 1e6
    return f"ge:good={rate(good)},bad={rate(good * rng.uniform(0.25, 0.5))},switch={rng.uniform(0.5, 2):.2f}"


def draw_link(condition: str, seed: int, work: Path) -> tuple[list[str], int, dict]:
    """The live link's `cellperf emulate` options, its number of users and what was drawn
    (reported, never shown to the recorder)."""
    rng = np.random.default_rng([seed, CONDITIONS.index(condition)])
    mobile = condition == "mobile"
    delay = rng.uniform(15, 35)
    wander = (0.2 if mobile else 0.1) * delay
    users = 1 + int(rng.integers(2, 4)) if condition == "crowded" else 1
    downs = [ge(rng, 8, 20) for _ in range(users)]
    up = ge(rng, 4, 8)
    opts = ["--profile", "lte-mobile" if mobile else "lte-stationary", *sum((["--downlink", d] for d in downs), []),
            "--uplink", up, "--delay", f"{delay:.1f}ms", "--delay-wander", f"sd={wander:.1f}ms,tau={rng.uniform(3, 8):.1f}s",
            "--seed", str(seed)]
    drawn = {"profile": opts[1], "downlink": downs, "uplink": up, "delay_ms": round(delay, 1),
             "wander_sd_ms": round(wander, 1), "users": users}
    if mobile:
        t, rows = 0.0, []
        while t < 600:
            t += rng.uniform(5, 12)
            rows.append(f"{t:.2f},{len(rows) % 3},0,{rng.uniform(50, 300):.0f}")
        (work / "handoffs.csv").write_text("time_s,bs_id,sector_id,outage_ms\n" + "\n".join(rows) + "\n")
        opts += ["--handoffs", str(work / "handoffs.csv")]
        drawn["handoffs"] = rows[:6]
    if users > 1:
        opts += ["--users", str(users), "--scheduler", "pf"]
    return opts, users, drawn


def live_prefix(opts: list[str], users: int, server: str, token: Path, work: Path) -> list[str]:
    """`cellperf emulate` on the live link; with background users, user 0 runs the command and
    the others pull on/off traffic until it ends (a stop file)."""
    prefix = [*CELLPERF, "emulate", *opts, "--"]
    if users == 1:
        return prefix
    stop = work / "stop"
    stop.unlink(missing_ok=True)
    background = f"exec {sys.executable} {Path(__file__).resolve()} --background {server} --token-file {token} --stop {stop}"
    script = (f'if [ "$CELLPERF_USER" = 0 ]; then "$@"; s=$?; touch {stop}; exit $s; '
              f'else {background} --user "$CELLPERF_USER"; fi')
    return [*prefix, "sh", "-c", script, "sh"]


def background(server: str, token_file: Path, stop: Path, user: int) -> None:
    """A background user: TCP downloads of 0.5-3 s, then 0.5-3 s idle, until `stop` exists."""
    from cellperf.agents import read_token

    token, rng = read_token(token_file), np.random.default_rng(user)
    while not stop.exists():
        try:
            run_probe(server, token, "tcp-bulk", {"duration_s": float(rng.uniform(0.5, 3)), "direction": "down"},
                      progress=lambda _p: not stop.exists())
        except Exception:  # noqa: BLE001 - a refused or cut test: idle, then try again
            pass
        time.sleep(rng.uniform(0.5, 3))


def record(prefix: list[str], server: str, token: Path, seconds: float, out: Path) -> None:
    argv = [*prefix, *CELLPERF, "record", server, "--token-file", str(token), "--duration", f"{seconds:g}",
            "--period", RECORD_PERIOD, "--max-rate", "1G", "--out", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if not (out / "manifest.json").exists():
        sys.exit(f"bench: the recording failed ({p.returncode}): {p.stderr.strip()[-400:]}")


def tile(bundle: Path, times: int, out: Path) -> Path:
    """The bundle repeated `times` over (every series' times shifted by its duration): a
    recording `times` as long with the same link."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    span_ms = manifest["duration_s"] * 1000
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({**manifest, "duration_s": manifest["duration_s"] * times}))
    for f in bundle.iterdir():
        if f.name == "manifest.json" or f.name == "radio.csv":
            continue
        rows = [l.split() for l in f.read_text().splitlines() if l.strip() and not l.startswith("#")]
        # The time columns: outages' start and end, every other file's first.
        cols = (1, 2) if f.name == "outages" else (0,)
        lines = []
        for k in range(times):
            for r in rows:
                r = list(r)
                for c in cols:
                    r[c] = f"{float(r[c]) + k * span_ms:.3f}" if "." in r[c] else str(int(r[c]) + int(k * span_ms))
                lines.append(" ".join(r))
        (out / f.name).write_text("\n".join(lines) + "\n")
    return out


def replay_cpu(bundle: Path, work: Path, pings: int) -> list[dict]:
    """CPU seconds of `cellperf emulate --replay` (and its pings) on the bundle tiled 1x, 4x, 16x."""
    rows = []
    for times in (1, 4, 16):
        b = bundle if times == 1 else tile(bundle, times, work / f"tiled-{times}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run([*scorecard.replay_prefix(b, "full"), "ping", "-n", "-q", "-c", str(pings), "-i", "0.01",
                        "$CELLPERF_CN"], capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows.append({"times": times, "recording_s": json.loads((b / "manifest.json").read_text())["duration_s"],
                     "cpu_s": round(cpu, 3), "wall_s": round(time.monotonic() - t0, 2)})
    return rows


def addresses(host: str, ports: tuple[int, int, int]) -> tuple[str, str, str]:
    """The agents' server, the download server and the page server at `host`."""
    return tuple(f"{host}:{p}" for p in ports)


@contextlib.contextmanager
def emulated_link(condition: str, seed: int, ports: tuple[int, int, int], token: Path, work: Path):
    """A `cellperf emulate` live link: yields a function giving the prefix that runs a command
    behind it (a fresh link each time), the servers' addresses from there, and what was drawn."""
    opts, users, drawn = draw_link(condition, seed, work)
    at = addresses("$CELLPERF_CN", ports)
    yield (lambda: live_prefix(opts, users, at[0], token, work)), at, drawn


@contextlib.contextmanager
def tbf_link(seed: int, ports: tuple[int, int, int], token: Path, work: Path):
    """The tbf + veth live path: tbf on the router each way (`TBF_QUEUE_MS`), a fixed base
    delay each way from a `cellperf emulate` link in the MN's namespace (this kernel has no
    netem; the emulator's rate, 1 Gb/s, is no bottleneck), and the agents', download and page
    servers in the CN's namespace on the host servers' ports. The MN's namespace forwards
    between the emulator's link and its veth, and the router routes the emulator's addresses
    back to it. Yields as `emulated_link` does."""
    from cellperf.campaign.web import shipped_site
    from cellperf.testbed.veth import Bottleneck, VethTestbed

    rng = np.random.default_rng([seed, CONDITIONS.index("tbf")])
    down, up = rng.uniform(8, 20) * 1e6, rng.uniform(4, 8) * 1e6
    delay = rng.uniform(15, 35)
    drawn = {"downlink": rate(down), "uplink": rate(up), "burst": TBF_BURST, "queue_ms": TBF_QUEUE_MS,
             "delay_ms": round(delay, 1)}
    delay_link = [*CELLPERF, "emulate", "--downlink", "1gbit", "--uplink", "1gbit", "--delay", f"{delay:.1f}ms", "--"]
    with VethTestbed(*(Bottleneck(rate(bps), TBF_BURST, TBF_QUEUE_MS) for bps in (down, up))) as tb:
        tb.sh(tb.mn, "sysctl -qw net.ipv4.ip_forward=1")
        tb.sh(tb.rt, "ip route add 10.231.0.0/16 via " + tb.MN_ADDR)  # the emulator's blocks (docs/emulator.md)
        port, http_port, web_port = ports
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        tb.popen(tb.cn, [*CELLPERF, "server", "--listen", f"0.0.0.0:{port}", "--token-file", str(token),
                         "--max-rate", "1G", "--max-tests", "64"], **quiet)
        tb.popen(tb.cn, [*CELLPERF, "replay", "downloads", "--listen", f"0.0.0.0:{http_port}"], **quiet)
        tb.popen(tb.cn, [*CELLPERF, "web", "serve", str(shipped_site(work)), "--listen", f"0.0.0.0:{web_port}",
                         "--compression", "off", "--http", "1.1"], **quiet)
        for p in ports:  # each server listening before the first run
            tb.sh(tb.cn, f"for i in $(seq 100); do ss -ltn | grep -q ':{p} ' && exit 0; sleep 0.1; done; exit 1")
        yield (lambda: ["ip", "netns", "exec", tb.mn, *delay_link]), addresses(tb.CN_ADDR, ports), drawn


def condition_card(condition: str, args, plan: dict, ports: tuple[int, int, int], token: Path, work: Path) -> dict:
    link = tbf_link(args.seed, ports, token, work) if condition == "tbf" else \
        emulated_link(condition, args.seed, ports, token, work)
    with link as (live, (server_at, http_at, web_at), drawn):
        bundle = work / "bundle"

        def live_run() -> dict:
            return scorecard.run_workloads(live(), server_at, token, plan, http_at, web_at=web_at)

        # The first live run comes before the recording, which is asked to last as long (the
        # recorder's phases overrun their plan, so it lasts longer): a replay then meets, at
        # each moment of the workloads, the channel's same moment, as the live runs do (each
        # from t = 0). A 95-s recording under ~200 s of workloads looped, and its later
        # workloads met other moments of the channel than they had live.
        t0 = time.monotonic()
        first_live = live_run()
        live_s = time.monotonic() - t0
        print(f"  live done ({live_s:.0f} s)", flush=True)
        seconds = args.record or live_s
        t0 = time.monotonic()
        record(live(), server_at, token, seconds, bundle)
        recorded_s = json.loads((bundle / "manifest.json").read_text())["duration_s"]
        print(f"  recorded {seconds:.0f} s asked, {recorded_s:.0f} s kept ({time.monotonic() - t0:.0f} s)", flush=True)
        if recorded_s < live_s:
            print(f"  the recording is shorter than the workloads ({live_s:.0f} s): their replays loop it", flush=True)

        runs = {}
        # Replays run on this host, behind the emulator: the host's servers at $CELLPERF_CN.
        replay_at = addresses("$CELLPERF_CN", ports)
        for mode in scorecard.MODES:
            runs[mode] = lambda mode=mode: scorecard.run_workloads(scorecard.replay_prefix(bundle, mode), replay_at[0],
                                                                   token, plan, replay_at[1], web_at=replay_at[2])
        # Last, the live link once more (the same seed, so the same channel): live against live
        # is the link's own variability, the floor under every replay's error.
        runs[scorecard.LIVE_AGAIN] = live_run
        results = {"live": first_live, **scorecard.alternate(runs, 1, lambda line: print(f"  {line}", flush=True))}
    card = scorecard.score(results["live"], {m: results[m] for m in COMPARED})
    return {"link": drawn, "card": card, "results": results, "bundle": bundle,
            "live_s": round(live_s, 1), "recorded_s": recorded_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Short workloads (and a recording as short); on "
                    "stationary alone unless --conditions is given.")
    ap.add_argument("--seed", type=int, default=1, help="The live links' seed (never given to the recorder).")
    ap.add_argument("--conditions", help="Comma-separated, of " + ", ".join(CONDITIONS) + " (default: all)")
    ap.add_argument("--record", type=float, help="Seconds of recording asked per condition (default: as long as the "
                    "first live run of the workloads took, so that the replays do not loop the recording).")
    ap.add_argument("--json", type=Path, help="Write every figure and the raw samples here.")
    ap.add_argument("--keep", type=Path, help="Keep the bundles in this folder.")
    ap.add_argument("--store", type=Path, help="Keep each condition's samples in this results store (for cellperf report).")
    ap.add_argument("--background", help=argparse.SUPPRESS)
    ap.add_argument("--token-file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--stop", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--user", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.background:
        return background(args.background, args.token_file, args.stop, args.user)
    if args.conditions:
        conditions = [c.strip() for c in args.conditions.split(",")]
    else:
        conditions = ["stationary"] if args.quick else list(CONDITIONS)
    if set(conditions) - set(CONDITIONS):
        ap.error(f"--conditions: choose from {', '.join(CONDITIONS)}")
    plan = workloads.QUICK_PLAN if args.quick else workloads.DEFAULT_PLAN
    work = Path(tempfile.mkdtemp(prefix="cellperf-bench-replay-"))
    token = work / "token"
    token.write_text("bench-replay\n")
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; seed {args.seed}", flush=True)
    report = {"seed": args.seed, "record_s": args.record, "plan": plan, "conditions": {}}
    try:
        with scorecard.local_servers(token) as (port, http_port, web_port):
            for condition in conditions:
                print(f"\n== {condition} ==", flush=True)
                (work / condition).mkdir()
                got = condition_card(condition, args, plan, (port, http_port, web_port), token, work / condition)
                print(f"live link: {json.dumps(got['link'])}")
                print(scorecard.table(got["card"], COMPARED), flush=True)
                report["conditions"][condition] = {k: v for k, v in got.items() if k != "bundle"}
                if args.store:
                    store_check(args.store, got["bundle"], f"bench/replay.py seed {args.seed}, {condition}",
                                        got["results"])
        report["replay_cpu"] = replay_cpu(work / conditions[0] / "bundle", work, 300 if args.quick else 1000)
        print("\nreplay CPU vs recording length (the same pings, 100 a second each way):")
        for r in report["replay_cpu"]:
            print(f"  {r['recording_s']:7.1f} s recorded: {r['cpu_s']:.2f} s CPU in {r['wall_s']:.1f} s")
        report["load_average_end"] = os.getloadavg()
    finally:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for c in conditions:
                if (work / c / "bundle").exists():
                    shutil.copytree(work / c / "bundle", args.keep / c)
        shutil.rmtree(work)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
