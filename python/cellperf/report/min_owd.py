"""The least one-way delay per direction (seed 003 slide 14: 14 ms down, 100 ms up on WiBro,
from GPS-synchronised clocks), with the clock offset's uncertainty beside every figure and how
the clocks were synchronised (slides 11-12), from the store's `min_owd` rows and each run's
`clock_sync` (`cellperf.campaign.clocks`, docs/methods.md §1)."""

from __future__ import annotations

import json

import polars as pl

from cellperf.report.item import Item
from cellperf.report.tables import html_table
from cellperf.store import Store

SQL = """
    SELECT r.network, r.scenario, r.test, coalesce(m.member, '–') AS member, m.direction, m.run_id, m.min_ms,
           m.uncertainty_ms, m.kind, m.basis, r.clock_sync
    FROM min_owd m JOIN runs r USING (run_id)
    WHERE r.status = 'ok' ORDER BY r.network, r.scenario, r.test, member, m.direction DESC"""


def _summary(clock_sync, end: str = "mn") -> str:
    """The MN host's (`end` "mn") or the CN host's ("cn") clock state of a run's `clock_sync`."""
    doc = json.loads(clock_sync) if isinstance(clock_sync, str) else clock_sync or {}
    if end == "cn":
        # Runs stored before the CN's state was read have none.
        return (doc.get("cn") or {}).get("summary") or "not read"
    return doc.get("summary") or "unknown"


def min_owd_table(store: Store) -> list[Item]:
    df = store.frame(SQL)
    if df.height == 0:
        return []
    df = df.with_columns(clock=pl.col("clock_sync").map_elements(_summary, return_dtype=pl.Utf8),
                         cn_clock=pl.col("clock_sync").map_elements(lambda c: _summary(c, "cn"), return_dtype=pl.Utf8))
    agg = (df.group_by("network", "scenario", "test", "member", "direction", maintain_order=True)
           .agg(runs=pl.col("run_id").n_unique(), least=pl.col("min_ms").min(), median=pl.col("min_ms").median(),
                uncertainty=pl.col("uncertainty_ms").max(), kind=pl.col("kind").unique().sort().str.join("/"),
                basis=pl.col("basis").unique().sort().str.join("; "),
                clock=pl.col("clock").unique().sort().str.join("; "),
                cn_clock=pl.col("cn_clock").unique().sort().str.join("; ")))
    rows = [[r["network"], r["scenario"], r["test"], r["member"], r["direction"], r["runs"],
             f"{r['least']:.2f} ± " + ("?" if r["uncertainty"] is None else f"{r['uncertainty']:.3f}"),
             f"{r['median']:.2f}", r["kind"], r["basis"], r["clock"], r["cn_clock"]]
            for r in agg.iter_rows(named=True)]
    return [Item("min-owd", "Least one-way delay per direction",
                 "Each probe stream's least one-way delay per direction (the least over the runs, and the median of "
                 "the runs' least), ± the clock offset's uncertainty: 0 when both ends' timestamps are on one host's "
                 "clock (the emulated testbed); on two hosts the probe's clock exchange measured the offset (NTP-style, "
                 "± half the best exchange's round trip) and it is taken off (uplink raw − offset, downlink raw + "
                 "offset); ± ? for captures imported on clocks the user declared synchronised (their error unknown). "
                 "MN clock, CN clock: how each host's clock was synchronised when the run started (chrony's "
                 "tracking, else the kernel's NTP state; the CN's from the testbed's cn_clock command, or this host "
                 "on the emulated testbed). Per run: SELECT * FROM min_owd. Seed 003 slides 11-14.",
                 table_html=html_table(["network", "scenario", "test", "member", "direction", "runs", "least OWD ms",
                                        "median of runs ms", "kind", "offset from", "MN clock", "CN clock"], rows,
                                       name="min-owd",
                                       query=SQL))]


SECTIONS = (("One-way delay", (min_owd_table,)),)
