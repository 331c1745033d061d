"""How cellperf writes quantities for people (machines get plain numbers in `--json`)."""

from __future__ import annotations


def format_rate(bps: float | None) -> str:
    """A bit rate with a unit that keeps 1–3 integer digits: `9.61 Mbit/s`; `-` when unknown."""
    if bps is None:
        return "-"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.2f} {unit}"
    return f"{bps:.0f} bit/s"
