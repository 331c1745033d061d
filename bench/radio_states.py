#!/usr/bin/env python3
"""Validation of every profile family's radio states through the real emulator (issue 30 §4).

For each family (evdo, hsdpa, umts, wibro, lte, nr, nr-mmwave; the stationary profile) one
`cellperf emulate --profile P-stationary` run sends real pings from the terminal: five warm
ones 0.25 s apart, then one after 0.2, 1, 5 and 15 s of idle. Each idle ping's extra RTT over
the warm median is compared with what the profile's documented timers (docs/emulator.md "Radio
states") give for that idle time: nothing within the tail, the low state's cost after it (UMTS
FACH: the 84-byte request and reply each sent at FACH's rate; NR RRC_INACTIVE: the resume),
the promotion beyond (a ping over UMTS's FACH leaves the radio in FACH: the next idle counts
against FACH's own 12 s). Where 15 s of idle does not reach idle (UMTS/HSDPA's FACH lasts 12 s
after the 5-s tail; NR's RRC_INACTIVE 60 s), a second run shortens the low state's tail with
`--radio-states low-tail=...` so that it does, and pings after 15 s once more.
For the families with DRX (lte, nr, nr-mmwave): pings from the CN, 20 of them 50 ms apart
(connected, no DRX), then 20 of them 242 ms apart (each arrives in DRX's long cycles; 242 ms is
6 cycles + 2 ms, so 20 pings sweep the 40-ms cycle's phase): the mean extra wait against the
expected mean over a uniform phase, (cycle − on)² / (2 × cycle).

The links keep the profile's one-way delays, uplink grant loop and radio states; the rates are
set to 100 Mb/s and the ARQ and wandering delay are off (`--downlink 100mbit --uplink 100mbit
--downlink-arq off --uplink-arq off --delay-wander off --loss 0`), so that a single ping's RTT is not
moved by a HARQ round, a deep fade, a slow trace slot, the base delay's drift or UMTS's 1 % loss
(a lost ping would leave a point without a figure): what is left
is the radio states' doing. Target: every figure within 10 % of the documented one (within
10 % of the promotion where the expected extra is 0).

    sudo .venv/bin/python bench/radio_states.py [--family lte ...]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cellperf.emulate.profiles import profile

CELLPERF = str(Path(sys.executable).parent / "cellperf")
FAMILIES = ("evdo", "hsdpa", "umts", "wibro", "lte", "nr", "nr-mmwave")
IDLE_S = (0.2, 1.0, 5.0, 15.0)
#: The isolated link: the profile's delays, grant loop and radio states only (see above).
ISOLATE = ("--downlink", "100mbit", "--uplink", "100mbit", "--downlink-arq", "off", "--uplink-arq", "off",
           "--delay-wander", "off", "--loss", "0")
PING_BYTES = 84  # IPv4 + ICMP header + ping's 56 bytes of data
DRX_FAST_S, DRX_SPREAD_S, DRX_PINGS = 0.05, 0.242, 20


def expected_extra_s(radio: dict, idle_s: float, in_fach: bool) -> tuple[str, float]:
    """The state an uplink ping meets after `idle_s` without traffic at the radio gate, and the
    extra RTT the documented timers give it (the reply then finds the radio in the same state).
    `in_fach`: the previous ping went over FACH, which keeps the radio in FACH (a small packet
    does not move it up to DCH), so this idle counts against FACH's own timer."""
    tail, low, low_tail = radio["tail_s"], radio.get("low_state"), radio.get("low_tail_s", 0.0)
    if in_fach:
        tail = 0.0
    if idle_s < tail:
        return "connected", 0.0
    if low == "fach" and idle_s < tail + low_tail:
        # Request and reply each wait for FACH to send them at its rate.
        return "fach", 2 * PING_BYTES * 8 / radio["fach_rate_bps"]
    if low == "inactive" and idle_s < tail + low_tail:
        return "inactive", radio["low_promotion_s"]
    return "idle", radio["promotion_s"]


def expected_states(radio: dict, idles: tuple[float, ...], delay_s: float) -> list[str]:
    """The states the pings after `idles` meet, one after another."""
    states = ["connected"]
    for idle in idles:
        states.append(expected_extra_s(radio, idle + delay_s, states[-1] == "fach")[0])
    return states[1:]


def rtts_ms(path: Path) -> list[float]:
    return [float(t) for t in re.findall(r"time=([0-9.]+) ms", path.read_text())]


def run(family: str, idles: tuple[float, ...], radio_change: str | None, drx: bool, out: Path) -> subprocess.CompletedProcess:
    """One emulator run: warm pings, one ping after each idle, then (with DRX) the CN's pings."""
    cn_ns = f"/proc/{os.getpid()}/ns/net"
    script = [f"ping -n -c 5 -i 0.25 $CELLPERF_CN > {out}/warm.txt"]
    for i, idle in enumerate(idles):
        script.append(f"sleep {idle}; ping -n -c 1 -W 5 $CELLPERF_CN > {out}/idle{i}.txt")
    if drx:
        script.append(f"nsenter --net={cn_ns} ping -n -c {DRX_PINGS} -i {DRX_FAST_S} $CELLPERF_MN > {out}/cn_fast.txt")
        script.append(f"nsenter --net={cn_ns} ping -n -c {DRX_PINGS} -i {DRX_SPREAD_S} $CELLPERF_MN > {out}/cn_drx.txt")
    extra = ("--radio-states", radio_change) if radio_change else ()
    return subprocess.run([CELLPERF, "emulate", "--profile", f"{family}-stationary", *ISOLATE, *extra, "--", "sh", "-c",
                           "; ".join(script)], capture_output=True, text=True, timeout=180)


def verdict(measured: float, expected: float, scale: float) -> str:
    """Within 10 % of the expected figure, or of `scale` (the promotion) where it is 0."""
    ok = abs(measured - expected) <= 0.1 * (expected if expected > 0 else scale)
    return "ok" if ok else "MISSED"


def family_rows(family: str) -> list[str]:
    cfg = profile(f"{family}-stationary")
    radio = dict(cfg.radio_states)
    runs = [(IDLE_S, None, "drx_long_cycle_s" in radio)]
    if "idle" not in expected_states(radio, IDLE_S, cfg.downlink.delay_s):
        # 15 s of idle ends in the low state: shorten it so that 15 s reach idle.
        short = IDLE_S[-1] - radio["tail_s"] - 2.0
        runs.append(((IDLE_S[-1],), f"low-tail={short:g}s", False))
    rows = []
    for idles, change, drx in runs:
        params = dict(radio, low_tail_s=float(change.split("=")[1].rstrip("s"))) if change else radio
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            p = run(family, idles, change, drx, out)
            if p.returncode != 0:
                rows.append(f"{family:<10} run failed: {p.stderr.strip().splitlines()[-1:]}")
                continue
            warm = statistics.median(rtts_ms(out / "warm.txt"))
            label = f"{family}" + (f" ({change})" if change else "")
            state = "connected"
            for i, idle in enumerate(idles):
                got = rtts_ms(out / f"idle{i}.txt")
                # The radio last carried the reply one downlink delay before the terminal got it.
                state, expected = expected_extra_s(params, idle + cfg.downlink.delay_s, state == "fach")
                if not got:
                    rows.append(f"{label:<24}{idle:>6g} s  {state:<10} no reply  MISSED")
                    continue
                extra = got[0] - warm
                rows.append(f"{label:<24}{idle:>6g} s  {state:<10}{warm:>8.1f}{got[0]:>9.1f}{extra:>9.1f}"
                            f"{expected * 1e3:>9.1f}  {verdict(extra, expected * 1e3, params['promotion_s'] * 1e3)}")
            if drx:
                fast, spread = rtts_ms(out / "cn_fast.txt"), rtts_ms(out / "cn_drx.txt")
                cycle, on = radio["drx_long_cycle_s"], radio["drx_on_s"]
                expected = (cycle - on) ** 2 / (2 * cycle) * 1e3
                base = statistics.median(fast)
                extra = statistics.mean(spread) - base
                rows.append(f"{label:<24}{'DRX':>8}  {'drx':<10}{base:>8.1f}{statistics.mean(spread):>9.1f}{extra:>9.1f}"
                            f"{expected:>9.1f}  {verdict(extra, expected, 0)}  (CN pings; range of extra "
                            f"{min(spread) - base:.1f}-{max(spread) - base:.1f} ms, cycle {cycle * 1e3:g} ms)")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", action="append", choices=FAMILIES, help="only these families (repeatable)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/radio_states.py needs root (namespaces)")
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    print(f"{'family':<24}{'idle':>8}  {'expected':<10}{'warm ms':>8}{'RTT ms':>9}{'extra':>9}{'expected':>9}")
    for family in a.family or FAMILIES:
        for row in family_rows(family):
            print(row, flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
