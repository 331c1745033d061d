"""The report's section of simulated runs (campaign tests of `type = "simulate"`): seed 001's
Tables 2/3 and Figs. 5-7 made from the store. Tests whose scenarios differ only in the
scheduler and the channel form one set (one table, one Fig. 7, and Figs. 5/6 at its slowest
and fastest transitions); the paper's values stand beside the cells that are 001's scenario
(cellperf.simulate.seed001.paper_kbps). The figures are drawn by the same code as `cellperf
simulate --seed001 --figures` (figure_items)."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import polars as pl
from plotly.colors import qualitative

from cellperf.report.item import Item, has_view, layout
from cellperf.report.tables import html_table
from cellperf.store import Store

#: Options a set of cells varies (001's tables: scheduler × transition rate).
CELL_KEYS = ("scheduler", "channel")
#: Seconds of the window plots (001 Figs. 5 and 6 show about 100 s).
WINDOW_SECONDS = 100.0


def _sets(store: Store) -> list[dict]:
    """The simulated tests grouped into sets, in the order they first ran: [{"options": common options, "tests": [{test,
    options, runs: [(run_id, repetition, seed)], goodput: frame run_id, flow_id, goodput_bps}]}]."""
    runs = store.frame("""SELECT run_id, test, repetition, config FROM runs
                          WHERE status = 'ok' AND test_type = 'simulate' ORDER BY started_at, run_id""")
    if runs.height == 0:
        return []
    flows = store.frame("""SELECT f.run_id, f.flow_id, f.goodput_bps FROM flows f JOIN runs r USING (run_id)
                           WHERE r.status = 'ok' AND r.test_type = 'simulate' AND f.role = 'data'""")
    tests: dict[str, dict] = {}
    for run_id, test, repetition, config in runs.iter_rows():
        config = json.loads(config) if isinstance(config, str) else config
        t = tests.setdefault(test, {"test": test, "options": config["options"], "runs": []})
        t["runs"].append((run_id, repetition, config["seed"]))
    sets: dict[str, dict] = {}
    for t in tests.values():
        t["goodput"] = flows.filter(pl.col("run_id").is_in([r[0] for r in t["runs"]]))
        common = {k: v for k, v in t["options"].items() if k not in CELL_KEYS}
        sets.setdefault(json.dumps(common, sort_keys=True), {"options": common, "tests": []})["tests"].append(t)
    return list(sets.values())


def _cells(tests: list[dict]) -> list[dict]:
    """Per test: per source mean and standard deviation (n−1) of goodput over its runs."""
    from cellperf.simulate.seed001 import paper_kbps, transition_rate

    cells = []
    for t in tests:
        per_source = (t["goodput"].group_by("flow_id").agg(mean=pl.col("goodput_bps").mean() / 1e3,
                                                           sd=pl.col("goodput_bps").std().fill_null(0.0) / 1e3)
                      .sort("flow_id"))
        cells.append({"test": t["test"], "scheduler": t["options"]["scheduler"],
                      "transitions_per_s": transition_rate(t["options"]), "channel": ", ".join(t["options"]["channel"]),
                      "runs": len(t["runs"]), "simulated_kbps": per_source["mean"].to_list(),
                      "sd_kbps": per_source["sd"].to_list(), "paper_kbps": paper_kbps(t["options"]), "source": t})
    order = {"pf": 0, "rr": 1}
    return sorted(cells, key=lambda c: (order.get(c["scheduler"], 2), c["transitions_per_s"] is None,
                                        c["transitions_per_s"] or 0, c["channel"]))


def _label(options: dict) -> str:
    """What a set changes from `cellperf simulate`'s defaults (001's scenario and our choices)."""
    from cellperf.simulate.scenario import DEFAULTS

    changed = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in options.items()
               if k in DEFAULTS and k not in ("seed", "repetitions") and v != DEFAULTS[k]]
    return ", ".join(changed) or "the defaults of cellperf simulate"


def _table(cells: list[dict], label: str, key: str) -> Item:
    sources = max(len(c["simulated_kbps"]) for c in cells)
    rows = []
    for c in cells:
        rate = f"{c['transitions_per_s']:g}" if c["transitions_per_s"] is not None else c["channel"]
        values = []
        for i, (s, sd) in enumerate(zip(c["simulated_kbps"], c["sd_kbps"])):
            text = f"{s:.1f}" + (f" ± {sd:.1f}" if c["runs"] > 1 else "")
            if c["paper_kbps"]:
                p = c["paper_kbps"][i]
                text += f" / {p:.2f} ({(s / p - 1) * 100:+.0f} %)"
            values.append(text)
        rows.append([c["test"], c["scheduler"].upper(), rate, c["runs"], *values])
    table = html_table(["test", "scheduler", "transitions/s", "runs", *(f"source {i + 1}" for i in range(sources))],
                       rows, name=f"{key}-throughput") + _verdicts_html(cells)
    return Item(key, "TCP throughput per source (001 Tables 2 and 3)",
                f"Goodput per source, kbit/s: mean ± standard deviation over the runs (seeds); where the cell is seed "
                f"001's scenario (Table 1: 3 sources, 1 Mb/s / 100 kb/s two-state channel, 2 wired hops of 100 Mb/s "
                f"and 10 ms, Reno, 2000-bit packets, ssthresh 16), simulated / paper (Table 2 PF, Table 3 RR; 001 ran "
                f"1000 s). Scenario: {label}.", table_html=table)


def _verdicts_html(cells: list[dict]) -> str:
    """What of seed 001 these cells reproduce and what not (seed001.verdicts), when the set
    holds 001's six scenario cells."""
    from cellperf.simulate.seed001 import verdicts

    rows = [[v["claim"], v["paper"], v["simulated"], "yes" if v["held"] else "no"] for v in verdicts(cells)]
    return html_table(["what 001 shows", "paper", "simulated", "reproduced"], rows, name="seed001-verdicts",
                      strong=[r[-1] == "no" for r in rows]) if rows else ""


def _windows(store: Store, cells: list[dict]) -> dict:
    """Figs. 5 and 6: the first run of the slowest and of the fastest transition rate (of PF
    where the set has PF at that rate, as 001 draws)."""
    rated = [c for c in cells if c["transitions_per_s"] is not None]
    if not rated or not has_view(store, "sim_cwnd"):
        return {}
    slow = min(rated, key=lambda c: (c["transitions_per_s"], c["scheduler"] != "pf"))
    fast = min(rated, key=lambda c: (-c["transitions_per_s"], c["scheduler"] != "pf"))
    out = {}
    for fig, c in {"fig5": slow, "fig6": fast}.items():
        if fig == "fig6" and c is slow:
            break
        run_id, _, seed = min(c["source"]["runs"], key=lambda r: r[1])
        cwnd = store.frame('SELECT time_s, "user", cwnd FROM sim_cwnd WHERE run_id = ? AND time_s <= ? '
                           'ORDER BY "user", time_s', [run_id, WINDOW_SECONDS])
        if cwnd.height:
            out[fig] = {"scheduler": c["scheduler"], "transitions_per_s": c["transitions_per_s"], "seed": seed,
                        "cwnd": cwnd}
    return out


def seed001_section(store: Store) -> list[Item]:
    """Per set of simulated tests: the Tables 2/3-style table, Figs. 5 and 6, Fig. 7."""
    items = []
    sets = _sets(store)
    for k, s in enumerate(sets, start=1):
        suffix = "" if k == 1 else f"-set{k}"
        note = "" if len(sets) == 1 else f" — set {k}"
        cells = _cells(s["tests"])
        items.append(_table(cells, _label(s["options"]), f"seed001-table{suffix}"))
        if note:
            items[-1].title += note
        items += figure_items({"cells": cells, "windows": _windows(store, cells)}, WINDOW_SECONDS, suffix, note)
    return items


def figure_items(result: dict, window_seconds: float = 100.0, key_suffix: str = "", note: str = "") -> list:
    """Report items of Figs. 5 and 6 (cwnd of each source over the first `window_seconds`
    of the `windows` given) and Fig. 7 (mean throughput per source against transition rate,
    PF and RR, simulated and, where a cell has them, the paper's). `result` is what
    `cellperf.simulate.seed001.reproduce` returns, or the same made from a store (seed001_section)."""
    items = []
    for fig, w in result["windows"].items():
        figure = go.Figure()
        cwnd = w["cwnd"].filter(pl.col("time_s") <= window_seconds).sort("user", "time_s")
        for (user,), d in cwnd.group_by("user", maintain_order=True):
            figure.add_trace(go.Scatter(x=d["time_s"], y=d["cwnd"], mode="lines", line_shape="hv",
                                        name=f"source {user + 1}"))
        figure.update_xaxes(title_text="time (s)")
        figure.update_yaxes(title_text="congestion window (packets)")
        rate, scheduler = w["transitions_per_s"], w["scheduler"]
        speed = "slow" if rate < 1 else "fast"
        items.append(Item(f"seed001-{fig}{key_suffix}",
                          f"Window over time, {speed} transitions ({rate:g}/s, {scheduler.upper()}){note}",
                          f"cwnd of each source, first {window_seconds:g} s of seed {w['seed']} (001 Fig. "
                          f"{5 if fig == 'fig5' else 6}).", layout(figure, 380)))
    cells = [c for c in result["cells"] if c["transitions_per_s"] is not None]
    if not cells:
        return items
    figure = go.Figure()
    for (scheduler, name), colour in zip((("pf", "PF"), ("rr", "RR"), ("none", "own links")), qualitative.Plotly):
        mine = sorted((c for c in cells if c["scheduler"] == scheduler), key=lambda c: c["transitions_per_s"])
        if not mine:
            continue
        rates = [c["transitions_per_s"] for c in mine]
        figure.add_trace(go.Scatter(x=rates, y=[sum(c["simulated_kbps"]) / len(c["simulated_kbps"]) for c in mine],
                                    mode="lines+markers", line_color=colour, name=f"{name}, simulated"))
        paper = [c for c in mine if c.get("paper_kbps")]
        if paper:
            figure.add_trace(go.Scatter(x=[c["transitions_per_s"] for c in paper],
                                        y=[sum(c["paper_kbps"]) / len(c["paper_kbps"]) for c in paper], mode="markers",
                                        marker=dict(symbol="x", size=10, color=colour), name=f"{name}, 001 Tables 2/3"))
    figure.update_xaxes(title_text="transitions per second", type="log")
    figure.update_yaxes(title_text="TCP throughput per source (kbit/s)")
    items.append(Item(f"seed001-fig7{key_suffix}", f"TCP throughput against transition rate, PF vs RR{note}",
                      "Mean goodput per source (001 Fig. 7), simulated and, where the scenario is 001's, the paper's.",
                      layout(figure, 380)))
    return items
