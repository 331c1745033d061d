"""Post-handover bursts (seed 004 §IV.B 2.2) on crafted arrivals: the peak 200-ms rate after
each handoff, windows cut at the next handoff, flows not active at a handoff left out, and only
the receiver's capture counted."""

from datetime import datetime, timezone

import polars as pl
import pytest

from cellperf.handoffs.bursts import handoff_bursts, receiver_packets

T0 = 1_700_000_000.0


def _arrivals(times_bytes, direction="downlink"):
    return pl.DataFrame({"flow_id": [f for f, _, _ in times_bytes], "direction": direction,
                         "t": [T0 + t for _, t, _ in times_bytes], "ip_len": [b for _, _, b in times_bytes]},
                        schema={"flow_id": pl.UInt32, "direction": pl.String, "t": pl.Float64, "ip_len": pl.UInt64})


def test_peak_rate_after_each_handoff():
    # Flow 1 steady: 1000 B every 100 ms (80 kb/s, at 0.05 s, 0.15 s, ... : off the bins'
    # edges) to 20 s, except a gap from the handoff at 5 s to 6.5 s whose 15 held packets
    # arrive in 6.51-6.58 s (a driver's burst).
    steady = [(1, k / 10 + 0.05, 1000) for k in range(200) if not 50 <= k < 65]
    burst = [(1, 6.51 + k * 0.005, 1000) for k in range(15)]
    # Flow 2 ends before the second handoff (12 s, 14.5 s): only the first concerns it.
    other = [(2, k / 10 + 0.05, 500) for k in range(100)]
    # Flow 1's other direction: a hello, no data in a full interval (left out), at 5.1 s.
    hello = [(1, 5.1, 60)]
    arrivals = pl.concat([_arrivals(steady + burst), _arrivals(other, "uplink"), _arrivals(hello, "uplink")])
    flows = pl.DataFrame({"flow_id": [1, 2, 1], "direction": ["downlink", "uplink", "uplink"], "start_s": [T0] * 3,
                          "end_s": [T0 + 19.95, T0 + 9.95, T0 + 5.1], "throughput_bps": [80_000.0, 40_000.0, 9.4],
                          "interval_max_bps": [88_000.0, 40_000.0, 0.0]}, schema_overrides={"flow_id": pl.UInt32})
    out = handoff_bursts(arrivals, flows, [T0 + 5.0, T0 + 12.0, T0 + 14.5])
    rows = {(r["flow_id"], round(r["handoff_s"] - T0, 3)): r for r in out.iter_rows(named=True)}
    assert sorted(rows) == [(1, 5.0), (1, 12.0), (1, 14.5), (2, 5.0)]
    # The 15 held packets land in the bin [6.4, 6.6) beside one steady one: 16 kB / 0.2 s.
    b = rows[(1, 5.0)]
    assert b["peak_bps"] == pytest.approx(16_000 * 8 / 0.2)
    assert b["peak_after_s"] == pytest.approx(1.4)
    assert b["peak_ratio"] == pytest.approx(640_000 / 80_000)
    # Window [5, 10): 35 steady packets (6.55 .. 9.95) and the 15 of the burst.
    assert b["window_bytes"] == 50_000 and b["window_s"] == pytest.approx(5.0)
    # The second handoff's window stops at the third (2.5 s); steady: 2 packets per bin.
    b = rows[(1, 12.0)]
    assert b["window_s"] == pytest.approx(2.5) and b["window_bytes"] == 25_000
    assert b["peak_bps"] == pytest.approx(2000 * 8 / 0.2)
    assert rows[(2, 5.0)]["peak_bps"] == pytest.approx(1000 * 8 / 0.2)
    assert rows[(2, 5.0)]["direction"] == "uplink"
    # No handoffs, no rows; a flow never seen at its receiver gets none either.
    assert handoff_bursts(arrivals, flows, []).height == 0
    only_1 = handoff_bursts(arrivals.filter(pl.col("flow_id") == 1), flows, [T0 + 5.0])
    assert only_1.select("flow_id", "direction").rows() == [(1, "downlink")]


def test_a_flow_silent_after_the_handoff_peaks_at_zero():
    arrivals = _arrivals([(1, 0.0, 1000), (1, 9.0, 1000)])
    flows = pl.DataFrame({"flow_id": [1], "direction": ["downlink"], "start_s": [T0], "end_s": [T0 + 9.0],
                          "throughput_bps": [1_000.0], "interval_max_bps": [8_000.0]},
                         schema_overrides={"flow_id": pl.UInt32})
    (row,) = handoff_bursts(arrivals, flows, [T0 + 2.0]).iter_rows(named=True)
    assert (row["window_bytes"], row["peak_bps"], row["peak_after_s"]) == (0, 0.0, None)


def test_receiver_packets_keep_each_direction_at_its_receiving_end():
    ts = [datetime.fromtimestamp(T0 + k, timezone.utc) for k in range(4)]
    packets = pl.DataFrame({"capture": [0, 1, 0, 1], "flow_id": [1, 1, 2, 2], "ts": ts,
                            "uplink": [True, True, False, False], "ip_len": [100, 100, 200, 200]},
                           schema_overrides={"capture": pl.UInt8, "flow_id": pl.UInt32, "ip_len": pl.UInt32})
    got = receiver_packets(packets, [{"side": "mn"}, {"side": "cn"}])
    # Uplink arrives at the CN's capture (index 1), downlink at the MN's (index 0).
    assert got.select("flow_id", "direction", "ip_len").rows() == [(1, "uplink", 100), (2, "downlink", 200)]
    assert got["t"].to_list() == [T0 + 1, T0 + 2]
