"""A synthetic voice stream in the `udp_packets` schema, built from per-packet arrays."""

import numpy as np
import polars as pl

T0_NS = 1_700_000_000 * 10**9  # an arbitrary Unix time, whole second


def build_stream(owd_ms, lost, *, interval_ms=20.0, flow_id=1, t0_ns=T0_NS, keep_lost_send_ts=True):
    """G.711-like stream: one 160-B packet every `interval_ms`, delays `owd_ms`, losses `lost`."""
    owd_ms = np.asarray(owd_ms, dtype=np.float64)
    lost = np.asarray(lost, dtype=bool)
    n = owd_ms.size
    send = t0_ns + np.round(np.arange(n) * interval_ms * 1e6).astype(np.int64)
    recv = send + np.round(owd_ms * 1e6).astype(np.int64)
    ts = pl.Datetime("ns", "UTC")
    return pl.DataFrame(
        {
            "flow_id": np.full(n, flow_id, np.uint32),
            "seq": np.arange(n, dtype=np.uint64),
            "send_ts": pl.Series(send).cast(ts),
            "recv_ts": pl.Series(recv).cast(ts),
            "bytes": np.full(n, 160, np.uint32),
            "lost": lost,
            "owd_ms": owd_ms,
        }
    ).with_columns(
        recv_ts=pl.when(pl.col("lost")).then(None).otherwise(pl.col("recv_ts")),
        owd_ms=pl.when(pl.col("lost")).then(None).otherwise(pl.col("owd_ms")),
        send_ts=pl.when(pl.col("lost") & (not keep_lost_send_ts)).then(None).otherwise(pl.col("send_ts")),
    )
