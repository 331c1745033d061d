"""Seed 000 Fig. 4.3 and Table 4.2 over every TCP test: tcp-bulk runs, the tcp-bulk members of
group runs and the windows of a window-sweep, each in its probe's direction."""

from __future__ import annotations

import polars as pl

from cellperf.report import collect_items
from cellperf.store import RunRecord, Store
from tests.report.test_studies_report import _group, _tcp
from tests.store.test_store import run_row


def _retx(data, total, n, s, u, m):
    return {"data_packets": data, "retx_total": total, "retx_normal": n, "retx_spurious": s, "retx_unavoidable": u,
            "retx_serial": m, "retx_method": "two-capture"}


def _commit(s: Store, run_id: str, test_type: str, flows: list[dict], kbps: dict, *, test=None, config=None,
            result=None, direction=None, network="EV-DO"):
    """A run with its flows and, per (flow_id, direction), intervals of the given kb/s."""
    row = run_row(run_id) | {"test": test or test_type, "test_type": test_type, "scenario": "mobile",
                             "network": network, "direction": direction, "result": result or {},
                             "config": {"interval_s": 5.0, **(config or {})}}
    intervals = pl.DataFrame([{"run_id": run_id, "flow_id": f, "direction": d, "interval": k, "bytes": 1,
                               "throughput_bps": v * 1e3} for (f, d), vs in kbps.items() for k, v in enumerate(vs)])
    s.commit_run(RunRecord(row, {"flows": pl.DataFrame([{"run_id": run_id, **f} for f in flows],
                                                       infer_schema_length=None), "intervals": intervals}))


def test_box_and_retransmission_classes_of_bulk_group_and_sweep_tcp(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        # A download: its connection's uplink carries the probe's hello (27 bit/s): no box point.
        _commit(s, "bulk", "tcp-bulk", direction="down", result={"direction": "down"},
                flows=[_tcp(1, "downlink", 2e6, **_retx(1000, 10, 2, 8, 0, 1)), _tcp(1, "uplink", 27.0)],
                kbps={(1, "downlink"): [2000, 1800], (1, "uplink"): [0.027]})
        # A group: a download beside a UDP stream (the stream is no TCP test).
        members = [("dl", "tcp-bulk", {"direction": "down"}), ("stream", "udp-cbr", {"direction": "down"})]
        _commit(s, "grp", "group", test="beside", config=_group(members),
                result={"test": "group", "members": {"dl": {"direction": "down"}, "stream": {"direction": "down"}}},
                flows=[_tcp(1, "downlink", 1e6, member="dl", **_retx(500, 5, 5, 0, 0, 0)),
                       _tcp(1, "uplink", 30.0, member="dl"),
                       {"flow_id": 2, "role": "data", "proto": "udp", "direction": "downlink", "goodput_bps": 9600.0,
                        "member": "stream"}],
                kbps={(1, "downlink"): [900, 1100], (1, "uplink"): [0.03], (2, "downlink"): [9.6]})
        # A window sweep: the steps' connections in start order (flow 4 started first).
        _commit(s, "ws", "window-sweep", config={"options": {"direction": "down"}},
                result={"direction": "down", "sweep": [{"window_bytes": 16384}, {"window_bytes": 65536}]},
                flows=[_tcp(3, "downlink", 3e6, start_s=6.0, **_retx(300, 3, 0, 3, 0, 0)),
                       _tcp(4, "downlink", 1e6, start_s=0.5, **_retx(100, 0, 0, 0, 0, 0))],
                kbps={(3, "downlink"): [3000], (4, "downlink"): [1000]})
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    (box,) = items["tcp-box"].figure.data
    points = sorted(zip(box.x, box.y))
    assert points == [("EV-DO", 1800), ("EV-DO", 2000), ("EV-DO beside:dl", 900), ("EV-DO beside:dl", 1100),
                      ("EV-DO window 16 KB", 1000), ("EV-DO window 64 KB", 3000)]
    table = items["tcp-retx"].table_html
    # all: 18 of 1900 data packets; N 7, S 11, U 0, M 1 of 18.
    for row in ("<td>all, mobile</td><td>0.95</td><td>38.89</td><td>61.11</td><td>0.00</td><td>5.56</td><td>18</td>",
                "<td>EV-DO (mobile)</td><td>1.00</td><td>20.00</td><td>80.00</td><td>0.00</td><td>10.00</td><td>10</td>",
                "<td>EV-DO beside:dl (mobile)</td><td>1.00</td><td>100.00</td><td>0.00</td>",
                "<td>EV-DO window 16 KB (mobile)</td><td>0.00</td><td>–</td>",
                "<td>EV-DO window 64 KB (mobile)</td><td>1.00</td><td>0.00</td><td>100.00</td>"):
        assert row in table.replace("<strong>", "").replace("</strong>", ""), (row, table)
    assert table.count("</tr>") == 1 + 5
