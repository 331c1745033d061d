"""The report's re-segmented retransmissions (seed 004 §V.B 2.2: with the timestamps option on,
data first sent in one packet was resent in two, which spoiled the paper's Table V): per test
and timestamps setting, the TCP data flows' retransmissions and how many merged or split the
original segments (docs/methods.md §4)."""

from __future__ import annotations

from cellperf.report.item import Item
from cellperf.report.tables import html_table
from cellperf.store import Store


def resegmented_table(store: Store) -> list[Item]:
    df = store.frame("""
        SELECT r.network, r.scenario, r.test,
               coalesce(CAST(json_extract(r.config, '$.options.timestamps') AS VARCHAR), 'default') AS timestamps,
               count(DISTINCT r.run_id) AS runs, sum(f.retx_total)::BIGINT AS total,
               sum(f.retx_merged)::BIGINT AS merged, sum(f.retx_split)::BIGINT AS split
        FROM flows f JOIN runs r USING (run_id)
        WHERE r.status = 'ok' AND f.role = 'data' AND f.proto = 'tcp' AND f.retx_merged IS NOT NULL
        GROUP BY ALL HAVING sum(f.retx_total) > 0 ORDER BY ALL""")
    if df.height == 0:
        return []
    rows = [[r["network"], r["scenario"], r["test"], r["timestamps"], r["runs"], r["total"], r["merged"], r["split"],
             f"{100 * (r['merged'] + r['split']) / r['total']:.1f}"] for r in df.iter_rows(named=True)]
    return [Item("tcp-resegmented", "Re-segmented retransmissions",
                 "Retransmissions of the TCP data flows whose boundaries differ from the first transmissions': one "
                 "resend over two or more original segments (merged) or a piece of one (split, each piece counted), "
                 "at the sender's capture, per timestamps setting (004 §V.B: with timestamps on, one segment was "
                 "resent as two).",
                 table_html=html_table(["network", "scenario", "test", "timestamps", "runs", "retransmissions",
                                        "merged", "split", "re-segmented %"], rows, name="tcp-resegmented"))]


SECTIONS = (("Re-segmented retransmissions", (resegmented_table,)),)
