"""Readers: per-slot tables, rate tables, radio logs, mahimahi traces; bad input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.channel.conftest import run_cli

from cellperf.channel import read_trace
from cellperf.channel.traces import DRC_RATES_BPS
from cellperf.errors import UserError


def test_state_column_with_drc_table(tmp_path):
    p = tmp_path / "drc.csv"
    p.write_text("slot,state\n0,14\n1,14\n2,1\n3,0\n")
    t = read_trace(p, rate_table="drc")
    assert t.states.to_pylist() == [14, 14, 1, 0]
    assert t.rates().tolist() == [3_072_000.0, 3_072_000.0, 38_400.0, 0.0]
    assert len(DRC_RATES_BPS) == 15


def test_parquet_drc_states_on_a_time_grid_keep_their_slot(tmp_path):
    p = tmp_path / "drc.parquet"
    t = 1_700_000_000.0 + np.arange(6) / 600
    pq.write_table(pa.table({"time_s": t, "state": pa.array([3, 3, 12, 12, 12, 0], type=pa.int8())}), p)
    trace = read_trace(p, rate_table="drc")
    assert trace.slot_s == pytest.approx(1 / 600, rel=1e-4)  # epoch doubles resolve 0.24 µs
    assert trace.rates().tolist() == [153_600.0] * 2 + [2_457_600.0] * 3 + [0.0]


def test_custom_rate_table_and_unknown_state(tmp_path):
    table = tmp_path / "cqi.csv"
    table.write_text("state,rate_bps\n7,1000000\n9,2000000\n")
    p = tmp_path / "t.csv"
    p.write_text("slot,state\n0,9\n1,7\n2,9\n")
    assert read_trace(p, rate_table=str(table)).rates().tolist() == [2e6, 1e6, 2e6]
    p.write_text("slot,state\n0,9\n1,8\n")
    with pytest.raises(UserError, match=r"t.csv: state 8 at slot 1 is not in the rate table"):
        read_trace(p, rate_table=str(table))
    with pytest.raises(UserError, match="--rate-table drc"):
        read_trace(p)


def test_parquet_and_time_column_hold_between_rows(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"time_s": [100.0, 100.01, 100.02], "rate_bps": [1e6, 2e6, 1e6]}), p)
    t = read_trace(p, slot_ms=5)
    # Rows at 0, 10 and 20 ms on 5-ms slots: each value held for two slots, the last for one.
    assert t.rates().tolist() == [1e6, 1e6, 2e6, 2e6, 1e6]
    assert t.start_s == 100.0


def test_radio_log_gives_rates_and_handoffs(tmp_path):
    p = tmp_path / "radio.csv"
    p.write_text(
        "time_s,bs_id,sector_id,technology,rate_bps,state\n"
        "0.000,1,1,EV-DO,614400,3\n"
        "0.010,1,1,EV-DO,1228800,5\n"
        "0.020,1,2,EV-DO,1228800,5\n"
        "0.030,2,1,EV-DO,307200,2\n"
    )
    t = read_trace(p, slot_ms=1)
    assert t.slots == 31
    assert t.handoff_slots.tolist() == [20, 30]
    assert t.rates()[15] == 1228800.0


def test_mahimahi_trace_resampled_to_slots(tmp_path):
    p = tmp_path / "x.down"
    p.write_text("1\n1\n2\n4\n")
    t = read_trace(p, slot_ms=2)
    # Period 4 ms → 2 slots: [0,2) has 2 opportunities, [2,4) has 1, the one at 4 ms wraps to slot 0.
    assert t.rates().tolist() == [3 * 12_000 / 0.002, 12_000 / 0.002]


def test_public_mahimahi_traces(shared_traces):
    t = read_trace(shared_traces / "Verizon-EVDO-driving.down", slot_ms=10)
    lines = (shared_traces / "Verizon-EVDO-driving.down").read_text().split()
    period_ms = int(lines[-1])
    assert t.slots == -(-period_ms // 10)
    assert t.rates().mean() * t.slots * 0.010 == pytest.approx(len(lines) * 12_000)


@pytest.mark.parametrize(
    "content, message",
    [
        ("slot,rate_bps\n", "no rows"),
        ("time_s,rate_bps\n1.0,5\n0.5,5\n", "time goes backwards at data row 2"),
        ("slot,rate_bps\n3,5\n1,5\n", "slot goes backwards at data row 2"),
        ("foo,rate_bps\n1,5\n", "needs a time column"),
        ("slot,bar\n1,5\n", "needs a rate_bps or a state column"),
        ("slot,rate_bps\n0,-5\n", "not a finite non-negative number"),
        ("slot,rate_bps\n0,abc\n", "rate_bps must hold numbers"),
    ],
)
def test_bad_traces_one_line(tmp_path, content, message):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    r = run_cli("channel", "stats", p)
    assert r.returncode == 1
    assert r.stderr.startswith(f"cellperf: error: {p}") and message in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_bad_mahimahi_names_the_line(tmp_path):
    p = tmp_path / "x.down"
    p.write_text("1\n2\nthree\n")
    r = run_cli("channel", "stats", p)
    # The line is not quoted: a trace path may name any file (issue 31).
    assert r.returncode == 1 and r.stderr.strip() == f"cellperf: error: {p}: line 3: not a whole number of milliseconds"
