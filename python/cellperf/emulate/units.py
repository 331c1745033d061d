"""Rates, durations and sizes as users write them (`10mbit`, `1.667ms`, `1126KB`)."""

from __future__ import annotations

import re

from cellperf.errors import UserError

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "": 1.0, "bit": 1.0, "bps": 1.0, "b/s": 1.0,
    "k": 1e3, "kbit": 1e3, "kbps": 1e3, "kb/s": 1e3,
    "m": 1e6, "mbit": 1e6, "mbps": 1e6, "mb/s": 1e6,
    "g": 1e9, "gbit": 1e9, "gbps": 1e9, "gb/s": 1e9,
}
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "k": 1000, "mb": 1_000_000, "m": 1_000_000, "kib": 1024, "mib": 1 << 20}

# Bounds past which a value is a typo, not a link: they keep 1e308 out of the Rust side, where
# it would overflow a counter or make a link that never delivers.
MAX_RATE = 1e12          # 1 Tbit/s
MAX_SECONDS = 86_400.0   # a day: a delay, a gap or a slot
MAX_SIZE = 1 << 40       # 1 TiB of queue


def parse_rate(text: str, what: str) -> float:
    """Bits per second from `384kbit`, `10mbit`, `2.5Mbps`, `1e6`."""
    m = re.fullmatch(_NUMBER + r"\s*([a-zA-Z/]*)", text.strip())
    unit = m.group(2).lower() if m else None
    if not m or unit not in _RATE_UNITS:
        raise UserError(f"{what}: {text!r} is not a rate (examples: 384kbit, 10mbit, 2.5e6)")
    value = float(m.group(1)) * _RATE_UNITS[unit]
    if not 0 < value <= MAX_RATE:
        raise UserError(f"{what}: the rate must be positive and at most 1Tbit, got {text!r}")
    return value


def parse_duration(text: str, what: str, default_unit: str = "s", least: float = 0.0) -> float:
    """Seconds from `1.667ms`, `30s`, `250us`; a bare number is in `default_unit`. At least
    `least` seconds (a slot of 0 s would never end) and at most a day."""
    m = re.fullmatch(_NUMBER + r"\s*([a-z]*)", text.strip().lower())
    unit = (m.group(2) or default_unit) if m else None
    if not m or unit not in _TIME_UNITS:
        raise UserError(f"{what}: {text!r} is not a duration (examples: 20ms, 1.5s, 250us)")
    value = float(m.group(1)) * _TIME_UNITS[unit]
    if not least <= value <= MAX_SECONDS:
        raise UserError(f"{what}: {text!r} is not between {least * 1e3:g} ms and 86,400 s")
    return value


def parse_size(text: str, what: str) -> int:
    """Bytes from `1126KB`, `64kB`, `150000` (KB = 1000 bytes, KiB = 1024)."""
    m = re.fullmatch(_NUMBER + r"\s*([a-zA-Z]*)", text.strip())
    unit = m.group(2).lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise UserError(f"{what}: {text!r} is not a size in bytes (examples: 150000, 64KB, 1126KB)")
    value = float(m.group(1)) * _SIZE_UNITS[unit]
    if not 0 < value <= MAX_SIZE:
        raise UserError(f"{what}: the size must be positive and at most 1TiB, got {text!r}")
    value = int(round(value))
    if value == 0:
        raise UserError(f"{what}: the size must be positive, got {text!r}")
    return value


def parse_probability(text: str, what: str) -> float:
    try:
        p = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UserError(f"{what}: {text!r} is not a probability (examples: 0.01, 1%)") from None
    if not 0.0 <= p <= 1.0:
        raise UserError(f"{what}: {text!r} is not between 0 and 1")
    return p


def key_values(text: str, what: str) -> dict[str, str]:
    """`a=1,b=2` → {'a': '1', 'b': '2'}."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key or not value:
            raise UserError(f"{what}: {part!r} is not KEY=VALUE")
        out[key.strip().lower()] = value.strip()
    return out
