"""`cellperf analyze`: captures in, TCP/UDP metrics out (METHODS §3–§4)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from cellperf.agent_logs import analyze_agent_log, is_agent_log
from cellperf.analysis import analyze
from cellperf.errors import UserError
from cellperf.units import format_rate

if TYPE_CHECKING:
    from rich.console import Console


def _fmt_ms(summary: dict | None, key: str = "median") -> str:
    return "-" if not summary else f"{summary[key]:.1f}"


def _retx(r: dict | None) -> str:
    if not r:
        return "-"
    if r["method"] == "two-sided":
        return f"{r['total']} (N {r['normal']} S {r['spurious']} U {r['unavoidable']} M {r['serial']})"
    return f"{r['total']} (fast {r['fast']} rto {r['rto']} spur {r['spurious']})*"


def _end(addr: str, port: int | None) -> str:
    return addr if port is None else f"{addr}:{port}"


def _nat(ends: dict | None) -> str:
    """The ends as the CN saw them, when a NAT translated one."""
    return "" if not ends else f" (at CN {ends['src']}:{ends['sport']} → {ends['dst']}:{ends['dport']})"


def _print_human(report: dict, console: Console) -> None:
    from rich.table import Table

    for c in report["captures"]:
        console.print(
            f"[bold]{(c['side'] or 'log').upper()}[/] {c['path']}: {c['format']}, {c['packets']} packets, "
            f"{c['counts']['tcp']} TCP, {c['counts']['udp']} UDP, {c['flows']} flows"
        )
    t = Table(show_lines=False, header_style="bold")
    for col in ("id", "proto", "dir", "flow (sender → receiver)", "pkts", "time s", "goodput",
                "RTT ms", "retransmissions", "ACK comp", "loss", "jitter ms", "OWD ms"):
        t.add_column(col, overflow="fold")
    one_sided = False
    for f in report["flows"]:
        ac = f.get("ack_compression")
        r = f.get("retransmissions")
        one_sided |= bool(r and r["method"] == "one-sided")
        owd = f.get("owd_ms")
        t.add_row(
            str(f["flow_id"]),
            f["proto"],
            f["direction"][:2] + ("?" if f["direction_basis"] == "initiator" else ""),
            f"{_end(f['src'], f['sport'])} → {_end(f['dst'], f['dport'])}" + _nat(f.get("nat")),
            str(f["packets"]),
            f"{f['duration_s']:.1f}",
            format_rate(f.get("goodput_bps")),
            _fmt_ms(f.get("rtt_ms")),
            _retx(r),
            "-" if not ac else f"{100 * ac['event_fraction']:.1f}% ev",
            "-" if f.get("loss_rate") is None else f"{100 * f['loss_rate']:.2f}%",
            _fmt_ms(f.get("jitter_ms")),
            "-" if not owd else f"{owd['median']:.1f} ({owd['kind']})",
        )
    console.print(t)
    notes = ["dir: up = MN→CN; '?' = guessed from the connection's initiator (use --mn-addr)"]
    if one_sided:
        notes.append("* one capture: sender-side heuristics, not the two-capture classes")
    notes.append("retransmissions: N normal, S spurious, U unavoidable, M serial (METHODS §4)")
    for n in notes:
        console.print(f"[dim]{n}[/]")


@click.command()
@click.argument("capture", required=False, type=click.Path(dir_okay=False))
@click.option("--mn", "mn", type=click.Path(dir_okay=False), help="Capture taken at the mobile node.")
@click.option("--cn", "cn", type=click.Path(dir_okay=False), help="Capture taken at the correspondent node.")
@click.option("--side", type=click.Choice(["mn", "cn"]), default="mn", show_default=True,
              help="Where a single CAPTURE was taken.")
@click.option("--interval", type=float, default=5.0, show_default=True, help="Series interval, seconds.")
@click.option("--mn-addr", help="The MN's IP address (else told by TTL, else by who opened the flow).")
@click.option("--synced-clocks", is_flag=True,
              help="The capture clocks agree (GPS/PTP/same host): report raw one-way delay, not excess.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Write report.json and the tables as Parquet into this folder.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(capture, mn, cn, side, interval, mn_addr, synced_clocks, out_dir, as_json) -> None:
    """Analyse packet captures: flows, throughput, RTT, loss, jitter, one-way delay,
    TCP retransmission classes and ACK compression.

    Give the two captures of a run (--mn and --cn) for the full analysis, or one CAPTURE
    for what one vantage point can tell. pcap and pcapng; Ethernet, Linux SLL/SLL2, raw
    IP and loopback link types. CAPTURE can also be a per-packet log of cellperf's agents
    (`cellperf probe --log F.parquet|F.csv`, or a server log): each of its UDP streams is
    measured like one found in captures.

    \b
    Examples:
      cellperf analyze --mn mn.pcap --cn cn.pcap
      cellperf analyze --mn mn.pcap --cn cn.pcap --json > report.json
      cellperf analyze trace.pcapng --side cn --interval 1 --out results/
      cellperf analyze voip.parquet              # a probe's per-packet log
    """
    logs = [p for p in (capture, mn, cn) if p is not None and is_agent_log(p)]
    if logs and capture is None:
        raise UserError(f"{logs[0]}: an agent log is analysed on its own (cellperf analyze LOG): "
                        "the probe's log holds both directions")
    if logs and (mn_addr or synced_clocks):
        raise UserError(f"{logs[0]}: --mn-addr and --synced-clocks apply to captures; an agent log names its "
                        "directions and says how its delays were measured")
    if logs:
        result = analyze_agent_log(capture, interval=interval, tables=out_dir is not None)
    else:
        result = analyze(
            capture, mn=mn, cn=cn, side=side, interval=interval, mn_addr=mn_addr,
            synced_clocks=synced_clocks, tables=out_dir is not None,
        )
    for w in result.warnings:
        click.echo(f"cellperf: warning: {w}", err=True)
    if out_dir is not None:
        result.write(out_dir)
    if as_json:
        click.echo(json.dumps(result.report, indent=2))
    else:
        # rich costs ~0.1 s to import; machines asking for --json do not pay it.
        from rich.console import Console

        _print_human(result.report, Console())
        if out_dir is not None:
            Console().print(f"tables written to {out_dir}/")
