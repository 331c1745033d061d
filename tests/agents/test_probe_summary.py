"""The probe's human summary shows each test's point and fits 80 columns (issue 28 §4)."""

from __future__ import annotations

import io

from rich.console import Console

from cellperf.commands import probe

DELAY = {"min": 40.1, "median": 41.0, "p95": 48.2, "max": 60.0, "samples": 10}

PING_SWEEP = {
    "test": "ping-sweep", "direction": "echo", "server": "cn.example.net:5250", "duration_s": 0.0,
    "throughput_bps": 0.0, "packets_sent": 200, "packets_received": 198, "loss_rate": 0.01, "rtt_ms": DELAY,
    "sweep": [{"size_bytes": 128, "rtt_ms": DELAY, "loss_rate": 0.0},
              {"size_bytes": 1400, "rtt_ms": {**DELAY, "median": 51.176}, "loss_rate": 0.02}],
    # 8 µs per byte: the bottleneck serialises at 1 Mbit/s.
    "fit": {"intercept_ms": 40.0, "slope_ms_per_byte": 0.008},
}

SPARSE = {
    "test": "sparse", "direction": "down", "server": "cn.example.net:5250", "duration_s": 60.0,
    "throughput_bps": 116_800.0, "packets_sent": 600, "packets_received": 590, "loss_rate": 10 / 600,
    "owd_ms": {**DELAY, "kind": "raw"},
    "streams": {"down": {"gaps": {"count": 3, "total_ms": 1234.4, "max_ms": 800.2, "lost_in_gaps": 10},
                         "delay_periods": {"count": 2, "total_ms": 450.0, "max_ms": 300.0}}, "up": None},
}

WINDOW_SWEEP = {
    "test": "window-sweep", "direction": "down", "server": "cn.example.net:5250", "duration_s": 40.0,
    "throughput_bps": 2e6, "packets_sent": 100, "packets_received": 100, "loss_rate": 0.0, "rtt_ms": DELAY,
    "sweep": [{"window_bytes": 16384, "mss": 1448, "throughput_bps": 1.5e6, "retransmission_rate": 0.0},
              {"window_bytes": 65536, "mss": 1448, "throughput_bps": 2e6, "retransmission_rate": 0.01}],
    "bdp": {"bandwidth_bps": 2e6, "rtt_ms": 40.1, "bdp_bytes": 10025.0, "rwin_bdp_bytes": 10136.0, "mss": 1448},
}


def _printed(doc: dict) -> list[str]:
    out = io.StringIO()
    probe.print_summary(doc, Console(file=out, width=80))
    return out.getvalue().splitlines()


def test_a_ping_sweep_shows_its_rtt_against_size_and_no_throughput():
    rows = dict(probe.summary_rows(PING_SWEEP))
    assert "throughput" not in rows and "duration" not in rows
    assert rows["1400 B"] == "51.176 ms median, 48.200 p95, loss 2.00 %"
    assert rows["RTT vs size"] == "40.000 ms + 8.0000 µs/B (≈ 1.00 Mbit/s)"


def test_a_sparse_test_shows_its_gaps_and_delay_periods():
    rows = dict(probe.summary_rows(SPARSE))
    assert rows["gaps (down)"] == "3, 1234 ms in all, longest 800 ms, 10 lost in them"
    assert rows["delay periods (down)"] == "2, 450 ms in all, longest 300 ms"


def test_a_window_sweep_shows_its_bdp_as_rate_times_rtt():
    rows = dict(probe.summary_rows(WINDOW_SWEEP))
    assert rows["BDP (best rate × min RTT)"] == "10025 B = 2.00 Mbit/s × 40.100 ms"
    assert rows["window 65536 B, MSS 1448"] == "2.00 Mbit/s, retx 1.00 %"


def test_every_summary_fits_80_columns_without_wrapping():
    for doc in (PING_SWEEP, SPARSE, WINDOW_SWEEP):
        lines = _printed(doc)
        assert max(len(line) for line in lines) <= 80
        # One printed line per row plus the title and the two borders: nothing wrapped.
        assert len(lines) == len(probe.summary_rows(doc)) + 3, lines
