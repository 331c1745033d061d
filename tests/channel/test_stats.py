"""Channel statistics against analytic values (docs/methods.md §7)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.channel.conftest import model_text, run_cli, two_state_rates, write_rate_csv

from cellperf.channel import read_trace
from cellperf.channel.analysis import generate, trace_stats


def entropy(p):
    p = np.asarray([q for q in p if q > 0])
    return float(-(p * np.log2(p)).sum())


def test_constant_trace_has_no_entropy_and_modal_fraction_one(tmp_path):
    path = write_rate_csv(tmp_path / "c.csv", np.full(50_000, 614_400.0))
    s = trace_stats(read_trace(path))
    assert s["slots"] == 50_000
    assert s["entropy_bits"] == 0.0
    assert s["modal_fraction"] == 1.0
    assert s["std_rate_bps"] == 0.0
    assert s["mean_rate_bps"] == 614_400.0
    assert s["mean_sojourn_slots"] == 50_000
    assert s["cond_entropy_by_depth"] == [None] * 4


def test_iid_trace_has_no_memory(tmp_path):
    rng = np.random.default_rng(4)
    table = np.array([38_400.0, 307_200.0, 1_228_800.0, 2_457_600.0])
    p = np.array([0.1, 0.2, 0.3, 0.4])
    rates = table[rng.choice(4, size=300_000, p=p)]
    s = trace_stats(read_trace(write_rate_csv(tmp_path / "iid.csv", rates)))
    assert s["entropy_bits"] == pytest.approx(entropy(p), abs=0.005)
    assert s["modal_fraction"] == pytest.approx(0.4, abs=0.005)
    assert s["mean_rate_bps"] == pytest.approx((p * table).sum(), rel=0.005)
    for e in s["cond_entropy_by_lag"]:
        assert e["normalized"] == pytest.approx(1.0, abs=0.002)
    assert s["cond_entropy_by_depth"][0] == pytest.approx(1.0, abs=0.002)
    # Runs are geometric: mean sojourn in state i is 1/(1 - p_i).
    for st in s["states"]:
        assert st["mean_sojourn_slots"] == pytest.approx(1 / (1 - p[st["state"]]), rel=0.02)


def test_two_state_chain_stationary_law_sojourns_and_memory(tmp_path):
    p01, p10 = 0.004, 0.02  # sojourns 250 and 50 slots; stationary (5/6, 1/6)
    rates = two_state_rates(3_000_000, p01, p10, 307_200.0, 2_457_600.0, seed=2)
    s = trace_stats(read_trace(write_rate_csv(tmp_path / "m.csv", rates)))
    pi = np.array([p10, p01]) / (p01 + p10)
    assert s["modal_fraction"] == pytest.approx(pi[0], abs=0.02)
    assert s["entropy_bits"] == pytest.approx(entropy(pi), abs=0.03)
    low, high = s["states"]
    assert low["markov_sojourn_slots"] == pytest.approx(1 / p01, rel=0.05)
    assert high["markov_sojourn_slots"] == pytest.approx(1 / p10, rel=0.05)
    assert low["mean_sojourn_slots"] == pytest.approx(1 / p01, rel=0.05)
    assert s["markov_rmse"] < 0.01  # 002 Fig. 4 (right): < 1e-2 for a one-step chain
    # Conditional entropy of a two-state chain: H(X1|X0) = Σ π_i h(P_i,leave).
    h = pi[0] * entropy([p01, 1 - p01]) + pi[1] * entropy([p10, 1 - p10])
    c = s["cond_entropy_by_depth"]
    assert c[0] == pytest.approx(h / entropy(pi), rel=0.05)
    assert all(later >= c[0] - 0.003 for later in c[1:])  # order 1: no gain past n = 1
    # Memory decays with lag as (1 - p01 - p10)^d.
    by_lag = {e["lag_slots"]: e["normalized"] for e in s["cond_entropy_by_lag"]}
    assert by_lag[1] < by_lag[10] < by_lag[100] < by_lag[1000] < 1.0


def test_three_state_model_generates_analytic_statistics():
    p = [[0.95, 0.05, 0.0], [0.02, 0.96, 0.02], [0.0, 0.1, 0.9]]
    # Detailed balance: π0·0.05 = π1·0.02, π1·0.02 = π2·0.1 → π ∝ (0.4, 1, 0.2).
    pi = np.array([0.4, 1.0, 0.2]) / 1.6
    trace = generate(model_text(p, [153_600.0, 921_600.0, 3_072_000.0]), 2_000_000, 3, "m")
    s = trace_stats(trace)
    shares = {st["state"]: st["fraction"] for st in s["states"]}
    for i in range(3):
        assert shares[i] == pytest.approx(pi[i], abs=0.02)
        assert s["states"][i]["mean_sojourn_slots"] == pytest.approx(1 / (1 - p[i][i]), rel=0.05)
    h_cond = sum(pi[i] * entropy(p[i]) for i in range(3))
    assert s["cond_entropy_by_depth"][0] == pytest.approx(h_cond / entropy(pi), rel=0.03)


def test_windows_and_sinr_correlation(tmp_path):
    slots = 36_000  # 60 s of 1.667 ms slots
    rng = np.random.default_rng(1)
    sinr = np.repeat(rng.normal(5, 3, size=slots // 100), 100)
    rates = np.where(sinr > 5, 1_228_800.0, 307_200.0)
    path = tmp_path / "s.csv"
    t = np.arange(slots) * 0.001667 + 1_700_000_000.0
    np.savetxt(path, np.column_stack([t, rates, sinr]), fmt=["%.6f", "%.1f", "%.3f"], delimiter=",", header="time_s,rate_bps,sinr_db", comments="")
    s = trace_stats(read_trace(path), window_s=20)
    # 20 s = 11,998 slots (rounded); 36,000 slots make three windows and 6 slots left over.
    assert [w["slots"] for w in s["windows"]] == [11998, 11998, 11998, 6]
    assert s["windows"][1]["start_s"] == pytest.approx(1_700_000_000.0 + 20.0, abs=0.01)
    assert 0.7 < s["sinr_rate_correlation"] < 0.9  # threshold of a Gaussian: sqrt(2/π) ≈ 0.80
    assert all(w["sinr_rate_correlation"] > 0.6 for w in s["windows"][:3])


def test_stats_cli_json_and_figures(tmp_path):
    rates = two_state_rates(200_000, 0.01, 0.05, 38_400.0, 1_843_200.0, seed=5)
    path = write_rate_csv(tmp_path / "t.csv", rates)
    out = run_cli("channel", "stats", path, "--window", 60, "--figures", tmp_path / "figs", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    t = doc["traces"][0]
    for key in ("slots", "mean_rate_bps", "std_rate_bps", "modal_fraction", "entropy_bits", "mean_sojourn_slots", "cond_entropy_by_depth", "markov_rmse"):
        assert key in t
    assert t["slots"] == 200_000 and len(t["cond_entropy_by_depth"]) == 4
    assert len(t["windows"]) == 6  # 333.4 s in windows of 60 s (35,993 slots): 5 full and 1 partial
    figs = {p.name for p in (tmp_path / "figs").iterdir()}
    assert {"windows.csv", "cdf_entropy.csv", "cdf_modal_fraction.csv", "cdf_sojourn.csv", "cond_entropy_depth.csv", "cond_entropy_lag.csv"} <= figs
    # 002 Figs. 1-5 as images too (issue 14 item 5), each drawn from those tables.
    for name in ("channel-over-time", "channel-cdfs", "channel-memory"):
        assert (tmp_path / "figs" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / "figs" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
    human = run_cli("channel", "stats", path)
    assert human.returncode == 0 and "modal fraction" in human.stdout


def test_stats_figures_draw_every_window_and_lag(tmp_path):
    from cellperf.channel.analysis import figure_tables
    from cellperf.channel.figures import channel_stats_items

    stats = []
    for seed in (1, 2):
        path = write_rate_csv(tmp_path / f"t{seed}.csv", two_state_rates(120_000, 0.01, 0.05, 38_400.0, 1_843_200.0, seed=seed))
        out = run_cli("channel", "stats", path, "--window", 60, "--json")
        stats.append(json.loads(out.stdout)["traces"][0] | {"name": f"t{seed}"})
    tables = figure_tables(stats)
    over_time, cdfs, memory = (item.figure for item in channel_stats_items(tables))
    # one line per trace in each of the three panels, one point per window
    assert len(over_time.data) == 6 and all(len(t.x) == len(stats[0]["windows"]) for t in over_time.data)
    assert [len(t.x) for t in cdfs.data] == [tables[k].height for k in
                                            ("cdf_modal_fraction", "cdf_entropy", "cdf_sojourn", "cdf_markov_rmse")]
    lags = [t for t in memory.data if t.xaxis == "x2"]
    assert len(lags) == 2 and list(lags[0].y) == [e["normalized"] for e in stats[0]["cond_entropy_by_lag"]]
