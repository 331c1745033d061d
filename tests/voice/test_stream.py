"""Windowed voice quality of crafted packet streams: exact counts, statuses, labels, bad input."""

import datetime as dt

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from cellperf.errors import UserError
from cellperf.voice import r_g107, r_simple, read_stream, summarize_windows, voice_windows


def test_one_window_per_five_seconds_with_exact_counts(make_stream):
    # 30 s of 20-ms packets = 1500 packets, 250 per 5-s window.
    owd = np.full(1500, 40.0)
    owd[250:500] = 150.0
    lost = np.zeros(1500, bool)
    lost[600:605] = True  # window 2: 5 of 250, one burst
    w = voice_windows(make_stream(owd, lost))
    assert w.height == 6
    assert w["packets_sent"].to_list() == [250] * 6
    assert w["packets_lost"].to_list() == [0, 0, 5, 0, 0, 0]
    assert w["mean_delay_ms"].to_list() == [40.0, 150.0, 40.0, 40.0, 40.0, 40.0]
    assert w["status"].to_list() == ["ok"] * 6
    assert w["delay_kind"].unique().to_list() == ["one_way"]
    assert w["r"][1] == pytest.approx(r_simple(150, 0))
    assert w["r"][2] == pytest.approx(r_simple(40, 0.02))
    # Burst ratio: one burst of 5 at 2 % loss → 5 · 0.98.
    assert w["burst_ratio"][2] == pytest.approx(4.9)
    assert w["burst_ratio"][0] is None
    assert (w["window_end"] - w["window_start"]).dt.total_seconds().unique().to_list() == [5]


def test_g107_uses_the_measured_burst_ratio(make_stream):
    lost = np.zeros(1500, bool)
    lost[600:605] = True
    w = voice_windows(make_stream(np.full(1500, 40.0), lost), model="g107")
    assert w["r"][2] == pytest.approx(r_g107(40, 0.02, burst_ratio=4.9))


def test_gap_is_no_data_and_total_loss_is_all_lost(make_stream):
    lost = np.zeros(1500, bool)
    lost[250:500] = True  # window 1 entirely lost
    df = make_stream(np.full(1500, 40.0), lost, keep_lost_send_ts=False)
    df = df.filter((pl.col("seq") < 750) | (pl.col("seq") >= 1000))  # window 3: nothing sent
    w = voice_windows(df)
    assert w["status"].to_list() == ["ok", "all_lost", "ok", "no_data", "ok", "ok"]
    assert w["packets_sent"].to_list() == [250, 250, 250, 0, 250, 250]
    no_data = w.row(3, named=True)
    assert no_data["r"] is None and no_data["mos"] is None and no_data["band"] is None
    assert no_data["loss"] is None
    all_lost = w.row(1, named=True)
    assert (all_lost["r"], all_lost["mos"], all_lost["mean_delay_ms"]) == (0.0, 1.0, None)
    s = summarize_windows(w).row(0, named=True)
    assert (s["window_count"], s["ok"], s["all_lost"], s["no_data"]) == (6, 4, 1, 1)
    assert s["share_r_ge_90"] == pytest.approx(4 / 5)


def test_half_rtt_from_echo_times(make_stream):
    df = make_stream(np.full(500, 180.0), np.zeros(500, bool)).with_columns(owd_ms=None)
    with pytest.raises(UserError, match="half-RTT"):
        voice_windows(df)
    w = voice_windows(df, delay="half_rtt")
    assert w["mean_delay_ms"].to_list() == [90.0, 90.0]
    assert w["delay_kind"].to_list() == ["half_rtt", "half_rtt"]


def test_two_directions_share_the_window_grid(make_stream):
    up = make_stream(np.full(500, 30.0), np.zeros(500, bool), flow_id=1)
    down = make_stream(np.full(400, 60.0), np.zeros(400, bool), flow_id=2, t0_ns=1_700_000_002 * 10**9)
    w = voice_windows(pl.concat([down, up]))
    assert w["flow_id"].to_list() == [1, 1, 2, 2]
    assert w["window"].to_list() == [0, 1, 0, 1]
    assert w.filter(pl.col("flow_id") == 2)["packets_sent"].to_list() == [150, 250]
    assert w.filter(pl.col("flow_id") == 2)["window_start"][0] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)


def test_one_flow_id_two_directions_by_uplink(make_stream):
    # `cellperf analyze` writes an echoed call as one flow_id with an `uplink` flag.
    up = make_stream(np.full(500, 30.0), np.zeros(500, bool), flow_id=7).with_columns(uplink=pl.lit(True))
    down = make_stream(np.full(500, 250.0), np.zeros(500, bool), flow_id=7).with_columns(uplink=pl.lit(False))
    w = voice_windows(pl.concat([up, down]))
    assert sorted(set(w["flow_id"].to_list())) == ["7/down", "7/up"]
    assert w.filter(pl.col("flow_id") == "7/up")["mean_delay_ms"].to_list() == [30.0, 30.0]
    assert w.filter(pl.col("flow_id") == "7/down")["mean_delay_ms"].to_list() == [250.0, 250.0]
    assert w.filter(pl.col("flow_id") == "7/up")["packets_sent"].sum() == 500


def test_arrow_table_input(make_stream):
    table = make_stream(np.full(300, 20.0), np.zeros(300, bool)).to_arrow()
    assert isinstance(table, pa.Table)
    assert voice_windows(table, window_s=2)["packets_sent"].to_list() == [100, 100, 100]


def test_parquet_and_csv_round_trip(make_stream, tmp_path):
    lost = np.zeros(600, bool)
    lost[10:13] = True
    df = make_stream(np.full(600, 25.0), lost)
    df.write_parquet(tmp_path / "s.parquet")
    df.write_csv(tmp_path / "s.csv")
    a = voice_windows(read_stream(tmp_path / "s.parquet"))
    b = voice_windows(read_stream(tmp_path / "s.csv"))
    assert a.equals(b)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.drop("lost"), "missing column"),
        (lambda d: d.with_columns(owd_ms=pl.lit(-5.0)), "negative delay"),
        (lambda d: d.with_columns(lost=True), "marked lost have a receive time"),
        (lambda d: d.clear(), "no packets"),
        (lambda d: d.with_columns(send_ts=None), "no packet has a send time"),
        (
            lambda d: pl.concat([d, d.with_columns(flow_id=pl.lit(9, pl.UInt32), send_ts=None)]),
            "flow 9 has no send timestamps",
        ),
    ],
)
def test_bad_streams(make_stream, mutate, message):
    df = make_stream(np.full(100, 20.0), np.zeros(100, bool))
    with pytest.raises(UserError, match=message):
        voice_windows(mutate(df))


def test_bad_window_and_files(make_stream, tmp_path):
    df = make_stream(np.full(100, 20.0), np.zeros(100, bool))
    with pytest.raises(UserError, match="window must be > 0"):
        voice_windows(df, window_s=0)
    with pytest.raises(UserError, match="no such file"):
        read_stream(tmp_path / "missing.parquet")
    (tmp_path / "s.txt").write_text("x")
    with pytest.raises(UserError, match="expected a .parquet or .csv"):
        read_stream(tmp_path / "s.txt")
    (tmp_path / "bad.csv").write_text("flow_id,seq,send_ts,recv_ts,bytes,lost,owd_ms\n1,0,yesterday,,160,false,\n")
    with pytest.raises(UserError, match="bad.csv"):
        read_stream(tmp_path / "bad.csv")


def test_agent_log_columns(make_stream):
    # Agent logs: string flow ids, owd_kind labels, rtt_ms for echoed packets.
    df = make_stream(np.full(500, 70.0), np.zeros(500, bool)).with_columns(
        flow_id=pl.lit("run1/0/up"), owd_kind=pl.lit("excess"), rtt_ms=pl.lit(300.0)
    )
    w = voice_windows(df)
    assert w["delay_kind"].unique().to_list() == ["excess_one_way"]
    assert w["flow_id"].unique().to_list() == ["run1/0/up"]
    # Half-RTT comes from rtt_ms (one clock), not from recv_ts − send_ts.
    assert voice_windows(df, delay="half_rtt")["mean_delay_ms"].to_list() == [150.0, 150.0]
    with pytest.raises(UserError, match="owd_kind must be one of"):
        voice_windows(df.with_columns(owd_kind=pl.when(pl.col("seq") < 10).then(pl.lit("raw")).otherwise(pl.lit("excess"))))
    with pytest.raises(UserError, match="unknown loss"):
        voice_windows(df.with_columns(lost=None))


def test_explicit_origin_fixes_the_grid(make_stream):
    df = make_stream(np.full(500, 20.0), np.zeros(500, bool))  # 10 s from T0
    origin = dt.datetime(2023, 11, 14, 22, 13, 18, tzinfo=dt.timezone.utc)  # T0 − 2 s
    w = voice_windows(df, origin=origin)
    assert w["window"].to_list() == [0, 1, 2]
    assert w["packets_sent"].to_list() == [150, 250, 100]
    assert w["window_start"][0] == origin



def test_window_edges_are_exact_to_the_nanosecond(make_stream):
    # On a 2023 epoch time float64 steps are 256 ns; packets 1 ns apart across an edge must split.
    df = make_stream(np.full(3, 20.0), np.zeros(3, bool))
    t0 = df["send_ts"].dt.epoch("ns")[0]
    offsets = pl.Series([0, 5 * 10**9 - 1, 5 * 10**9], dtype=pl.Int64)
    df = df.with_columns(send_ts=(offsets + t0).cast(pl.Datetime("ns", "UTC")))
    assert voice_windows(df)["packets_sent"].to_list() == [2, 1]
