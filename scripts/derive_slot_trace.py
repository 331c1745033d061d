"""Derives the compact per-slot rate traces the LTE profiles ship
(python/cellperf/emulate/traces/) from mahimahi delivery-opportunity traces.

A mahimahi trace line is the time (ms) of one chance to deliver a 1500-byte packet; this
counts them per 100-ms slot and writes one rate per line in kbit/s, with a comment header
naming the source. Usage: python scripts/derive_slot_trace.py TRACE OUT [--slot-ms 100]
(the shipped files: ../shared/traces/mahimahi/{Verizon-LTE-short,ATT-LTE-driving-2016}.{down,up},
from the mahimahi repository, recorded by Winstein et al., NSDI 2013)."""

from __future__ import annotations

import argparse
from pathlib import Path


def slot_rates_kbps(times_ms: list[int], slot_ms: int) -> list[int]:
    slots = [0] * (max(times_ms) // slot_ms + 1)
    for t in times_ms:
        slots[t // slot_ms] += 1
    return [round(n * 1500 * 8 / slot_ms) for n in slots]  # bits per ms = kbit/s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--slot-ms", type=int, default=100)
    a = ap.parse_args()
    times = [int(line) for line in Path(a.trace).read_text().split()]
    rates = slot_rates_kbps(times, a.slot_ms)
    header = (f"# kbit/s per {a.slot_ms}-ms slot, derived by scripts/derive_slot_trace.py from the mahimahi trace "
              f"{Path(a.trace).name} (github.com/ravinet/mahimahi traces/, Winstein et al., NSDI 2013)\n")
    Path(a.out).write_text(header + "".join(f"{r}\n" for r in rates))


if __name__ == "__main__":
    main()
