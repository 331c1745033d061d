"""Analyse captures or agent logs: throughput, RTT, loss, jitter, OWD.

Flows, throughput series, RTT, loss, jitter, one-way delay, TCP retransmission classes and ACK
compression (docs/methods.md §3–§4). Give the two captures of a run (--mn and --cn) for the full
analysis, or one CAPTURE for what one vantage point can tell. pcap and pcapng; Ethernet, Linux
SLL/SLL2, raw IP and loopback link types. CAPTURE can also be a per-packet log of cellperf's
agents (`cellperf probe --log F.parquet|F.csv`, or a server log): each of its UDP streams is
measured like one found in captures.

Examples:
  cellperf analyze --mn mn.pcap --cn cn.pcap
  cellperf analyze --mn mn.pcap --cn cn.pcap --json > report.json
  cellperf analyze cn.pcap --side cn --interval 1 --out tables/
  cellperf analyze voip.parquet              # a probe's per-packet log
  # + channel utilisation
  cellperf analyze --mn mn.pcap --cn cn.pcap --radio-log radio.csv

With both captures, TCP data has a one-way delay too (each segment matched across them):
excess (OWD − the flow's minimum) unless --synced-clocks. With --radio-log, each flow's
channel utilisation = goodput / mean channel capacity over its lifetime (002 §7.3). TCP
data flows carrying data the same way at the same time (active spans overlapping for half
the shorter one) get their shares and Jain's index (`concurrent`); cellperf's control
connections (known by their hello) never do. A cellperf probe stream's loss is split into
loss before the first capture (numbers missing at both) and between the captures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from cellperf.agent_logs import analyze_agent_log, is_agent_log
from cellperf.analysis import analyze
from cellperf.cli import file_path, folder_path
from cellperf.validate import number_arg
from cellperf.errors import UserError
from cellperf.units import format_rate

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from rich.console import Console


def _fmt_ms(summary: dict | None, key: str = "median") -> str:
    return "-" if not summary else f"{summary[key]:.1f}"


def _retx(r: dict | None) -> str:
    if not r:
        return "-"
    # Re-segmented resends (004 §V.B), named only when there are some.
    reseg = f" re-segmented {r['merged']}+{r['split']}" if r.get("merged") or r.get("split") else ""
    if r["method"] == "two-sided":
        return f"{r['total']} (N {r['normal']} S {r['spurious']} U {r['unavoidable']} M {r['serial']}{reseg})"
    return f"{r['total']} (fast {r['fast']} rto {r['rto']} spur {r['spurious']}{reseg})*"


def _loss(f: dict) -> str:
    """The loss rate, with its split when the probe headers told loss before the capture."""
    split, rate = f.get("loss_split"), f.get("loss_rate")
    if not split:
        return "-" if rate is None else f"{100 * rate:.2f}%"
    before = f"before capture {100 * split['before_capture']:.2f}%"
    if rate is None:
        return before
    if split.get("between_captures") is None:  # one capture: nothing to tell between them
        return f"{100 * rate:.2f}% ({before})"
    return f"{100 * rate:.2f}% ({before}, between {100 * split['between_captures']:.2f}%)"


def _end(addr: str, port: int | None) -> str:
    return addr if port is None else f"{addr}:{port}"


def _nat(ends: dict | None) -> str:
    """The ends as the CN saw them, when a NAT translated one."""
    return "" if not ends else f" (at CN {ends['src']}:{ends['sport']} → {ends['dst']}:{ends['dport']})"


def _ends(f: dict) -> str:
    return f"{_end(f['src'], f['sport'])} → {_end(f['dst'], f['dport'])}" + _nat(f.get("nat"))


def _dir(f: dict) -> str:
    return f["direction"][:2] + ("?" if f["direction_basis"] == "initiator" else "")


def _table(report: dict):
    """One row per flow direction, the headline figures (the wide layout)."""
    from rich.table import Table

    t = Table(show_lines=False, header_style="bold")
    for col in ("id", "proto", "dir", "flow (sender → receiver)", "pkts", "time s", "goodput",
                "RTT ms", "retransmissions", "ACK comp", "loss", "jitter ms", "OWD median ms"):
        t.add_column(col, overflow="fold")
    for f in report["flows"]:
        ac, owd = f.get("ack_compression"), f.get("owd_ms")
        t.add_row(
            str(f["flow_id"]), f["proto"] + (" ctl" if f.get("control") else ""), _dir(f), _ends(f), str(f["packets"]), f"{f['duration_s']:.1f}",
            format_rate(f.get("goodput_bps")), _fmt_ms(f.get("rtt_ms")), _retx(f.get("retransmissions")),
            "-" if not ac else f"{100 * ac['event_fraction']:.1f}% ev",
            _loss(f),
            _fmt_ms(f.get("jitter_ms")), "-" if not owd else f"{owd['median']:.1f} ({owd['kind']})",
        )
    return t


def _facts(f: dict) -> list[str]:
    """A flow direction's figures as short phrases (the narrow layout), unknown ones left out."""
    out = [f"{f['packets']} pkts in {f['duration_s']:.1f} s", f"goodput {format_rate(f.get('goodput_bps'))}"]
    if f.get("rtt_ms"):
        out.append(f"RTT {_fmt_ms(f['rtt_ms'])} ms")
    if f.get("retransmissions"):
        out.append(f"retx {_retx(f['retransmissions'])}")
        if f["retransmissions"].get("syn"):
            out.append(f"SYN resent {f['retransmissions']['syn']}")
    if f.get("ack_compression"):
        out.append(f"ACK comp {100 * f['ack_compression']['event_fraction']:.1f}% ev")
    if f.get("loss_rate") is not None or f.get("loss_split"):
        out.append(f"loss {_loss(f)}")
    if f.get("jitter_ms"):
        out.append(f"jitter {_fmt_ms(f['jitter_ms'])} ms")
    if f.get("owd_ms"):
        o = f["owd_ms"]
        out.append(f"OWD median {o['median']:.1f} ms, mean {o['mean']:.1f} ± {o['std']:.1f} ms ({o['kind']})")
    if (f.get("channel") or {}).get("utilisation") is not None:
        out.append(f"utilisation {f['channel']['utilisation']:.2f}")
    if f.get("capture_duplicates"):
        out.append(f"{f['capture_duplicates']} frames captured twice")
    return out


def _packed(items: list[str], width: int, indent: str = "    ") -> list[str]:
    """`items` joined by ' · ' into lines of at most `width` characters."""
    lines, line = [], ""
    for item in items:
        if line and len(indent) + len(line) + 3 + len(item) > width:
            lines.append(indent + line)
            line = item
        else:
            line = f"{line} · {item}" if line else item
    return lines + ([indent + line] if line else [])


def _print_human(report: dict, console: Console) -> None:
    """A table when it fits the terminal, else a few lines per flow direction."""
    from rich.markup import escape
    from rich.measure import Measurement

    for c in report["captures"]:
        console.print(
            f"[bold]{(c['side'] or 'log').upper()}[/] {escape(c['path'])}: {c['format']}, {c['packets']} packets, "
            f"{c['counts']['tcp']} TCP, {c['counts']['udp']} UDP, {c['flows']} flows"
        )
    table = _table(report)
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if natural <= console.width:
        console.print(table)
    else:
        for f in report["flows"]:
            guessed = "?" if f["direction_basis"] == "initiator" else ""
            console.print(f"[bold]{f['flow_id']} {f['proto']} {f['direction']}{guessed}[/] {escape(_ends(f))}")
            for line in _packed(_facts(f), console.width):
                console.print(escape(line), highlight=False)
    notes = ["dir: up = MN→CN; '?' = guessed from the connection's initiator (use --mn-addr)"]
    if any((f.get("retransmissions") or {}).get("method") == "one-sided" for f in report["flows"]):
        notes.append("* one capture: sender-side heuristics, not the two-capture classes")
    notes.append("retransmissions: N normal, S spurious, U unavoidable, M serial; re-segmented merged+split "
                 "(docs/methods.md §4)")
    if any(f.get("control") for f in report["flows"]):
        notes.append("ctl: a control connection of cellperf's agents (never among the competing flows)")
    for c in report.get("concurrent", []):
        shares = ", ".join(f"{fid}: {100 * x:.1f}%" for fid, x in zip(c["flows"], c["shares"]))
        console.print(f"concurrent TCP {c['direction']}: Jain's index {c['jain']:.3f} (shares {shares})")
    if any(f.get("channel") for f in report["flows"]):
        notes.append("utilisation = goodput / mean channel capacity over the flow (radio log)")
    for n in notes:
        console.print(f"[dim]{n}[/]")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("capture", metavar="CAPTURE", nargs="?", type=file_path(),
                        help="One capture (pcap, pcapng) or an agent's per-packet log (.parquet, .csv).")
    parser.add_argument("--mn", metavar="FILE", type=file_path(), help="Capture taken at the mobile node.")
    parser.add_argument("--cn", metavar="FILE", type=file_path(), help="Capture taken at the correspondent node.")
    parser.add_argument("--side", choices=["mn", "cn"], default="mn", help="Where a single CAPTURE was taken.")
    parser.add_argument("--interval", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=86400, unit="seconds"), default=5.0, help="Series interval, seconds.")
    parser.add_argument("--mn-addr", metavar="ADDR", help="The MN's IP address (else told by TTL, else by who opened the flow).")
    parser.add_argument("--synced-clocks", action="store_true",
                        help="The capture clocks agree (GPS/PTP/same host): report raw one-way delay, not excess.")
    parser.add_argument("--radio-log", metavar="FILE", type=file_path(),
                        help="Radio log with rate_bps samples (an emulated link's, or a modem's): adds each flow's "
                             "channel utilisation.")
    parser.add_argument("--out", dest="out_dir", metavar="DIR", type=folder_path(),
                        help="Write report.json and the tables as Parquet into this folder.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    capture, out_dir = args.capture, args.out_dir
    logs = [p for p in (capture, args.mn, args.cn) if p is not None and is_agent_log(p)]
    if logs and capture is None:
        raise UserError(f"{logs[0]}: an agent log is analysed on its own (cellperf analyze LOG): "
                        "the probe's log holds both directions")
    if logs and (args.mn_addr or args.synced_clocks):
        raise UserError(f"{logs[0]}: --mn-addr and --synced-clocks apply to captures; an agent log names its "
                        "directions and says how its delays were measured")
    from cellperf.progress import Progress

    inputs = ", ".join(os.path.basename(p) for p in (capture, args.mn, args.cn) if p is not None)
    # One call into the Rust core (it releases the GIL): a bar without a total, the time so far.
    with Progress("analyze", enabled=not args.as_json) as progress:
        progress.update(0, detail=inputs)
        if logs:
            result = analyze_agent_log(capture, interval=args.interval, tables=out_dir is not None)
        else:
            result = analyze(
                capture, mn=args.mn, cn=args.cn, side=args.side, interval=args.interval, mn_addr=args.mn_addr,
                synced_clocks=args.synced_clocks, tables=out_dir is not None,
            )
    if args.radio_log is not None:
        from cellperf.handoffs.radio_log import read_radio_log
        from cellperf.studies import add_utilisation

        add_utilisation(result.report, read_radio_log(args.radio_log), str(args.radio_log))
    from cellperf.studies import concurrent_summary

    result.report["concurrent"] = concurrent_summary(result.report)
    for w in result.warnings:
        print(f"cellperf: warning: {w}", file=sys.stderr)
    if out_dir is not None:
        result.write(out_dir)
    if args.as_json:
        print(json.dumps(result.report, indent=2))
    else:
        # rich costs ~0.1 s to import; machines asking for --json do not pay it.
        from rich.console import Console

        _print_human(result.report, Console())
        if out_dir is not None:
            Console().print(f"tables written to {str(out_dir).rstrip('/')}/")
