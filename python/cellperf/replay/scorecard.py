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

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from cellperf.errors import UserError

MODES = ("full", "heavy")
#: The measures' order and labels in the table; units in the label.
LABELS = {"ping_rtt_ms": "ping RTT ms", "train_mbps_10": "10-pkt train Mb/s", "train_mbps_100": "100-pkt train Mb/s",
          "voip_r": "VoIP R (5-s)", "download_s_10KB": "10 KB download s", "download_s_100KB": "100 KB download s",
          "download_s_1MB": "1 MB download s", "download_s_10MB": "10 MB download s"}
#: Issue 29's targets for `full`: measure → (statistic, bound). `mean`: relative error of the
#: means; `median`: relative error of the medians; `median_points`: absolute difference of
#: the medians; `train_ratio`: the 100- over 10-packet train rate ratio's relative error.
TARGETS = {"download_s_1MB": ("mean", 0.09), "download_s_10MB": ("mean", 0.065), "ping_rtt_ms": ("median", 0.05),
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


def relative_error(live: float, replay: float) -> float:
    return abs(replay - live) / abs(live)


def compare(live, replay) -> dict:
    """One measure: its samples' sizes, means and medians, and the errors of the replay."""
    live, replay = np.asarray(live, dtype=float), np.asarray(replay, dtype=float)
    out = {"n_live": len(live), "n_replay": len(replay)}
    if not len(live) or not len(replay):
        return out
    lm, rm = float(live.mean()), float(replay.mean())
    out.update(live_mean=lm, replay_mean=rm, live_median=float(np.median(live)), replay_median=float(np.median(replay)),
               mean_error=relative_error(lm, rm), emd_over_mean=emd(live, replay) / abs(lm),
               median_error=relative_error(float(np.median(live)), float(np.median(replay))),
               median_points=abs(float(np.median(replay)) - float(np.median(live))))
    return out


def train_ratio(result: dict) -> float | None:
    """Mean delivery rate of the 100-packet trains over the 10-packet ones', or None."""
    long, short = result.get("train_mbps_100") or [], result.get("train_mbps_10") or []
    return float(np.mean(long) / np.mean(short)) if long and short else None


def score(live: dict[str, list], replays: dict[str, dict[str, list]]) -> dict:
    """The scorecard of one recording: per measure and mode, `compare`; the train-size ratio
    live and per mode; and each target's figure per mode with whether `full` met it and
    whether `full`'s error is at most half `heavy`'s."""
    measures = [m for m in LABELS if m in live] + sorted(m for m in live if m not in LABELS)
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
        full, heavy = figures.get("full"), figures.get("heavy")
        targets[name] = {"statistic": stat, "bound": bound, **figures,
                         "met": None if full is None else full <= bound,
                         "half_of_heavy": None if full is None or heavy is None else full <= heavy / 2}
    card["targets"] = targets
    return card


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def table(card: dict, modes: tuple[str, ...] = MODES) -> str:
    """The scorecard as text within 80 columns: per measure the live mean and, per mode, the
    relative error of the means and the EMD over the live mean; then the train ratio and the
    targets."""
    head = f"{'measure':<19} {'n':>4} {'live mean':>10}" + "".join(f" {m + ' mean':>10} {'EMD':>7}" for m in modes)
    lines = [head, "-" * len(head)]
    for m, by_mode in card["measures"].items():
        first = next(iter(by_mode.values()), {})
        mean = first.get("live_mean")
        row = f"{LABELS.get(m, m)[:19]:<19} {first.get('n_live', 0):>4} {'-' if mean is None else f'{mean:.4g}':>10}"
        for mode in modes:
            c = by_mode.get(mode, {})
            row += f" {_pct(c.get('mean_error')):>10} {_pct(c.get('emd_over_mean')):>7}"
        lines.append(row)
    r = card["train_ratio"]
    lines.append("")
    lines.append("100/10-packet train rate: " + ", ".join(
        f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in r.items()))
    lines.append("")
    lines.append(f"{'target (full)':<26} {'bound':>8}" + "".join(f" {m:>8}" for m in modes) + f" {'met':>5} {'<=heavy/2':>9}")
    for name, t in card["targets"].items():
        unit = (lambda x: "-" if x is None else f"{x:.2f}") if t["statistic"] == "median_points" else _pct
        label = f"{LABELS.get(name, name)} {t['statistic'].replace('_points', ' pts')}"[:26]
        yes = {True: "yes", False: "NO", None: "-"}
        lines.append(f"{label:<26} {unit(t['bound']):>8}" + "".join(f" {unit(t.get(m)):>8}" for m in modes)
                     + f" {yes[t['met']]:>5} {yes[t['half_of_heavy']]:>9}")
    return "\n".join(lines)


def cellperf_command() -> list[str]:
    """The `cellperf` console script of this interpreter (or the one on PATH)."""
    script = Path(sys.executable).parent / "cellperf"
    return [str(script) if script.exists() else "cellperf"]


def run_workloads(prefix: list[str], server: str, token_file: Path, plan: dict, timeout_s: float | None = None) -> dict:
    """Runs the workloads' plan at `server` as `prefix + [python -m cellperf.replay.workloads
    ...]` (prefix: [] for the live network, a `cellperf emulate ... --` command for an emulated
    one; `$CELLPERF_CN` in `server` is the emulator's host side); returns their results."""
    with tempfile.TemporaryDirectory(prefix="cellperf-scorecard-") as tmp:
        plan_file, out = Path(tmp) / "plan.json", Path(tmp) / "result.json"
        plan_file.write_text(json.dumps(plan))
        argv = [*prefix, sys.executable, "-m", "cellperf.replay.workloads", server, "--token-file", str(token_file),
                "--plan", str(plan_file), "--out", str(out)]
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
