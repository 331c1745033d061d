"""One check per kind of value, shared by the command line (argparse types), campaign files
(`cellperf run --check`) and the Python front of the agents, so that a value is refused the same
way wherever it is typed. Messages say what was expected and echo the value, as ruff does:
`argument --window: expected a finite number of seconds > 0, got 'inf'`."""

from __future__ import annotations

import argparse
import math


def number(value, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           integer: bool = False, unit: str = "") -> float | int:
    """`value` (a number or its text) as a finite number within [lo, hi] (or (lo, hi] with
    `lo_open`), an int when `integer`; ValueError with the expectation and the value."""
    what = ("a whole number" if integer else "a finite number") + (f" of {unit}" if unit else "")
    if lo is not None and hi is not None:
        what += f" {'>' if lo_open else '≥'} {_show(lo)} and ≤ {_show(hi)}"
    elif lo is not None:
        what += f" {'>' if lo_open else '≥'} {_show(lo)}"
    elif hi is not None:
        what += f" ≤ {_show(hi)}"
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, got {value!r}")
    try:
        if integer:
            if isinstance(value, float) and value.is_integer():
                x = int(value)
            else:
                x = int(str(value).strip()) if not isinstance(value, int) else value
        else:
            x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"expected {what}, got {str(value)!r}") from None
    if (not integer and not math.isfinite(x)) or (lo is not None and (x <= lo if lo_open else x < lo)) \
            or (hi is not None and x > hi):
        raise ValueError(f"expected {what}, got {str(value)!r}")
    return x


def _show(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def number_arg(**bounds):
    """An argparse `type=` for `number(..., **bounds)`: argparse names the option."""

    def check(text: str):
        try:
            return number(text, **bounds)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return check


def plain_text(value: str) -> str:
    """Text without control characters (a newline in a name would end up in a folder name or
    split a one-line message)."""
    bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ValueError(f"contains the control character {bad!r}")
    return value


def looks_binary(data: bytes) -> bool:
    """A NUL byte, or bytes that are not UTF-8, in the first block of a file meant to be text."""
    head = data[:8192]
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 4  # a character cut by the block's end is fine
    return False
