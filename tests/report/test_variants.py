"""TCP variants compared on one cell (seed 002 Figs. 8 and 9) on a store with crafted flows."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.report.variants import normalised_means, tcp_variants
from cellperf.store import RunRecord, Store

#: (run, congestion, goodput, delay mean, delay std, loss, capacity mean, capacity std)
FLOWS = [("c1", "cubic", 2e6, 300.0, 90.0, 0.010, 2.5e6, 4e5),
         ("c2", "cubic", 1e6, 100.0, 30.0, 0.002, 2.0e6, 6e5),
         ("r1", "reno", 1e6, 200.0, 60.0, 0.004, 2.0e6, 5e5)]


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        for k, (run, cc, good, mean, std, loss, cap, cap_std) in enumerate(FLOWS):
            row = {"run_id": run, "network": "EV-DO", "scenario": "mobile", "test": "tcp", "test_type": "tcp-bulk",
                   "repetition": k + 1, "config": {"options": {"congestion": cc}}, "config_sha256": "x",
                   "status": "ok", "started_at": datetime.fromtimestamp(1.7e9 + 100 * k, timezone.utc)}
            flows = pl.DataFrame({"run_id": [run], "flow_id": pl.Series([1], dtype=pl.UInt32), "role": ["data"],
                                  "proto": ["tcp"], "direction": ["downlink"], "goodput_bps": [good],
                                  "owd_mean_ms": [mean], "owd_std_ms": [std], "loss_rate": [loss],
                                  "mean_capacity_bps": [cap], "capacity_std_bps": [cap_std],
                                  "utilisation": [good / cap]})
            s.commit_run(RunRecord(row, {"flows": flows}))
        yield s


def test_the_means_per_variant_are_normalised_to_the_largest():
    flows = pl.DataFrame({"congestion": [f[1] for f in FLOWS], "goodput_bps": [f[2] for f in FLOWS],
                          "owd_mean_ms": [f[3] for f in FLOWS], "mean_capacity_bps": [f[6] for f in FLOWS]})
    m = normalised_means(flows)
    # cubic: goodput 1.5 Mb/s, delay 200 ms, capacity 2.25 Mb/s; reno: 1, 200, 2.
    assert m["congestion"].to_list() == ["cubic", "reno"]
    assert m["goodput"].to_list() == pytest.approx([1.0, 2 / 3])
    assert m["delay"].to_list() == pytest.approx([1.0, 1.0])
    assert m["capacity"].to_list() == pytest.approx([1.0, 2 / 2.25])


def test_figures_8_and_9_plot_each_flow_of_each_variant(store):
    items = {i.key: i for i in tcp_variants(store)}
    assert set(items) == {"variants-EV-DO-mobile", "variants-channel-EV-DO-mobile"}
    perf = items["variants-EV-DO-mobile"].figure
    # The flows' points (the legend's entries are empty traces of their own).
    scatters = [t for t in perf.data if t.type == "scatter" and t.showlegend is False]
    # Delay std vs goodput (kbit/s) and loss (%) vs goodput, one trace per variant and panel.
    by = {(t.xaxis, t.name): t for t in scatters}
    assert list(by[("x2", "cubic")].x) == [2000.0, 1000.0] and list(by[("x2", "cubic")].y) == [90.0, 30.0]
    assert list(by[("x3", "reno")].y) == pytest.approx([0.4])
    channel = items["variants-channel-EV-DO-mobile"].figure
    std_panel = {t.name: t for t in channel.data if t.xaxis == "x2" and t.showlegend is False}
    assert list(std_panel["cubic"].x) == [400.0, 600.0]
    assert list(std_panel["cubic"].y) == pytest.approx([0.8, 0.5])


def test_one_variant_alone_is_no_comparison(store):
    store.con.execute("DELETE FROM flows WHERE run_id = 'r1'")
    assert tcp_variants(store) == []


def test_page_loads_are_no_variant(store):
    # The modern campaign's report compared "–" (its web runs' browser connections) with the
    # bulk tests' congestion control.
    store.con.execute("UPDATE runs SET test_type = 'web', config = '{}' WHERE run_id = 'r1'")
    assert tcp_variants(store) == []
