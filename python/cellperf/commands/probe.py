"""Run one test against a `cellperf server` (agent at the mobile node).

SERVER is HOST[:PORT], default port 5250. Tests (docs/methods.md §2): udp-cbr, tcp-bulk, voip (echoed,
per-packet RTT), min-delay (40 B every 40 ms), ping-sweep (RTT vs size), cn-ping-sweep (the same
pings sent by the server and echoed here: round trips timed at the CN), sparse (one packet per
100 ms: gaps and delay periods), window-sweep (TCP throughput vs window or MSS, BDP), trains
(packet trains of each --lengths in turn, one every --period, both ways: what `cellperf record`
sends for a replay's light delivery opportunities).

Examples:
  cellperf probe cn.example.net -t udp-cbr --rate 10M --duration 300 \\
       --direction down
  cellperf probe cn.example.net -t voip --codec g729 --log voip.parquet --json
  cellperf probe cn -t udp-cbr --direction both --log mn.parquet \\
       --server-log cn.parquet
  cellperf probe 192.0.2.7:5250 -t tcp-bulk --congestion bbr --window 64K -P 2
  cellperf probe cn -t window-sweep --windows 16K,64K,256K --duration 20
  cellperf probe cn -t ping-sweep --count 20 --interval 0.5
  cellperf probe cn -t cn-ping-sweep --sizes 128,1500 --count 20 --interval 0.5
  cellperf probe cn -t trains --lengths 10,100 --period 200ms --payload 1400 \\
       --direction both --log t.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.agents import (MAX_DURATION_S, TESTS, check_log_path, parse_count_list, parse_list, parse_rate, parse_size,
                             read_token, run_probe, write_log)
from cellperf.cli import file_path
from cellperf.validate import number_arg
from cellperf.errors import UserError
from cellperf.units import format_rate


def _ms(s: dict | None) -> str:
    """min / median / p95 / max of a delay summary, in one short cell."""
    if not s:
        return "-"
    return f"{s['min']:.3f} / {s['median']:.3f} / {s['p95']:.3f} / {s['max']:.3f}"


def _loss(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.2f} %"


def _sweep_rows(doc: dict) -> list[tuple[str, str]]:
    """A ping-sweep's point is its RTT against size (the fit's slope is the per-byte cost on
    the path's bottleneck, docs/methods.md §3); a window-sweep's is its throughput against the
    window and the BDP of the path."""
    rows = []
    for row in doc.get("sweep") or []:
        if "size_bytes" in row:
            rtt = row.get("rtt_ms") or {}
            median = "-" if not rtt else f"{rtt['median']:.3f} ms median, {rtt['p95']:.3f} p95"
            rows.append((f"{row['size_bytes']} B", f"{median}, loss {_loss(row.get('loss_rate'))}"))
        else:
            rows.append((f"window {row.get('window_bytes')} B, MSS {row.get('mss')}",
                         f"{format_rate(row.get('throughput_bps'))}, retx {_loss(row.get('retransmission_rate'))}"))
    if doc.get("fit"):
        f = doc["fit"]
        slope_us = f["slope_ms_per_byte"] * 1000
        per_byte = f" (≈ {format_rate(8 / (slope_us * 1e-6))})" if slope_us > 0 else ""
        rows.append(("RTT vs size", f"{f['intercept_ms']:.3f} ms + {slope_us:.4f} µs/B{per_byte}"))
    bdp = doc.get("bdp") or {}
    if bdp.get("bdp_bytes") is not None and bdp.get("rtt_ms") is not None:
        rows.append(("BDP (best rate × min RTT)",
                     f"{bdp['bdp_bytes']:.0f} B = {format_rate(bdp['bandwidth_bps'])} × {bdp['rtt_ms']:.3f} ms"))
        if bdp.get("rwin_bdp_bytes"):
            rows.append(("RWIN-BDP (whole segments)", f"{bdp['rwin_bdp_bytes']:.0f} B"))
    return rows


def _stream_rows(doc: dict) -> list[tuple[str, str]]:
    """Gaps and delay periods of each received stream: a sparse test's point (docs/methods.md §6)."""
    rows = []
    for name, st in sorted((doc.get("streams") or {}).items()):
        if not st:
            continue
        g, d = st.get("gaps") or {}, st.get("delay_periods") or {}
        if g:
            rows.append((f"gaps ({name})", f"{g['count']}, {g['total_ms']:.0f} ms in all, longest {g['max_ms']:.0f} ms, "
                                           f"{g.get('lost_in_gaps', 0)} lost in them"))
        if d:
            rows.append((f"delay periods ({name})", f"{d['count']}, {d['total_ms']:.0f} ms in all, longest {d['max_ms']:.0f} ms"))
    return rows


def summary_rows(doc: dict) -> list[tuple[str, str]]:
    """The human summary of a probe result, as (what, value) rows that fit 80 columns. Each
    test shows its point: a sweep its curve, a sparse test its gaps; a ping-sweep has no
    throughput or single duration to show."""
    sweep = doc["test"] in ("ping-sweep", "cn-ping-sweep")
    rows = [] if sweep else [("duration", f"{doc.get('duration_s', 0):.2f} s"),
                             ("throughput", format_rate(doc.get("throughput_bps")))]
    rows.append(("packets sent / received", f"{doc.get('packets_sent')} / {doc.get('packets_received')}"))
    rows.append(("loss" + (" (TCP retransmissions)" if doc.get("loss_basis") else ""), _loss(doc.get("loss_rate"))))
    if not sweep:
        for key, label in (("jitter_ms", "jitter"), ("rtt_ms", "round trip")):
            if doc.get(key):
                rows.append((f"{label}, ms (min/med/p95/max)", _ms(doc[key])))
        if doc.get("owd_ms"):
            rows.append((f"one-way delay ({doc['owd_ms'].get('kind')}), ms", _ms(doc["owd_ms"])))
    if doc.get("send_lateness_us"):
        s = doc["send_lateness_us"]
        rows.append(("send-time error, µs (med/p99/max)", f"{s['median']:.1f} / {s['p99']:.1f} / {s['max']:.1f}"))
    rows += _stream_rows(doc)
    if doc.get("no_path"):
        gaps = ", ".join(f"{g['direction']} {g['duration_s']:.1f} s ({g['datagrams']} datagrams)" for g in doc["no_path"])
        rows.append(("without a path", f"{doc['no_path_s']:.1f} s: {gaps}; {doc['no_path'][0]['error']}"))
    if doc.get("longest_stall_s"):
        rows.append(("longest stall (no byte received)", f"{doc['longest_stall_s']:.1f} s"))
    if doc.get("partial"):
        rows.append(("partial", doc["partial"]))
    if doc.get("clock_offset"):
        c = doc["clock_offset"]
        applied = " (off the OWDs)" if c.get("applied_to_owd") else ""
        rows.append(("clock offset (server − probe)", f"{c['offset_ms']:.3f} ± {c['uncertainty_ms']:.3f} ms{applied}"))
    return rows + _sweep_rows(doc)


def print_summary(doc: dict, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"cellperf probe {doc['test']} ({doc['direction']}) → {doc.get('server')}", show_header=False)
    for what, value in summary_rows(doc):
        t.add_row(what, value)
    (console or Console()).print(t)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("server", metavar="SERVER", help="The server, HOST[:PORT] (default port 5250).")
    parser.add_argument("-t", "--test", required=True, metavar="TEST", help=f"One of: {', '.join(TESTS)}.")
    parser.add_argument("--token-file", metavar="FILE", type=file_path(Path), help="Shared token (else $CELLPERF_TOKEN).")
    parser.add_argument("--direction", help="up (MN→CN), down, or both (udp-cbr, tcp-bulk, trains).")
    parser.add_argument("--rate", help="udp-cbr payload rate, bit/s (k/M/G). Default 1M.")
    parser.add_argument("--payload", type=number_arg(lo=0, hi=2**32 - 1, integer=True), metavar="BYTES", help="UDP payload bytes (default 1460; the header takes 20).")
    parser.add_argument("--duration", type=number_arg(lo=0, hi=MAX_DURATION_S, lo_open=True, unit="seconds"), metavar="SECONDS", help="Seconds (default 10; voip/min-delay 30, sparse 60).")
    parser.add_argument("--bytes", dest="nbytes", metavar="BYTES", help="tcp-bulk: stop after this many bytes (K/M/G).")
    parser.add_argument("--congestion", metavar="NAME", help="TCP congestion control of what the probe sends (e.g. cubic, reno, bbr; one of net.ipv4.tcp_available_congestion_control, checked before connecting); a download's is set at the server.")
    parser.add_argument("--window", metavar="BYTES", help="TCP receive window (K/M), e.g. 64K: both socket buffers, advertised window clamped to it; at most net.core.rmem_max and wmem_max (the kernel caps the buffers there).")
    parser.add_argument("--mss", type=number_arg(lo=0, hi=2**32 - 1, integer=True), metavar="BYTES", help="TCP maximum segment size, bytes (88..32767, the kernel's bounds).")
    parser.add_argument("-P", "--streams", type=number_arg(lo=0, hi=2**32 - 1, integer=True), metavar="N", help="Parallel TCP streams.")
    parser.add_argument("--codec", help="voip: g711 (160 B / 20 ms, default) or g729 (20 B / 20 ms).")
    parser.add_argument("--sizes", metavar="LIST", help="ping-sweep and cn-ping-sweep payload sizes (default 128,256,512,1024,1500); trains: one size a train, in turn (instead of --payload).")
    parser.add_argument("--count", type=number_arg(lo=0, hi=2**32 - 1, integer=True), metavar="N", help="ping-sweep and cn-ping-sweep probes per size (default 100).")
    parser.add_argument("--interval", type=number_arg(lo=0, hi=MAX_DURATION_S, lo_open=True, unit="seconds"), metavar="SECONDS", help="Seconds between packets (ping-sweeps 1, sparse 0.1).")
    parser.add_argument("--timeout", type=number_arg(lo=0, hi=MAX_DURATION_S, lo_open=True, unit="seconds"), metavar="SECONDS", help="Longest wait for late packets once the sender is done (default 2; ping-sweeps 10); a missing packet is given up sooner when the stream's own delays say it cannot come (docs/methods.md, Loss).")
    parser.add_argument("--windows", metavar="LIST", help="window-sweep windows (default 16K..1024K).")
    parser.add_argument("--mss-values", metavar="LIST", help="window-sweep MSS values instead of windows.")
    parser.add_argument("--lengths", metavar="LIST", help="trains: packets per train, in turn (default 10,100).")
    parser.add_argument("--period", metavar="TIME", help="trains: time from one train's start to the next (default 200ms).")
    parser.add_argument("--owd", metavar="KIND",
                        help="One-way delay reported: raw, excess, offset (raw with the measured clock offset "
                             "removed), half-rtt (echo tests' default).")
    parser.add_argument("--clock-samples", type=number_arg(lo=0, hi=64, integer=True), metavar="N",
                        help="Round trips of the clock exchange before the test (default 8); 0 skips it where "
                             "both ends share a clock (cellperf run's emulated testbed): no clock_offset then.")
    parser.add_argument("--ticket-file", metavar="FILE", type=file_path(Path),
                        help="Keep the server's resumption ticket in FILE between runs: the next run proves the "
                             "token in its first message, one round trip sooner (docs/agents.md).")
    parser.add_argument("--log", dest="log_path", metavar="FILE", type=file_path(Path),
                        help="Per-packet log of both ends, merged (.parquet or .csv).")
    parser.add_argument("--server-log", dest="server_log_path", metavar="FILE", type=file_path(Path),
                        help="The server's own per-packet log of this run, fetched over the control connection (.parquet or .csv).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def _parse_duration(text: str, option: str) -> float:
    # Imported here: the cellperf.emulate package costs 40-70 ms of every probe's start-up
    # (part of each campaign run's wall time), and only --period needs it.
    from cellperf.emulate.units import parse_duration

    return parse_duration(text, option)


def run(args: argparse.Namespace) -> None:
    log_path, server_log_path, as_json = args.log_path, args.server_log_path, args.as_json
    for path, option in ((log_path, "--log"), (server_log_path, "--server-log")):
        if path is not None:
            check_log_path(path, option)
    if log_path is not None and server_log_path is not None and log_path.resolve() == server_log_path.resolve():
        raise UserError(f"--server-log {server_log_path}: the same file as --log")
    token = read_token(args.token_file)
    options: dict = {}
    for key, value in (
        ("direction", args.direction), ("payload", args.payload), ("duration_s", args.duration),
        ("congestion", args.congestion), ("mss", args.mss), ("streams", args.streams), ("codec", args.codec),
        ("count", args.count), ("interval_s", args.interval), ("timeout_s", args.timeout), ("owd", args.owd),
        ("clock_samples", args.clock_samples), ("ticket_file", args.ticket_file and str(args.ticket_file)),
    ):
        if value is not None:
            options[key] = value
    for key, text, option, parse in (
        ("rate_bps", args.rate, "--rate", parse_rate), ("bytes", args.nbytes, "--bytes", parse_size),
        ("window", args.window, "--window", parse_size), ("sizes", args.sizes, "--sizes", parse_list),
        ("windows", args.windows, "--windows", parse_list), ("mss_values", args.mss_values, "--mss-values", parse_list),
        ("lengths", args.lengths, "--lengths", parse_count_list), ("period_s", args.period, "--period", _parse_duration),
    ):
        if text is not None:
            options[key] = parse(text, option)

    live = sys.stdout.isatty() and not as_json
    status = None
    if live:
        from rich.console import Console

        status = Console().status("connecting…")
        status.start()

    def progress(p: dict) -> bool:
        if status is not None:
            step = f"step {p['step'] + 1}/{p['steps']} {p['label']}  " if p["steps"] > 1 else ""
            loss = "" if p.get("loss_rate") is None else f"  loss {100 * p['loss_rate']:.2f} %"
            rtt = "" if p.get("rtt_ms") is None else f"  rtt {p['rtt_ms']:.2f} ms"
            status.update(f"{step}{p['elapsed_s']:5.1f} s  {format_rate(p['rate_bps'])}{loss}{rtt}")
        return True

    try:
        writers = {"pyarrow.parquet" if path.suffix.lower() == ".parquet" else "pyarrow.csv"
                   for path in (log_path, server_log_path) if path is not None}
        result = run_probe(args.server, token, args.test, options, progress, preload=tuple(sorted(writers)))
    finally:
        if status is not None:
            status.stop()
    # The packets already exchanged are kept even when the run failed part way.
    if log_path is not None and result.log is not None:
        write_log(result.log, log_path, result.document)
    if server_log_path is not None and result.server_log is not None:
        write_log(result.server_log, server_log_path, result.document, "--server-log")
    if result.error is not None and result.error != "interrupted":
        if as_json:
            print(json.dumps({**result.document, "error": result.error}))
        raise UserError(result.error)
    if as_json:
        print(json.dumps(result.document))
    else:
        print_summary(result.document)
    if result.error == "interrupted":
        raise KeyboardInterrupt
