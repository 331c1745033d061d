"""Derives the compact per-slot rate traces the LTE profiles ship
(python/cellperf/emulate/traces/) from mahimahi delivery-opportunity traces.

A mahimahi trace line is the time (ms) of one chance to deliver a 1500-byte packet; this
counts them per 100-ms slot and writes one rate per line in kbit/s, with a comment header
naming the source. Usage: python scripts/derive_slot_trace.py TRACE OUT [--slot-ms 100]
[--other-direction TRACE] (the shipped files: ../shared/traces/mahimahi/{Verizon-LTE-short,
ATT-LTE-driving-2016}.{down,up}, from the mahimahi repository, recorded by Winstein et al.,
NSDI 2013; ATT-LTE-driving-2016.up with --other-direction ATT-LTE-driving-2016.down).

--other-direction: the same recording's other direction. A slot with no delivery in TRACE
while the other direction delivered is the recorder's gap, not the radio's: the saturator
(Saturatr, github.com/keithw/multisend sender/saturateservo.cc) sends one packet a second
once its window is outstanding, so a stalled window leaves ~1-s gaps while the phone's radio
is up — as its downlink, delivering in the same slot, shows. Such a slot takes the rate of the
last slot that delivered (the nearest measurement of the link before it); a slot where neither
direction delivered stays zero (the radio's outage)."""

from __future__ import annotations

import argparse
from pathlib import Path


def slot_rates_kbps(times_ms: list[int], slot_ms: int) -> list[int]:
    slots = [0] * (max(times_ms) // slot_ms + 1)
    for t in times_ms:
        slots[t // slot_ms] += 1
    return [round(n * 1500 * 8 / slot_ms) for n in slots]  # bits per ms = kbit/s


def recorder_gaps_filled(rates: list[int], other: list[int]) -> list[int]:
    """`rates` with each empty slot in which `other` delivered given the last delivered rate
    (slots past the end of `other` count as delivered there: the recording ran on)."""
    filled, last = [], 0
    for i, rate in enumerate(rates):
        if rate == 0 and (i >= len(other) or other[i] > 0):
            rate = last
        filled.append(rate)
        last = rate if rate else last
    return filled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--slot-ms", type=int, default=100)
    ap.add_argument("--other-direction", metavar="TRACE",
                    help="the same recording's other direction: fill the saturator's gaps (see above)")
    a = ap.parse_args()
    times = [int(line) for line in Path(a.trace).read_text().split()]
    rates = slot_rates_kbps(times, a.slot_ms)
    header = (f"# kbit/s per {a.slot_ms}-ms slot, derived by scripts/derive_slot_trace.py from the mahimahi trace "
              f"{Path(a.trace).name} (github.com/ravinet/mahimahi traces/, Winstein et al., NSDI 2013)\n")
    if a.other_direction:
        other = slot_rates_kbps([int(line) for line in Path(a.other_direction).read_text().split()], a.slot_ms)
        empty = sum(1 for r in rates if r == 0)
        rates = recorder_gaps_filled(rates, other)
        header += (f"# with --other-direction {Path(a.other_direction).name}: of its {empty} slots with no delivery, "
                   f"{empty - rates.count(0)} in which the other direction delivered (the saturator's gaps) hold "
                   f"the last delivered rate; {rates.count(0)} where neither delivered stay 0\n")
    Path(a.out).write_text(header + "".join(f"{r}\n" for r in rates))


if __name__ == "__main__":
    main()
