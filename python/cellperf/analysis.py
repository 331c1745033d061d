"""Capture analysis from Python: `analyze()` returns the report and the Arrow tables.

    >>> from cellperf.analysis import analyze
    >>> a = analyze(mn="mn.pcap", cn="cn.pcap", tables=True)
    >>> a.report["flows"][0]["retransmissions"]
    >>> import polars as pl; pl.from_arrow(a.tables["intervals"])

All per-packet work happens in the compiled core; the tables are pyarrow tables that
polars, pandas and DuckDB read without copies. Table schemas: `docs/tables.md`.
"""

from __future__ import annotations

import json
import os

from cellperf import _native
from cellperf.errors import UserError, os_reason

# `cellperf analyze` imports this module: what it imports at top level is start-up time of
# every analysis, so no dataclasses (inspect), typing, pathlib, tempfile or shutil here.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # pyarrow is imported only when tables are asked for (it costs ~0.1 s)
    from pathlib import Path

    import pyarrow as pa

TABLE_NAMES = ("packets", "intervals", "udp_packets", "gaps", "delay_spikes", "tcp_retransmissions", "ack_compression",
               "rtt")


class Analysis:
    """The result of analysing one capture or a two-sided pair: the `report` document and
    the Arrow `tables` by name (empty unless asked for)."""

    __slots__ = ("report", "tables")

    def __init__(self, report: dict, tables: dict[str, pa.Table] | None = None) -> None:
        self.report = report
        self.tables = {} if tables is None else tables

    @property
    def warnings(self) -> list[str]:
        return self.report.get("warnings", [])

    def write(self, out_dir: str | os.PathLike) -> list[Path]:
        """Writes `report.json` and one Parquet file per table into `out_dir`.

        Files are written in a temporary folder beside `out_dir` and moved in only when
        all are complete, so an interrupted run never leaves half-written results.
        """
        import shutil
        import tempfile
        from pathlib import Path

        import pyarrow.parquet as pq

        out = Path(out_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{out}: cannot create output folder ({os_reason(e)})") from None
        staging = Path(tempfile.mkdtemp(prefix=".cellperf-", dir=out))
        try:
            written = []
            (staging / "report.json").write_text(json.dumps(self.report, indent=2) + "\n")
            written.append("report.json")
            for name, table in self.tables.items():
                pq.write_table(table, staging / f"{name}.parquet", compression="zstd")
                written.append(f"{name}.parquet")
            for name in written:
                os.replace(staging / name, out / name)
            return [out / n for n in written]
        except OSError as e:
            raise UserError(f"{out}: cannot write results ({os_reason(e)})") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def analyze_stream(
    packets: pa.Table,
    *,
    flow_id: int = 0,
    uplink: bool = True,
    duplicates: int = 0,
    losses_known: bool = True,
    owd_kind: str = "excess",
    interval: float = 5.0,
) -> Analysis:
    """UDP stream metrics (docs/methods.md §3) of packets from any source (agent or tool logs).

    `packets` is a pyarrow table in sending order, one row per sent packet: `seq` (uint64),
    `send_ns` and `recv_ns` (int64 ns since the epoch; null when unknown / lost) and `bytes`
    (uint32). The same computation as `analyze()` runs on captures. Returns the stream summary
    as `report` and the `udp_packets` and `intervals` tables (docs/tables.md).
    """
    batches = packets.to_batches()
    batch = batches[0] if len(batches) == 1 else packets.combine_chunks().to_batches()[0]
    try:
        text, out = _native.analyze_udp_stream(
            batch, flow_id, uplink, duplicates=duplicates, losses_known=losses_known,
            owd_kind=owd_kind, interval_s=interval)
    except _native.InputError as e:
        raise UserError(str(e)) from None
    import pyarrow as pa

    return Analysis(report=json.loads(text), tables={name: pa.Table.from_batches([b]) for name, b in out})


def analyze(
    capture: str | os.PathLike | None = None,
    *,
    mn: str | os.PathLike | None = None,
    cn: str | os.PathLike | None = None,
    side: str = "mn",
    interval: float = 5.0,
    mn_addr: str | None = None,
    synced_clocks: bool = False,
    tables: bool = False,
) -> Analysis:
    """Analyses one capture (`capture`, taken at `side`) or a two-sided pair (`mn`, `cn`).

    `interval` is the length of the interval series in seconds (docs/methods.md §3: 5 s);
    `mn_addr` names the MN's address when the TTL rule cannot tell it; `synced_clocks`
    says the two capture clocks agree, so one-way delays are raw rather than excess.
    """
    if capture is not None and (mn is not None or cn is not None):
        raise UserError("give either one capture or --mn/--cn, not both")
    if capture is not None:
        if side not in ("mn", "cn"):
            raise UserError(f"--side must be 'mn' or 'cn', not '{side}'")
        inputs = [(os.fspath(capture), side)]
    else:
        inputs = [(os.fspath(p), s) for p, s in ((mn, "mn"), (cn, "cn")) if p is not None]
    if not inputs:
        raise UserError("no capture given")
    try:
        text, batches = _native.analyze_captures(
            inputs, interval_s=interval, mn_addr=mn_addr, synced_clocks=synced_clocks, tables=tables
        )
    except _native.InputError as e:
        raise UserError(str(e)) from None
    tables_out = {}
    if batches:
        import pyarrow as pa

        tables_out = {name: pa.Table.from_batches([b]) for name, b in batches}
    return Analysis(report=json.loads(text), tables=tables_out)
