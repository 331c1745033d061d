"""The report's delay spikes (seed 000 ch. 5: most delay spikes came at handoffs, but one of
5 s "does not coincide with a handoff, and needs further investigation"): per test, the UDP
streams' spikes near and away from handoffs, and each one away from them
(docs/methods.md §3 and §6)."""

from __future__ import annotations

from cellperf.report.item import Item
from cellperf.report.tables import html_table
from cellperf.store import Store

AWAY_SQL = """
    SELECT r.network, r.scenario, r.test, s.run_id, s.direction,
           round(epoch(s.start_ts) - epoch(r.started_at), 3) AS start_s, s.duration_ms, s.packets, s.peak_ms,
           s.handoff_offset_s
    FROM delay_spikes s JOIN runs r USING (run_id)
    WHERE r.status = 'ok' AND NOT s.near_handoff ORDER BY s.peak_ms DESC"""


def _f(v, spec: str = ".0f") -> str:
    return "–" if v is None else format(v, spec)


def spikes_tables(store: Store) -> list[Item]:
    df = store.frame("""
        SELECT r.network, r.scenario, r.test, s.direction, count(DISTINCT s.run_id) AS runs, count(*) AS spikes,
               count(*) FILTER (WHERE s.near_handoff) AS near, count(*) FILTER (WHERE NOT s.near_handoff) AS away,
               median(s.peak_ms) AS peak_median, max(s.peak_ms) AS peak_max, max(s.duration_ms) AS longest
        FROM delay_spikes s JOIN runs r USING (run_id)
        WHERE r.status = 'ok' GROUP BY ALL ORDER BY ALL""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["direction"], r["runs"], r["spikes"], r["near"], r["away"],
             _f(r["peak_median"]), _f(r["peak_max"]), _f(r["longest"])] for r in df.iter_rows(named=True)]
    items = [Item("delay-spikes", "Delay spikes",
                  "Runs of packets whose one-way delay exceeds the stream's median by more than 5 MADs (× 1.4826) "
                  "and at least 100 ms, found on every UDP stream's per-packet delay; near a handoff when the spike "
                  "overlaps ±5 s of one (seed 000 ch. 5: most spikes at handoffs, one of 5 s away from them).",
                  table_html=html_table(["network", "scenario", "test", "direction", "runs", "spikes", "near handoff",
                                         "away", "median peak ms", "max peak ms", "longest ms"], rows,
                                        name="delay-spikes"))]
    away = store.frame(AWAY_SQL)
    if away.height:
        rows = [[r["network"], r["scenario"], r["test"], r["run_id"], r["direction"], _f(r["start_s"], ".3f"),
                 _f(r["duration_ms"]), r["packets"], _f(r["peak_ms"]),
                 "no handoff" if r["handoff_offset_s"] is None else _f(r["handoff_offset_s"], "+.1f")]
                for r in away.iter_rows(named=True)]
        items.append(Item("delay-spikes-away", "Delay spikes away from handoffs",
                          "Each spike more than 5 s from every handoff, highest first, with its start in the run and "
                          "its distance from the nearest handoff: the ones a handoff does not explain.",
                          table_html=html_table(["network", "scenario", "test", "run", "direction", "start s",
                                                 "duration ms", "packets", "peak ms", "from nearest handoff s"], rows,
                                                name="delay-spikes-away", query=AWAY_SQL)))
    return items


SECTIONS = (("Delay spikes", (spikes_tables,)),)
