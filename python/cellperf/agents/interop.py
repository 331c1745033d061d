"""Results of iperf3 and D-ITG in cellperf's tables, so older campaigns analyse like new ones.

- iperf3 `-J` output (TCP or UDP, upload, `-R` download, `--bidir`) → the probe's result
  document (`udp-cbr` or `tcp-bulk`) and the per-interval series (the `intervals` table of
  docs/tables.md). iperf3 logs no packets, so there is no per-packet log.
- D-ITG: the text that `ITGDec RECV_LOG -l FILE` writes (one line per received packet) →
  the per-packet log of docs/agents.md (raw OWD, jitter), the result document and the
  per-interval series, all computed by `cellperf.analysis.analyze_stream` (the same
  stream metrics as for captures and cellperf's own agents).

    >>> from cellperf.agents.interop import read_iperf3
    >>> imported = read_iperf3("old/run-17.json")
    >>> imported.document["throughput_bps"], imported.intervals.num_rows

The iperf3 client is taken to be the mobile node (as in the papers' campaigns): what it
sends is `up`. D-ITG has no notion of which end is mobile: the caller says (`direction`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from cellperf.analysis import analyze_stream
from cellperf.errors import UserError, os_reason

#: Default interval of the per-interval series, as `cellperf analyze` (docs/methods.md §3).
DEFAULT_INTERVAL_S = 5.0

_TS = pa.timestamp("ns", tz="UTC")

#: Columns of the `intervals` table (docs/tables.md), in order.
INTERVAL_SCHEMA = pa.schema([
    ("flow_id", pa.uint32()), ("interval", pa.uint32()), ("uplink", pa.bool_()), ("start_ts", _TS),
    ("start_s", pa.float64()), ("bytes", pa.uint64()), ("throughput_bps", pa.float64()),
    ("packets_sent", pa.uint64()), ("packets_lost", pa.uint64()), ("loss_rate", pa.float64()),
    ("owd_mean_ms", pa.float64()), ("jitter_mean_ms", pa.float64()),
])

#: Columns of the agents' per-packet log (docs/agents.md), in order.
LOG_SCHEMA = pa.schema([
    ("flow_id", pa.string()), ("step", pa.uint32()), ("direction", pa.string()), ("seq", pa.uint64()),
    ("send_ts", _TS), ("recv_ts", _TS), ("bytes", pa.uint32()), ("lost", pa.bool_()),
    ("owd_ms", pa.float64()), ("owd_kind", pa.string()), ("rtt_ms", pa.float64()), ("jitter_ms", pa.float64()),
])


@dataclass
class Imported:
    """An imported run: the result document (the shape `cellperf probe --json` prints, with
    `source` naming the tool and file), the per-interval series, and the per-packet log
    (None when the tool logs no packets)."""

    document: dict
    intervals: pa.Table
    log: pa.Table | None


# ---------------------------------------------------------------------------------- iperf3


def _non_finite(doc, where: str = "") -> tuple[str, float] | None:
    """The first field holding NaN or ±Infinity (Python's json reads them) and its value; the
    field as `end.sum_sent.bits_per_second` or `intervals[3].sum.bytes`."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return where, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        found = _non_finite(value, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}".lstrip("."))
        if found is not None:
            return found
    return None


def _load_iperf3(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not iperf3 JSON output (binary file)") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        what = "truncated iperf3 JSON" if text.lstrip().startswith("{") else "not iperf3 JSON output (iperf3 -J)"
        raise UserError(f"{path}: {what} (line {e.lineno}: {e.msg})") from None
    if not isinstance(doc, dict) or not {"start", "intervals", "end"} <= doc.keys():
        raise UserError(f"{path}: not iperf3 JSON output (no start/intervals/end; was it made with iperf3 -J?)")
    bad = _non_finite(doc)
    if bad is not None:
        raise UserError(f"{path}: {bad[0]} is {bad[1]}, not a number (damaged iperf3 output?)")
    if doc.get("error"):
        raise UserError(f"{path}: iperf3 reported an error: {doc['error']}")
    test_start = (doc["start"] or {}).get("test_start")
    if not isinstance(test_start, dict) or not doc["intervals"] or not doc["end"]:
        raise UserError(f"{path}: iperf3 output of a test that did not run (no test_start, intervals or end)")
    return doc


def _iperf3_intervals(doc: dict, t0_ns: int, udp: bool) -> tuple[pa.Table, list[bool]]:
    """One series per iperf3 stream (flow_id = its index in the stream list): its bytes and
    rate per reporting interval as the client measured them (sent bytes for an upload,
    received bytes for a download), and for UDP streams the client received, loss."""
    rows = [(k, i, s) for i, iv in enumerate(doc["intervals"]) for k, s in enumerate(iv.get("streams") or [])
            if not s.get("omitted")]
    if not rows:
        raise KeyError("intervals.streams")
    flow = np.array([k for k, _, _ in rows], dtype=np.uint32)
    uplink = [bool(s.get("sender")) for _, _, s in rows]
    start_s = np.array([float(s["start"]) for _, _, s in rows])
    seconds = np.array([float(s["seconds"]) for _, _, s in rows])
    nbytes = np.array([int(s["bytes"]) for _, _, s in rows], dtype=np.uint64)
    n = len(rows)
    null_f = pa.nulls(n, pa.float64())
    sent = lost = pa.nulls(n, pa.uint64())
    loss = null_f
    if udp:
        # A UDP receiver's interval counts the packets expected (`packets`) and lost.
        recv = np.array([not s.get("sender") for _, _, s in rows])
        expect = np.array([int(s.get("packets", 0)) for _, _, s in rows], dtype=np.uint64)
        gone = np.array([int(s.get("lost_packets", 0)) for _, _, s in rows], dtype=np.uint64)
        sent, lost = pa.array(expect, mask=~recv), pa.array(gone, mask=~recv)
        loss = pa.array(gone / np.maximum(expect, 1), mask=~recv | (expect == 0))
    table = pa.table({
        "flow_id": flow, "interval": np.array([i for _, i, _ in rows], dtype=np.uint32), "uplink": uplink,
        "start_ts": pa.array(t0_ns + np.round(start_s * 1e9).astype(np.int64), _TS), "start_s": start_s,
        "bytes": nbytes, "throughput_bps": np.where(seconds > 0, nbytes * 8.0 / np.where(seconds > 0, seconds, 1), 0.0),
        "packets_sent": sent, "packets_lost": lost,
        "loss_rate": loss, "owd_mean_ms": null_f, "jitter_mean_ms": null_f,
    }, schema=INTERVAL_SCHEMA)
    streams_up = [bool(s.get("sender")) for s in doc["intervals"][0]["streams"]]
    return table, streams_up


def _iperf3_stream(end_stream: dict, udp: bool) -> dict:
    """One direction's summary from iperf3's end-of-test figures (the receiver's view)."""
    if udp:
        u = end_stream["udp"]
        sent, lost = int(u["packets"]), int(u["lost_packets"])
        return {
            "packets_sent": sent, "packets_received": sent - lost, "packets_lost": lost,
            "loss_rate": lost / sent if sent else None, "reordered": u.get("out_of_order"),
            "bytes_received": int(u["bytes"]), "duration_s": float(u["seconds"]),
            "throughput_bps": float(u["bits_per_second"]),
            "jitter_ms": {"min": None, "median": None, "p95": None, "max": None, "rfc3550": float(u["jitter_ms"])},
        }
    snd, rcv = end_stream["sender"], end_stream["receiver"]
    out = {"bytes_sent": int(snd["bytes"]), "bytes_received": int(rcv["bytes"]), "duration_s": float(rcv["seconds"]),
           "throughput_bps": float(rcv["bits_per_second"]), "retransmits": snd.get("retransmits")}
    # iperf3 knows the sender's RTT (µs, TCP_INFO) only when the client sent; otherwise 0.
    if snd.get("max_rtt"):
        out["rtt_ms"] = {"min": snd["min_rtt"] / 1e3, "median": None, "p95": None, "max": snd["max_rtt"] / 1e3,
                         "mean": snd["mean_rtt"] / 1e3}
    return out


def read_iperf3(path: str | os.PathLike) -> Imported:
    """Reads the output of `iperf3 -c ... -J` (client side). Raises UserError naming the
    file when it is not iperf3 JSON, is truncated, or records an iperf3 error."""
    path = Path(path)
    doc = _load_iperf3(path)
    start, end = doc["start"], doc["end"]
    ts = start["test_start"]
    udp = str(ts.get("protocol", "")).upper() == "UDP"
    try:
        t0_ns = int(start["timestamp"]["timesecs"]) * 1_000_000_000
        intervals, streams_up = _iperf3_intervals(doc, t0_ns, udp)
        per_stream = [_iperf3_stream(s, udp) for s in end["streams"]]
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{path}: iperf3 JSON without the expected field {e} (unsupported iperf3 version?)") from None
    dirs = sorted(set("up" if u else "down" for u in streams_up), reverse=True)
    direction = dirs[0] if len(dirs) == 1 else "both"
    streams: dict[str, dict] = {}
    for up, s in zip(streams_up, per_stream):
        key = "up" if up else "down"
        if key in streams:  # parallel streams (-P): counts and rates add up
            agg = streams[key]
            for k in ("packets_sent", "packets_received", "packets_lost", "bytes_sent", "bytes_received",
                      "throughput_bps", "retransmits"):
                if s.get(k) is not None:
                    agg[k] = (agg.get(k) or 0) + s[k]
            agg.pop("jitter_ms", None)
            agg.pop("rtt_ms", None)
            agg["loss_rate"] = agg["packets_lost"] / agg["packets_sent"] if udp and agg["packets_sent"] else agg.get("loss_rate")
        else:
            streams[key] = s
    total = lambda k: sum(s[k] for s in streams.values()) if all(s.get(k) is not None for s in streams.values()) else None
    sent, received = total("packets_sent"), total("packets_received")
    connecting = start.get("connecting_to") or {}
    result = {
        "test": "udp-cbr" if udp else "tcp-bulk",
        "direction": direction,
        "server": f"{connecting.get('host')}:{connecting.get('port')}" if connecting else None,
        "duration_s": max(s["duration_s"] for s in streams.values()),
        "throughput_bps": total("throughput_bps"),
        "packets_sent": sent,
        "packets_received": received,
        "loss_rate": (sent - received) / sent if sent else None,
        "clock_offset": None,
        "streams": streams,
        "source": {"tool": "iperf3", "version": start.get("version"), "file": str(path),
                   "started_at": start.get("timestamp", {}).get("time"), "streams": len(streams_up),
                   "congestion": end.get("sender_tcp_congestion"), "interval_basis": "client"},
    }
    if len(streams) == 1:
        only = next(iter(streams.values()))
        for k in ("jitter_ms", "rtt_ms"):
            if k in only:
                result[k] = only[k]
        if not udp:
            result["retransmits"] = only.get("retransmits")
    return Imported(result, intervals, None)


# ---------------------------------------------------------------------------------- D-ITG

# One line of `ITGDec LOG -l FILE`:
# Flow>0001 Seq>      1 Src>   127.0.0.1/38774 Dest>   127.0.0.1/9501 txTime>13:20:56.476357 rxTime>13:20:56.476401 Size>  200
_DITG_LINE = (r"^Flow>\s*(\d+)\s+Seq>\s*(\d+)\s+Src>\s*(\S+)\s+Dest>\s*(\S+)\s+"
              r"txTime>\s*(\d+):(\d+):(\d+(?:\.\d+)?)\s+rxTime>\s*(\d+):(\d+):(\d+(?:\.\d+)?)\s+Size>\s*(\d+)\s*$")
_DITG_COLS = ["flow", "seq", "src", "dest", "th", "tm", "ts", "rh", "rm", "rs", "size"]


def _time_of_day_ns(h: pl.Expr, m: pl.Expr, s: pl.Expr) -> pl.Expr:
    return ((h.cast(pl.Int64) * 3600 + m.cast(pl.Int64) * 60) * 1_000_000_000
            + (s.cast(pl.Float64) * 1e9).round().cast(pl.Int64))


def read_ditg(path: str | os.PathLike, *, date: dt.date | None = None, direction: str = "up",
              interval_s: float = DEFAULT_INTERVAL_S) -> Imported:
    """Reads the per-packet text of `ITGDec RECV_LOG -l FILE`. D-ITG logs times of day
    only: `date` is the day the test started (default: the file's modification date, UTC),
    and a time that goes back by over 12 h is taken to have crossed midnight. Packets
    whose sequence numbers are missing are the losses (ITGDec counts them the same way);
    their send times are unknown. OWD is raw (sender and receiver clocks)."""
    path = Path(path)
    if direction not in ("up", "down"):
        raise UserError(f"--direction: use up or down, not '{direction}'")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise UserError(f"{path}: binary file; decode a D-ITG log first with `ITGDec {path.name} -l FILE.txt`") from None
    lines = pl.Series("line", text.splitlines(), dtype=pl.String).str.strip_chars()
    lines = lines.filter(lines != "")
    if lines.len() == 0:
        raise UserError(f"{path}: empty; expected the per-packet text of `ITGDec LOG -l FILE`")
    parsed = lines.to_frame().select(pl.col("line").str.extract_groups(_DITG_LINE)).unnest("line")
    parsed.columns = _DITG_COLS
    bad = parsed["flow"].is_null()
    if bad.any():
        first = int(bad.arg_true()[0])
        raise UserError(f"{path}: line {first + 1} is not ITGDec per-packet text (`ITGDec LOG -l FILE`): "
                        f"{lines[first][:60]!r}")
    if date is None:
        date = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc).date()
    day0 = int(dt.datetime(date.year, date.month, date.day, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000_000
    day = 86_400 * 1_000_000_000
    df = parsed.select(
        flow=pl.col("flow").cast(pl.UInt32), seq=pl.col("seq").cast(pl.UInt64), size=pl.col("size").cast(pl.UInt32),
        src=pl.col("src"), dest=pl.col("dest"),
        tx=_time_of_day_ns(pl.col("th"), pl.col("tm"), pl.col("ts")),
        rx=_time_of_day_ns(pl.col("rh"), pl.col("rm"), pl.col("rs")),
    )
    # Midnight: the receive times are in arrival order; each backward step of over 12 h adds a day.
    wraps = (df["rx"].diff().fill_null(0) < -day // 2).cum_sum().cast(pl.Int64)
    rx = df["rx"] + wraps * day + day0
    tx = df["tx"] + day0
    tx = tx + ((tx - rx) > day // 2).cast(pl.Int64) * -day + ((rx - tx) > day // 2).cast(pl.Int64) * day
    df = df.with_columns(rx=rx, tx=tx)
    stem = path.stem

    # One row per sent packet of each flow: the first copy of every received sequence
    # number, plus the missing numbers (losses, send time unknown). Extra copies are counted.
    first_copy = df.unique(["flow", "seq"], keep="first", maintain_order=True)
    span = df.group_by("flow").agg(pl.col("seq").min().alias("lo"), pl.col("seq").max().alias("hi"))
    expected = span.select("flow", seq=pl.int_ranges("lo", pl.col("hi") + 1, dtype=pl.UInt64)).explode("seq")
    sizes = df.group_by("flow").agg(pl.col("size").median().cast(pl.UInt32).alias("median_size"))
    rows = (expected.join(first_copy.select("flow", "seq", "tx", "rx", "size"), on=["flow", "seq"], how="left")
            .join(sizes, on="flow").with_columns(size=pl.col("size").fill_null(pl.col("median_size")))
            .sort("flow", "seq"))
    dups_by_flow = dict(df.group_by("flow").len().join(first_copy.group_by("flow").len(), on="flow")
                        .select("flow", d=pl.col("len") - pl.col("len_right")).iter_rows())

    # The metrics are cellperf's one implementation (cellperf_analysis::udp_stream).
    streams, logs, intervals = {}, [], []
    for (flow,), g in rows.group_by("flow", maintain_order=True):
        name = f"ditg:{stem}/{flow}/{direction}"
        a = analyze_stream(
            g.select(seq=pl.col("seq"), send_ns=pl.col("tx"), recv_ns=pl.col("rx"), bytes=pl.col("size")).to_arrow(),
            flow_id=flow, uplink=direction == "up", duplicates=int(dups_by_flow.get(flow, 0)),
            owd_kind="raw", interval=interval_s)
        streams[name] = a.report
        intervals.append(a.tables["intervals"])
        logs.append(pl.from_arrow(a.tables["udp_packets"]).select(
            flow_id=pl.lit(name), step=pl.lit(0, pl.UInt32), direction=pl.lit(direction), seq="seq",
            send_ts="send_ts", recv_ts="recv_ts", bytes="bytes", lost="lost", owd_ms="owd_ms",
            owd_kind=pl.lit("raw"), rtt_ms=pl.lit(None, pl.Float64), jitter_ms="jitter_ms"))
    log = pl.concat(logs).to_arrow().cast(LOG_SCHEMA)
    intervals = pa.concat_tables(intervals).select(INTERVAL_SCHEMA.names).cast(INTERVAL_SCHEMA)
    first = df.row(0, named=True)
    totals = lambda k: sum(s[k] for s in streams.values())
    sent, received_n = totals("packets_sent"), totals("packets_received")
    result = {
        "test": "udp-cbr", "direction": direction, "server": first["dest"],
        "duration_s": max(s["duration_s"] for s in streams.values()),
        "throughput_bps": totals("throughput_bps"), "packets_sent": sent, "packets_received": received_n,
        "loss_rate": (sent - received_n) / sent if sent else None, "clock_offset": None, "streams": streams,
        "source": {"tool": "D-ITG", "file": str(path), "flows": len(streams), "date": date.isoformat()},
    }
    if len(streams) == 1:
        only = next(iter(streams.values()))
        result["jitter_ms"], result["owd_ms"] = only["jitter_ms"], only["owd_ms"]
    return Imported(result, intervals, log)


# ---------------------------------------------------------------------------------- output


def write_imported(imported: Imported, out: Path) -> list[Path]:
    """Writes `result.json`, `intervals.parquet` and (D-ITG) `agent_log.parquet` into `out`,
    each atomically; on failure none of the files is left half-written."""
    import pyarrow.parquet as pq

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--out {out}: cannot create ({os_reason(e)})") from None
    files = [(out / "result.json", None), (out / "intervals.parquet", imported.intervals)]
    if imported.log is not None:
        files.append((out / "agent_log.parquet", imported.log))
    written: list[Path] = []
    try:
        for target, table in files:
            tmp = target.with_name(target.name + ".part")
            if table is None:
                tmp.write_text(json.dumps(imported.document, indent=1))
            else:
                pq.write_table(table, tmp, compression="zstd")
            written.append(tmp)
        for tmp in written:
            os.replace(tmp, tmp.with_name(tmp.name[: -len(".part")]))
    except OSError as e:
        for tmp in written:
            tmp.unlink(missing_ok=True)
        raise UserError(f"--out {out}: cannot write ({os_reason(e)})") from None
    return [t for t, _ in files]
