"""The report's replay fidelity section (issue 29 §3): per stored check (`replay_samples`), the
scorecard (`cellperf.replay.scorecard`: CellReplay's relative error of the means and EMD over the
live mean, `full` beside `heavy`, and the issue's targets) and, per workload measure, the live,
`full` and `heavy` CDFs."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from cellperf.report.item import Item, cdf_trace, layout, percent
from cellperf.report.tables import html_table
from cellperf.store import Store

_COLOURS = {"live": "#222222", "full": "#1f77b4", "heavy": "#d62728", "live-2": "#999999"}


def replay_fidelity(store: Store) -> list[Item]:
    from cellperf.replay import results, scorecard

    if not store.frame("SELECT count(*) AS n FROM replay_samples")["n"][0]:
        return []
    items = []
    for check in results.read_checks(store):
        got = check["results"]
        if "live" not in got:
            continue
        # A second live run, when the check has one, beside the modes: the link's own noise.
        modes = [m for m in (*scorecard.MODES, scorecard.LIVE_AGAIN) if m in got]
        card = scorecard.score(got["live"], {m: got[m] for m in modes})
        name = f"{check['label'] or check['bundle']} ({check['check_id']})"
        rows = []
        for measure, by_mode in card["measures"].items():
            first = next(iter(by_mode.values()), {})
            row = [scorecard.label(measure), first.get("n_live", 0),
                   "–" if first.get("live_mean") is None else f"{first['live_mean']:.4g}"]
            for m in modes:
                row += [percent(by_mode[m].get("mean_error")), percent(by_mode[m].get("emd_over_mean"))]
            rows.append(row)
        # The targets in a table of their own: each mode's figure under its name, full's 95 %
        # interval, and the verdict (for full) in a column that says so.
        targets = []
        for target, t in card["targets"].items():
            points = t["statistic"] == "median_points"
            unit = (lambda x: "–" if x is None else f"{x:.2f} pts") if points \
                else (lambda x: "–" if x is None else f"{100 * x:.1f} %")
            label = "100/10 train rate ratio" if target == "train_ratio" else scorecard.LABELS.get(target, target)
            targets.append([f"{label} ({t['statistic']})", f"≤ {unit(t['bound'])}", *[unit(t.get(m)) for m in modes],
                            scorecard.span(t["interval"].get("full"), points, words=True),
                            scorecard.verdict(t, words=True)])
        head = ["measure", "n live", "live mean"] + [h for m in modes for h in (f"{m} error %", f"{m} EMD/mean %")]
        target_head = ["target", "bound", *modes, "full: 95 % interval of replay − live", "full: met?"]
        ratio = card["train_ratio"]
        items.append(Item(f"replay-score-{check['check_id']}", f"Replay scorecard: {name}",
                          "Per workload measure: relative error of the means and earth mover's distance over the live "
                          "mean (CellReplay's measures), full replay beside heavy (mahimahi's way); below, the issue's "
                          "targets, met or missed by full, with the 95 % bootstrap interval of full's signed error: "
                          "where it crosses the bound, the samples cannot tell. 100/10-packet train rate: " + ", ".join(
                              f"{k} {'–' if v is None else f'{v:.2f}x'}" for k, v in ratio.items())
                          + f". Bundle {html.escape(str(check['bundle']))}.",
                          table_html=html_table(head, rows) + html_table(target_head, targets)))
        fig = go.Figure()
        measures = [m for m in card["measures"]]
        for i, measure in enumerate(measures):
            for mode in ("live", *modes):
                values = np.asarray(got.get(mode, {}).get(measure, []), dtype=float)
                trace = cdf_trace(values, f"{mode}", line_color=_COLOURS[mode], legendgroup=mode,
                                  showlegend=i == 0, visible=i == 0)
                if trace is not None:
                    fig.add_trace(trace)
        # One measure at a time: a menu switches between them.
        counts = [sum(1 for mode in ("live", *modes) if len(got.get(mode, {}).get(m, []))) for m in measures]
        buttons, start = [], 0
        for measure, n in zip(measures, counts):
            visible = [False] * sum(counts)
            visible[start:start + n] = [True] * n
            name_of = scorecard.label(measure)
            buttons.append(dict(label=name_of, method="update", args=[{"visible": visible}, {"xaxis": {"title": name_of}}]))
            start += n
        fig.update_layout(updatemenus=[dict(buttons=buttons, x=1.0, xanchor="right", y=1.15)],
                          xaxis_title=scorecard.label(measures[0]) if measures else "",
                          yaxis_title="CDF")
        items.append(Item(f"replay-cdf-{check['check_id']}", f"Live vs replayed: {name}",
                          "CDF of each workload measure through the live link and replayed full and heavy"
                          + (", and the live link again (its own variability)" if scorecard.LIVE_AGAIN in modes else "")
                          + " (choose the measure in the menu).", layout(fig)))
    return items


SECTIONS = (("Replay fidelity", (replay_fidelity,)),)
