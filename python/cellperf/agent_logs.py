"""The agents' per-packet logs (docs/agents.md) as input to `cellperf analyze`.

Every (flow, step, direction) of a log is one UDP stream, measured by the same
implementation as a stream found in captures (`cellperf_analysis::udp_stream`, through
`analyze_stream`), so a probe's log and a two-sided capture of the same test give the same
kind of report: loss, jitter, OWD, gaps and delay periods, the interval series.

    >>> from cellperf.agent_logs import analyze_agent_log
    >>> a = analyze_agent_log("voip.parquet", tables=True)
    >>> [(f["direction"], f["loss_rate"]) for f in a.report["flows"]]

A stream without receive times (what the server logs of the packets it sent) is reported
from the sender's view: packets, bytes and sending rate, nothing about delivery. A stream
with receive times but no `lost` column values is a receiver's view (losses unknown).
"""

from __future__ import annotations

import json
import os

from cellperf.analysis import Analysis, analyze_stream
from cellperf.errors import UserError

# On the path of every `cellperf analyze`: pathlib, polars and pyarrow are imported by the
# functions that read a log, not here.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

#: What the files start with: Parquet's magic, or the CSV log's header.
_PARQUET_MAGIC = b"PAR1"
_CSV_HEADER = b"flow_id,step,direction,seq,"


#: What captures start with (pcap in either byte order and precision, pcapng).
_CAPTURE_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                   b"\x0a\x0d\x0d\x0a")


def _head(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(len(_CSV_HEADER))
    except OSError:
        return b""


def is_agent_log(path: str | os.PathLike) -> bool:
    """Whether `path` is meant as an agent log, by its first bytes: a log's, or a
    capture's (whatever the file is called). Only a file that is neither goes by its name
    (`.parquet`, `.csv`), so that a damaged log is reported as a damaged log."""
    head = _head(path)
    if head.startswith(_PARQUET_MAGIC) or head.startswith(_CSV_HEADER):
        return True
    if head.startswith(_CAPTURE_MAGICS):
        return False
    return os.path.splitext(path)[1].lower() in (".parquet", ".csv") and os.path.exists(path)


def _read(path: Path):
    import polars as pl

    from cellperf.agents.interop import LOG_SCHEMA

    try:
        if _head(path).startswith(_PARQUET_MAGIC):
            df = pl.read_parquet(path)
        else:
            df = pl.read_csv(path, schema_overrides={"send_ts": pl.Datetime("ns", "UTC"),
                                                     "recv_ts": pl.Datetime("ns", "UTC")})
    except (OSError, pl.exceptions.PolarsError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: not a readable agent log ({first})") from None
    missing = [c for c in LOG_SCHEMA.names if c not in df.columns]
    if missing:
        raise UserError(f"{path}: not an agent log: missing column(s) {', '.join(missing)} (docs/agents.md)")
    if df.height == 0:
        raise UserError(f"{path}: the agent log has no packets")
    try:
        # The log's schema, whichever format carried it (CSV infers plain integers).
        return df.select(LOG_SCHEMA.names).cast(dict(pl.from_arrow(LOG_SCHEMA.empty_table()).schema))
    except pl.exceptions.PolarsError as e:
        raise UserError(f"{path}: agent log columns of the wrong type ({str(e).splitlines()[0]})") from None


def _server_of(path: Path) -> str | None:
    """The server the probe tested against, from the result document stored with the log."""
    doc = None
    try:
        if _head(path).startswith(_PARQUET_MAGIC):
            import pyarrow.parquet as pq

            raw = (pq.read_schema(path).metadata or {}).get(b"cellperf.run")
            doc = json.loads(raw) if raw else None
        else:
            side = path.with_name(path.name + ".json")
            doc = json.loads(side.read_text()) if side.exists() else None
    except (OSError, ValueError):
        return None
    server = (doc or {}).get("server")
    return server.rsplit(":", 1)[0].strip("[]") if isinstance(server, str) else None


def analyze_agent_log(path: str | os.PathLike, *, interval: float = 5.0, tables: bool = False) -> Analysis:
    """One report for the whole log: a flow per (flow, step, direction), in the log's order."""
    from pathlib import Path

    import polars as pl
    import pyarrow as pa

    p = Path(path)
    df = _read(p)
    mn, cn = "MN", _server_of(p) or "CN"
    flows, udp_packets, intervals = [], [], []
    connections: dict[tuple, int] = {}  # (log flow, step) → connection id: its two directions share it
    groups = df.group_by(["flow_id", "step", "direction"], maintain_order=True)
    for i, ((name, step, direction), g) in enumerate(groups):
        if direction not in ("up", "down"):
            raise UserError(f"{p}: direction must be 'up' or 'down', not {direction!r} (flow {name})")
        firsts = g.unique("seq", keep="first", maintain_order=True).sort("seq")
        uplink = direction == "up"
        flow = {
            "flow_id": i, "connection_id": connections.setdefault((name, step), len(connections)),
            "log_flow": name, "step": step, "proto": "udp",
            "src": mn if uplink else cn, "dst": cn if uplink else mn, "sport": None, "dport": None,
            "direction": "uplink" if uplink else "downlink", "direction_basis": "agent-log",
            "packets": firsts.height, "bytes": int(firsts["bytes"].sum()),
        }
        if firsts["recv_ts"].null_count() == firsts.height:
            # Only the sending side was logged: its rate, nothing about delivery.
            span_ns = (firsts["send_ts"].max() - firsts["send_ts"].min()).total_seconds() * 1e9 if firsts.height > 1 else 0
            flow.update(duration_s=span_ns / 1e9, throughput_bps=flow["bytes"] * 8e9 / span_ns if span_ns else 0.0,
                        goodput_bps=None, loss_rate=None, jitter_ms=None, owd_ms=None, udp=None, udp_view="sender")
            flows.append(flow)
            continue
        known = firsts["lost"].null_count() == 0
        # Receive times are on the probe's clock, offset-corrected, when the log says `raw`,
        # and in echo tests (whose `owd_ms` column holds half the round trip instead).
        logged = firsts["owd_kind"][0]
        kind = "raw" if logged in ("raw", "half_rtt") else logged if logged == "offset_corrected" else "excess"
        try:
            a = analyze_stream(
                firsts.select(seq="seq", send_ns=pl.col("send_ts").cast(pl.Int64),
                              recv_ns=pl.col("recv_ts").cast(pl.Int64), bytes="bytes").to_arrow(),
                flow_id=i, uplink=uplink, duplicates=g.height - firsts.height, losses_known=known,
                owd_kind=kind, interval=interval)
        except UserError as e:
            raise UserError(f"{p}: flow {name} ({direction}): {e}") from None
        s = a.report
        flow.update(duration_s=s["duration_s"], throughput_bps=s["throughput_bps"], goodput_bps=s["throughput_bps"],
                    loss_rate=s["loss_rate"], jitter_ms=s["jitter_ms"], owd_ms=s["owd_ms"], udp=s,
                    udp_view="agent-log" if known else "receiver")
        rtt = firsts["rtt_ms"].drop_nulls()
        if len(rtt):
            flow["rtt_ms"] = {"min": rtt.min(), "median": rtt.median(), "p95": rtt.quantile(0.95, "linear"),
                              "max": rtt.max(), "samples": len(rtt)}
        flows.append(flow)
        udp_packets.append(a.tables["udp_packets"])
        intervals.append(a.tables["intervals"])
    report = {
        "captures": [{"path": str(p), "side": None, "format": f"cellperf agent log ({p.suffix.lstrip('.')})",
                      "packets": df.height, "counts": {"tcp": 0, "udp": df.height}, "flows": len(flows)}],
        "flows": flows, "interval_s": interval, "warnings": [],
    }
    out = {}
    if tables and udp_packets:
        out = {"udp_packets": pa.concat_tables(udp_packets), "intervals": pa.concat_tables(intervals)}
    return Analysis(report=report, tables=out)
