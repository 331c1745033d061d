"""Record a link for replay: light trains and a saturator, both ways.

Runs at the mobile node against `cellperf server` at the CN (no root needed) and writes a
recording bundle (docs/formats.md "Recording bundle"): the base delay and light delivery
opportunities of packet trains of each --lengths, the heavy delivery opportunities of a
saturating stream, the latency offset per packet size, loss and outages as they happened,
and optionally the radio log. `cellperf emulate --replay BUNDLE` replays it. Trains and
saturator take turns (one device cannot do both in one direction at once; docs/record.md).
Ctrl-C or a lost server keeps what was recorded, with "complete": false in the manifest.

Examples:
  cellperf record cn.example.net --token-file token --duration 5min \\
       --label network=home-lte --out home-lte
  cellperf record cn --token-file token --direction downlink --lengths 10,100 \\
       --period 200ms --out dl
  cellperf record cn --token-file token \\
       --radio-log 'mmcli:mmcli -m any --location-get -J' --out drive
  cellperf record --check home-lte
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cellperf.errors import UserError

RADIO_FORMATS = ("mmcli", "qmicli")
DEFAULT_MMCLI = "mmcli -m any --location-get -J"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("server", metavar="SERVER", nargs="?", help="The server, HOST[:PORT] (default port 5250).")
    parser.add_argument("--token-file", metavar="FILE", type=Path, help="Shared token (else $CELLPERF_TOKEN).")
    parser.add_argument("--duration", default="5min", metavar="TIME",
                        help="How long to record: seconds or 30s, 5min.")
    parser.add_argument("--direction", choices=("both", "downlink", "uplink"), default="both",
                        help="Which directions to record.")
    parser.add_argument("--lengths", default="10,100", metavar="LIST",
                        help="Packets per light train, in turn (a replay picks light opportunities by demand).")
    parser.add_argument("--period", default="200ms", metavar="TIME", help="From one train's start to the next.")
    parser.add_argument("--size", default=1400, type=int, metavar="BYTES",
                        help="UDP payload of the trains' and the saturator's packets.")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="A label for the manifest (repeatable), e.g. network=home-lte.")
    parser.add_argument("--radio-log", metavar="SPEC",
                        help="A radio log of the recording: a CSV file logged meanwhile (cut to the recording), or "
                             "mmcli[:COMMAND] / qmicli:COMMAND polled every second (as campaigns take it).")
    parser.add_argument("--clock", choices=("auto", "synced", "rtt-half"), default="auto",
                        help="One-way delays: synced (the ends share a clock; auto: the server is on this host or "
                             "behind `cellperf emulate`) or rtt-half (offset from the least round trip).")
    parser.add_argument("--max-rate", default="100M", metavar="RATE",
                        help="The server's --max-rate (bit/s, k/M/G): the saturator asks for at most this; a link faster "
                             "than it needs a server started with a higher one.")
    parser.add_argument("--out", metavar="BUNDLE", type=Path, help="The bundle folder to create.")
    parser.add_argument("--check", metavar="BUNDLE", type=Path, help="Validate a bundle instead of recording.")
    parser.set_defaults(usage_error=parser.error)


def run(args: argparse.Namespace) -> None:
    if args.check is not None:
        return check(args.check)
    if args.server is None or args.out is None:
        args.usage_error("give SERVER and --out BUNDLE, or --check BUNDLE")
    from cellperf.agents import parse_count_list, parse_rate, read_token
    from cellperf.campaign.spec.values import parse_duration as parse_minutes
    from cellperf.emulate.units import parse_duration
    from cellperf.replay.record import DIRECTIONS, Recorder, RecordOptions, write_bundle

    out = args.out
    if out.exists():
        raise UserError(f"--out {out}: already exists (a bundle is never overwritten)")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: no folder {out.parent}")
    try:
        duration = parse_minutes(args.duration, "--duration")
    except ValueError as e:
        raise UserError(f"--duration: {args.duration!r} {e}") from None
    if not 20 <= args.size <= 65_507:
        raise UserError(f"--size: {args.size} B outside 20..65507")
    labels = {}
    for item in args.label:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UserError(f"--label: {item!r} is not KEY=VALUE")
        labels[key.strip()] = value
    opts = RecordOptions(
        server=args.server, token=read_token(args.token_file), duration_s=duration,
        directions=DIRECTIONS if args.direction == "both" else (args.direction,),
        lengths=tuple(parse_count_list(args.lengths, "--lengths")), period_s=parse_duration(args.period, "--period"),
        payload=args.size, labels=labels, clock=args.clock, max_rate_bps=parse_rate(args.max_rate, "--max-rate"))
    radio = _radio(args.radio_log, out)
    recorder = Recorder(opts, say=_say)
    if radio is not None:
        radio.start()
    try:
        recorder.run()
    finally:
        radio_csv = radio.stop(recorder.recorded.t0_ns / 1e9, recorder.recorded.t0_ns / 1e9 + recorder.recorded.seconds) \
            if radio is not None else None
    if not recorder.has_data():
        if recorder.interrupted:
            raise KeyboardInterrupt
        raise UserError(recorder.error or "nothing was recorded")
    complete = not (recorder.interrupted or recorder.error)
    clock = recorder.clock()
    files = recorder.files(clock)
    missing = [d for d in recorder.opts.directions if d not in recorder.usable]
    if not recorder.usable:
        nothing = (f"after {recorder.recorded.seconds:.1f} s no direction had light trains delivered and a saturated "
                   f"stretch: nothing kept")
        if recorder.interrupted:
            print(f"cellperf record: {nothing}", file=sys.stderr)
            raise KeyboardInterrupt
        raise UserError(f"{recorder.error or 'the link delivered too little'}; {nothing}")
    if missing:
        _say(f"warning: {', '.join(missing)} left out of the bundle (no light trains delivered "
             f"or no saturated stretch yet)")
    write_bundle(out, recorder.manifest(clock, complete, "radio.csv" if radio_csv else None), files, radio_csv)
    if radio_csv is not None:
        radio_csv.unlink(missing_ok=True)
    print(_summary(out, recorder, files))
    kept = f"kept {recorder.recorded.seconds:.1f} s in {out} (complete: false)"
    if recorder.error:
        raise UserError(f"{recorder.error}; {kept}")
    if recorder.interrupted:
        print(f"cellperf record: {kept}", file=sys.stderr)
        raise KeyboardInterrupt


def _say(line: str) -> None:
    """A progress note or warning on stderr, wrapped to the terminal (continuation lines
    indented): the recorder's warnings run to two or three lines of prose. (The closing
    lines that name the bundle's folder are not wrapped: a path stays whole to copy.)"""
    import textwrap

    from cellperf.cli import terminal_width
    print("\n".join(textwrap.wrap(f"cellperf record: {line}", terminal_width(), subsequent_indent="  ",
                                  break_long_words=False, break_on_hyphens=False)), file=sys.stderr, flush=True)


def check(path: Path) -> None:
    """`--check`: the bundle reader's validation (one line and exit 1 on a problem)."""
    try:
        from cellperf.replay.bundle import check as check_bundle
    except ImportError:
        raise UserError(f"{path}: this cellperf has no bundle reader (cellperf.replay.bundle)") from None
    check_bundle(path)
    print(f"{path}: a valid recording bundle")


def _summary(out: Path, recorder, files: dict[str, list[str]]) -> str:
    seconds = max(recorder.recorded.seconds, 1e-9)
    parts = []
    for d in recorder.usable:
        heavy = len(files[f"{d}.heavy"]) * 1500 * 8 / seconds / 1e6
        parts.append(f"{d}: {len(files[f'{d}.light'])} trains, heavy {heavy:.2f} Mb/s")
    return f"recorded {seconds:.1f} s into {out}: " + "; ".join(parts)


class _Radio:
    """The radio log of a recording: a CSV cut to its time, or a modem command polled."""

    def __init__(self, spec: str, out: Path):
        from cellperf.campaign import radio

        self.radio, self.csv, self.poller = radio, None, None
        self.path = out.with_name(f".{out.name}.radio.csv")
        fmt, colon, command = spec.partition(":")
        if fmt in RADIO_FORMATS:
            if fmt == "qmicli" and not command.strip():
                raise UserError("--radio-log qmicli:COMMAND: give the command (e.g. qmicli -d /dev/cdc-wdm0 "
                                "--nas-get-serving-system)")
            self.poller = radio.CommandPoller(command.strip() or DEFAULT_MMCLI, fmt, 1.0, self.path)
        else:
            from cellperf.handoffs import read_radio_log

            self.csv = Path(spec)
            if not self.csv.is_file():
                raise UserError(f"--radio-log {spec}: no such file (or give mmcli[:COMMAND] / qmicli:COMMAND)")
            read_radio_log(self.csv)

    def start(self) -> None:
        if self.poller is not None:
            self.poller.start()

    def stop(self, start_s: float, end_s: float) -> Path:
        if self.poller is not None:
            warning = self.poller.stop()
            if warning:
                _say(f"warning: {warning}")
        else:
            self.radio.cut_csv(self.csv, start_s, end_s, self.path)
        return self.path


def _radio(spec: str | None, out: Path) -> _Radio | None:
    return None if spec is None else _Radio(spec, out)
