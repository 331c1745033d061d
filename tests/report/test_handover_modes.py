"""Soft and hard handovers side by side (seed 004 §IV.B) from a store's handoffs, gaps, delay
periods and delay spikes: the mode from the run's link, or derived from the loss on a real
network; each event counted once, at its nearest handover."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.handoffs.modes import link_mode
from cellperf.report import collect_items
from cellperf.report.handover_modes import handover_table
from cellperf.store import RunRecord, Store
from tests.store.test_store import T0, run_row


def _at(s: float) -> datetime:
    return datetime.fromtimestamp(T0 + s, timezone.utc)


def _commit(s: Store, run_id: str, network: str, config: dict, handoffs: list[float], stream: tuple[float, float],
            gaps=(), spikes=()):
    """A mobile run with one UDP stream alive over `stream` (s after T0), handoffs at the given
    times, gaps (start, ms, lost; lost 0 = a delay period) and spikes (start, ms, peak)."""
    row = run_row(run_id) | {"network": network, "scenario": "mobile", "test": "udp", "test_type": "udp-cbr",
                             "config": {"interval_s": 5.0, **config}}
    tables = {
        "flows": pl.DataFrame({"run_id": [run_id], "flow_id": [1], "role": ["data"], "proto": ["udp"],
                               "direction": ["downlink"], "start_s": [T0 + stream[0]], "end_s": [T0 + stream[1]]}),
        "handoffs": pl.DataFrame({"run_id": [run_id] * len(handoffs), "time_s": [T0 + h for h in handoffs],
                                  "last_old_s": [T0 + h for h in handoffs], "kind": ["inter-BS"] * len(handoffs)},
                                 schema={"run_id": pl.Utf8, "time_s": pl.Float64, "last_old_s": pl.Float64,
                                         "kind": pl.Utf8}),
        "gaps": pl.DataFrame({"run_id": [run_id] * len(gaps), "flow_id": [1] * len(gaps),
                              "direction": ["downlink"] * len(gaps),
                              "kind": ["gap" if g[2] else "delay_period" for g in gaps],
                              "start_ts": [_at(g[0]) for g in gaps], "duration_ms": [float(g[1]) for g in gaps],
                              "lost": [g[2] for g in gaps]},
                             schema={"run_id": pl.Utf8, "flow_id": pl.UInt32, "direction": pl.Utf8, "kind": pl.Utf8,
                                     "start_ts": pl.Datetime("us", "UTC"), "duration_ms": pl.Float64,
                                     "lost": pl.UInt64}),
        "delay_spikes": pl.DataFrame({"run_id": [run_id] * len(spikes), "flow_id": [1] * len(spikes),
                                      "direction": ["downlink"] * len(spikes), "start_ts": [_at(p[0]) for p in spikes],
                                      "duration_ms": [float(p[1]) for p in spikes],
                                      "packets": [3] * len(spikes), "peak_ms": [float(p[2]) for p in spikes]},
                                     schema={"run_id": pl.Utf8, "flow_id": pl.UInt32, "direction": pl.Utf8,
                                             "start_ts": pl.Datetime("us", "UTC"), "duration_ms": pl.Float64,
                                             "packets": pl.UInt64, "peak_ms": pl.Float64}),
    }
    s.commit_run(RunRecord(row, tables))


def test_link_modes():
    assert link_mode({"profile": "wibro-mobile"}) == "hard" and link_mode({"profile": "umts-car"}) == "hard"
    assert link_mode({"profile": "evdo-mobile"}) == "soft"
    assert link_mode('{"link": [["downlink", "1mbit"], ["outage_mode", "drop"]], "testbed": "emulated"}') == "hard"
    assert link_mode({"link": [["downlink", "1mbit"]], "testbed": "emulated"}) == "soft"  # the emulator's default
    assert link_mode({"testbed": "real"}) is None
    assert link_mode({"profile": "gprs-mobile", "testbed": "emulated"}) is None  # a profile no longer known


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        # WiBro: the 300-ms gap (20 lost) and the spike at 10 s; a 60-ms delay period 4.9 s later is
        # nearer 10 than 20; the gap at 20.1 s (15 lost) is the second handover's.
        _commit(s, "W", "WiBro", {"profile": "wibro-mobile", "testbed": "emulated"}, [10.0, 20.0], (0.0, 30.0),
                gaps=[(10.0, 300, 20), (14.9, 60, 0), (20.1, 250, 15)], spikes=[(10.0, 400, 650.0)])
        # EV-DO: held, not lost; the handover at 100 s has no stream alive and is no row.
        _commit(s, "E", "EV-DO", {"profile": "evdo-mobile", "testbed": "emulated"}, [5.0, 100.0], (0.0, 30.0),
                gaps=[(5.0, 120, 0)], spikes=[(4.9, 200, 300.0)])
        # A real network: the handover with a lossy gap is derived hard, the quiet one soft.
        _commit(s, "R", "lab", {"testbed": "real"}, [10.0, 30.0], (0.0, 40.0), gaps=[(9.0, 2000, 3)])
    with Store.open(tmp_path, read_only=True) as s:
        yield s


def test_each_handover_with_its_mode_interruption_loss_and_spike(store):
    per = handover_table(store).select("run_id", "time_s", "mode", "basis", "interruption_ms", "lost", "spike_ms")
    rows = [(r, round(t - T0, 1), m, b, i, n, p) for r, t, m, b, i, n, p in per.iter_rows()]
    assert rows == [("E", 5.0, "soft", "link", 120.0, 0, 300.0),
                    ("W", 10.0, "hard", "link", 300.0, 20, 650.0),
                    ("W", 20.0, "hard", "link", 250.0, 15, None),
                    ("R", 10.0, "hard", "derived: loss", 2000.0, 3, None),
                    ("R", 30.0, "soft", "derived: loss", 0.0, 0, None)]


def test_the_report_puts_soft_beside_hard(store):
    items = {i.key: i for _, its in collect_items(store) for i in its}
    table = items["handover-modes"].table_html
    assert ("<td>WiBro</td><td>mobile</td><td>hard</td><td>link</td><td>1</td><td>2</td><td>275</td><td>300</td>"
            "<td>100</td><td>17.5</td><td>20</td><td>50</td><td>650</td><td>650</td>") in table
    assert ("<td>EV-DO</td><td>mobile</td><td>soft</td><td>link</td><td>1</td><td>1</td><td>120</td><td>120</td>"
            "<td>0</td><td>0.0</td><td>0</td><td>100</td><td>300</td><td>300</td>") in table
    assert "<td>lab</td><td>mobile</td><td>hard</td><td>derived: loss</td>" in table
    assert table.count("</tr>") == 1 + 4
    fig = items["handover-modes-figure"].figure
    assert {t.name for t in fig.data} == {"soft", "hard"} and len(fig.data) == 6


def test_a_panel_with_nothing_to_draw_says_none(tmp_path):
    """No delay spike came within 5 s of a handover: the spike panel says so, with no axes."""
    from cellperf.report.handover_modes import handover_modes

    with Store.open(tmp_path, create=True) as s:
        _commit(s, "R", "lab", {"testbed": "real"}, [10.0, 30.0], (0.0, 40.0), gaps=[(9.0, 2000, 3)])
    with Store.open(tmp_path, read_only=True) as s:
        fig = {i.key: i for i in handover_modes(s)}["handover-modes-figure"].figure
    notes = [a for a in fig.layout.annotations if a.text.startswith("none")]
    assert [(a.text, a.xref, a.yref, a.y) for a in notes] == [
        ("none: no delay spike<br>within 5 s of a handover", "paper", "paper", 0.5)]
    assert fig.layout.xaxis3.domain[0] < notes[0].x < fig.layout.xaxis3.domain[1]  # over the third panel
    assert {t.xaxis for t in fig.data} == {"x", "x2"} and len(fig.data) == 4  # soft and hard, two panels
    assert fig.layout.xaxis3.visible is False and fig.layout.yaxis3.visible is False
    assert [t.showlegend for t in fig.data] == [True, False, True, False]
