"""Seed 001 reproduced: the nine cells of Tables 2 and 3 (PF and RR at 0.1, 1 and 5
transitions per second, three sources), each beside the paper's value, and Figs. 5-7 (the
window over time at slow and fast transitions; throughput against transition rate, PF vs RR).
Every cell runs with the same options (the documented choices, docs/simulate.md)."""

from __future__ import annotations

from cellperf.simulate import runner
from cellperf.simulate.scenario import build

#: Seed 001 Tables 2 (PF) and 3 (RR): kbit/s per source, by transitions per second.
PAPER = {
    ("pf", 0.1): [188.54, 184.92, 186.68],
    ("pf", 1): [67.72, 70.4, 68.68],
    ("pf", 5): [55.72, 55.68, 53.32],
    ("rr", 0.1): [136.48, 138.94, 136.36],
    ("rr", 1): [61.08, 59.36, 59.96],
    ("rr", 5): [48.50, 51.52, 50.22],
}
#: The cells whose window 001 Figs. 5 and 6 draw (slow and fast transitions).
WINDOW_FIGURES = {"fig5": ("pf", 0.1), "fig6": ("pf", 5)}
#: The options a reproduction sets itself.
OWN_OPTIONS = ("users", "scheduler", "channel", "profile")


def channel(transitions_per_s: float) -> str:
    return f"ge:good=1mbit,bad=100kbit,switch={transitions_per_s:g}"


#: Seed 001 Table 1 and its topology (Fig. 4): what a scenario must have for the paper's
#: values to stand beside it. The rest (queue, RTO rules, delayed ACKs, PF α, ...) are the
#: choices where 001 is silent (docs/simulate.md), so they may differ; the duration may too.
TABLE_1 = {"users": 3, "tcp": "reno", "packet_bytes": 250, "initial_ssthresh": 16.0, "wired_hops": 2,
           "wired_rate_bps": 100e6, "wired_delay_s": 0.010, "good_bps": 1e6, "bad_bps": 100e3}


def transition_rate(options: dict) -> float | None:
    """Transitions per second out of each state of a scenario whose users share one
    two-state channel (`ge:` with equal switching rates both ways); None for any other."""
    from cellperf.emulate.spec import parse_link

    channels = options.get("channel") or []
    if options.get("profile") or len(set(channels)) != 1 or not str(channels[0]).lower().startswith("ge:"):
        return None
    link = parse_link(str(channels[0]), "channel")
    rate = link["good_to_bad_per_s"]
    return rate if rate == link["bad_to_good_per_s"] else None


def paper_kbps(options: dict) -> list[float] | None:
    """001's Tables 2/3 values (kbit/s per source) when `options` (a scenario's, after
    defaults) is 001's scenario (TABLE_1, PF or RR, 0.1, 1 or 5 transitions/s); else None."""
    from cellperf.emulate.spec import parse_link
    from cellperf.emulate.units import parse_duration, parse_rate
    from cellperf.simulate.scenario import parse_packet

    rate = transition_rate(options)
    if rate is None or (options.get("scheduler"), rate) not in PAPER:
        return None
    link = parse_link(str(options["channel"][0]), "channel")
    ssthresh = str(options.get("initial_ssthresh")).lower()
    seen = {"users": options.get("users"), "tcp": options.get("tcp"),
            "packet_bytes": parse_packet(options["packet"], "packet"),
            "initial_ssthresh": None if ssthresh in ("off", "none", "inf") else float(ssthresh),
            "wired_hops": int(options["wired_hops"]), "wired_rate_bps": parse_rate(str(options["wired_rate"]), "wired_rate"),
            "wired_delay_s": parse_duration(f"{options['wired_delay']}s" if isinstance(options["wired_delay"], (int, float))
                                            else str(options["wired_delay"]), "wired_delay"),
            "good_bps": link["good_bps"], "bad_bps": link["bad_bps"]}
    same = all(seen[k] == v if not isinstance(v, float) else seen[k] is not None and abs(seen[k] - v) <= 1e-9 * v
               for k, v in TABLE_1.items())
    return PAPER[options["scheduler"], rate] if same else None


def reproduce(options: dict, record: bool = False) -> dict:
    """Runs the nine cells with `options` (not those of OWN_OPTIONS); returns {"cells":
    [...], "windows": {fig: {"scheduler", "transitions_per_s", "seed", "cwnd": polars frame of
    the first seed's time_s, user, cwnd}}} (windows only with `record`)."""
    import polars as pl

    cells, windows = [], {}
    for (scheduler, rate), paper in PAPER.items():
        cell_options = {**options, "users": 3, "scheduler": scheduler, "channel": [channel(rate)]}
        recorded = record and (scheduler, rate) in WINDOW_FIGURES.values()
        outcome = runner.run(build(cell_options), record=recorded)
        spread = outcome.spread()
        cells.append({
            "scheduler": scheduler,
            "transitions_per_s": rate,
            "paper_kbps": paper,
            "simulated_kbps": [u["goodput_bps"]["mean"] / 1e3 for u in spread],
            "sd_kbps": [u["goodput_bps"]["sd"] / 1e3 for u in spread],
            "wall_s": outcome.wall_s,
        })
        if recorded:
            fig = next(k for k, v in WINDOW_FIGURES.items() if v == (scheduler, rate))
            seed = outcome.scenario.options["seed"]
            cwnd = pl.from_arrow(outcome.tables["cwnd"]).filter(pl.col("seed") == seed)
            windows[fig] = {"scheduler": scheduler, "transitions_per_s": rate, "seed": seed, "cwnd": cwnd}
    return {"cells": cells, "windows": windows}


def _jain(values: list[float]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if any(values) else 1.0


def verdicts(cells: list[dict]) -> list[dict]:
    """What of seed 001's Tables 2/3 and Fig. 7 the simulated cells reproduce, measured on
    them: each claim with the paper's value, the simulated one and whether it held. Empty
    unless all six of 001's (scheduler, rate) cells are among `cells` with the paper's values."""
    mean = {(c["scheduler"], c["transitions_per_s"]): (sum(c["simulated_kbps"]) / len(c["simulated_kbps"]),
                                                     sum(c["paper_kbps"]) / len(c["paper_kbps"]))
            for c in cells if c.get("paper_kbps")}
    if set(mean) != set(PAPER):
        return []
    rates = sorted({r for _, r in PAPER})
    gain = {r: tuple(mean["pf", r][k] / mean["rr", r][k] - 1 for k in (0, 1)) for r in rates}
    fairness = min(_jain(c["simulated_kbps"]) for c in cells if c.get("paper_kbps"))
    falls = all(mean[s, a][0] > mean[s, b][0] for s in ("pf", "rr") for a, b in zip(rates, rates[1:]))
    close = [c for c in cells if c.get("paper_kbps")
             and abs(sum(c["simulated_kbps"]) / sum(c["paper_kbps"]) - 1) <= 0.10]

    def pct(x: float) -> str:
        return f"{x * 100:+.0f} %"

    return [
        {"claim": "sources share fairly (least Jain index)", "paper": "≈ 1", "simulated": f"{fairness:.3f}",
         "held": fairness >= 0.99},
        {"claim": "throughput falls as transitions speed up", "paper": "yes", "simulated": "yes" if falls else "no",
         "held": falls},
        *({"claim": f"PF over RR at {r:g} tr/s", "paper": pct(gain[r][1]), "simulated": pct(gain[r][0]),
           "held": gain[r][0] > 0 if r >= 1 else abs(gain[r][0] - gain[r][1]) <= 0.10} for r in rates),
        {"claim": "cells within 10 % of the paper (mean of sources)", "paper": "6 of 6",
         "simulated": f"{len(close)} of 6", "held": len(close) == 6},
    ]


def print_tables(result: dict, repetitions: int) -> None:
    print(f"seed 001 Tables 2 (PF), 3 (RR): kbit/s per source, simulated/paper, {repetitions} seed(s)")
    for c in result["cells"]:
        values = "  ".join(f"{s:5.1f}/{p:5.1f} {(s / p - 1) * 100:+4.0f}%"
                           for s, p in zip(c["simulated_kbps"], c["paper_kbps"]))
        print(f"{c['scheduler'].upper()} {c['transitions_per_s']:>3g} tr/s  {values}")
    rows = verdicts(result["cells"])
    if rows:
        print(f"\n{'what 001 shows':<48} {'paper':>7} {'simulated':>9}  reproduced")
        for v in rows:
            print(f"{v['claim']:<48} {v['paper']:>7} {v['simulated']:>9}  {'yes' if v['held'] else 'no'}")


def table_rows(result: dict) -> list[dict]:
    """One row per source and cell (the CSV beside the figures)."""
    return [{"scheduler": c["scheduler"], "transitions_per_s": c["transitions_per_s"], "source": i + 1,
             "simulated_kbps": s, "sd_kbps": sd, "paper_kbps": p}
            for c in result["cells"]
            for i, (s, sd, p) in enumerate(zip(c["simulated_kbps"], c["sd_kbps"], c["paper_kbps"]))]
