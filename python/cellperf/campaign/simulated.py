"""A campaign's `type = "simulate"` run: one repetition of a `cellperf simulate` scenario in
virtual time (no testbed, no root), stored as a run like any other (docs/campaigns.md,
docs/store.md): the simulator's result document in `runs.result` (exactly `cellperf simulate
--json`'s `runs[k]` for the same seed), one `flows` row per user (role `data`, downlink), and
the window and RTT over time as the Parquet tables `sim_cwnd` and `sim_rtt`."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pyarrow as pa

from cellperf.campaign.spec import RunSpec
from cellperf.campaign.testbed import Outcome
from cellperf.simulate.runner import run_seed
from cellperf.store import write_parquet

#: The simulator's time series → the store's Parquet table of each.
SERIES_TABLES = {"cwnd": "sim_cwnd", "rtt": "sim_rtt"}


def _ms(column: str) -> pl.Expr:
    return pl.col(column) * 1e3


def flow_rows(run_id: str, result: dict) -> pl.DataFrame:
    """`flows` rows of a simulated run, one per user (flow_id = user): goodput and throughput
    as the simulator counts them, data segments sent, retransmissions (fast ones, and the rest,
    which the timeouts caused), RTT median and p95; the other figures in `detail`."""
    f = pl.DataFrame(result["flows"], infer_schema_length=None)
    duration = result["duration_s"]
    detail = pl.struct(
        pl.col("variant"), pl.col("timeouts"), pl.col("rtt_samples"), _ms("rtt_min_s").alias("rtt_min_ms"),
        _ms("rtt_mean_s").alias("rtt_mean_ms"), _ms("rtt_max_s").alias("rtt_max_ms"), pl.col("cwnd_mean"),
        pl.lit(result["seed"]).alias("seed"))
    return f.select(
        pl.lit(run_id).alias("run_id"), pl.col("user").cast(pl.UInt32).alias("flow_id"),
        pl.lit("data").alias("role"), pl.lit("tcp").alias("proto"), pl.lit("downlink").alias("direction"),
        (pl.lit("FH") + (pl.col("user") + 1).cast(pl.Utf8)).alias("src"),
        (pl.lit("MH") + (pl.col("user") + 1).cast(pl.Utf8)).alias("dst"),
        pl.lit(duration).alias("duration_s"), pl.col("goodput_bps").cast(pl.Float64),
        pl.col("throughput_bps").cast(pl.Float64),
        _ms("rtt_p50_s").alias("rtt_median_ms"), _ms("rtt_p95_s").alias("rtt_p95_ms"),
        pl.col("segments_sent").cast(pl.UInt64).alias("data_packets"),
        pl.col("retransmissions").cast(pl.UInt64).alias("retx_total"),
        pl.col("fast_retransmits").cast(pl.UInt64).alias("retx_fast"),
        (pl.col("retransmissions") - pl.col("fast_retransmits")).cast(pl.UInt64).alias("retx_rto"),
        pl.lit("simulated").alias("retx_method"),
        pl.lit(0.0).alias("start_s"), pl.lit(duration).alias("end_s"),
        pl.col("user").cast(pl.UInt32).alias("connection_id"),
        detail.struct.json_encode().alias("detail"))


def simulate_run(run: RunSpec, folder: Path) -> tuple[Outcome, dict]:
    """Runs the scenario with the run's seed; writes its series into `folder` and returns
    the outcome (its result document) and the run's table rows."""
    started = time.time()
    result, series = run_seed(run.test.simulation, run.seed, record=True)
    ended = time.time()
    for name, table in series.items():
        table = table.add_column(0, "run_id", pa.array([run.run_id] * len(table), pa.string()))
        write_parquet(table, folder / f"{SERIES_TABLES[name]}.parquet")
    return Outcome(started, ended, result=result), {"flows": flow_rows(run.run_id, result)}
