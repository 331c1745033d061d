"""The streaming and remote-terminal sections (004 §VI.B-C) from rows committed to a store."""

from __future__ import annotations

import polars as pl
import pytest

from cellperf.report import collect_items
from cellperf.store import RunRecord, Store, write_parquet
from tests.store.test_store import run_row


def test_stream_table_and_keystroke_cdf(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        stream = pl.DataFrame([{"run_id": "s1", "transport": "udp", "rate_bps": 384e3, "packet_bytes": 1200,
                                "buffer_s": 2.0, "expected": 800, "received": 790, "lost": 10, "late": 12,
                                "stalls": 2, "stall_s": 1.25, "startup_ms": 2300.0, "loss_rate": 0.0125,
                                "jitter_ms": 3.5, "owd_median_ms": 150.0, "owd_p95_ms": 300.0}])
        s.commit_run(RunRecord(run_row("s1") | {"test": "stream-udp", "test_type": "stream", "config": {"duration_s": 20}}, {"streams": stream}))
        staging = s.staging_dir("t1")
        # Echoes of 120, 250, 90 ms and one never echoed.
        write_parquet(pl.DataFrame({"key": [0, 1, 2, 3], "echo_ms": [120.0, 250.0, 90.0, None],
                                    "run_id": ["t1"] * 4}), staging / "keystrokes.parquet")
        session = pl.DataFrame([{"run_id": "t1", "keys": 4, "echoed": 3, "interval_s": 0.2, "median_ms": 120.0,
                                 "p95_ms": 237.0, "p99_ms": 247.4, "min_ms": 90.0, "max_ms": 250.0,
                                 "mean_ms": 153.3, "over_100ms": 0.75, "over_200ms": 0.5}])
        s.commit_run(RunRecord(run_row("t1") | {"test": "ssh", "test_type": "interactive", "config": {"duration_s": 20}},
                               {"terminal_sessions": session}, staging))
    with Store.open(tmp_path, read_only=True) as s:
        items = {i.key: i for _, its in collect_items(s) for i in its}
    assert "<td>udp</td><td>384</td><td>2</td><td>2300</td><td>2</td><td>1.25</td><td>12</td><td>10</td>" \
        in items["stream-table"].table_html
    bars = items["stream-stalls"].figure.data
    assert list(bars[0].y) == [1.25] and list(bars[0].text) == ["2 stalls"] and list(bars[1].y) == pytest.approx([2.3])
    assert "<td>3/4</td><td>120</td><td>237</td><td>250</td><td>75</td><td>50</td>" in items["keystroke-table"].table_html
    [cdf] = items["keystroke-cdf"].figure.data
    assert list(cdf.x) == [90.0, 120.0, 250.0] and [round(p, 3) for p in cdf.y] == [0.333, 0.667, 1.0]
