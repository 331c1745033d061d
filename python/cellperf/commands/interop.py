"""`cellperf interop`: iperf3 and D-ITG results into cellperf's tables."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import click

from cellperf.agents.interop import DEFAULT_INTERVAL_S, Imported, read_ditg, read_iperf3, write_imported
from cellperf.errors import UserError
from cellperf.units import format_rate


def _show(imported: Imported, as_json: bool, out: Path | None) -> None:
    files = write_imported(imported, out) if out is not None else []
    doc = imported.document
    if as_json:
        click.echo(json.dumps(doc))
        return
    from rich.console import Console
    from rich.table import Table

    src = doc["source"]
    t = Table(title=f"{src['tool']} {doc['test']} ({doc['direction']}) from {src['file']}", show_header=False)
    t.add_row("duration", f"{doc['duration_s']:.2f} s")
    t.add_row("throughput", format_rate(doc["throughput_bps"]))
    if doc.get("packets_sent") is not None:
        t.add_row("packets sent / received", f"{doc['packets_sent']} / {doc['packets_received']}")
        t.add_row("loss", f"{100 * doc['loss_rate']:.3f} %")
    if doc.get("retransmits") is not None:
        t.add_row("TCP retransmissions", str(doc["retransmits"]))
    for key, name in (("jitter_ms", "jitter"), ("owd_ms", "one-way delay (raw)"), ("rtt_ms", "sender RTT")):
        s = doc.get(key)
        if s:
            parts = [f"{k} {s[k]:.3f}" for k in ("min", "median", "p95", "max", "mean", "rfc3550") if s.get(k) is not None]
            t.add_row(name, " / ".join(parts) + " ms")
    t.add_row("intervals", f"{imported.intervals.num_rows} rows")
    if imported.log is not None:
        t.add_row("per-packet log", f"{imported.log.num_rows} rows")
    for f in files:
        t.add_row("wrote", str(f))
    Console().print(t)


_OUT = click.option("--out", type=click.Path(file_okay=False, path_type=Path),
                    help="Write result.json, intervals.parquet (and agent_log.parquet) here.")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result document as one JSON line.")


@click.group()
def command() -> None:
    """Read iperf3 and D-ITG results into cellperf's tables (the probe's result document,
    the per-interval series, and for D-ITG the per-packet log), so campaigns measured with
    those tools analyse like cellperf's own.

    \b
    Examples:
      cellperf interop iperf3 run-17.json
      cellperf interop iperf3 run-17.json --json --out imported/run-17
      cellperf interop ditg recv.txt --direction down --date 2009-05-14 --out imported/voip-3
    """


@command.command("iperf3")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_JSON
@_OUT
def iperf3(file: Path, as_json: bool, out: Path | None) -> None:
    """FILE is the output of `iperf3 -c SERVER -J` (TCP or UDP, -R, --bidir, -P). The client
    is the mobile node: what it sent is `up`.

    \b
    Examples:
      iperf3 -c cn -u -b 2M -t 60 -R -J > down.json && cellperf interop iperf3 down.json
      cellperf interop iperf3 down.json --out imported/down
    """
    _show(read_iperf3(file), as_json, out)


@command.command("ditg")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--direction", default="up", show_default=True, type=click.Choice(["up", "down"]),
              help="up: D-ITG's sender was the mobile node; down: its receiver was.")
@click.option("--date", "date_text", help="Day the test started, YYYY-MM-DD (D-ITG logs times of day; default: the file's date).")
@click.option("--interval", default=DEFAULT_INTERVAL_S, show_default=True, type=float, help="Interval series, seconds.")
@_JSON
@_OUT
def ditg(file: Path, direction: str, date_text: str | None, interval: float, as_json: bool, out: Path | None) -> None:
    """FILE is the per-packet text of `ITGDec RECV_LOG -l FILE` (the receiver's log).

    \b
    Examples:
      ITGDec recv.log -l recv.txt && cellperf interop ditg recv.txt --date 2009-05-14
      cellperf interop ditg recv.txt --direction down --json --out imported/voip-3
    """
    date = None
    if date_text is not None:
        try:
            date = dt.date.fromisoformat(date_text)
        except ValueError:
            raise UserError(f"--date: '{date_text}' is not a date (YYYY-MM-DD)") from None
    if interval <= 0:
        raise UserError(f"--interval: must be positive, not {interval}")
    _show(read_ditg(file, date=date, direction=direction, interval_s=interval), as_json, out)
