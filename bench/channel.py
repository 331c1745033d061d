"""Benchmark: channel statistics and PF scheduling on a day of EV-DO slots (≈ 52 M slots),
against a straightforward numpy implementation measured in the same run.

    .venv/bin/python bench/channel.py [--slots 51840000] [--pf-baseline-slots 200000]

Targets (issue 5): ≥ 50 M slots/s for stats, ≥ 20 M slot-decisions/s for PF with 4 users.
The trace is a 15-state DRC-like chain (geometric sojourns, mean ≈ 40 slots, as in 002's
mobile traces) built with numpy. The numpy PF baseline is a per-slot loop (PF is sequential:
each decision depends on the previous averages), so it is timed on a prefix and reported
as a rate.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pyarrow as pa

from cellperf import _native

native = _native.channel
RATES = np.asarray(native.drc_rate_table()[0])
K = RATES.size
LAGS = sorted({int(round(10 ** (3 * k / 30))) for k in range(31)})


def make_trace(slots: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    runs = slots // 40 + slots // 400 + 100
    lengths = rng.geometric(1 / 40, size=runs)
    # A walk over DRC indices 1..14 reflected at the ends, like a fading channel stepping
    # between neighbouring rates.
    walk = 7 + np.cumsum(rng.choice([-2, -1, 1, 2], size=runs))
    states = (np.abs(walk % 26 - 13) + 1).astype(np.uint16)
    x = np.repeat(states, lengths)
    assert x.size >= slots
    return x[:slots]


def entropy_of(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def cond_entropy(codes: np.ndarray, k: int) -> float:
    counts = np.bincount(codes)
    joint = entropy_of(counts)
    context = entropy_of(np.bincount(np.flatnonzero(counts) // k, weights=counts[counts > 0]))
    return joint - context


def numpy_stats(x: np.ndarray) -> dict:
    """The same statistics the straightforward numpy way (one pass per quantity)."""
    counts = np.bincount(x, minlength=K)
    h = entropy_of(counts)
    rates = RATES[x]
    change = np.flatnonzero(np.diff(x)) + 1
    out = {"mean": rates.mean(), "std": rates.std(), "modal": counts.max() / x.size, "entropy": h, "sojourn": x.size / (change.size + 1)}
    xi = x.astype(np.int64)
    depth = []
    for n in range(1, 5):
        codes = np.zeros(x.size - n, dtype=np.int64)
        for j in range(n + 1):
            codes = codes * K + xi[j : x.size - n + j]
        depth.append(cond_entropy(codes, K) / h)
    out["depth"] = depth
    lag = []
    for d in LAGS:
        pairs = np.bincount(xi[:-d] * K + xi[d:], minlength=K * K).reshape(K, K)
        lag.append((entropy_of(pairs.ravel()) - entropy_of(pairs.sum(axis=1))) / entropy_of(pairs.sum(axis=0)))
    out["lag"] = lag
    return out


def numpy_pf(rates: list[np.ndarray], starts: list[int], slots: int, alpha: float = 1e-3) -> np.ndarray:
    n = len(rates)
    a = np.zeros(n)
    served = np.zeros(n)
    idx = np.array(starts)
    length = np.array([r.size for r in rates])
    for _ in range(slots):
        r = np.array([rates[u][idx[u]] for u in range(n)])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(a > 0, r / a, np.inf)
        ratio[r <= 0] = -1
        i = int(np.argmax(ratio))
        a *= 1 - alpha
        if ratio[i] >= 0:
            a[i] += alpha * r[i]
            served[i] += r[i]
        idx = (idx + 1) % length
    return served / slots


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=86_400 * 600, help="slots in the trace (default: one day of 1/600 s slots)")
    ap.add_argument("--pf-baseline-slots", type=int, default=200_000, help="slots of the numpy PF loop (timed on a prefix)")
    args = ap.parse_args()

    x = make_trace(args.slots)
    states = pa.array(x)
    print(f"trace: {x.size:,} slots, {np.count_nonzero(np.diff(x)) + 1:,} runs, {K} DRC states")

    t0 = time.perf_counter()
    ours = native.trace_stats(states, RATES.tolist(), None, 4, LAGS)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    base = numpy_stats(x)
    t_np = time.perf_counter() - t0
    import json

    doc = json.loads(ours)["trace"]
    assert abs(doc["entropy_bits"] - base["entropy"]) < 1e-9
    assert all(abs(a - b) < 1e-6 for a, b in zip(doc["cond_entropy_by_depth"], base["depth"]))
    assert all(abs(e["normalized"] - b) < 1e-6 for e, b in zip(doc["cond_entropy_by_lag"], base["lag"]))
    print(
        f"stats (depth 1..4, {len(LAGS)} lags): cellperf {t_ours:.2f} s = {x.size / t_ours / 1e6:,.0f} M slots/s; "
        f"numpy {t_np:.2f} s = {x.size / t_np / 1e6:,.1f} M slots/s; ratio {t_np / t_ours:.1f}x (results agree)"
    )

    rates = pa.array(RATES[x])
    users = 4
    starts = [0, x.size // 4, x.size // 2, 3 * x.size // 4]
    empty = pa.array(np.empty(0, dtype=np.uint64))
    t0 = time.perf_counter()
    per_user, _, _ = native.simulate_full_buffer([rates] * users, starts, [empty] * users, x.size, 1 / 600, "pf", 1e-3)
    t_pf = time.perf_counter() - t0
    m = args.pf_baseline_slots
    rates_np = RATES[x]
    t0 = time.perf_counter()
    numpy_pf([rates_np] * users, starts, m)
    t_np_pf = time.perf_counter() - t0
    ours_prefix, _, _ = native.simulate_full_buffer([rates] * users, starts, [empty] * users, m, 1 / 600, "pf", 1e-3)
    check = numpy_pf([rates_np] * users, starts, min(m, 20_000))
    ours_check, _, _ = native.simulate_full_buffer([rates] * users, starts, [empty] * users, min(m, 20_000), 1 / 600, "pf", 1e-3)
    assert np.allclose(check, ours_check, rtol=1e-9), (check, ours_check)
    ours_rate = x.size / t_pf
    np_rate = m / t_np_pf
    print(
        f"PF, {users} users: cellperf {t_pf:.2f} s for {x.size:,} slots = {ours_rate / 1e6:,.1f} M decisions/s; "
        f"numpy loop {np_rate / 1e3:,.1f} k decisions/s (on {m:,} slots); ratio {ours_rate / np_rate:,.0f}x (results agree)"
    )
    ok = x.size / t_ours >= 50e6 and ours_rate >= 20e6
    print("targets (>= 50 M slots/s stats, >= 20 M decisions/s PF):", "met" if ok else "NOT met")
    del ours_prefix, per_user
    sys.exit(0)


if __name__ == "__main__":
    main()
