"""Windowed voice quality of a packet stream (docs/methods.md §5; seed 000 §4.3, Figs. 4.5–4.7).

Input is the per-packet table `cellperf analyze` exports as `udp_packets` (agent logs have the
same columns), one row per packet in sending order:

    flow_id, seq (uint64), send_ts, recv_ts (timestamp[ns, UTC]; recv_ts null when not
    received), bytes (uint32), lost (bool), owd_ms (float64, nullable)

Each flow (one direction of a call) is cut into fixed windows (default 5 s) by sending time, on
one grid shared by all flows so that the two directions line up. Per window: packets sent and
lost, loss fraction, mean delay over received packets, burst ratio, R, MOS and the G.109 band.

Delay is either the one-way delay in `owd_ms` or, for echoed streams, half the round-trip time,
as the thesis does when clocks are not synchronised (000 §4.3): `rtt_ms` / 2 when the table has
that column (agent logs), else (recv_ts − send_ts) / 2 for tables whose send and receive times
are both on the sender's clock. The output's `delay_kind` says which kind of delay R rests on
(`one_way`, `excess_one_way` or `half_rtt`; agent logs label owd_ms in `owd_kind`).

Window status (never a silent default):
- `ok`: at least one delay sample; R computed from mean delay and loss.
- `all_lost`: packets were sent and every one was lost. No speech arrives, so R = 0 and MOS = 1
  (**choice**: both models' loss curves are fitted far below 100 % loss; the floor is the only
  honest rating of silence). Delay and burst ratio are null.
- `no_data`: no packet was sent in the window (a gap in the stream), or no packet has a known
  delay and not all were lost. R, MOS, band are null; never the 94.2 of an unimpaired call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from cellperf.errors import UserError
from cellperf.voice.emodel import G107Params, mos_from_r, rating, satisfaction_band
from cellperf.voice.loss_pattern import burst_ratio_by_group

DELAY_KINDS = ("one_way", "half_rtt")
REQUIRED_COLUMNS = ("flow_id", "seq", "send_ts", "recv_ts", "lost", "owd_ms")
_TS = pl.Datetime("ns", "UTC")


def read_stream(path: str | Path) -> pl.DataFrame:
    """Read a per-packet stream table from Parquet or CSV and check its schema.

    CSV timestamps are ISO 8601 (what polars, pandas and DuckDB write for timestamps).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        if path.suffix.lower() == ".parquet":
            df = pl.read_parquet(path)
        elif path.suffix.lower() == ".csv":
            df = pl.read_csv(
                path,
                schema_overrides={"send_ts": pl.String, "recv_ts": pl.String, "seq": pl.UInt64},
            )
        else:
            raise UserError(f"{path}: expected a .parquet or .csv per-packet stream table")
    except (pl.exceptions.PolarsError, OSError) as e:
        raise UserError(f"{path}: cannot read ({str(e).splitlines()[0]})") from None
    return check_stream(df, str(path))


def check_stream(table, source: str = "stream table") -> pl.DataFrame:
    """The stream as a polars DataFrame with the expected column types; UserError naming `source`."""
    df = table if isinstance(table, pl.DataFrame) else pl.from_arrow(table)
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"{source}: missing column(s) {', '.join(missing)} (need {', '.join(REQUIRED_COLUMNS)})")
    casts = []
    for col in ("send_ts", "recv_ts"):
        dtype = df.schema[col]
        if dtype == pl.String:
            casts.append(pl.col(col).str.to_datetime(time_unit="ns", time_zone="UTC", strict=True))
        elif isinstance(dtype, pl.Datetime):
            tz = pl.col(col).dt.replace_time_zone("UTC") if dtype.time_zone is None else pl.col(col)
            casts.append(tz.dt.convert_time_zone("UTC").dt.cast_time_unit("ns"))
        elif dtype == pl.Null:
            casts.append(pl.col(col).cast(_TS))
        else:
            raise UserError(f"{source}: column {col} must be a timestamp, not {dtype}")
    casts += [pl.col("lost").cast(pl.Boolean, strict=True), pl.col("owd_ms").cast(pl.Float64, strict=True)]
    try:
        df = df.with_columns(casts)
    except pl.exceptions.PolarsError as e:
        raise UserError(f"{source}: bad value ({str(e).splitlines()[0]})") from None
    if df["lost"].null_count():
        raise UserError(
            f"{source}: {df['lost'].null_count()} packet(s) have unknown loss (lost is null); "
            "rate a log from the receiving side or a two-sided capture"
        )
    lost_but_received = df.filter(pl.col("lost") & pl.col("recv_ts").is_not_null()).height
    if lost_but_received:
        raise UserError(f"{source}: {lost_but_received} packet(s) marked lost have a receive time")
    if "uplink" in df.columns:
        # `cellperf analyze` gives both directions of a UDP flow one flow_id and tells them
        # apart by `uplink`: each direction is its own stream here ("3/up", "3/down").
        df = df.with_columns(
            flow_id=pl.format("{}/{}", pl.col("flow_id"), pl.when(pl.col("uplink")).then(pl.lit("up")).otherwise(pl.lit("down")))
        ).drop("uplink")
    return df


def _delay(df: pl.DataFrame, delay: str, source: str) -> tuple[pl.Expr, str]:
    """The per-packet delay expression and its label.

    Agent logs carry `owd_kind` (raw, excess or half_rtt) and `rtt_ms`: the label follows
    `owd_kind` (excess OWD, which subtracts the minimum, understates the delay the E-model needs,
    so it is labelled apart), and half-RTT comes from `rtt_ms`, which is on one clock.
    """
    if delay == "half_rtt":
        if "rtt_ms" in df.columns:
            return pl.col("rtt_ms").cast(pl.Float64) / 2, "half_rtt"
        return (pl.col("recv_ts") - pl.col("send_ts")).dt.total_nanoseconds().cast(pl.Float64) / 2e6, "half_rtt"
    if "owd_kind" not in df.columns:
        return pl.col("owd_ms"), "one_way"
    kinds = df.filter(pl.col("owd_ms").is_not_null())["owd_kind"].unique().to_list()
    labels = {"raw": "one_way", "excess": "excess_one_way", "half_rtt": "half_rtt"}
    if len(kinds) > 1 or any(k not in labels for k in kinds):
        raise UserError(f"{source}: owd_kind must be one of raw, excess, half_rtt for all packets, got {sorted(map(str, kinds))}")
    return pl.col("owd_ms"), labels[kinds[0]] if kinds else "one_way"


def voice_windows(
    stream,
    *,
    window_s: float = 5.0,
    model: str = "simple",
    codec: str = "g711",
    delay: str = "one_way",
    params: G107Params = G107Params(),
    origin=None,
    source: str = "stream table",
) -> pl.DataFrame:
    """Per-flow, per-window delay, loss, burst ratio, R, MOS and band of a voice stream.

    `stream` is a polars DataFrame or pyarrow Table with the per-packet schema above. `model`
    and `codec` choose the E-model (`cellperf.voice.emodel`); the simplified model ignores the
    burst ratio (it assumes random loss), G.107 uses it. `delay` is `one_way` (column owd_ms) or
    `half_rtt` (echoed stream). `origin` (a datetime) fixes the window grid; by default it starts
    at the earliest sending time in the table. Rows come back ordered by flow and window.
    """
    if not window_s > 0:
        raise UserError(f"window must be > 0 s, got {window_s:g}")
    if delay not in DELAY_KINDS:
        raise UserError(f"delay must be one of {', '.join(DELAY_KINDS)}, got {delay!r}")
    df = check_stream(stream, source)
    if df.height == 0:
        raise UserError(f"{source}: the stream has no packets")

    delay_expr, delay_kind = _delay(df, delay, source)
    first_send_ns = df["send_ts"].dt.epoch("ns").min()
    if first_send_ns is None:
        raise UserError(f"{source}: no packet has a send time; cannot place the stream in time")
    # Lost packets may carry no send time (a receiver-side log only knows their sequence
    # numbers); place them between their neighbours by linear interpolation in sending order.
    # Times are in ns after the first send, where float64 is exact (up to 104 days).
    df = (
        df.with_row_index("_row")
        .sort("flow_id", "_row", maintain_order=True)
        .with_columns(
            _t=(pl.col("send_ts").dt.epoch("ns") - first_send_ns)
            .cast(pl.Float64)
            .interpolate()
            .forward_fill()
            .backward_fill()
            .over("flow_id")
            .round()
            .cast(pl.Int64),
            _delay=delay_expr,
        )
    )
    no_time = df.filter(pl.col("_t").is_null())["flow_id"].unique()
    if len(no_time):
        raise UserError(f"{source}: flow {no_time[0]} has no send timestamps; cannot place it in time")
    if delay == "one_way" and df["_delay"].null_count() == df.height:
        raise UserError(f"{source}: owd_ms is empty; for an echoed stream use half-RTT delay (--half-rtt)")
    negative = df.filter(pl.col("_delay") < 0).height
    if negative:
        raise UserError(
            f"{source}: {negative} packet(s) have negative delay (unsynchronised clocks?); "
            "use half-RTT delay or an excess one-way delay"
        )

    window_ns = int(round(window_s * 1e9))
    origin_ns = first_send_ns if origin is None else int(pl.Series([origin]).cast(_TS).dt.epoch("ns")[0])
    df = df.with_columns(_w=((pl.col("_t") - (origin_ns - first_send_ns)) // window_ns).cast(pl.Int64))

    # One group code per (flow, window); bursts are runs of losses inside one group.
    flow_code = df["flow_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    w = df["_w"].to_numpy()
    _, group = np.unique(flow_code * (w.max() - w.min() + 1) + (w - w.min()), return_inverse=True)
    burst = burst_ratio_by_group(df["lost"].to_numpy(), group)
    per_window = (
        df.with_columns(_g=pl.Series(group))
        .group_by("_g")
        .agg(
            pl.first("flow_id"),
            pl.first("_w").alias("window"),
            pl.len().alias("packets_sent"),
            pl.col("lost").sum().alias("packets_lost"),
            pl.col("_delay").mean().alias("mean_delay_ms"),
        )
        .sort("_g")
        .with_columns(burst_ratio=pl.Series(burst).fill_nan(None))
        .drop("_g")
    )

    # Every window between a flow's first and last, so gaps appear as no_data rows.
    grid = (
        per_window.group_by("flow_id")
        .agg(window=pl.int_ranges(pl.col("window").min(), pl.col("window").max() + 1).first())
        .explode("window")
    )
    out = grid.join(per_window, on=["flow_id", "window"], how="left").sort("flow_id", "window")
    out = out.with_columns(
        pl.col("packets_sent").fill_null(0).cast(pl.UInt64),
        pl.col("packets_lost").fill_null(0).cast(pl.UInt64),
    ).with_columns(
        loss=pl.when(pl.col("packets_sent") > 0).then(pl.col("packets_lost") / pl.col("packets_sent")),
        status=pl.when(pl.col("mean_delay_ms").is_not_null())
        .then(pl.lit("ok"))
        .when((pl.col("packets_sent") > 0) & (pl.col("packets_lost") == pl.col("packets_sent")))
        .then(pl.lit("all_lost"))
        .otherwise(pl.lit("no_data")),
    )

    status = out["status"].to_numpy()
    ok = status == "ok"
    delay_ms = out["mean_delay_ms"].fill_null(np.nan).to_numpy()
    loss = out["loss"].fill_null(np.nan).to_numpy()
    burst_in = None
    if model == "g107":
        burst_in = out["burst_ratio"].fill_null(1.0).to_numpy()[ok]
    try:
        r_ok = rating(delay_ms[ok], loss[ok], model, codec, burst_in, params)
    except ValueError as e:
        raise UserError(f"{source}: {e}") from None
    r = np.full(out.height, np.nan)
    r[ok] = r_ok
    r[status == "all_lost"] = 0.0
    start = pl.lit(origin_ns, pl.Int64) + pl.col("window") * window_ns
    return out.with_columns(
        window_start=start.cast(_TS),
        window_end=(start + window_ns).cast(_TS),
        delay_kind=pl.lit(delay_kind),
        r=pl.Series(r).fill_nan(None),
        mos=pl.Series(mos_from_r(r)).fill_nan(None),
        band=pl.Series(satisfaction_band(r), dtype=pl.String),
    ).select(
        "flow_id",
        "window",
        "window_start",
        "window_end",
        "packets_sent",
        "packets_lost",
        "loss",
        "mean_delay_ms",
        "delay_kind",
        "burst_ratio",
        "r",
        "mos",
        "band",
        "status",
    )


def summarize_windows(windows: pl.DataFrame) -> pl.DataFrame:
    """Per flow: window counts by status, R quantiles and the share of rated windows at or above
    toll quality (R ≥ 70) and at or above 90 (the thesis' WiBro figure, 000 §4.3)."""
    rated = pl.col("r").filter(pl.col("status") != "no_data")
    return (
        windows.group_by("flow_id", maintain_order=True)
        .agg(
            window_count=pl.len(),
            ok=(pl.col("status") == "ok").sum(),
            all_lost=(pl.col("status") == "all_lost").sum(),
            no_data=(pl.col("status") == "no_data").sum(),
            r_min=rated.min(),
            r_p5=rated.quantile(0.05, "linear"),
            r_median=rated.median(),
            r_max=rated.max(),
            mos_median=pl.col("mos").filter(pl.col("status") != "no_data").median(),
            share_r_ge_70=(rated >= 70).mean(),
            share_r_ge_90=(rated >= 90).mean(),
            mean_delay_ms=pl.col("mean_delay_ms").mean(),
            loss=pl.col("packets_lost").sum() / pl.col("packets_sent").sum(),
        )
        .sort("flow_id")
    )
