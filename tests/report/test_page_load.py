"""A report stays quick to open at any size of campaign: its figures are drawn as the reader
scrolls to them (plotly.js evaluated once, after the page has loaded), per-packet series are
binned before they reach the page, and an embedded CSV has a size limit (docs/report.md)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np
import polars as pl
import pytest

from cellperf.report import build_report, collect_items
from cellperf.report.studies import PID_TIMELINE_BINS
from cellperf.store import RunRecord, Store, write_parquet
from tests.report.test_report import CHROMIUM, report_page
from tests.store.test_store import T0, run_row

PACKETS = 120_000
GAP_AT = 70_000
GAP_S = 0.8


def _stream_store(root, runs: int = 1, packets: int = PACKETS) -> None:
    """`runs` CBR downlink runs of `packets` packets 1 ms apart, each received except for a
    lost burst that leaves one 801-ms inter-arrival before packet GAP_AT (or the middle one)."""
    gap_at = GAP_AT if packets > GAP_AT else packets // 2
    k = np.arange(packets)
    send = T0 + k * 1e-3
    recv = send + 0.020 + np.where(k >= gap_at, GAP_S, 0.0)
    ts = lambda secs: pl.Series(np.round(secs * 1e9).astype(np.int64)).cast(pl.Datetime("ns", "UTC"))
    with Store.open(root, create=True) as s:
        for r in range(runs):
            run_id = f"cbr{r}"
            staging = s.staging_dir(run_id)
            write_parquet(pl.DataFrame({
                "flow_id": pl.Series([1] * packets, dtype=pl.UInt32), "seq": pl.Series(k, dtype=pl.UInt64),
                "send_ts": ts(send), "recv_ts": ts(recv), "bytes": pl.Series([1000] * packets, dtype=pl.UInt32),
                "lost": [False] * packets, "owd_ms": [20.0] * packets, "jitter_ms": [0.0] * packets,
                "direction": ["downlink"] * packets, "run_id": [run_id] * packets}), staging / "udp_packets.parquet")
            gaps = pl.DataFrame({"run_id": [run_id], "flow_id": [1], "direction": ["downlink"], "kind": ["gap"],
                                 "start_ts": [datetime.fromtimestamp(recv[gap_at - 1], timezone.utc)],
                                 "duration_ms": [GAP_S * 1e3 + 1], "lost": [40]})
            flows = pl.DataFrame([{"run_id": run_id, "flow_id": 1, "role": "data", "proto": "udp",
                                   "direction": "downlink", "packets": packets, "duration_s": packets / 1e3,
                                   "goodput_bps": 8e6}])
            row = run_row(run_id) | {"test": "udp-cbr-down", "test_type": "udp-cbr", "scenario": "stationary",
                                     "config": {"interval_s": 5.0, "options": {}},
                                     "ended_at": datetime.fromtimestamp(recv[-1], timezone.utc)}
            s.commit_run(RunRecord(row, {"gaps": gaps, "flows": flows}, staging_dir=staging))


def test_the_inter_arrival_timeline_is_binned_and_keeps_the_gap(tmp_path):
    _stream_store(tmp_path)
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    (trace,) = items["pid-timeline"].figure.data
    # 120,000 packets → one point per bin, the longest inter-arrival of the bin: the gap's.
    assert PID_TIMELINE_BINS == 500 and len(trace.y) <= PID_TIMELINE_BINS + 1
    assert max(trace.y) == pytest.approx(GAP_S * 1e3 + 1, abs=0.01)
    assert sorted(trace.y)[-2] == pytest.approx(1.0, abs=0.01)  # every other bin: 1-ms spacing (epoch() is a double)
    at = list(trace.y).index(max(trace.y))
    assert trace.x[at] == pytest.approx(GAP_AT * 1e-3 + 0.020 + GAP_S, abs=1e-3)  # where the gap ended


def test_a_big_csv_is_not_embedded_the_query_is_given(monkeypatch):
    import cellperf.report.tables as tables

    monkeypatch.setattr(tables, "MAX_CSV_BYTES", 2000)  # 200 rows: 5,000 B; 60 rows: 1,500 B
    rows = [[k, "x" * 20] for k in range(200)]
    html = tables.html_table(["n", "name"], rows, name="big", query="SELECT n, name FROM t")
    assert "data:text/csv" not in html and "SELECT n, name FROM t" in html
    assert "150 more rows (all 200)" in html and "too many to embed" in html
    assert "data:text/csv" in tables.html_table(["n", "name"], rows[:60], name="small")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_figures_are_drawn_after_load_as_they_come_into_view(tmp_path):
    _stream_store(tmp_path / "store", runs=2, packets=2000)
    page_file = tmp_path / "report.html"
    build_report(tmp_path / "store", page_file)
    text = page_file.read_text()
    assert text.count('id="plotly-js"') == 1 and len(text) < 2_000_000  # plotly.js's cartesian bundle
    errors: list[str] = []
    with report_page(page_file, tmp_path, errors, viewport={"width": 1300, "height": 400}) as page:
        # At the load event the text is there, plotly.js is not yet evaluated, no figure drawn.
        assert page.evaluate("window.cellperfAtLoad") == {"plotly": False, "drawn": 0}
        top = {key: page.evaluate(f"document.getElementById('fig-{key}').getBoundingClientRect().top")
               for key in ("gaps-cdf", "pid-timeline")}
        assert top["gaps-cdf"] < 2 * 400 < top["pid-timeline"]  # within a screen of the view, and beyond
        page.wait_for_function("document.querySelector('#fig-gaps-cdf .main-svg')")
        height = page.evaluate("document.documentElement.scrollHeight")
        assert page.locator("#fig-pid-timeline .main-svg").count() == 0  # not drawn before it is near
        page.locator("#fig-pid-timeline").scroll_into_view_if_needed()
        page.wait_for_function("document.querySelector('#fig-pid-timeline .main-svg')")
        assert page.locator("#fig-pid-timeline g.trace").count() == 1
        # The boxes had the figures' heights: drawing moved nothing.
        assert page.evaluate("document.documentElement.scrollHeight") == height
    assert errors == []
    assert re.search(r'<div class="plot" id="fig-pid-timeline"[^>]*style="height:420px"', text)


def test_every_table_of_a_big_campaign_shows_at_most_fifty_rows(tmp_path):
    from cellperf.report.tables import MAX_ROWS
    from tests.report.test_studies_report import _commit

    # 60 networks with a CBR run each and 70 failed runs: summary and failures grow per run.
    with Store.open(tmp_path, create=True) as s:
        for k in range(60):
            _commit(s, f"ok{k}", "udp-cbr", network=f"N{k:02d}", flows=[
                {"flow_id": 1, "role": "data", "proto": "udp", "direction": "downlink", "goodput_bps": 1e6,
                 "loss_rate": 0.01}])
        for k in range(70):
            s.commit_run(RunRecord(run_row(f"bad{k}", status="failed") | {"reason": f"reason {k}"}))
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    for item in items.values():
        for table in re.findall(r"<tbody>.*?</tbody>", item.table_html or "", re.S):
            assert table.count("<tr") <= MAX_ROWS, item.key
    assert "11 more rows (all 61)" in items["summary"].table_html  # + the failed runs' (WiBro voip, 0/70)
    assert "20 more rows (all 70)" in items["failed"].table_html
    assert "WHERE status = &#x27;failed&#x27;" in items["failed"].table_html


def test_strong_rows_are_bold():
    from cellperf.report.tables import html_table

    table = html_table(["what", "n"], [["all", 3], ["one", 1]], strong=[True, False])
    assert '<tr class="sum"><td>all</td><td>3</td></tr><tr><td>one</td><td>1</td></tr>' in table


def test_the_cartesian_bundle_is_plotlys_own_version_and_used_only_for_its_trace_types():
    from plotly.offline import get_plotlyjs

    from cellperf.report.figure_html import CARTESIAN_JS, _version, plotly_js

    # Fails when plotly is upgraded without the bundle (npm plotly.js-cartesian-dist-min@VERSION).
    assert _version(CARTESIAN_JS.read_text()) == _version(get_plotlyjs()) is not None
    assert plotly_js({"scatter", "bar", "box"}) == CARTESIAN_JS.read_text()
    assert plotly_js({"scatter", "scattergl"}) == get_plotlyjs()
