"""Per-flow and per-run figures of the TCP studies (docs/methods.md §3, §12; 002 §7, 003, 004 §IV):
channel utilisation, each concurrent flow's share and Jain's index, and the queue-size
estimate. They work on flows as the analysis report or the store's `flows` table gives
them, whatever produced the flows (one test per run, or several started together), and on
a radio log's rate samples; nothing here touches packets.
"""

from __future__ import annotations

from cellperf import _native
from cellperf.errors import UserError

# `cellperf analyze` imports this module: numpy and polars are imported where needed.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np
    import polars as pl


def rate_samples(radio: pl.DataFrame, source: str = "radio log") -> tuple[np.ndarray, np.ndarray]:
    """(time_s, rate_bps) of a radio log's rate samples, sorted by time. Each sample is the
    capacity offered over the interval ending at its time (docs/emulator.md); with several
    users (a `user` column) every user's samples count (**choice**: the flow's own user is
    not known from its addresses)."""
    import polars as pl

    if "rate_bps" not in radio.columns:
        raise UserError(f"{source}: the radio log has no rate_bps column: channel utilisation needs the "
                        "channel's rate samples (an emulated link's radio log has them)")
    r = radio.select("time_s", pl.col("rate_bps").cast(pl.Float64)).drop_nulls().sort("time_s")
    if r.height < 2:
        raise UserError(f"{source}: fewer than two rate samples; channel utilisation needs a rate series")
    return r["time_s"].to_numpy(), r["rate_bps"].to_numpy()


def capacity_stats(times: np.ndarray, rates: np.ndarray, start: float, end: float) -> tuple[float, float] | None:
    """Time-weighted mean and standard deviation of the rate over [start, end]: sample i covers
    (t[i-1], t[i]] (the first sample covers nothing before it). None when the window holds no
    sample's span."""
    import numpy as np

    if not end > start or times.size < 2:
        return None
    lo, hi = times[:-1], times[1:]
    overlap = np.clip(np.minimum(hi, end) - np.maximum(lo, start), 0.0, None)
    total = overlap.sum()
    if total <= 0:
        return None
    mean = float((overlap * rates[1:]).sum() / total)
    var = float((overlap * (rates[1:] - mean) ** 2).sum() / total)
    return mean, var ** 0.5


def add_utilisation(report: dict, radio: pl.DataFrame, source: str = "radio log") -> None:
    """Adds `channel` = {mean_capacity_bps, capacity_std_bps, utilisation} to every flow of
    `report` with a goodput (002 §7.3: utilisation = goodput / mean channel capacity over the
    flow's lifetime, `start_s`..`end_s`; the std is 002 Fig. 9 right's); null figures where the
    log does not cover the flow."""
    times, rates = rate_samples(radio, source)
    for f in report["flows"]:
        cap, std = capacity_stats(times, rates, f.get("start_s", 0.0), f.get("end_s", 0.0)) or (None, None)
        good = f.get("goodput_bps")
        f["channel"] = {
            "mean_capacity_bps": cap,
            "capacity_std_bps": std,
            "utilisation": good / cap if cap and good is not None else None,
        }


def shares(flows: pl.DataFrame, by: tuple[str, ...] = ("direction",)) -> pl.DataFrame:
    """Each flow's share of the summed goodput of the flows in its group (`by`, e.g. one
    run's direction) and the group's Jain's index and flow count (002 §7.2-7.3). `flows`
    needs `goodput_bps` and the `by` columns; rows without a goodput get nulls."""
    import polars as pl

    g = pl.col("goodput_bps")
    return flows.with_columns(
        share=g / g.sum().over(list(by)),
        jain=(g.sum().pow(2) / (g.count() * (g * g).sum())).over(list(by)),
        concurrent=g.count().over(list(by)),
    )


#: Two data flows compete when their active spans (first to last packet, `start_s`..`end_s`)
#: overlap for at least this share of the shorter span (docs/analysis.md).
MIN_OVERLAP = 0.5


def competing_groups(spans: list[tuple[float | None, float | None]], keys: list | None = None) -> list[int]:
    """A group number for each span: two spans of the same key (a direction) overlapping for
    at least `MIN_OVERLAP` of the shorter one (and for some time) are in one group, and so
    are chains of such pairs; a span that overlaps no other enough is a group of its own.
    Tests run one after another are separate groups; the flows of one test started together
    (`-P 2`) are one. A span with an unknown end overlaps every other."""
    n = len(spans)
    keys = keys if keys is not None else [None] * n
    group = list(range(n))

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i in range(n):
        a0, a1 = spans[i]
        for j in range(i + 1, n):
            b0, b1 = spans[j]
            if keys[i] != keys[j]:
                continue
            # Flows whose times are not known (no capture: an agent's log) are taken to compete.
            overlap = None if None in (a0, a1, b0, b1) else min(a1, b1) - max(a0, b0)
            if overlap is None or overlap > 0 and overlap >= MIN_OVERLAP * min(a1 - a0, b1 - b0):
                group[root(j)] = root(i)
    return [root(i) for i in range(n)]


def leading(flows: list[tuple[int, float | None]]) -> list[bool]:
    """Whether each of `flows` (flow_id, goodput in bit/s; a connection's two directions share
    a flow_id) is its connection's direction of highest goodput (no goodput counts as 0).
    A connection with data both ways competes for the link in that direction only: a
    download's upstream hello or request is no competitor (`concurrent_summary`, and the
    campaign analysis's shares)."""
    best: dict[int, float] = {}
    for fid, g in flows:
        best[fid] = max(best.get(fid, 0.0), g or 0.0)
    return [(g or 0.0) >= best[fid] for fid, g in flows]


def concurrent_summary(report: dict) -> list[dict]:
    """Per direction and group of competing TCP data flows (`competing_groups`) with more
    than one flow: the flows' shares and Jain's index (the report's `concurrent` entry; the
    same figures as `shares`; Jain's index by the scheduler study's `jain_fairness`). A
    connection with data both ways counts in its direction of higher goodput only
    (`leading`); cellperf's control connections (`control`) are no data flows."""
    tcp = [f for f in report["flows"]
           if f["proto"] == "tcp" and not f.get("control") and (f.get("tcp") or {}).get("unique_bytes")]
    by_dir: dict[str, list[dict]] = {}
    for f, lead in zip(tcp, leading([(f["flow_id"], f["goodput_bps"]) for f in tcp])):
        if lead:
            by_dir.setdefault(f["direction"], []).append(f)
    out = []
    for direction, flows in by_dir.items():
        groups: dict[int, list[dict]] = {}
        for f, g in zip(flows, competing_groups([(f.get("start_s"), f.get("end_s")) for f in flows])):
            groups.setdefault(g, []).append(f)
        for fs in groups.values():
            good = [f["goodput_bps"] or 0.0 for f in fs]
            if len(fs) > 1 and sum(good) > 0:
                out.append({"direction": direction, "flows": [f["flow_id"] for f in fs],
                            "shares": [g / sum(good) for g in good], "jain": _native.channel.jain_fairness(good)})
    return out


def queue_estimate(flows: pl.DataFrame) -> pl.DataFrame:
    """The queue-size estimate of 003 slide 16 per saturating UDP flow: max OWD × measured
    bandwidth (bytes; 961 ms × 9603 kb/s = 1126 KB on WiBro down). `flows` needs
    `owd_max_ms` and `goodput_bps`. With excess OWD the maximum is the queueing delay over
    the least delay seen; with raw OWD it includes the path's propagation (003 used raw,
    GPS-synchronised)."""
    import polars as pl

    return flows.with_columns(queue_bytes=pl.col("owd_max_ms") / 1e3 * pl.col("goodput_bps") / 8)
