"""The replay scorecard (docs/emulator.md "Replay fidelity"): how close replays of a recorded link
come to the live link, workload by workload, `full` and `heavy` side by side.

The workloads (`cellperf.replay.workloads`) run through the live link and under `cellperf
emulate --replay` in each mode; per measure the scorecard gives CellReplay's two errors: the
relative error of the means, |mean(replay) − mean(live)| / mean(live), and the earth mover's
distance between the live and replayed distributions over the live mean; per target, the 95 %
bootstrap interval of the error, so that a target is said met or missed only as far as the
samples can tell. Shared by `bench/replay.py` (a seeded emulated cell as the live network) and
`cellperf replay check` (a real network).
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
#: The targets' names in the target table (within 80 columns beside three modes and an interval).
TARGET_LABELS = {"page_load_s": "page load", "download_s_1MB": "1 MB download", "download_s_10MB": "10 MB download",
                 "ping_rtt_ms": "ping RTT", "voip_r": "VoIP R", "train_ratio": "100/10 ratio"}
#: Resamples of the bootstrap behind each target's interval; its seed is fixed, so the same
#: samples always give the same card.
BOOTSTRAP = 2000
#: Issue 29's targets for `full`: measure → (statistic, bound). `mean`: relative error of the
#: means; `median`: relative error of the medians; `median_points`: absolute difference of
#: the medians; `train_ratio`: the 100- over 10-packet train rate ratio's relative error.
TARGETS = {"page_load_s": ("mean", 0.067), "download_s_1MB": ("mean", 0.09), "download_s_10MB": ("mean", 0.065), "ping_rtt_ms": ("median", 0.05),
           "voip_r": ("median_points", 1.0), "train_ratio": ("train_ratio", 0.10)}


def label(measure: str, under: bool = False) -> str:
    """A measure's name: its label; a stratum's (`page_load_s:cnn`, one page's loads) its
    measure's label and its own name, or (`under`, in a text table right under its measure's
    row) its own name, indented."""
    base, _, stratum = measure.partition(":")
    if not stratum or base not in LABELS:
        return LABELS.get(measure, measure)
    return f"  {stratum}" if under else f"{LABELS[base]}: {stratum}"


def _measures(live: dict) -> list[str]:
    """The measures of `live` in the table's order: LABELS', each followed by its strata, then
    the others; the bytes series are no measure of their own."""
    strata = sorted(m for m in live if m.partition(":")[2])
    known = [x for m in LABELS if m in live for x in (m, *(s for s in strata if s.partition(":")[0] == m))]
    return known + sorted(m for m in live if m not in known and "bytes" not in m)


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


def _strata(result: dict, measure: str) -> list[np.ndarray]:
    """A measure's samples in their strata: its `measure:NAME` lists when the result has them
    (each page's loads: the pages' times differ far more than a page's loads do, and a
    resample that drew one page more often would move the pooled mean by that), else the one
    list."""
    parts = [np.asarray(v, dtype=float) for k, v in sorted(result.items())
             if k.partition(":")[0] == measure and k.partition(":")[2] and len(v)]
    return parts or [np.asarray(result.get(measure) or [], dtype=float)]


def _resampled(strata: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP resamples (rows) of the pooled samples, each stratum resampled within itself."""
    return np.concatenate([s[rng.integers(0, len(s), (BOOTSTRAP, len(s)))] for s in strata], axis=1)


def _resampled_ratio(result: dict, rng: np.random.Generator) -> np.ndarray:
    """`train_ratio` of BOOTSTRAP resamples of the trains (each length's, its times and bytes
    together)."""
    rates = []
    for n in (100, 10):
        ms = np.asarray(result.get(f"train_ms_{n}") or [], dtype=float)
        sent = np.asarray(result.get(f"train_bytes_{n}") or [], dtype=float)
        i = rng.integers(0, len(ms), (BOOTSTRAP, len(ms)))
        with np.errstate(divide="ignore", invalid="ignore"):
            rates.append(sent[i].sum(axis=1) / ms[i].sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return rates[0] / rates[1]


def interval(stat: str, live: dict, replay: dict, measure: str) -> tuple[float, float] | None:
    """The 95 % bootstrap interval (percentiles 2.5 and 97.5) of a target's signed error:
    (replay − live) / live for `mean`, `median` and `train_ratio`, replay − live for
    `median_points`, live and replay resampled apart (they are runs of their own, not pairs),
    a measure with strata (`_strata`) within each. None without two samples a side. With ten
    downloads a side on `bench/replay.py`'s links the interval of the 1-MB error spanned 36-84
    points (docs/emulator.md, "How sure a verdict is"), against a bound of 9 %: a figure under
    the bound then says little."""
    rng = np.random.default_rng(0)
    if stat == "train_ratio":
        if min(len(r.get(f"train_ms_{n}") or []) for r in (live, replay) for n in (100, 10)) < 2:
            return None
        a, b = _resampled_ratio(live, rng), _resampled_ratio(replay, rng)
    else:
        sides = [_strata(r, measure) for r in (live, replay)]
        if any(sum(len(s) for s in side) < 2 for side in sides):
            return None
        centre = np.mean if stat == "mean" else np.median
        a, b = (centre(_resampled(side, rng), axis=1) for side in sides)
    with np.errstate(divide="ignore", invalid="ignore"):
        signed = b - a if stat == "median_points" else (b - a) / np.abs(a)
    signed = signed[np.isfinite(signed)]
    if not len(signed):
        return None
    lo, hi = np.percentile(signed, [2.5, 97.5])
    return float(lo), float(hi)


def _sure(bounds: tuple[float, float] | None, bound: float) -> bool | None:
    """Whether a 95 % interval of the signed error lies all within ±bound or all beyond it:
    the samples then say whether the target is met. None without an interval."""
    if bounds is None:
        return None
    lo, hi = bounds
    return (-bound <= lo and hi <= bound) or lo > bound or hi < -bound


def score(live: dict[str, list], replays: dict[str, dict[str, list]]) -> dict:
    """The scorecard of one recording: per measure and mode, `compare`; the train-size ratio
    live and per mode; and each target's figure per mode with whether `full` met it and
    whether `full`'s error is at most half `heavy`'s, and per mode the 95 % interval of the
    signed error (`interval`) and whether `full`'s says for sure (`sure`) that it is met or
    missed."""
    measures = _measures(live)
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
        intervals = {mode: interval(stat, live, r, name) for mode, r in replays.items()}
        targets[name] = {"statistic": stat, "bound": bound, **figures, "judged": judged,
                         "met": None if full is None or not judged else full <= bound,
                         "half_of_heavy": None if full is None or heavy is None else full <= heavy / 2,
                         "interval": intervals, "sure": _sure(intervals.get("full"), bound)}
    card["targets"] = targets
    return card


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def span(bounds: tuple[float, float] | None, points: bool, words: bool = False) -> str:
    """An interval as `lo..hi` (% unless `points`), or (`words`, for the report) `lo to hi`
    with its unit and a decimal more; a dash without one."""
    if bounds is None:
        return "–" if words else "-"
    lo, hi = bounds if points else (100 * bounds[0], 100 * bounds[1])
    # Rounded first, so that an end just under 0 reads +0.0, not -0.0.
    digits = (2 if points else 1) if words else (1 if points else 0)
    lo, hi = round(lo, digits) + 0.0, round(hi, digits) + 0.0
    if words:
        return f"{lo:+.2f} to {hi:+.2f} pts" if points else f"{lo:+.1f} to {hi:+.1f} %"
    return f"{lo:+.1f}..{hi:+.1f}" if points else f"{lo:+.0f}..{hi:+.0f}%"


def verdict(t: dict, words: bool = False) -> str:
    """A target's verdict for `full`: `yes` (met) or `NO`, with `?` when its 95 % interval
    crosses the bound (the samples cannot tell), `noise` when the live link again is over the
    bound, a dash without a figure; or (`words`, for the report) the same in words."""
    if not t.get("judged", True):
        return "cannot be judged: the live link again is over the bound" if words else "noise"
    if t["met"] is None:
        return "–" if words else "-"
    unsure = t.get("sure") is False
    if words:
        return ("met" if t["met"] else "missed") + (" (not sure: the interval crosses the bound)" if unsure else "")
    return ("yes" if t["met"] else "NO") + ("?" if unsure else "")


def table(card: dict, modes: tuple[str, ...] = MODES) -> str:
    """The scorecard as text within 80 columns: per measure the live mean and, per mode, the
    relative error of the means and the EMD over the live mean; then the train ratio and the
    targets, with `full`'s 95 % interval of the signed error (replay over live)."""
    head = f"{'measure':<19} {'n':>4} {'live mean':>9}" + "".join(f" {m:>7} {'EMD':>6}" for m in modes)
    lines = ["per mode: relative error of the means, then EMD over the live mean", head, "-" * len(head)]
    for m, by_mode in card["measures"].items():
        first = next(iter(by_mode.values()), {})
        mean = first.get("live_mean")
        row = f"{label(m, under=True)[:19]:<19} {first.get('n_live', 0):>4} {'-' if mean is None else f'{mean:.4g}':>9}"
        for mode in modes:
            c = by_mode.get(mode, {})
            row += f" {_pct(c.get('mean_error')):>7} {_pct(c.get('emd_over_mean')):>6}"
        lines.append(row)
    r = card["train_ratio"]
    lines.append("")
    lines.append("100/10-packet train rate: " + ", ".join(
        f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in r.items()))
    lines.append("")
    lines.append(f"{'target (full)':<19} {'bound':>7}" + "".join(f" {m:>7}" for m in modes)
                 + f" {'full 95%':>11} {'met':>5} {'<=heavy/2':>9}")
    for name, t in card["targets"].items():
        points = t["statistic"] == "median_points"
        unit = (lambda x: "-" if x is None else f"{x:.2f}") if points else _pct
        stat = "" if name == "train_ratio" else " " + t["statistic"].replace("_points", " pts")
        lines.append(f"{(TARGET_LABELS.get(name, name) + stat)[:19]:<19} {unit(t['bound']):>7}"
                     + "".join(f" {unit(t.get(m)):>7}" for m in modes)
                     + f" {span(t.get('interval', {}).get('full'), points):>11} {verdict(t):>5}"
                     + f" {({True: 'yes', False: 'NO', None: '-'})[t['half_of_heavy']]:>9}")
    if any(t.get("sure") is False and t.get("judged", True) for t in card["targets"].values()):
        lines.append("?: full's 95 % interval crosses the bound: these samples cannot tell (run more)")
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
