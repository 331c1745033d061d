"""The TCP and path studies' sections (002 §7, 003, 004 §IV) from rows committed to a store,
and the campaign analysis's per-run shares, Jain's index and queue estimate."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.campaign.analyse import _with_studies
from cellperf.report import collect_items, export_figures
from cellperf.store import RunRecord, Store
from tests.store.test_store import T0, run_row


def _flows(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, infer_schema_length=None)


def test_shares_jain_and_queue_of_a_runs_flows():
    # Two TCP test flows down (3 and 1 Mbit/s), the ACKs of flow 2 up (a connection's two
    # directions share its flow_id), one UDP flow up, a control flow that does not count.
    flows = _flows([
        {"flow_id": 0, "role": "control", "proto": "tcp", "direction": "uplink", "goodput_bps": 5e6, "owd_max_ms": None},
        {"flow_id": 1, "role": "data", "proto": "tcp", "direction": "downlink", "goodput_bps": 3e6, "owd_max_ms": 10.0},
        {"flow_id": 2, "role": "data", "proto": "tcp", "direction": "downlink", "goodput_bps": 1e6, "owd_max_ms": 10.0},
        {"flow_id": 2, "role": "data", "proto": "tcp", "direction": "uplink", "goodput_bps": 0.0, "owd_max_ms": 5.0},
        {"flow_id": 3, "role": "data", "proto": "udp", "direction": "uplink", "goodput_bps": 9_603_000.0,
         "owd_max_ms": 961.0},
    ])
    out = _with_studies(flows, saturating=True)
    assert out.height == flows.height
    out = out.sort("flow_id", "direction")
    assert out["share"].to_list() == [None, 0.75, 0.25, None, 1.0]  # the ACKs delivered nothing
    assert out["jain"].to_list() == pytest.approx([None, 16 / 20, 16 / 20, None, 1.0])  # (3+1)² / (2·(9+1))
    # 003 slide 16: 961 ms × 9603 kbit/s = 1,153,560 bytes (the slide's "1126 KB" is KiB).
    assert out["queue_bytes"].to_list()[:4] == [None, None, None, None]
    assert out["queue_bytes"][4] == pytest.approx(961e-3 * 9_603_000 / 8)
    assert out["queue_bytes"][4] / 1024 == pytest.approx(1126, abs=1)
    assert "queue_bytes" not in _with_studies(flows, saturating=False).columns  # not a saturating test


def _commit(s: Store, run_id: str, test_type: str, *, flows=None, result=None, options=None, tables=None):
    row = run_row(run_id) | {"test": test_type, "test_type": test_type, "scenario": "stationary",
                             "config": {"interval_s": 5.0, "options": options or {}}}
    if result is not None:
        row["result"] = result
    t = dict(tables or {})
    if flows is not None:
        t["flows"] = _flows([{"run_id": run_id, **f} for f in flows])
    s.commit_run(RunRecord(row, t))


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        for i, (cc, util, mean, std) in enumerate([("reno", 0.86, 120.0, 40.0), ("vegas", 0.75, 20.0, 5.0)]):
            _commit(s, f"tcp{i}", "tcp-bulk", options={"congestion": cc}, flows=[{
                "flow_id": 1, "role": "data", "proto": "tcp", "direction": "downlink", "goodput_bps": 1.5e6,
                "utilisation": util, "mean_capacity_bps": 1.5e6 / util, "owd_mean_ms": mean, "owd_std_ms": std,
                "owd_p95_ms": mean + 2 * std, "owd_kind": "excess", "share": 1.0, "jain": 1.0}])
        _commit(s, "cbr", "udp-cbr", flows=[{"flow_id": 1, "role": "data", "proto": "udp", "direction": "downlink",
                                             "goodput_bps": 9_603_000.0, "owd_max_ms": 961.0, "owd_kind": "raw",
                                             "queue_bytes": 961e-3 * 9_603_000 / 8}])
        _commit(s, "md", "min-delay", result={"owd_ms": {"kind": "raw", "min": 42.5}})
        _commit(s, "ping", "ping-sweep", result={
            "sweep": [{"size_bytes": 128, "rtt_ms": {"median": 100.0}, "rtt_mean_ms": 101.0, "rtt_std_ms": 3.0,
                       "loss_rate": 0.0},
                      {"size_bytes": 1500, "rtt_ms": {"median": 200.0}, "rtt_mean_ms": 205.0, "rtt_std_ms": 9.0,
                       "loss_rate": 0.01}],
            "fit": {"intercept_ms": 90.67, "slope_ms_per_byte": 0.0729}})
        t = datetime.fromtimestamp(T0 + 12.5, timezone.utc)
        gaps = pl.DataFrame({"run_id": ["sp"] * 2, "flow_id": [1, 1], "direction": ["downlink"] * 2,
                             "kind": ["gap", "delay_period"], "start_ts": [t, t],
                             "duration_ms": [1200.0, 600.0], "lost": [11, 0]})
        _commit(s, "sp", "sparse", tables={"gaps": gaps})
    return tmp_path


def test_studies_sections_render_with_their_figures(store, tmp_path):
    with Store.open(store, read_only=True) as s:
        sections = dict(collect_items(s))
    items = {i.key: i for i in [*sections["TCP studies"], *sections["Path studies"]]}
    tcp = items["tcp-studies-table"].table_html
    assert "<td>reno</td><td>downlink</td><td>1500</td><td>0.86</td><td>1744</td><td>120.0 ± 40.0</td>" in tcp
    assert "<td>vegas</td>" in tcp and "<td>0.75</td>" in tcp
    bars, points = items["tcp-studies-figure"].figure.data
    assert list(bars.y) == [0.86, 0.75] and list(points.y) == [120.0, 20.0]
    assert list(points.error_y.array) == [40.0, 5.0]
    q = items["queue-size"].table_html
    assert "<td>961.0</td><td>9603</td><td>1154</td><td>raw</td><td>42.5</td>" in q
    assert "<td>128</td><td>100.0</td><td>101.0</td><td>3.0</td>" in items["ping-table"].table_html
    mean, fit = items["ping-fit"].figure.data
    assert list(mean.y) == [101.0, 205.0] and list(mean.error_y.array) == [3.0, 9.0]
    assert list(fit.y) == pytest.approx([90.67 + 0.0729 * 128, 90.67 + 0.0729 * 1500])
    g = items["gaps-table"].table_html
    assert "<td>gap</td><td>12.50</td><td>1200</td><td>11</td>" in g and "<td>delay period</td>" in g
    written = export_figures([items["tcp-studies-figure"], items["ping-fit"]], tmp_path / "figs")
    heads = {p.suffix: p.read_bytes()[:4] for p in written}
    assert heads == {".png": b"\x89PNG", ".pdf": b"%PDF"}


def test_no_study_sections_without_their_rows(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        _commit(s, "v", "voip")
    with Store.open(tmp_path, read_only=True) as s:
        titles = [t for t, _ in collect_items(s)]
    assert "TCP studies" not in titles and "Path studies" not in titles
    assert json.dumps(titles)
