"""Run a command or a shell behind an emulated cellular link.

Run COMMAND (default: a shell) in a network namespace behind an emulated cellular link. Packets
cross the link through TUN devices: the uplink and downlink are independent trace-driven
bottlenecks with their own queue, loss and delay. The command finds the host side of the link
in $CELLPERF_CN, or $CELLPERF_CN6 over IPv6 (reach a server started outside the emulator
there). Needs root. Everything it creates is removed when it ends.

Examples:
  sudo cellperf emulate --profile wibro-stationary -- ping -c 3 '$CELLPERF_CN'
  sudo cellperf emulate --profile hsdpa-mobile \\
       -- iperf3 -6 -c '$CELLPERF_CN6' -R -t 3
  sudo cellperf emulate --downlink evdo.down --uplink 1mbit \\
       --delay 20 --pcap-dir run1 -- sh -c 'iperf3 -c $CELLPERF_CN -R -t 3'
  sudo cellperf emulate --downlink 10mbit --uplink 2mbit --queue packets=100 \\
       --loss 1%
  sudo cellperf emulate --downlink evdo.down --uplink 5mbit \\
       --downlink-log down.log \\
       -- iperf3 -c '$CELLPERF_CN' -R -t 10; \\
       mm-throughput-graph 500 down.log > down.svg
  sudo cellperf emulate --replay home-lte/ --pcap-dir run1 \\
       -- ping -c 3 '$CELLPERF_CN'
  sudo cellperf emulate --replay home-lte/ --replay-mode heavy \\
       -- iperf3 -c '$CELLPERF_CN' -R -t 3
  sudo cellperf emulate --users 2 --scheduler pf \\
       --downlink ge:good=1mbit,bad=100kbit,switch=1 \\
       --uplink 1mbit \\
       -- sh -c 'iperf3 -c $CELLPERF_CN -p $((5201+CELLPERF_USER)) -R -t 3'
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from cellperf.cli import file_path, folder_path
from cellperf.emulate.profiles import PROFILE_NAMES
from cellperf.errors import UserError
from cellperf.validate import number_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", dest="profile_name", metavar="NAME",
                        help=f"Built-in link: {', '.join(PROFILE_NAMES)}; the 3G families also at a speed: "
                        "-walk, -subway, -car, -train (evdo-train; docs/emulator.md).")
    parser.add_argument("--downlink", metavar="SPEC", action="append", default=[],
                        help="Once per user for a shared cell with different channels. Downlink rate: 10mbit, a mahimahi "
                        "trace file, slots:FILE,slot=1.667ms[,states=drc], markov:MODEL.json, ge:good=1mbit,bad=100kbit,switch=1.")
    parser.add_argument("--uplink", metavar="SPEC", help="Uplink rate (same forms as --downlink).")
    parser.add_argument("--replay", metavar="BUNDLE", type=folder_path(),
                        help="Replay a recorded link in both directions: a `cellperf record` bundle or a CellReplay trace folder "
                        "(docs/emulator.md). Replaces --profile, --downlink, --uplink, --delay, --jitter, --delay-wander, --loss, "
                        "ARQ, frames and outages; the replay loops if it outlasts the recording. Its heavy series are read as "
                        "the replay reaches them: a bad line deep in one ends the run there (`cellperf record --check BUNDLE` "
                        "reads the whole bundle).")
    parser.add_argument("--replay-mode", choices=["full", "heavy"],
                        help="full (default): the recorded base delay series, light delivery opportunities for light demand and "
                        "the saturator's for heavy demand, the size offset, losses and outages. heavy: the mahimahi way, the "
                        "saturator's opportunities with the smallest recorded base delay.")
    parser.add_argument("--delay", metavar="MS", help="One-way delay added in each direction (ms unless a unit is given).")
    parser.add_argument("--jitter", metavar="MS", help="Standard deviation of normal jitter on the delay; packets are never reordered.")
    parser.add_argument("--delay-wander", metavar="SPEC", help="Slow variation of the base delay, both directions: "
                        "sd=T[,tau=T] (standard deviation, ms unless a unit is given; correlation time, default 10s), or off.")
    parser.add_argument("--loss", metavar="P", help="Loss per direction: 0.01, 1%%, or ge:p=0.01,r=0.3[,good=0,bad=1] (Gilbert-Elliott).")
    parser.add_argument("--queue", metavar="SPEC", help="Bottleneck queue per direction: packets=N, bytes=N (e.g. 1126KB), "
                        "codel[,target=5ms,interval=100ms], unbounded.")
    parser.add_argument("--downlink-arq", metavar="SPEC",
                        help="Link-layer retransmission on the downlink: bler=P,harq=N,harq-rtt=T[,harq-bler=P],"
                        "arq=N,arq-delay=T[,block=T] (ms unless a unit is given; block: the packets of each period "
                        "share one transport block's HARQ chain), or off. In-order delivery.")
    parser.add_argument("--uplink-arq", metavar="SPEC", help="The same for the uplink.")
    parser.add_argument("--uplink-frames", metavar="SPEC",
                        help="Uplink sent only in granted frames: frame=T[,grant=T][,bytes=N], or off.")
    parser.add_argument("--radio-states", metavar="SPEC",
                        help="The radio state machine (promotion after idle, tails, DRX; docs/emulator.md): off, or changes "
                        "to the profile's as KEY=VALUE pairs, e.g. tail=2s,promotion=300ms (keys: promotion, tail, paging, "
                        "low=fach|inactive|none, low-tail, low-promotion, fach-rate, fach-up, fach-down, drx-inactivity, "
                        "drx-on, drx-short, drx-short-cycles, drx-long; ms unless a unit is given).")
    parser.add_argument("--outage", dest="outages", metavar="START:DUR", action="append", default=[],
                        help="Scheduled connectivity gap, e.g. 10s:2s (repeatable).")
    parser.add_argument("--random-outages", metavar="every=T,duration=T", help="Random gaps (exponential interval and duration).")
    parser.add_argument("--outage-mode", choices=["buffer", "drop"], help="In a gap (scheduled, random or a replay's recorded one), queue packets (buffer) or lose arrivals (drop).")
    parser.add_argument("--handoffs", dest="handoffs_file", metavar="FILE", help="Handoff schedule CSV: time_s,bs_id,sector_id[,outage_ms].")
    parser.add_argument("--users", metavar="N", type=number_arg(lo=1, hi=63, integer=True), default=1, help="Users, each in its own namespace; with --scheduler they share one cell.")
    parser.add_argument("--scheduler", choices=["pf", "rr"], help="Shared-cell downlink scheduler: proportional fair or round robin.")
    parser.add_argument("--slot", metavar="T", help="Scheduler slot length (default 1/600 s, EV-DO).")
    parser.add_argument("--pcap-dir", metavar="DIR", type=folder_path(), help="Write mn.pcap and cn.pcap (both sides of the link) here.")
    parser.add_argument("--radio-log", metavar="FILE", type=file_path(), help="Write the radio log CSV here.")
    parser.add_argument("--uplink-log", metavar="FILE", type=file_path(),
                        help="Write the uplink bottleneck's events here, in mahimahi's link-log format (mm-throughput-graph reads it).")
    parser.add_argument("--downlink-log", metavar="FILE", type=file_path(),
                        help="Write the downlink bottleneck's events here (mahimahi format).")
    parser.add_argument("--mtu", metavar="BYTES", type=number_arg(lo=68, hi=65535, integer=True),
                        help="The link's MTU at both ends (default 1500; below 1280 the link carries no IPv6).")
    parser.add_argument("--pmtu-discovery", choices=["on", "off"],
                        help="Path-MTU discovery in the MN's namespace (default on; off: its packets leave without DF "
                             "and are fragmented on the way where too big).")
    parser.add_argument("--technology", metavar="NAME", help="Technology name written to the radio log.")
    parser.add_argument("--seed", metavar="N", type=number_arg(lo=0, hi=2**64 - 1, integer=True), help="Seed of every random element (same seed, same link).")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the run's statistics as one JSON document on stdout.")
    parser.add_argument("command", metavar="COMMAND", nargs="*",
                        help="The command to run behind the link, after '--' (default: $SHELL, interactive).")
    parser.set_defaults(usage_error=parser.error)


#: Options that describe the link a replay brings itself (dest, option).
REPLAY_REPLACES = (("profile_name", "--profile"), ("downlink", "--downlink"), ("uplink", "--uplink"), ("delay", "--delay"),
                   ("jitter", "--jitter"), ("delay_wander", "--delay-wander"), ("loss", "--loss"),
                   ("downlink_arq", "--downlink-arq"), ("uplink_arq", "--uplink-arq"), ("uplink_frames", "--uplink-frames"),
                   ("outages", "--outage"), ("random_outages", "--random-outages"), ("handoffs_file", "--handoffs"),
                   ("scheduler", "--scheduler"), ("uplink_log", "--uplink-log"), ("downlink_log", "--downlink-log"))


def replay_conflict(args: argparse.Namespace) -> str | None:
    """Why the options cannot go with --replay (or --replay-mode without it), else None."""
    if not args.replay:
        return "--replay-mode: needs --replay BUNDLE" if args.replay_mode else None
    given = [option for dest, option in REPLAY_REPLACES if getattr(args, dest) not in (None, [], "")]
    if given:
        return f"--replay: the recording is the link; it cannot be combined with {', '.join(given)}"
    return None




def build_config(args: argparse.Namespace):
    """The EmulationConfig of the command line (also what a campaign's `[networks.link]`
    is checked and run by); UserError names the option."""
    from cellperf.emulate.profiles import profile
    from cellperf.emulate.spec import (
        DirectionConfig,
        EmulationConfig,
        parse_arq,
        parse_frames,
        parse_link,
        parse_loss,
        parse_outage,
        parse_queue,
        parse_radio_states,
        parse_random_outages,
        parse_wander,
        read_handoffs,
        replay_link,
    )
    from cellperf.emulate.units import parse_duration

    conflict = replay_conflict(args)
    if conflict:
        raise UserError(conflict)
    rates = [parse_link(d, "--downlink") for d in args.downlink]
    if args.replay:
        down, up = (DirectionConfig(rate=replay_link(args.replay, d, args.replay_mode or "full", args.outage_mode or "buffer"))
                    for d in ("downlink", "uplink"))
        cfg = EmulationConfig(downlink=down, uplink=up)
    elif args.profile_name:
        cfg = profile(args.profile_name)
    elif not rates or not args.uplink:
        raise UserError("give --profile NAME, or both --downlink and --uplink")
    else:
        cfg = EmulationConfig(downlink=DirectionConfig(rate=rates[0]), uplink=DirectionConfig(rate=parse_link(args.uplink, "--uplink")))
    down, up = cfg.downlink, cfg.uplink
    if rates:
        down = DirectionConfig(**{**down.__dict__, "rate": rates[0]})
    if args.uplink:
        up = DirectionConfig(**{**up.__dict__, "rate": parse_link(args.uplink, "--uplink")})
    for key, value in (
        ("delay_s", args.delay and parse_duration(args.delay, "--delay", default_unit="ms")),
        ("jitter_s", args.jitter and parse_duration(args.jitter, "--jitter", default_unit="ms")),
        ("queue", args.queue and parse_queue(args.queue)),
    ):
        if value is not None and value != "" and value is not False:
            down = DirectionConfig(**{**down.__dict__, key: value})
            up = DirectionConfig(**{**up.__dict__, key: value})
    if args.downlink_arq is not None:
        down = DirectionConfig(**{**down.__dict__, "arq": parse_arq(args.downlink_arq, "--downlink-arq")})
    if args.uplink_arq is not None:
        up = DirectionConfig(**{**up.__dict__, "arq": parse_arq(args.uplink_arq, "--uplink-arq")})
    if args.delay_wander is not None:
        wander = parse_wander(args.delay_wander, "--delay-wander")
        down = DirectionConfig(**{**down.__dict__, "wander": wander})
        up = DirectionConfig(**{**up.__dict__, "wander": wander})
    if args.uplink_frames is not None:
        up = DirectionConfig(**{**up.__dict__, "frames": parse_frames(args.uplink_frames, "--uplink-frames")})
    radio_states = cfg.radio_states
    if args.radio_states is not None:
        radio_states = parse_radio_states(args.radio_states, radio_states)
    if args.loss is not None:
        lost = parse_loss(args.loss)
        down = DirectionConfig(**{**down.__dict__, "loss": lost})
        up = DirectionConfig(**{**up.__dict__, "loss": lost})
    outage_spec = dict(cfg.outages)
    if args.outages:
        outage_spec["scheduled"] = [parse_outage(o) for o in args.outages]
    if args.random_outages:
        outage_spec["random"] = parse_random_outages(args.random_outages)
    if args.outage_mode:
        outage_spec["mode"] = args.outage_mode
    if args.scheduler and args.users < 2:
        raise UserError("--scheduler needs --users 2 or more (a shared cell)")
    changes = {"downlink": down, "uplink": up, "outages": outage_spec, "users": args.users, "scheduler": args.scheduler,
               "pcap_dir": args.pcap_dir, "radio_log": args.radio_log, "uplink_log": args.uplink_log,
               "downlink_log": args.downlink_log, "radio_states": radio_states}
    if len(rates) > 1:
        changes["user_downlink_rates"] = rates
    if args.handoffs_file:
        changes["handoffs"] = read_handoffs(args.handoffs_file)
    if args.slot:
        changes["slot_s"] = parse_duration(args.slot, "--slot", least=1e-4)
    if args.technology:
        changes["technology"] = args.technology
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.mtu is not None:
        changes["mtu"] = args.mtu
    if args.pmtu_discovery is not None:
        changes["pmtu_discovery"] = args.pmtu_discovery == "on"
    return cfg.with_(**changes)


def run(args: argparse.Namespace) -> None:
    from cellperf.emulate.runner import run_emulation

    conflict = replay_conflict(args)
    if conflict:
        args.usage_error(conflict)
    cfg = build_config(args)
    interactive = not args.command
    argv = args.command or [os.environ.get("SHELL", "/bin/sh")]
    if interactive and args.users > 1:
        raise UserError("an interactive shell needs --users 1; give a COMMAND to run for each user")
    result = run_emulation(cfg, argv, interactive=interactive)
    if args.as_json:
        print(json.dumps(result.to_json()))
    else:
        d, u = result.stats.get("downlink", {}), result.stats.get("uplink", {})
        print(
            f"cellperf emulate: {result.stats.get('duration_s', 0):.1f} s; downlink {d.get('packets_out', 0)} packets "
            f"({d.get('dropped_packets', 0)} dropped), uplink {u.get('packets_out', 0)} packets "
            f"({u.get('dropped_packets', 0)} dropped); command exit {result.exit_code}",
            file=sys.stderr,
        )
    if result.exit_code:
        raise SystemExit(result.exit_code if result.exit_code > 0 else 128 - result.exit_code)
