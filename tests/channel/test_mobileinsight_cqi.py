"""Per-subframe channel quality from a device (seed 002 §5's per-slot DRC, for LTE): the CQI
reports of a crafted MobileInsight log (LTE_PHY_PUCCH_CSF at 43.300 s with CQI 9 and 43.320 s
with 11, LTE_PHY_PUSCH_CSF at 43.340 s with 11; a 10-MHz cell, 50 resource blocks) read by
`cellperf channel stats` as a 1-ms trace, with exact statistics."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cellperf.channel import read_trace
from cellperf.channel.analysis import trace_stats
from cellperf.errors import UserError
from tests.channel.conftest import run_cli

DATA = Path(__file__).resolve().parent.parent / "radiologs" / "data"
#: TS 36.213 Table 7.2.3-1 efficiency × 12 subcarriers × 14 symbols × 1000 subframes × 50 blocks.
RATE_9, RATE_11 = 2.4063 * 8.4e6, 3.3223 * 8.4e6


@pytest.mark.parametrize("name", ["mobileinsight-phy.xml", "mobileinsight-phy.jsonl"])
def test_cqi_reports_are_a_per_subframe_trace_with_exact_statistics(name):
    trace = read_trace(DATA / name)
    # Slots 0-19 hold CQI 9 (until the report at 20 ms), slots 20-40 CQI 11.
    assert trace.slot_s == 0.001 and trace.slots == 41
    assert trace.rates().tolist() == pytest.approx([RATE_9] * 20 + [RATE_11] * 21)
    s = trace_stats(trace, window_s=1.0)
    p9, p11 = 20 / 41, 21 / 41
    assert s["mean_rate_bps"] == pytest.approx(p9 * RATE_9 + p11 * RATE_11)
    assert s["std_rate_bps"] == pytest.approx(math.sqrt(p9 * p11) * (RATE_11 - RATE_9))
    assert (s["modal_rate_bps"], s["state_changes"]) == (pytest.approx(RATE_11), 1)
    assert s["modal_fraction"] == pytest.approx(p11)
    assert s["entropy_bits"] == pytest.approx(-(p9 * math.log2(p9) + p11 * math.log2(p11)))
    assert s["mean_sojourn_slots"] == pytest.approx(20.5)


def test_channel_stats_reads_a_mobileinsight_log_from_the_command_line():
    p = run_cli("channel", "stats", DATA / "mobileinsight-phy.jsonl", "--json")
    assert p.returncode == 0, p.stderr
    (s,) = json.loads(p.stdout)["traces"]
    assert s["duration_s"] == pytest.approx(0.041) and s["modal_fraction"] == pytest.approx(21 / 41)


def test_bad_cqi_inputs_are_refused_in_one_line(tmp_path):
    lines = (DATA / "mobileinsight-phy.jsonl").read_text().splitlines()
    cases = {
        "no-cqi": ([lines[0], lines[1]], r"no CQI report \(LTE_PHY_PUCCH_CSF, LTE_PHY_PUSCH_CSF\)"),
        "first": ([lines[2], lines[0]],
                  r"a CQI report before any LTE serving-cell message giving the downlink bandwidth"),
        "range": ([lines[0], lines[2].replace('"CQI CW0": 9', '"CQI CW0": 16')],
                  r"a LTE_PHY_PUCCH_CSF message has CQI CW0 '16' \(expected 0 to 15\)"),
    }
    for name, (body, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(body) + "\n")
        with pytest.raises(UserError, match=f"{name}.jsonl: {message}"):
            read_trace(path)
    with pytest.raises(UserError, match="--rate-table does not apply"):
        read_trace(DATA / "mobileinsight-phy.jsonl", rate_table="drc")
