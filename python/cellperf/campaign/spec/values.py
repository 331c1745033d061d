"""Checks of single values of a campaign file (docs/campaigns.md): numbers with their bounds,
rates, sizes, durations, names, lists. Each takes `(value, key)`, returns the value as the
campaign holds it and raises ValueError saying what was expected."""

from __future__ import annotations

import re

from cellperf.agents import parse_rate, parse_size
from cellperf.emulate.mobility import JOURNEYS
from cellperf.validate import number, plain_text

#: Scenario labels whose mobility is known; any other label (car, campus, KTX, subway,
#: pedestrian, vehicular, ...) is free text and says `mobile = true/false` where the code needs it.
SCENARIOS = ("stationary", "mobile")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,39}")
#: Bounds of a campaign's numbers: a day for times (and the most retries of a real network's run).
MAX_SECONDS = 86400.0
MAX_COUNT = 10**9
MAX_RETRIES = 100


def positive(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a positive number")
    return number(value, lo=0, lo_open=True, hi=MAX_SECONDS)


def count(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number ≥ 1")
    return number(value, lo=1, hi=MAX_COUNT, integer=True)


def hop_limit(value, where):
    """A `hops` test's highest TTL (`cellperf hops --max-hops`)."""
    from cellperf.agents.hops import MAX_HOPS

    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number of hops in 1..{MAX_HOPS}")
    return number(value, lo=1, hi=MAX_HOPS, integer=True)


def probe_packets(value, where):
    """A stream's bandwidth probe before the media (`cellperf stream play --probe-packets`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of packets in 1..100")
    return number(value, lo=1, hi=100, integer=True)


def payload(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of bytes")
    # The probe's 20-byte header up to the largest UDP payload over IPv4 (what the agents accept).
    return number(value, lo=20, hi=65507, integer=True, unit="bytes")


def packet(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of bytes")
    # RTP header, sequence number and send time up to the largest UDP payload.
    return number(value, lo=28, hi=65507, integer=True, unit="bytes")


def port(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a port number")
    return number(value, lo=1, hi=65535, integer=True)


def seed(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return number(value, lo=0, hi=2**32 - 1, integer=True)


def rate(value, where):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return positive(value, where)
    return parse_rate(str(value), where)


def size(value, where):
    if isinstance(value, int) and not isinstance(value, bool):
        return count(value, where)
    return parse_size(str(value), where)


def size_list(value, where):
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list, e.g. [\"16K\", \"64K\"]")
    return [size(v, where) for v in value]


def count_list(value, where):
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list of whole numbers, e.g. [10, 100]")
    return [count(v, where) for v in value]


def choice(*allowed):
    def check(value, where):
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return check


def text(value, where):
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return plain_text(value)


def parse_duration(value, where) -> float:
    """Seconds: a number, or a string with unit s/ms/min (`"30s"`, `"2min"`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(positive(value, where))
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m)?\s*", str(value))
    if not m:
        raise ValueError("is not a duration (e.g. 30, \"30s\", \"2min\")")
    scale = {"ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0, "m": 60.0}[m.group(2)]
    return positive(float(m.group(1)) * scale, where)


def idle_time(value, where) -> float:
    """Seconds of silence before a page load (`parse_duration`'s forms), 0 allowed: the load
    right after the one before it."""
    if value in (0, "0", "0s", "0ms") and not isinstance(value, bool):
        return 0.0
    return parse_duration(value, where)


def connections(value, where):
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 32 for v in values):
        raise ValueError("must be a whole number 1..32 or a list of them, e.g. [2, 4, 6, 8, 10]")
    return values


def page_names(value, where):
    if not isinstance(value, list) or not value or any(not isinstance(v, str) or not _NAME.fullmatch(v) for v in value):
        raise ValueError("must be a list of page names (sub-folders of the site), e.g. [\"yahoo\", \"cnn\"]")
    return value


def urls(value, where):
    if not isinstance(value, list) or not value or any(
            not isinstance(v, str) or not v.startswith(("http://", "https://")) for v in value):
        raise ValueError("must be a list of http:// or https:// URLs")
    return [plain_text(v) for v in value]


def boolean(value, where):
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def segments(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of segments")
    # `ip route` takes any u32; Linux caps a route's initcwnd at the window clamp, and more
    # than 1000 segments is no initial window but a typo.
    return number(value, lo=1, hi=1000, integer=True, unit="segments")


def retries(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number 0..{MAX_RETRIES} (0: no retry)")
    return number(value, lo=0, hi=MAX_RETRIES, integer=True)


def identifier(value, where):
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError("must be 1–40 letters, digits, '_', '+' or '-', starting with a letter or digit")
    return value


def free_text(value, where):
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value  # free text (a description): newlines are fine


def scenario_label(name) -> str:
    """A scenario label (a run id's SCENARIO, the store's `scenario`): stationary, mobile or
    any other (car, campus, KTX, subway, ...), checked as `cellperf run` and `cellperf import`
    check it; ValueError otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{name!r}: a scenario label is 1–40 letters, digits, '_', '+' or '-'")
    return name


def scenarios(value, where) -> list[tuple[str, bool | None, str | None]]:
    """Labels (stationary and mobile say their mobility; car, campus, KTX, ... are free) or
    tables `{ name = "KTX", mobile = true }`, `{ name = "KTX", speed = "train" }` (a speed of
    the 3G profiles, seed 000 §3.1: mobile): [(label, mobile or None, speed or None)]."""
    usage = ("must be a list of scenario labels or { name = \"KTX\", mobile = true } tables, "
             "e.g. [\"stationary\", { name = \"car\", mobile = true }, { name = \"KTX\", speed = \"train\" }]")
    if not isinstance(value, list) or not value:
        raise ValueError(usage)
    out = []
    for v in value:
        speed = None
        if isinstance(v, str):
            name, mobile = v, {"stationary": False, "mobile": True}.get(v)
        elif isinstance(v, dict) and set(v) <= {"name", "mobile", "speed"} and "name" in v:
            name, mobile, speed = v["name"], v.get("mobile"), v.get("speed")
            if mobile is not None and not isinstance(mobile, bool):
                raise ValueError(f"{name!r}: mobile must be true or false")
            if speed is not None and speed not in JOURNEYS:
                raise ValueError(f"{name!r}: speed must be one of {', '.join(JOURNEYS)}")
            if speed is not None and (mobile is False or name == "stationary"):
                raise ValueError(f"{name!r}: a speed is for a mobile scenario")
            if name in SCENARIOS and mobile is not None and mobile != (name == "mobile"):
                raise ValueError(f"{name!r} is {'' if name == 'mobile' else 'not '}mobile by its name")
            if mobile is None:
                mobile = True if speed else {"stationary": False, "mobile": True}.get(name)
        else:
            raise ValueError(usage)
        scenario_label(name)
        if any(name == n for n, *_ in out):
            raise ValueError(f"scenario {name!r} is given twice")
        out.append((name, mobile, speed))
    return out
