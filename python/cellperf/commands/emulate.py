"""`cellperf emulate`: run a command (or a shell) behind an emulated cellular link."""

from __future__ import annotations

import json
import os

import click

from cellperf.emulate.profiles import PROFILE_NAMES, profile
from cellperf.emulate.runner import run_emulation
from cellperf.emulate.spec import (
    DirectionConfig,
    EmulationConfig,
    parse_link,
    parse_loss,
    parse_outage,
    parse_queue,
    parse_random_outages,
    read_handoffs,
)
from cellperf.emulate.units import parse_duration
from cellperf.errors import UserError


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("--profile", "profile_name", metavar="NAME", help=f"Built-in link: {', '.join(PROFILE_NAMES)}.")
@click.option("--downlink", metavar="SPEC", multiple=True, help="Once per user for a shared cell with different channels. Downlink rate: 10mbit, a mahimahi trace file, slots:FILE,slot=1.667ms[,states=drc], markov:MODEL.json, ge:good=1mbit,bad=100kbit,switch=1.")
@click.option("--uplink", metavar="SPEC", help="Uplink rate (same forms as --downlink).")
@click.option("--delay", metavar="MS", help="One-way delay added in each direction (ms unless a unit is given).")
@click.option("--jitter", metavar="MS", help="Standard deviation of normal jitter on the delay; packets are never reordered.")
@click.option("--loss", metavar="P", help="Loss per direction: 0.01, 1%, or ge:p=0.01,r=0.3[,good=0,bad=1] (Gilbert-Elliott).")
@click.option("--queue", metavar="SPEC", help="Bottleneck queue per direction: packets=N, bytes=N (e.g. 1126KB), codel[,target=5ms,interval=100ms], unbounded.")
@click.option("--outage", "outages", metavar="START:DUR", multiple=True, help="Scheduled connectivity gap, e.g. 10s:2s (repeatable).")
@click.option("--random-outages", metavar="every=T,duration=T", help="Random gaps (exponential interval and duration).")
@click.option("--outage-mode", type=click.Choice(["buffer", "drop"]), help="In a gap, queue packets (buffer) or lose arrivals (drop).")
@click.option("--handoffs", "handoffs_file", metavar="FILE", help="Handoff schedule CSV: time_s,bs_id,sector_id[,outage_ms].")
@click.option("--users", type=int, default=1, show_default=True, help="Users, each in its own namespace; with --scheduler they share one cell.")
@click.option("--scheduler", type=click.Choice(["pf", "rr"]), help="Shared-cell downlink scheduler: proportional fair or round robin.")
@click.option("--slot", metavar="T", help="Scheduler slot length (default 1/600 s, EV-DO).")
@click.option("--pcap-dir", type=click.Path(file_okay=False), help="Write mn.pcap and cn.pcap (both sides of the link) here.")
@click.option("--radio-log", type=click.Path(dir_okay=False), help="Write the radio log CSV here.")
@click.option("--uplink-log", type=click.Path(dir_okay=False), help="Write the uplink bottleneck's events here, in mahimahi's link-log format (mm-throughput-graph reads it).")
@click.option("--downlink-log", type=click.Path(dir_okay=False), help="Write the downlink bottleneck's events here (mahimahi format).")
@click.option("--technology", help="Technology name written to the radio log.")
@click.option("--seed", type=int, help="Seed of every random element (same seed, same link).")
@click.option("--json", "as_json", is_flag=True, help="Print the run's statistics as one JSON document on stdout.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(profile_name, downlink, uplink, delay, jitter, loss, queue, outages, random_outages, outage_mode,
            handoffs_file, users, scheduler, slot, pcap_dir, radio_log, uplink_log, downlink_log, technology, seed, as_json,
            command) -> None:
    """Run COMMAND (default: a shell) in a network namespace behind an emulated cellular link.

    Packets cross the link through TUN devices: the uplink and downlink are independent
    trace-driven bottlenecks with their own queue, loss and delay. The command finds the host
    side of the link in $CELLPERF_CN, or $CELLPERF_CN6 over IPv6 (reach a server started
    outside the emulator there).
    Needs root. Everything it creates is removed when it ends.

    \b
    Examples:
      sudo cellperf emulate --profile wibro-stationary -- ping -c 5 '$CELLPERF_CN'
      sudo cellperf emulate --profile hsdpa-mobile -- iperf3 -6 -c '$CELLPERF_CN6' -R
      sudo cellperf emulate --downlink Verizon-LTE-short.down --uplink Verizon-LTE-short.up \\
           --delay 20 --pcap-dir run1 -- sh -c 'iperf3 -c $CELLPERF_CN -R -t 10'
      sudo cellperf emulate --downlink 10mbit --uplink 2mbit --queue packets=100 --loss 1%
      sudo cellperf emulate --downlink Verizon-LTE-short.down --uplink 5mbit --downlink-log down.log \
           -- iperf3 -c '$CELLPERF_CN' -R -t 10;  mm-throughput-graph 500 down.log > down.svg
      sudo cellperf emulate --users 2 --scheduler pf --downlink ge:good=1mbit,bad=100kbit,switch=1 \\
           --uplink 1mbit -- sh -c 'iperf3 -c $CELLPERF_CN -p $((5201+CELLPERF_USER)) -R -t 20'
    """
    rates = [parse_link(d, "--downlink") for d in downlink]
    if profile_name:
        cfg = profile(profile_name)
    elif not rates or not uplink:
        raise UserError("give --profile NAME, or both --downlink and --uplink")
    else:
        cfg = EmulationConfig(downlink=DirectionConfig(rate=rates[0]), uplink=DirectionConfig(rate=parse_link(uplink, "--uplink")))
    down, up = cfg.downlink, cfg.uplink
    if rates:
        down = DirectionConfig(**{**down.__dict__, "rate": rates[0]})
    if uplink:
        up = DirectionConfig(**{**up.__dict__, "rate": parse_link(uplink, "--uplink")})
    for key, value in (
        ("delay_s", delay and parse_duration(delay, "--delay", default_unit="ms")),
        ("jitter_s", jitter and parse_duration(jitter, "--jitter", default_unit="ms")),
        ("queue", queue and parse_queue(queue)),
    ):
        if value is not None and value != "" and value is not False:
            down = DirectionConfig(**{**down.__dict__, key: value})
            up = DirectionConfig(**{**up.__dict__, key: value})
    if loss is not None:
        lost = parse_loss(loss)
        down = DirectionConfig(**{**down.__dict__, "loss": lost})
        up = DirectionConfig(**{**up.__dict__, "loss": lost})
    outage_spec = dict(cfg.outages)
    if outages:
        outage_spec["scheduled"] = [parse_outage(o) for o in outages]
    if random_outages:
        outage_spec["random"] = parse_random_outages(random_outages)
    if outage_mode:
        outage_spec["mode"] = outage_mode
    if scheduler and users < 2:
        raise UserError("--scheduler needs --users 2 or more (a shared cell)")
    changes = {"downlink": down, "uplink": up, "outages": outage_spec, "users": users, "scheduler": scheduler,
               "pcap_dir": pcap_dir, "radio_log": radio_log, "uplink_log": uplink_log, "downlink_log": downlink_log}
    if len(rates) > 1:
        changes["user_downlink_rates"] = rates
    if handoffs_file:
        changes["handoffs"] = read_handoffs(handoffs_file)
    if slot:
        changes["slot_s"] = parse_duration(slot, "--slot")
    if technology:
        changes["technology"] = technology
    if seed is not None:
        changes["seed"] = seed
    cfg = cfg.with_(**changes)

    interactive = not command
    argv = list(command) or [os.environ.get("SHELL", "/bin/sh")]
    if interactive and users > 1:
        raise UserError("an interactive shell needs --users 1; give a COMMAND to run for each user")
    result = run_emulation(cfg, argv, interactive=interactive)
    if as_json:
        click.echo(json.dumps(result.to_json()))
    else:
        d, u = result.stats.get("downlink", {}), result.stats.get("uplink", {})
        click.echo(
            f"cellperf emulate: {result.stats.get('duration_s', 0):.1f} s; downlink {d.get('packets_out', 0)} packets "
            f"({d.get('dropped_packets', 0)} dropped), uplink {u.get('packets_out', 0)} packets "
            f"({u.get('dropped_packets', 0)} dropped); command exit {result.exit_code}",
            err=True,
        )
    if result.exit_code:
        raise SystemExit(result.exit_code if result.exit_code > 0 else 128 - result.exit_code)
