"""`cellperf channel fit` / `generate`: the model reproduces the fitted statistics."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from tests.channel.conftest import model_text, run_cli, two_state_rates, write_rate_csv


def test_fit_then_generate_reproduces_stationary_law_and_sojourns(tmp_path):
    rates = two_state_rates(1_000_000, 0.002, 0.01, 153_600.0, 2_457_600.0, seed=8)
    trace = write_rate_csv(tmp_path / "t.csv", rates)
    model = tmp_path / "m.json"
    fit = run_cli("channel", "fit", trace, "-o", model, "--json")
    assert fit.returncode == 0, fit.stderr
    info = json.loads(fit.stdout)
    assert info["order"] == 1 and info["rates_bps"] == [153_600.0, 2_457_600.0]
    soj = info["markov_sojourn_slots"]
    assert soj[0] == pytest.approx(500, rel=0.08) and soj[1] == pytest.approx(100, rel=0.08)
    doc = json.loads(model.read_text())
    assert doc["format"] == "cellperf-markov-rate-model" and doc["version"] == 1

    out = tmp_path / "g.parquet"
    mm = tmp_path / "g.down"
    gen = run_cli("channel", "generate", model, "--slots", 2_000_000, "--seed", 11, "-o", out, "--mahimahi", mm, "--json")
    assert gen.returncode == 0, gen.stderr
    g = json.loads(gen.stdout)
    # Shares: sticky chain, ≈ 2e6/(mixing ≈ 80 slots) independent samples → std ≈ 0.01.
    for got, want in zip(g["state_fraction"], g["model_stationary"]):
        assert got == pytest.approx(want, abs=0.03)
    for got, want in zip(g["mean_sojourn_by_state"], g["model_sojourn_slots"]):
        assert got == pytest.approx(want, rel=0.05)
    table = pq.read_table(out)
    assert table.column_names == ["slot", "time_s", "state", "rate_bps"] and table.num_rows == 2_000_000
    # The mahimahi trace carries the same mean rate (1500-byte opportunities).
    ms = np.loadtxt(mm, dtype=np.int64)
    assert ms[-1] == round(2_000_000 * 1.667)  # the default slot, 1.667 ms
    assert ms.size * 12_000 / (ms[-1] / 1000) == pytest.approx(g["mean_rate_bps"], rel=0.01)


def test_same_seed_same_trace_other_seed_other_trace(tmp_path):
    model = tmp_path / "m.json"
    model.write_text(model_text([[0.9, 0.1], [0.2, 0.8]], [1e5, 1e6]))
    paths = []
    for i, seed in enumerate((5, 5, 6)):
        p = tmp_path / f"g{i}.csv"
        assert run_cli("channel", "generate", model, "--slots", 10_000, "--seed", seed, "-o", p).returncode == 0
        paths.append(p.read_bytes())
    assert paths[0] == paths[1] != paths[2]


def test_order_two_model_keeps_a_pattern_order_one_cannot(tmp_path):
    # Runs of exactly 3 slots: an order-1 model makes geometric runs, order 3 keeps them exact.
    rates = np.tile(np.repeat([100_000.0, 900_000.0], 3), 20_000)
    trace = write_rate_csv(tmp_path / "p.csv", rates)
    for order, exact in ((1, False), (3, True)):
        model = tmp_path / f"o{order}.json"
        assert run_cli("channel", "fit", trace, "--order", order, "-o", model).returncode == 0
        out = tmp_path / f"o{order}.csv"
        gen = run_cli("channel", "generate", model, "--slots", 60_000, "-o", out)
        assert gen.returncode == 0, gen.stderr
        states = np.loadtxt(out, delimiter=",", skiprows=1, usecols=2)
        changes = np.flatnonzero(np.diff(states)) + 1
        interior_runs = np.diff(changes)  # the first and last runs are cut by the trace ends
        assert bool(np.all(interior_runs == 3)) == exact


def test_bad_model_files(tmp_path):
    wrong_version = tmp_path / "v2.json"
    wrong_version.write_text(model_text([[1.0]], [1e5]).replace('"version": 1', '"version": 2'))
    r = run_cli("channel", "generate", wrong_version, "--slots", 10, "-o", tmp_path / "x.csv")
    assert r.returncode == 1
    assert r.stderr.strip() == f"cellperf: error: {wrong_version}: model version 2 is not supported (this cellperf reads version 1)"
    assert not (tmp_path / "x.csv").exists()
    garbage = tmp_path / "g.json"
    garbage.write_text("not json")
    r = run_cli("channel", "generate", garbage, "--slots", 10, "-o", tmp_path / "x.csv")
    assert r.returncode == 1 and "not JSON" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("channel", "generate", tmp_path / "missing.json", "--slots", 10, "-o", tmp_path / "x.csv")
    assert r.returncode == 1 and "no such file" in r.stderr
