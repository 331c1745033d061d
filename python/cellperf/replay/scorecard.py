"""The replay scorecard (docs/emulator.md "Replay fidelity"): how close replays of a recorded link
come to the live link, workload by workload, `full` and `heavy` side by side.

The workloads (`cellperf.replay.workloads`) run through the live link and under `cellperf
emulate --replay` in each mode; per measure the scorecard gives CellReplay's two errors: the
relative error of the means, |mean(replay) − mean(live)| / mean(live), and the earth mover's
distance between the live and replayed distributions over the live mean. Shared by
`bench/replay.py` (a seeded emulated cell as the live network) and `cellperf replay check` (a
real network).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from cellperf.errors import UserError

MODES = ("full", "heavy")
#: A second live run scored as if it were a replay: the link's own variability, the error
#: floor below which no replay can be judged (bench/replay.py prints it beside the modes).
LIVE_AGAIN = "live-2"
#: The measures' order and labels in the table; units in the label.
LABELS = {"ping_rtt_ms": "ping RTT ms", "train_ms_10": "10-pkt train ms", "train_ms_100": "100-pkt train ms",
          "voip_r": "VoIP R (5-s)", "download_s_10KB": "10 KB download s", "download_s_100KB": "100 KB download s",
          "download_s_1MB": "1 MB download s", "download_s_10MB": "10 MB download s",
          "bulk_goodput_mbps": "bulk TCP Mb/s (1-s)", "bulk_rtt_ms": "RTT in bulk TCP ms", "page_load_s": "page load s"}
#: Issue 29's targets for `full`: measure → (statistic, bound). `mean`: relative error of the
#: means; `median`: relative error of the medians; `median_points`: absolute difference of
#: the medians; `train_ratio`: the 100- over 10-packet train rate ratio's relative error.
TARGETS = {"page_load_s": ("mean", 0.067), "download_s_1MB": ("mean", 0.09), "download_s_10MB": ("mean", 0.065), "ping_rtt_ms": ("median", 0.05),
           "voip_r": ("median_points", 1.0), "train_ratio": ("train_ratio", 0.10)}


def emd(a, b) -> float:
    """The earth mover's (Wasserstein-1) distance between two samples' empirical distributions:
    the area between their CDFs."""
    a, b = np.sort(np.asarray(a, dtype=float)), np.sort(np.asarray(b, dtype=float))
    if not len(a) or not len(b):
        raise ValueError("emd: an empty sample")
    points = np.sort(np.concatenate([a, b]))
    widths = np.diff(points)
    cdf_a = np.searchsorted(a, points[:-1], side="right") / len(a)
    cdf_b = np.searchsorted(b, points[:-1], side="right") / len(b)
    return float(np.sum(np.abs(cdf_a - cdf_b) * widths))


def relative_error(live: float, replay: float) -> float | None:
    """|replay − live| / |live|; None when live is 0 (a 10-packet train through a tbf whose
    bucket holds it arrives in one go: its delivery time's median is 0)."""
    return abs(replay - live) / abs(live) if live else None


def compare(live, replay) -> dict:
    """One measure: its samples' sizes, means and medians, and the errors of the replay."""
    live, replay = np.asarray(live, dtype=float), np.asarray(replay, dtype=float)
    out = {"n_live": len(live), "n_replay": len(replay)}
    if not len(live) or not len(replay):
        return out
    lm, rm = float(live.mean()), float(replay.mean())
    out.update(live_mean=lm, replay_mean=rm, live_median=float(np.median(live)), replay_median=float(np.median(replay)),
               mean_error=relative_error(lm, rm), emd_over_mean=emd(live, replay) / abs(lm) if lm else None,
               median_error=relative_error(float(np.median(live)), float(np.median(replay))),
               median_points=abs(float(np.median(replay)) - float(np.median(live))))
    return out


def train_rate(result: dict, n: int) -> float | None:
    """Delivery rate (bytes/ms) of the n-packet trains: their bytes after the first packet over
    their delivery times, summed (a mean of per-train rates would be ruled by the trains whose
    packets came out together, at rates of Gb/s)."""
    ms, sent = sum(result.get(f"train_ms_{n}") or []), sum(result.get(f"train_bytes_{n}") or [])
    return sent / ms if ms > 0 else None


def train_ratio(result: dict) -> float | None:
    """Delivery rate of the 100-packet trains over the 10-packet ones', or None."""
    long, short = train_rate(result, 100), train_rate(result, 10)
    return long / short if long and short else None


def score(live: dict[str, list], replays: dict[str, dict[str, list]]) -> dict:
    """The scorecard of one recording: per measure and mode, `compare`; the train-size ratio
    live and per mode; and each target's figure per mode with whether `full` met it and
    whether `full`'s error is at most half `heavy`'s."""
    measures = [m for m in LABELS if m in live] + sorted(m for m in live if m not in LABELS and "bytes" not in m)
    card = {"measures": {m: {mode: compare(live[m], r.get(m, [])) for mode, r in replays.items()} for m in measures}}
    ratios = {"live": train_ratio(live), **{mode: train_ratio(r) for mode, r in replays.items()}}
    card["train_ratio"] = ratios
    targets = {}
    for name, (stat, bound) in TARGETS.items():
        figures = {}
        for mode in replays:
            if stat == "train_ratio":
                ok = ratios["live"] is not None and ratios[mode] is not None
                figures[mode] = relative_error(ratios["live"], ratios[mode]) if ok else None
            else:
                figures[mode] = card["measures"].get(name, {}).get(mode, {}).get(f"{stat}_error" if stat != "median_points" else stat)
        full, heavy, again = figures.get("full"), figures.get("heavy"), figures.get(LIVE_AGAIN)
        # A second live run itself over the bound: the link's own noise is more than the target
        # allows, so the row can be neither met nor missed (`judged` False, `met` None).
        judged = again is None or again <= bound
        targets[name] = {"statistic": stat, "bound": bound, **figures, "judged": judged,
                         "met": None if full is None or not judged else full <= bound,
                         "half_of_heavy": None if full is None or heavy is None else full <= heavy / 2}
    card["targets"] = targets
    return card


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def table(card: dict, modes: tuple[str, ...] = MODES) -> str:
    """The scorecard as text within 80 columns: per measure the live mean and, per mode, the
    relative error of the means and the EMD over the live mean; then the train ratio and the
    targets."""
    head = f"{'measure':<19} {'n':>4} {'live mean':>9}" + "".join(f" {m:>7} {'EMD':>6}" for m in modes)
    lines = ["per mode: relative error of the means, then EMD over the live mean", head, "-" * len(head)]
    for m, by_mode in card["measures"].items():
        first = next(iter(by_mode.values()), {})
        mean = first.get("live_mean")
        row = f"{LABELS.get(m, m)[:19]:<19} {first.get('n_live', 0):>4} {'-' if mean is None else f'{mean:.4g}':>9}"
        for mode in modes:
            c = by_mode.get(mode, {})
            row += f" {_pct(c.get('mean_error')):>7} {_pct(c.get('emd_over_mean')):>6}"
        lines.append(row)
    r = card["train_ratio"]
    lines.append("")
    lines.append("100/10-packet train rate: " + ", ".join(
        f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in r.items()))
    lines.append("")
    lines.append(f"{'target (full)':<26} {'bound':>8}" + "".join(f" {m:>8}" for m in modes) + f" {'met':>5} {'<=heavy/2':>9}")
    for name, t in card["targets"].items():
        unit = (lambda x: "-" if x is None else f"{x:.2f}") if t["statistic"] == "median_points" else _pct
        label = ("100/10 train rate ratio" if name == "train_ratio"
                 else f"{LABELS.get(name, name)} {t['statistic'].replace('_points', ' pts')}")[:26]
        yes = {True: "yes", False: "NO", None: "-"}
        met = yes[t["met"]] if t.get("judged", True) else "noise"
        lines.append(f"{label:<26} {unit(t['bound']):>8}" + "".join(f" {unit(t.get(m)):>8}" for m in modes)
                     + f" {met:>5} {yes[t['half_of_heavy']]:>9}")
    if any(not t.get("judged", True) for t in card["targets"].values()):
        lines.append(f"noise: {LIVE_AGAIN} (the live link again) is over the bound: cannot be judged")
    return "\n".join(lines)


def cellperf_command() -> list[str]:
    """The `cellperf` console script of this interpreter (or the one on PATH)."""
    script = Path(sys.executable).parent / "cellperf"
    return [str(script) if script.exists() else "cellperf"]


def run_workloads(prefix: list[str], server: str, token_file: Path, plan: dict, http_at: str | None = None,
                  timeout_s: float | None = None, web_at: str | None = None) -> dict:
    """Runs the workloads' plan at `server` (and the download server `http_at`, the page
    server `web_at`) as `prefix + [python -m cellperf.replay.workloads ...]` (prefix: [] for
    the live network, a `cellperf emulate ... --` command for an emulated one; `$CELLPERF_CN`
    in the addresses is the emulator's host side); returns their results."""
    with tempfile.TemporaryDirectory(prefix="cellperf-scorecard-") as tmp:
        plan_file, out = Path(tmp) / "plan.json", Path(tmp) / "result.json"
        plan_file.write_text(json.dumps(plan))
        argv = [*prefix, sys.executable, "-m", "cellperf.replay.workloads", server, "--token-file", str(token_file),
                "--plan", str(plan_file), "--out", str(out), *(["--http", http_at] if http_at else []),
                *(["--web", web_at] if web_at else [])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in [str(Path(__file__).parents[2]),
                                                                           os.environ.get("PYTHONPATH", "")] if p)}
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
        if not out.exists():
            why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            raise UserError(f"the workloads failed ({why})")
        return json.loads(out.read_text())


def replay_prefix(bundle, mode: str) -> list[str]:
    """The command that runs a command behind a replay of `bundle` in `mode`."""
    return [*cellperf_command(), "emulate", "--replay", os.fspath(bundle), "--replay-mode", mode, "--"]


def alternate(runs: dict[str, Callable[[], dict]], rounds: int, say: Callable[[str], None]) -> dict[str, dict]:
    """Runs each of `runs` (live first, then the replays) in turn, `rounds` times over, so that
    a slow drift of the live network spreads over all of them; each one's results merged."""
    merged: dict[str, dict] = {name: {} for name in runs}
    for k in range(rounds):
        for name, run in runs.items():
            t0 = time.monotonic()
            for measure, values in run().items():
                merged[name].setdefault(measure, []).extend(values)
            say(f"round {k + 1}/{rounds}: {name} done ({time.monotonic() - t0:.0f} s)")
    return merged


@contextlib.contextmanager
def local_servers(token_file: Path) -> Iterator[tuple[int, int, int]]:
    """A `cellperf server` (any address, 1 Gb/s a test), a download server and a page server
    (`cellperf web serve` of the 004 pages, as campaigns run it) on this host, for workloads
    behind `cellperf emulate` (at $CELLPERF_CN): yields their ports."""
    from cellperf.campaign.web import page_server, shipped_site
    from cellperf.replay.workloads import serve_downloads

    server = subprocess.Popen([*cellperf_command(), "server", "--listen", "0.0.0.0:0", "--token-file", str(token_file),
                               "--json", "--max-rate", "1G", "--max-tests", "64"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    downloads = None
    try:
        line = server.stdout.readline()
        if not line:
            raise UserError(f"cellperf server did not start: {server.stderr.read().strip()[-300:]}")
        downloads = serve_downloads()
        with tempfile.TemporaryDirectory(prefix="cellperf-pages-") as site, \
                page_server(cellperf_command()[0], shipped_site(Path(site)), compression=False, http="1.1") as (web, _):
            yield int(json.loads(line)["listening"].rsplit(":", 1)[1]), downloads.server_address[1], web
    finally:
        if downloads is not None:
            downloads.shutdown()
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
