"""RTP streams of the `stream` runs as their captures show them (seed 004 §VI.C: the fast-start
burst of a streaming server, RTCP loss notification, the first packets' SSRC differing from the
rest's and what that costs header compression), from the store's `rtp_streams` rows
(`cellperf_analysis::rtp`, docs/methods.md §13)."""

from __future__ import annotations

import polars as pl

from cellperf.report.item import Item
from cellperf.report.tables import html_table
from cellperf.store import Store

SQL = """
    SELECT r.network, r.scenario, s.*
    FROM rtp_streams s JOIN runs r USING (run_id)
    WHERE r.status = 'ok' ORDER BY r.network, r.scenario, s.capture DESC"""


def _f(x, digits: int = 1, scale: float = 1.0) -> str:
    return "-" if x is None else f"{x * scale:.{digits}f}"


def rtp_streams(store: Store) -> list[Item]:
    df = store.frame(SQL)
    if df.height == 0:
        return []
    # Each run's media stream at a capture: its 5-tuple's stream with the most packets.
    media = df.sort("packets", descending=True).unique(["run_id", "capture"], keep="first")
    per = (df.group_by("network", "scenario", "capture", maintain_order=True)
           .agg(runs=pl.col("run_id").n_unique(), streams=pl.len(), changes=pl.col("ssrc_changes").sum(),
                refresh=pl.col("refresh_bytes").sum()))
    m = (media.group_by("network", "scenario", "capture", maintain_order=True)
         .agg(packets=pl.col("packets").sum(), lost=pl.col("lost").sum(), jitter=pl.col("jitter_ms").median(),
              max_jitter=pl.col("max_jitter_ms").max(), burst_s=pl.col("burst_s").median(),
              burst_bps=pl.col("burst_bps").median(), lead=pl.col("burst_lead_s").median(),
              reports=pl.col("receiver_reports").sum(), rr_jitter=pl.col("rr_jitter_ms").median(),
              rtt=pl.col("rtcp_rtt_ms").median()))
    agg = per.join(m, on=["network", "scenario", "capture"], how="left", maintain_order="left")
    rows = [[r["network"], r["scenario"], r["capture"].upper(), r["runs"], r["streams"], r["changes"], r["refresh"],
             r["packets"], r["lost"], _f(r["jitter"], 2), _f(r["max_jitter"], 2), _f(r["burst_s"], 2),
             _f(r["burst_bps"], 0, 1e-3), _f(r["lead"], 2), r["reports"], _f(r["rr_jitter"], 2), _f(r["rtt"])]
            for r in agg.iter_rows(named=True)]
    caption = ("RTP streams (5-tuple and SSRC) in the stream runs' captures at the MN and the CN (docs/methods.md §13). "
               "SSRC changes: packets of a 5-tuple whose SSRC differs from the previous packet's (a streaming "
               "server's bandwidth probe on an SSRC of its own before the media, as 004 saw for the first three "
               "packets); each starts a new ROHC context (RFC 3095/5795: the SSRC is a static field of the context), "
               "costing an IR packet that carries the full IP/UDP/RTP header (40 B over IPv4) where an established "
               "context sends 1-3 B: refresh bytes = their sum. Media columns are each run's largest stream: "
               "packets, lost (from the sequence numbers), RFC 3550 jitter (last value, median over the runs; "
               "largest), the start-up burst (until the stream's lead over its media clock first reaches 90 % of its "
               "largest: duration, rate, lead), RTCP receiver reports seen, their last jitter, and the RTCP round "
               "trip (arrival − LSR − DLSR, CN capture). Per stream: SELECT * FROM rtp_streams. Seed 004 §VI.C.")
    return [Item("rtp-streams", "RTP streams: SSRC changes, start-up burst, RTCP", caption,
                 table_html=html_table(["network", "scenario", "capture", "runs", "streams", "SSRC changes",
                                        "refresh B", "packets", "lost", "jitter ms", "max jitter ms", "burst s",
                                        "burst kb/s", "lead s", "RRs", "RR jitter ms", "RTCP RTT ms"], rows,
                                       name="rtp-streams", query=SQL))]


SECTIONS = (("RTP streams", (rtp_streams,)),)
