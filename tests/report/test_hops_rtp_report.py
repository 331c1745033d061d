"""The report's "Path hops" (seed 003 slides 9-10) and "RTP streams" (seed 004 §VI.C) on crafted
store rows: exact aggregation over runs."""

from __future__ import annotations

import polars as pl

from cellperf.report import collect_items
from cellperf.store import RunRecord, Store
from tests.store.test_store import run_row


def _hop(ttl, responder, sent, answered, reached, rtt=None):
    q = dict(zip(("min", "q1", "median", "q3", "p95", "max"), rtt)) if rtt else {}
    return {"ttl": ttl, "responder": responder, "responders": int(responder is not None), "sent": sent,
            "answered": answered, "loss_rate": 1 - answered / sent, "reached": reached,
            **{f"rtt_{k}_ms": q.get(k) for k in ("min", "q1", "median", "q3", "p95", "max")},
            "rtt_mean_ms": q.get("median"), "rtt_std_ms": 0.0 if rtt else None}


def _commit(s: Store, run_id: str, test_type: str, tables: dict):
    row = run_row(run_id) | {"test": test_type, "test_type": test_type, "network": "WiBro", "scenario": "stationary"}
    s.commit_run(RunRecord(row, {k: pl.DataFrame([{"run_id": run_id, **r} for r in v], infer_schema_length=None)
                                 for k, v in tables.items()}))


def test_hops_and_rtp_streams_over_two_runs(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        _commit(s, "h1", "hops", {"hop_rtt": [_hop(1, None, 10, 0, False),
                                              _hop(2, "10.0.0.1", 10, 9, True, (110, 112, 115, 118, 130, 140))]})
        _commit(s, "h2", "hops", {"hop_rtt": [_hop(1, None, 10, 0, False),
                                              _hop(2, "10.0.0.1", 10, 10, True, (105, 111, 121, 125, 150, 160))]})
        media = {"capture": "cn", "src": "10.0.0.1", "src_port": 5260, "dst": "10.0.0.2", "dst_port": 40000,
                 "payload_type": 33, "lost": 0, "jitter_ms": 1.0, "max_jitter_ms": 2.0, "burst_s": 0.2,
                 "burst_bps": 700e3, "burst_lead_s": 0.8, "receiver_reports": 2, "rr_jitter_ms": 3.0,
                 "ssrc_changes": 1, "refresh_bytes": 40}
        probe = {**media, "packets": 3, "ssrc": 7, "ssrc_changes": 0, "refresh_bytes": 0, "burst_s": None,
                 "burst_bps": None, "burst_lead_s": None, "receiver_reports": 0, "rr_jitter_ms": None}
        _commit(s, "s1", "stream", {"rtp_streams": [probe, {**media, "packets": 120, "ssrc": 42, "rtcp_rtt_ms": 200.0}]})
        _commit(s, "s2", "stream", {"rtp_streams": [probe, {**media, "packets": 118, "lost": 2, "ssrc": 43,
                                                            "jitter_ms": 3.0, "rtcp_rtt_ms": 210.0}]})
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    table = items["hop-rtt"].table_html
    # TTL 1 silent in both runs; TTL 2: 19 of 20 answered (5 %), least 105, median of the
    # medians (115, 121) 118, largest p95 150 and max 160.
    assert "<td>1</td><td>???</td><td>2</td><td>20</td><td>100.0</td><td>-</td>" in table
    assert ("<td>2</td><td>10.0.0.1 (target)</td><td>2</td><td>20</td><td>5.0</td><td>105.00</td><td>118.00</td>"
            "<td>150.00</td><td>160.00</td>") in table
    fig = items["hop-rtt-figure"].figure
    (box,) = fig.data
    assert (list(box.x), list(box.median), list(box.q1), list(box.upperfence)) == ([2], [118.0], [111.5], [150.0])
    # The silent hop keeps its place on the axis, marked.
    assert [(a.x, a.text) for a in fig.layout.annotations] == [(1, "???")] and fig.layout.xaxis.range == (0.5, 2.5)
    # Two runs, four streams, two SSRC changes (80 B of refreshes); media: 238 packets, 2 lost,
    # jitter median 2.0, largest 2.0, RTCP RTT median 205.
    assert ("<td>CN</td><td>2</td><td>4</td><td>2</td><td>80</td><td>238</td><td>2</td><td>2.00</td><td>2.00</td>"
            "<td>0.20</td><td>700</td><td>0.80</td><td>4</td><td>3.00</td><td>205.0</td>") in items["rtp-streams"].table_html
