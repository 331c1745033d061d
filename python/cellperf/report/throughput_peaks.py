"""The report's throughput peaks (seed 004 Table V and §IV.B 2.2): each test's per-interval
throughput as mean, standard deviation and maximum, and the peak rate its data flows reached
right after each handoff (`handoff_bursts`, docs/methods.md §6), beside their mean rate."""

from __future__ import annotations

from cellperf.report.item import Item, natural
from cellperf.report.tables import html_table
from cellperf.store import Store


def _kbps(v) -> str:
    return "–" if v is None else f"{v / 1e3:.1f}"


def spread_table(store: Store) -> list[Item]:
    """Per network, scenario, test and direction over the data flows of the good runs: the
    mean of their interval means and standard deviations, and the largest interval."""
    df = store.frame(f"""
        SELECT r.network, r.scenario, r.test, f.direction, count(*) AS flows,
               avg(f.interval_mean_bps) AS mean, avg(f.interval_std_bps) AS std, max(f.interval_max_bps) AS max
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.role = 'data' AND f.interval_max_bps IS NOT NULL
        GROUP BY r.network, r.scenario, r.test, f.direction
        ORDER BY r.network, r.scenario, {natural("r.test")}, f.direction""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["direction"], r["flows"], _kbps(r["mean"]), _kbps(r["std"]),
             _kbps(r["max"])] for r in df.iter_rows(named=True)]
    return [Item("throughput-spread", "Throughput per interval: mean, std and maximum",
                 "Each data flow's throughput per full interval (the campaign's interval), as mean and standard "
                 "deviation (averaged over the flows) and maximum (the largest interval of any flow), as 004 "
                 "Table V gives the maximum beside the mean.",
                 table_html=html_table(["network", "scenario", "test", "direction", "flows", "mean kbit/s",
                                        "std kbit/s", "max kbit/s"], rows, name="throughput-spread"))]


def bursts_table(store: Store) -> list[Item]:
    """Per network, scenario, test and direction: handoffs met by data flows, the median and
    largest peak rate after them, and the peak over the flow's mean rate."""
    df = store.frame(f"""
        SELECT r.network, r.scenario, r.test, b.direction, count(*) AS handoffs,
               median(b.peak_bps) AS peak_median, max(b.peak_bps) AS peak_max, median(b.peak_ratio) AS ratio,
               max(b.peak_ratio) AS ratio_max, avg(b.flow_bps) AS flow_bps, any_value(b.bin_s) AS bin_s
        FROM handoff_bursts b JOIN runs r USING (run_id)
        WHERE r.status = 'ok' GROUP BY r.network, r.scenario, r.test, b.direction
        ORDER BY r.network, r.scenario, {natural("r.test")}, b.direction""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["direction"], r["handoffs"], _kbps(r["flow_bps"]),
             _kbps(r["peak_median"]), _kbps(r["peak_max"]),
             "–" if r["ratio"] is None else f"{r['ratio']:.2f}", "–" if r["ratio_max"] is None else f"{r['ratio_max']:.2f}"]
            for r in df.iter_rows(named=True)]
    bin_ms = 1e3 * df["bin_s"][0]
    return [Item("handoff-bursts", "Bursts after handoffs",
                 f"The peak rate each data flow reached at its receiver in the 5 s after a handoff ({bin_ms:.0f}-ms "
                 "bins; the window stops at the next handoff) beside the flow's mean rate: packets held during the "
                 "handover arrive together, a rate above the link's (004 §IV.B: peaks of 1.2 Mb/s on UMTS). "
                 "Per flow and handoff: `SELECT * FROM handoff_bursts`.",
                 table_html=html_table(["network", "scenario", "test", "direction", "flow × handoff", "mean kbit/s",
                                        "median peak kbit/s", "max peak kbit/s", "median peak/mean", "max peak/mean"],
                                       rows, name="handoff-bursts"))]


SECTIONS = (("Throughput peaks", (spread_table, bursts_table)),)
