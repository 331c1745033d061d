"""Replay checks kept in a results store (`replay_samples`) and the report's section drawn from
them: the scorecard of the stored samples and one CDF per measure, live, full and heavy."""

from __future__ import annotations

import json
import re

from cellperf.replay import results, scorecard
from cellperf.report import build_report
from cellperf.store import Store

SAMPLES = {
    "live": {"ping_rtt_ms": [60.0, 70.0, 80.0], "download_s_1MB": [1.0, 1.2], "voip_r": [90.0, 92.0]},
    "full": {"ping_rtt_ms": [62.0, 72.0, 82.0], "download_s_1MB": [1.1, 1.3], "voip_r": [90.5, 91.0]},
    "heavy": {"ping_rtt_ms": [40.0, 45.0, 50.0], "download_s_1MB": [0.8, 0.9], "voip_r": [93.0, 93.0]},
}


def test_a_stored_check_reads_back_and_the_report_draws_its_scorecard_and_cdfs(tmp_path):
    check_id = results.store_check(tmp_path / "store", "/data/home-lte", "home LTE", SAMPLES)
    with Store.open(tmp_path / "store", read_only=True) as store:
        checks = results.read_checks(store)
    assert len(checks) == 1 and checks[0]["check_id"] == check_id and checks[0]["label"] == "home LTE"
    got = {mode: {m: sorted(v) for m, v in measures.items()} for mode, measures in checks[0]["results"].items()}
    assert got == SAMPLES
    out = build_report(tmp_path / "store", tmp_path / "report.html")
    assert out["items"] == [f"replay-score-{check_id}", f"replay-cdf-{check_id}"]
    page = (tmp_path / "report.html").read_text()
    # The scorecard's figures are the scorecard module's: ping's mean is 70 live, 72 full
    # (2.9 %), 45 heavy (35.7 %); the 1 MB download's target (9 %) is missed at 9.1 %.
    card = scorecard.score(SAMPLES["live"], {m: SAMPLES[m] for m in scorecard.MODES})
    assert round(100 * card["measures"]["ping_rtt_ms"]["full"]["mean_error"], 1) == 2.9
    table = page[page.index("Replay scorecard"):page.index("Live vs replayed")]
    assert "<td>2.9</td>" in table and "<td>35.7</td>" in table
    # The targets' table: each mode's figure under its own name, full's interval and the
    # verdict in columns of their own. Two downloads a side: a resample of each is one of
    # three means (live 1.0, 1.1, 1.2 s; full 1.1, 1.2, 1.3 s), each end a sixteenth of the
    # draws, so the interval runs from (1.1 - 1.2) / 1.2 to (1.3 - 1.0) / 1.0: over the bound
    # and under it, the samples cannot tell.
    assert ("<th>target</th><th>bound</th><th>full</th><th>heavy</th><th>full: 95 % interval of replay − live</th>"
            "<th>full: met?</th>") in table
    assert ("<td>1 MB download s (mean)</td><td>≤ 9.0 %</td><td>9.1 %</td><td>22.7 %</td><td>-8.3 to +30.0 %</td>"
            "<td>missed (not sure: the interval crosses the bound)</td>") in table
    # One CDF per mode and measure (3 × 3 traces), the first measure's shown, a menu for the rest.
    figure = json.loads(re.search(r'<script type="application/json" id="fig-replay-cdf-[^"]+">(.*?)</script>',
                                  page, re.S).group(1))
    assert len(figure["data"]) == 9 and [t["visible"] for t in figure["data"]][:3] == [True] * 3
    assert len(figure["layout"]["updatemenus"][0]["buttons"]) == 3


def test_a_second_live_run_is_scored_beside_the_replays(tmp_path):
    # bench/replay.py's live-against-live run: its error is the link's own noise, a column and
    # a CDF of its own (ping mean 74 against 70: 5.7 %).
    samples = {**SAMPLES, scorecard.LIVE_AGAIN: {"ping_rtt_ms": [64.0, 74.0, 84.0], "download_s_1MB": [1.0, 1.1],
                                                 "voip_r": [91.0, 92.0]}}
    results.store_check(tmp_path / "store", "/data/home-lte", "home LTE", samples)
    build_report(tmp_path / "store", tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    table = page[page.index("Replay scorecard"):page.index("Live vs replayed")]
    assert "live-2 error %" in table and "<td>5.7</td>" in table
    figure = json.loads(re.search(r'<script type="application/json" id="fig-replay-cdf-[^"]+">(.*?)</script>',
                                  page, re.S).group(1))
    assert len(figure["data"]) == 12
