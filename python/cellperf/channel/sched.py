"""Trace-driven, full-buffer comparison of Proportional Fair and Round Robin (docs/methods.md §8,
seed 002 §6).

Each user follows one of the given traces (user u uses trace u mod T) from a random start
slot (seeded; the trace wraps around), every user always has data, and one user is served
per slot. For N = 1..max users the run reports each user's throughput, the system gain
T_PF/T_RR and Jain's fairness of both schedulers, averaged over `repeats` sets of start
slots. The handoff variant resets a user's PF average A_i at each of its handoffs (the new
sector serves it as a new user); RR keeps no per-user state, so only PF is re-run.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cellperf import _native
from cellperf.channel.traces import SlotTrace
from cellperf.errors import UserError

native = _native.channel

#: 002 §6 uses one million slots per run and ten random start offsets.
DEFAULT_SLOTS = 1_000_000
DEFAULT_REPEATS = 10


def check_same_slot(traces: list[SlotTrace]) -> float:
    slot_s = traces[0].slot_s
    for t in traces[1:]:
        if abs(t.slot_s - slot_s) > 1e-6 * slot_s:
            raise UserError(
                f"{t.name}: slot length {t.slot_s * 1000:g} ms differs from {traces[0].name}'s "
                f"{slot_s * 1000:g} ms; one sched run needs one slot length"
            )
    return slot_s


def _resets_in_run(handoff_slots: np.ndarray, trace_len: int, start: int, run_slots: int) -> np.ndarray:
    """Trace-slot handoffs → simulation slots of a user that starts at `start` and wraps."""
    if handoff_slots.size == 0:
        return np.empty(0, dtype=np.uint64)
    first = (handoff_slots.astype(np.int64) - start) % trace_len
    laps = -(-run_slots // trace_len)
    all_slots = (first[None, :] + trace_len * np.arange(laps, dtype=np.int64)[:, None]).ravel()
    return np.sort(all_slots[all_slots < run_slots]).astype(np.uint64)


def _periodic_resets(interval_slots: int, phase: int, run_slots: int) -> np.ndarray:
    return np.arange(phase, run_slots, interval_slots, dtype=np.uint64)


def _run(rates, starts, resets, run_slots, slot_s, discipline, alpha) -> tuple[np.ndarray, float]:
    """(per-user throughput, system throughput) in bit/s."""
    per_user, system, _ = native.simulate_full_buffer(rates, starts, resets, run_slots, slot_s, discipline, alpha)
    return np.asarray(per_user), system


#: The most user-slots (users × slots, summed over runs and both schedulers) one call may take.
MAX_USER_SLOTS = 2 * 10**10


def compare(
    traces: list[SlotTrace],
    *,
    max_users: int = 4,
    alpha: float = 1 / 1000,
    slots: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
    handoff_slots: list[np.ndarray] | None = None,
    handoff_interval_s: float | None = None,
    progress=None,
) -> dict:
    """PF vs RR for 1..max_users users. `handoff_slots[t]` lists trace t's handoffs (trace
    slots); `handoff_interval_s` resets each user periodically instead (random phase).
    `progress(done, total)` is called after each run (for a progress bar)."""
    if not traces:
        raise UserError("sched needs at least one trace")
    if max_users < 1:
        raise UserError(f"--users must be >= 1, got {max_users}")
    if not 0 < alpha <= 1:
        raise UserError(f"--alpha must be in (0, 1], got {alpha:g}")
    if repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {repeats}")
    slot_s = check_same_slot(traces)
    run_slots = slots if slots is not None else min(DEFAULT_SLOTS, min(t.slots for t in traces))
    if run_slots < 1:
        raise UserError(f"--slots must be >= 1, got {run_slots}")
    # Each of PF and RR serves n users for run_slots slots, for n = 1..max_users, `repeats`
    # times: refuse what would run for hours rather than start it (issue 18 item 7).
    user_slots = 2 * repeats * run_slots * max_users * (max_users + 1) // 2
    if user_slots > MAX_USER_SLOTS:
        raise UserError(f"--users {max_users} × --slots {run_slots} × --repeats {repeats} is {user_slots:.2e} "
                        f"user-slots to schedule, above the {MAX_USER_SLOTS:.0e} this command takes "
                        "(a few minutes at ~1e8 per second); give fewer users, slots or repeats")
    interval_slots = None
    if handoff_interval_s is not None:
        if not handoff_interval_s > 0:
            raise UserError(f"--handoff-interval must be > 0 s, got {handoff_interval_s:g}")
        interval_slots = max(1, int(round(handoff_interval_s / slot_s)))
    with_resets = interval_slots is not None or (handoff_slots is not None and any(h.size for h in handoff_slots))

    rates = [pa.array(t.rates()) for t in traces]
    rng = np.random.default_rng(seed)
    no_resets = pa.array(np.empty(0, dtype=np.uint64))
    per_n = []
    for n in range(1, max_users + 1):
        user_trace = [u % len(traces) for u in range(n)]
        pf_runs, rr_runs, reset_runs = [], [], []
        for _ in range(repeats):
            starts = [int(rng.integers(traces[t].slots)) for t in user_trace]
            user_rates = [rates[t] for t in user_trace]
            pf_runs.append(_run(user_rates, starts, [no_resets] * n, run_slots, slot_s, "pf", alpha))
            rr_runs.append(_run(user_rates, starts, [no_resets] * n, run_slots, slot_s, "rr", alpha))
            if with_resets:
                resets = []
                for u, t in enumerate(user_trace):
                    if interval_slots is not None:
                        r = _periodic_resets(interval_slots, int(rng.integers(interval_slots)), run_slots)
                    else:
                        r = _resets_in_run(handoff_slots[t], traces[t].slots, starts[u], run_slots)
                    resets.append(pa.array(r, type=pa.uint64()))
                reset_runs.append(_run(user_rates, starts, resets, run_slots, slot_s, "pf", alpha))
            if progress is not None:
                progress((n - 1) * repeats + len(pf_runs), max_users * repeats)
        per_n.append(_summarise(n, pf_runs, rr_runs, reset_runs))

    result = {
        "traces": [t.name for t in traces],
        "slot_s": slot_s,
        "slots": run_slots,
        "repeats": repeats,
        "seed": seed,
        "alpha": alpha,
        "users": [p["users"] for p in per_n],
        "gain": [p["gain"] for p in per_n],
        "gain_std": [p["gain_std"] for p in per_n],
        "jain_pf": [p["jain_pf"] for p in per_n],
        "jain_rr": [p["jain_rr"] for p in per_n],
        "system_pf_bps": [p["system_pf_bps"] for p in per_n],
        "system_rr_bps": [p["system_rr_bps"] for p in per_n],
        "per_user_pf_bps": [p["per_user_pf_bps"] for p in per_n],
        "per_user_rr_bps": [p["per_user_rr_bps"] for p in per_n],
        "handoff": None,
    }
    if with_resets:
        result["handoff"] = {
            "source": "interval" if interval_slots is not None else "handoffs",
            "interval_s": None if interval_slots is None else interval_slots * slot_s,
            "gain": [p["gain_handoff"] for p in per_n],
            "jain_pf": [p["jain_pf_handoff"] for p in per_n],
            "system_pf_bps": [p["system_pf_handoff_bps"] for p in per_n],
        }
    return result


def _jain(x: np.ndarray) -> float | None:
    return native.jain_fairness(x.tolist())


def _mean(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _summarise(n: int, pf_runs: list, rr_runs: list, reset_runs: list) -> dict:
    pf, rr = np.array([r[0] for r in pf_runs]), np.array([r[0] for r in rr_runs])
    pf_sys, rr_sys = np.array([r[1] for r in pf_runs]), np.array([r[1] for r in rr_runs])
    # A run where RR carries nothing (all-zero rates) has no defined gain.
    gains = np.divide(pf_sys, rr_sys, out=np.full_like(pf_sys, np.nan), where=rr_sys > 0)
    known = gains[np.isfinite(gains)]
    out = {
        "users": n,
        "gain": float(known.mean()) if known.size else None,
        "gain_std": float(known.std()) if known.size else None,
        "jain_pf": _mean([_jain(r) for r in pf]),
        "jain_rr": _mean([_jain(r) for r in rr]),
        "system_pf_bps": float(pf_sys.mean()),
        "system_rr_bps": float(rr_sys.mean()),
        "per_user_pf_bps": pf.mean(axis=0).tolist(),
        "per_user_rr_bps": rr.mean(axis=0).tolist(),
    }
    if reset_runs:
        pr = np.array([r[0] for r in reset_runs])
        pr_sys = np.array([r[1] for r in reset_runs])
        g = np.divide(pr_sys, rr_sys, out=np.full_like(pr_sys, np.nan), where=rr_sys > 0)
        g = g[np.isfinite(g)]
        out["gain_handoff"] = float(g.mean()) if g.size else None
        out["jain_pf_handoff"] = _mean([_jain(r) for r in pr])
        out["system_pf_handoff_bps"] = float(pr_sys.mean())
    return out


def handoff_times_from_file(path: str) -> np.ndarray:
    """Handoff instants (s) from a radio log (changes of bs_id/sector_id/technology, via
    cellperf.handoffs) or from a CSV whose only needed column is time_s (one row per handoff)."""
    import polars as pl

    from cellperf.handoffs import detect_handoffs, read_radio_log
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise UserError(f"--handoffs {path}: no such file")
    try:
        columns = pl.read_csv(p, n_rows=0).columns
    except pl.exceptions.PolarsError as e:
        raise UserError(f"--handoffs {path}: cannot read ({str(e).splitlines()[0]})") from None
    if "bs_id" in columns and "sector_id" in columns:
        return np.sort(detect_handoffs(read_radio_log(p), source=str(p))["time_s"].to_numpy())
    if "time_s" not in columns:
        raise UserError(f"--handoffs {path}: needs a time_s column (handoff instants) or a radio log with bs_id,sector_id")
    try:
        times = pl.read_csv(p)["time_s"].cast(pl.Float64, strict=True).to_numpy()
    except pl.exceptions.PolarsError:
        raise UserError(f"--handoffs {path}: time_s must hold numbers") from None
    if not np.all(np.isfinite(times)):
        raise UserError(f"--handoffs {path}: time_s has empty or non-finite values")
    return np.sort(times)


def handoff_slots_for(trace: SlotTrace, times_s: np.ndarray) -> np.ndarray:
    """Handoff instants → slots of `trace` (its slot 0 starts at `trace.start_s`); instants
    outside the trace are dropped."""
    slots = np.floor((times_s - trace.start_s) / trace.slot_s + 1e-6).astype(np.int64)
    return np.unique(slots[(slots >= 0) & (slots < trace.slots)]).astype(np.uint64)
