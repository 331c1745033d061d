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


def reproduce(options: dict, record: bool = False) -> dict:
    """Runs the nine cells with `options` (not those of OWN_OPTIONS); returns
    {"cells": [...], "windows": {fig: pyarrow cwnd table}} (windows only with `record`)."""
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
            windows[fig] = outcome.tables["cwnd"]
    return {"cells": cells, "windows": windows}


def print_tables(result: dict, repetitions: int) -> None:
    print(f"seed 001 Tables 2 (PF), 3 (RR): kbit/s per source, simulated/paper, {repetitions} seed(s)")
    for c in result["cells"]:
        values = "  ".join(f"{s:5.1f}/{p:5.1f} {(s / p - 1) * 100:+4.0f}%"
                           for s, p in zip(c["simulated_kbps"], c["paper_kbps"]))
        print(f"{c['scheduler'].upper()} {c['transitions_per_s']:>3g} tr/s  {values}")


def figure_items(result: dict, window_seconds: float = 100.0) -> list:
    """Report items of Figs. 5 and 6 (cwnd of each source over the first `window_seconds`)
    and Fig. 7 (mean throughput per source against transition rate, PF and RR, simulated
    and the paper's)."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    from cellperf.report.figures import Item, _layout

    items = []
    for fig, (scheduler, rate) in WINDOW_FIGURES.items():
        table = result["windows"].get(fig)
        if table is None:
            continue
        first_seed = min(table.column("seed").to_pylist())
        figure = go.Figure()
        rows = table.to_pydict()
        for user in sorted(set(rows["user"])):
            pts = [(t, w) for t, u, w, s in zip(rows["time_s"], rows["user"], rows["cwnd"], rows["seed"])
                   if u == user and s == first_seed and t <= window_seconds]
            figure.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines",
                                        line_shape="hv", name=f"source {user + 1}"))
        figure.update_xaxes(title_text="time (s)")
        figure.update_yaxes(title_text="congestion window (packets)")
        speed = "slow" if rate < 1 else "fast"
        items.append(Item(f"seed001-{fig}", f"Window over time, {speed} transitions ({rate:g}/s, {scheduler.upper()})",
                          f"cwnd of each source, first {window_seconds:g} s of seed {first_seed} (001 Fig. "
                          f"{fig[-1]}).", _layout(figure, 380)))
    figure = go.Figure()
    for (scheduler, name), colour in zip((("pf", "PF"), ("rr", "RR")), qualitative.Plotly):
        cells = [c for c in result["cells"] if c["scheduler"] == scheduler]
        rates = [c["transitions_per_s"] for c in cells]
        figure.add_trace(go.Scatter(x=rates, y=[sum(c["simulated_kbps"]) / 3 for c in cells], mode="lines+markers",
                                    line_color=colour, name=f"{name}, simulated"))
        figure.add_trace(go.Scatter(x=rates, y=[sum(c["paper_kbps"]) / 3 for c in cells], mode="markers",
                                    marker=dict(symbol="x", size=10, color=colour), name=f"{name}, 001 Tables 2/3"))
    figure.update_xaxes(title_text="transitions per second", type="log")
    figure.update_yaxes(title_text="TCP throughput per source (kbit/s)")
    items.append(Item("seed001-fig7", "TCP throughput against transition rate, PF vs RR",
                      "Mean goodput per source (001 Fig. 7), simulated and the paper's.", _layout(figure, 380)))
    return items


def table_rows(result: dict) -> list[dict]:
    """One row per source and cell (the CSV beside the figures)."""
    return [{"scheduler": c["scheduler"], "transitions_per_s": c["transitions_per_s"], "source": i + 1,
             "simulated_kbps": s, "sd_kbps": sd, "paper_kbps": p}
            for c in result["cells"]
            for i, (s, sd, p) in enumerate(zip(c["simulated_kbps"], c["sd_kbps"], c["paper_kbps"]))]
