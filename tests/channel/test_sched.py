"""`cellperf sched`: PF vs RR against exact cases and the trends of seed 002 §6."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.channel.conftest import run_cli, two_state_rates, write_rate_csv



def sched(*args):
    r = run_cli("sched", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_constant_trace_gain_exactly_one_and_fair(tmp_path):
    p = write_rate_csv(tmp_path / "c.csv", np.full(24_000, 921_600.0))  # 24,000 slots split evenly among 1..4
    doc = sched(p, "--users", "1..4", "--repeats", 2, "--figures", tmp_path / "figs")
    assert doc["users"] == [1, 2, 3, 4]
    fig = (tmp_path / "figs" / "gain_vs_users.csv").read_text().splitlines()
    assert fig[0].startswith("users,gain,") and len(fig) == 5
    assert (tmp_path / "figs" / "sched-gain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # 002 Fig. 6
    assert (tmp_path / "figs" / "sched-gain.pdf").read_bytes()[:5] == b"%PDF-"
    assert doc["gain"] == [1.0, 1.0, 1.0, 1.0]
    assert doc["jain_rr"] == [1.0] * 4
    assert doc["jain_pf"] == pytest.approx([1.0] * 4, abs=1e-9)
    assert doc["system_rr_bps"] == pytest.approx([921_600.0] * 4)


def test_identical_users_are_treated_fairly(tmp_path):
    rates = two_state_rates(300_000, 0.02, 0.02, 307_200.0, 2_457_600.0, seed=1)
    p = write_rate_csv(tmp_path / "m.csv", rates)
    doc = sched(p, "--users", 4, "--repeats", 3)
    assert all(j > 0.99 for j in doc["jain_pf"] + doc["jain_rr"])  # 002 §6: 0.99 for both
    assert doc["gain"][0] == pytest.approx(1.0)  # one user: nothing to choose between


def test_gain_grows_with_variability_and_users_and_shrinks_with_handoff_resets(tmp_path):
    # Stationary-like: two close rates, sojourns of 500 slots (longer than PF's 1/α memory).
    slow = two_state_rates(400_000, 0.002, 0.002, 1_228_800.0, 1_536_000.0, seed=2)
    # Mobile-like: rates 16x apart, sojourns of 50 slots.
    fast = two_state_rates(400_000, 0.02, 0.02, 153_600.0, 2_457_600.0, seed=2)
    calm = sched(write_rate_csv(tmp_path / "calm.csv", slow), "--users", 4, "--repeats", 3)
    wild = sched(write_rate_csv(tmp_path / "wild.csv", fast), "--users", 4, "--repeats", 3, "--handoff-interval", 2)
    assert 1.0 < calm["gain"][3] < 1.05  # 002: < 5 % for stationary users
    assert wild["gain"][3] > 1.2  # 002: ≈ 20 % for mobile users
    assert calm["gain"][1] < calm["gain"][2] < calm["gain"][3]
    assert wild["gain"][1] < wild["gain"][2] < wild["gain"][3]
    # Resetting A_i every 2 s (1,200 slots) makes PF chase the reset user: gain falls.
    reset_gain = wild["handoff"]["gain"]
    assert all(r < g for r, g in zip(reset_gain[1:], wild["gain"][1:]))


def test_handoffs_from_a_radio_log_reduce_the_gain(tmp_path):
    rates = two_state_rates(120_000, 0.03, 0.03, 153_600.0, 2_457_600.0, seed=6)
    t = np.arange(rates.size) / 600
    p = tmp_path / "mobile.csv"
    np.savetxt(p, np.column_stack([t, rates]), fmt=["%.6f", "%.1f"], delimiter=",", header="time_s,rate_bps", comments="")
    radio = tmp_path / "radio.csv"
    # A new sector every second.
    sectors = np.arange(int(t[-1]))
    radio.write_text("time_s,bs_id,sector_id\n" + "".join(f"{s:.3f},1,{s}\n" for s in sectors))
    doc = sched(p, "--users", 3, "--repeats", 2, "--handoffs", radio)
    assert doc["handoffs_per_trace"] == [sectors.size - 1]
    assert doc["handoff"]["gain"][2] < doc["gain"][2]


def test_mixed_slot_lengths_are_refused(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("time_s,rate_bps\n" + "".join(f"{k * 0.001667:.6f},1000000\n" for k in range(100)))
    b.write_text("time_s,rate_bps\n" + "".join(f"{k * 0.001:.6f},1000000\n" for k in range(100)))
    r = run_cli("sched", a, b)
    assert r.returncode == 1
    assert r.stderr.strip() == "cellperf: error: b.csv: slot length 1 ms differs from a.csv's 1.667 ms; one sched run needs one slot length"
    r = run_cli("sched", a, "--users", "0")
    assert r.returncode == 1 and "--users must be >= 1" in r.stderr
