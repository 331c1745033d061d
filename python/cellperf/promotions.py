"""Telling a radio promotion from a loss (issue 30 §3; docs/emulator.md "Radio states").

After a time without traffic longer than the radio's inactivity timer (its *tail*) the radio is
released, and the next packet waits for the promotion (LTE: 260 ms; UMTS: 2 s). A stream that
pauses that long then shows a long inter-arrival that ends with the packet delivered: the gap
analysis would call it a delay period, as if the path had stalled. A delay period whose ending
packet was sent after an idle of at least the tail is a `promotion` instead (the gaps table's
`kind`). The idle before a packet is the time from the latest moment the run's earlier packets,
either direction, were on the link (their arrival, or their sending when lost) to its sending:
IDLE_SQL, the one computation of it, which the report's "first packet after idle" figure reads
too (cellperf.report.radio_states).
"""

from __future__ import annotations

import duckdb
import polars as pl

#: Each received UDP packet of `udp_packets` with the idle before it (seconds; null for a run's
#: first packet): its sending time less the latest end of the run's earlier-sent packets.
IDLE_SQL = """
    SELECT run_id, flow_id, direction, send_ts, recv_ts, owd_ms, idle_s FROM (
        SELECT run_id, flow_id, direction, send_ts, recv_ts, owd_ms, lost,
               greatest(epoch(send_ts) - max(epoch(coalesce(recv_ts, send_ts))) OVER (
                   PARTITION BY run_id ORDER BY send_ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS idle_s
        FROM udp_packets WHERE send_ts IS NOT NULL)
    WHERE recv_ts IS NOT NULL"""

#: The gaps (one run's) with the idle before the packet that ended each: the first packet of
#: the same flow and direction received after the gap's start.
_GAP_IDLE_SQL = f"""
    WITH idle AS ({IDLE_SQL})
    SELECT g.*, i.idle_s AS idle_before_s
    FROM gaps g ASOF LEFT JOIN idle i
      ON g.flow_id = i.flow_id AND g.direction IS NOT DISTINCT FROM i.direction AND i.recv_ts > g.start_ts"""


def radio_tail_s(profile: str | None, radio_mechanisms: bool = True, link_radio_states: str | None = None) -> float | None:
    """The inactivity timer of an emulated run's radio states: its profile's, as changed by its
    network's `[networks.link] radio_states` (the `--radio-states` text); None without radio
    states (`radio_mechanisms = false`, `radio_states = "off"`, or neither a profile nor a link
    that gives them)."""
    if not radio_mechanisms:
        return None
    from cellperf.emulate.profiles import profile as profile_config
    from cellperf.emulate.spec import parse_radio_states

    radio = profile_config(profile).radio_states if profile else None
    if link_radio_states is not None:
        radio = parse_radio_states(link_radio_states, radio)
    return radio["tail_s"] if radio else None


def label_promotions(gaps: pl.DataFrame, udp_packets: pl.DataFrame, tail_s: float | None) -> pl.DataFrame:
    """`gaps` (one run's rows of the gaps table) with each delay period that ended with a
    packet sent after at least `tail_s` of idle relabelled `promotion`."""
    if tail_s is None or gaps.height == 0 or udp_packets.height == 0:
        return gaps
    con = duckdb.connect()
    con.register("gaps", gaps.with_row_index("_row").to_arrow())
    con.register("udp_packets", udp_packets.with_columns(run_id=pl.lit("run")).to_arrow())
    idle = con.sql(f"SELECT _row, idle_before_s FROM ({_GAP_IDLE_SQL})").pl()
    promoted = (pl.col("kind") == "delay_period") & (pl.col("idle_before_s") >= tail_s)
    return (gaps.with_row_index("_row").join(idle, on="_row", how="left")
            .with_columns(kind=pl.when(promoted).then(pl.lit("promotion")).otherwise(pl.col("kind")))
            .drop("_row", "idle_before_s"))
