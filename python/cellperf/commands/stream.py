"""Media stream into a playout buffer: start-up, stalls, losses.

docs/methods.md §13, seed 004 §VI.B. `serve` sends streams at the CN (RTP over UDP, or over TCP with
RFC 4571 framing, on one port); `play` asks for one at the MN, records every packet's arrival
and plays it through a buffer of --buffer seconds: playback starts once that much media is in,
and stalls (rebuffers to the full buffer) when the packet due has not arrived. Both ends share
a token, as `cellperf server` and `cellperf probe` do (--token-file, else $CELLPERF_TOKEN): the
stream goes only to a receiver that proved it knows it. In a campaign (`type = "stream"`) the
runner does both around the emulated link (docs/apps.md). `rtp` reads the RTP streams and RTCP
reports of a capture (seed 004 §VI.C).

Examples:
  cellperf stream serve --listen 0.0.0.0:5260 --token-file token
  sudo cellperf emulate --profile umts-stationary -- \\
      cellperf stream play '$CELLPERF_CN:5260' --token-file token --rate 384k \\
        --buffer 2 --json
  cellperf stream play cn.example.net:5260 --token-file token --transport tcp \\
       --rate 1M --log stream.parquet
  cellperf stream rtp cn.pcap
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.cli import add_subcommand, add_subcommands, file_path
from cellperf.errors import UserError
from cellperf.validate import number_arg


def serve_command(args: argparse.Namespace) -> None:
    """Send media streams to the receivers that ask and know the token, until stopped.

    Listens on TCP and UDP on the same port. A receiver authenticates over TCP (HMAC challenge
    on the shared token, as `cellperf server`); a UDP stream goes only to the address that
    authenticated, and datagrams from anyone else get no answer. Each stream is held to
    --max-rate, --max-packet and --max-duration; --max-sessions run at once, --max-per-source
    from one address. With --json the first line on stdout is {"listening": "ADDR:PORT"}.
    Stop with Ctrl-C or SIGTERM.

    Examples:
      cellperf stream serve --listen 0.0.0.0:5260 --token-file token
      CELLPERF_TOKEN=s3cret cellperf stream serve --listen 0.0.0.0:0 \\
           --max-rate 10M --json
    """
    from cellperf.agents import parse_rate, read_token
    from cellperf.apps.stream import serve

    token = read_token(args.token_file)
    rate = parse_rate(args.max_rate, "--max-rate")
    if args.max_per_source > args.max_sessions:
        raise UserError(f"--max-per-source: {args.max_per_source} is over --max-sessions {args.max_sessions}")

    def ready(addr: str) -> None:
        print(json.dumps({"listening": addr}) if args.as_json else f"streaming on {addr} (TCP and UDP)", flush=True)

    try:
        serve(args.listen, token, ready, max_rate_bps=rate, max_packet_bytes=args.max_packet,
              max_duration_s=args.max_duration, max_sessions=args.max_sessions, max_per_source=args.max_per_source)
    except KeyboardInterrupt:
        pass


def play_command(args: argparse.Namespace) -> None:
    """Receive one stream and play it through a buffer; report start-up, stalls and losses.

    The stream is --rate bit/s of --packet-byte RTP packets for --duration seconds, the first
    --fast-start seconds of media sent five times faster, after --probe-packets packets of a
    bandwidth probe on another SSRC. Over UDP the server sends an RTCP sender report and the
    receiver a receiver report (loss, jitter, LSR/DLSR) once a second on the stream's port. Packets
    that never arrive are skipped (lost); those later than their time in a playout that never
    stalls are late; the stream's loss, jitter and one-way delay are measured as for the
    agents' UDP streams (OWD on the two hosts' clocks, exact in an emulation). --log writes
    the per-packet log in the agents' schema (docs/agents.md).

    Examples:
      cellperf stream play 10.0.0.1:5260 --token-file token --rate 384k --buffer 2
      cellperf stream play 10.0.0.1:5260 --token-file token --transport tcp \\
           --rate 1M --duration 30 --json
      cellperf stream play 10.0.0.1:5260 --token-file token --fast-start 2 \\
           --probe-packets 3
    """
    from cellperf.agents import check_log_path, parse_rate, read_token, write_log
    from cellperf.apps.stream import check, play

    _check_server(args.server)
    rate = parse_rate(args.rate, "--rate")
    check(rate, args.packet, args.duration, args.fast_start, args.probe_packets)
    if args.log is not None:
        check_log_path(args.log)
    token = read_token(args.token_file)
    doc, log = play(args.server, token, transport=args.transport, rate_bps=rate, packet_bytes=args.packet,
                    duration_s=args.duration, buffer_s=args.buffer, drain_s=args.timeout,
                    fast_start_s=args.fast_start, probe_packets=args.probe_packets)
    if args.log is not None and log is not None:
        write_log(log, args.log, doc)
    if args.as_json:
        print(json.dumps(doc))
        return
    startup = "-" if doc["startup_ms"] is None else f"{doc['startup_ms']:.0f} ms"
    print(f"stream over {doc['transport']} from {doc['server']}: {doc['rate_bps'] / 1e3:.0f} kbit/s, "
          f"{doc['buffer_s']:g} s buffer")
    print(f"  packets   {doc['received']} of {doc['expected']} received, {doc['lost']} lost, {doc['late']} late")
    print(f"  start-up  {startup}")
    print(f"  stalls    {doc['stalls']}, {doc['stall_s']:.2f} s in all")
    owd = doc["stream"].get("owd_ms")
    if owd:
        print(f"  OWD       median {owd['median']:.1f} / p95 {owd['p95']:.1f} / max {owd['max']:.1f} ms")


def rtp_command(args: argparse.Namespace) -> None:
    """The RTP streams of a capture: packets, loss, jitter, start-up burst, SSRC changes, RTCP.

    A stream is a 5-tuple and an SSRC; per stream the figures tshark's RTP analysis gives
    (packets, loss from the sequence numbers, largest gap, RFC 3550 jitter: last, largest, mean)
    and the start-up burst (how far it ran ahead of its media clock); each change of SSRC on a
    5-tuple with the header-compression context refresh it costs; the RTCP report blocks, and
    the round trip they give at the capture of the sender reports' sender (docs/methods.md §13).

    Examples:
      cellperf stream rtp cn.pcap
      cellperf stream rtp mn.pcap --json
    """
    from cellperf.apps.stream import rtp_report

    report = rtp_report(args.capture)
    if args.as_json:
        print(json.dumps(report))
        return
    print(_rtp_text(report, args.capture.name))


def _rtp_text(report: dict, name: str) -> str:
    lines = [f"{len(report['streams'])} RTP streams in {name}"]
    for s in report["streams"]:
        lines.append(f"SSRC 0x{s['ssrc']:08X}, PT {s['payload_type']}: {s['src']}:{s['src_port']} → "
                     f"{s['dst']}:{s['dst_port']}")
        lines.append(f"  packets {s['packets']}, lost {s['lost']}, largest gap {s['max_delta_ms']:.2f} ms")
        if s["jitter_ms"] is not None:
            lines.append(f"  jitter  {s['jitter_ms']:.2f} last / {s['max_jitter_ms']:.2f} max / "
                         f"{s['mean_jitter_ms']:.2f} mean ms (RFC 3550)")
        if s["burst"]:
            b = s["burst"]
            lines.append(f"  burst   {b['duration_s']:.2f} s at {b['rate_bps'] / 1e3:.0f} kb/s, "
                         f"{b['lead_s']:.2f} s ahead of the media clock")
        for c in report["ssrc_changes"]:
            if c["to_ssrc"] == s["ssrc"] and (c["src"], c["src_port"]) == (s["src"], s["src_port"]):
                lines.append(f"  after   SSRC 0x{c['from_ssrc']:08X} ({c['after_packets']} packets): one "
                             f"context refresh, {c['refresh_bytes']} B")
    rr = [r for r in report["reports"] if r["kind"] == "rr"]
    rtts = sorted(r["rtt_ms"] for r in rr if r["rtt_ms"] is not None)
    lines.append(f"RTCP: {report['sender_reports']} sender reports, {len(rr)} receiver report blocks")
    if rr:
        last = rr[-1]
        jitter = "-" if last["jitter_ms"] is None else f"{last['jitter_ms']:.2f} ms"
        lines.append(f"  last RR: {100 * last['fraction_lost']:.1f} % lost, {last['cumulative_lost']} in all, "
                     f"jitter {jitter}")
    if rtts:
        lines.append(f"  round trip (arrival − LSR − DLSR): median {rtts[len(rtts) // 2]:.1f} ms")
    return "\n".join(lines)


def _check_server(text: str) -> None:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"SERVER: '{text}' is not ADDR:PORT (e.g. 10.0.0.1:5260)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cellperf.apps.stream import DEFAULT_CAPS, DEFAULT_PORT, MAX_DURATION_S, MAX_SESSIONS, TRANSPORTS

    subcommands = add_subcommands(parser)
    p = add_subcommand(subcommands, "serve", serve_command)
    p.add_argument("--listen", metavar="ADDR:PORT", default=f"0.0.0.0:{DEFAULT_PORT}",
                   help="Address to serve on, TCP and UDP (port 0: any free).")
    _token_argument(p)
    p.add_argument("--max-rate", metavar="RATE", default="100M", help="Highest bitrate of a stream (k/M/G), up to 1T.")
    p.add_argument("--max-packet", metavar="BYTES", type=number_arg(lo=28, hi=65507, integer=True),
                   default=DEFAULT_CAPS["max_packet_bytes"], help="Largest RTP packet of a stream (28..65507 B).")
    p.add_argument("--max-duration", metavar="SECONDS",
                   type=number_arg(lo=0, lo_open=True, hi=MAX_DURATION_S, unit="seconds"),
                   default=DEFAULT_CAPS["max_duration_s"], help="Longest stream (at most 3600 s).")
    p.add_argument("--max-sessions", metavar="N", type=number_arg(lo=1, hi=MAX_SESSIONS, integer=True),
                   default=DEFAULT_CAPS["max_sessions"], help="Streams at once (1..1024).")
    p.add_argument("--max-per-source", metavar="N", type=number_arg(lo=1, hi=MAX_SESSIONS, integer=True),
                   default=DEFAULT_CAPS["max_per_source"],
                   help="Streams at once from one source (an IPv4 address, an IPv6 /64).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the address as one JSON line when listening.")

    p = add_subcommand(subcommands, "play", play_command)
    p.add_argument("server", metavar="SERVER", help="ADDR:PORT of `cellperf stream serve` (an IP address).")
    _token_argument(p)
    p.add_argument("--transport", choices=TRANSPORTS, default="udp", help="RTP over UDP, or over TCP (RFC 4571).")
    p.add_argument("--rate", metavar="RATE", default="384k", help="Media bitrate (e.g. 384k, 2M).")
    p.add_argument("--packet", metavar="BYTES", type=number_arg(lo=28, hi=65507, integer=True), default=1200,
                   help="RTP packet size (28..65507 B).")
    p.add_argument("--duration", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=3600, unit="seconds"),
                   default=10.0, help="Length of the stream.")
    p.add_argument("--buffer", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=600, unit="seconds"),
                   default=2.0, help="Playout buffer: media held before playback starts and after a stall.")
    p.add_argument("--fast-start", metavar="SECONDS", type=number_arg(lo=0, hi=3600, unit="seconds"), default=0.0,
                   help="Media the server sends first at five times the rate, staying that far ahead after "
                        "(a fast-start streaming server; 0: none).")
    p.add_argument("--probe-packets", metavar="N", type=number_arg(lo=0, hi=100, integer=True), default=0,
                   help="RTP packets the server sends back to back before the media on an SSRC of their own "
                        "(a bandwidth probe; 004 saw 3).")
    p.add_argument("--timeout", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=60, unit="seconds"),
                   default=2.0, help="UDP: how long after the last packet was due late ones are still taken.")
    p.add_argument("--log", metavar="FILE", type=file_path(Path), help="Per-packet log (.parquet or .csv).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


    p = add_subcommand(subcommands, "rtp", rtp_command)
    p.add_argument("capture", metavar="CAPTURE", type=file_path(Path), help="A pcap or pcapng file.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def _token_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token-file", metavar="FILE", type=file_path(Path), help="Shared token (else $CELLPERF_TOKEN).")


def run(args: argparse.Namespace) -> None:
    args.subcommand(args)
    sys.stdout.flush()
