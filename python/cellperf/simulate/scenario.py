"""A simulation scenario from command-line options and/or a TOML file, written as the JSON
`cellperf._native.simulate` reads (docs/simulate.md). The defaults are seed 001's topology and
the documented choices where 001 is silent (docs/simulate.md, "Choices")."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass

from cellperf.toml_locator import TomlLocator
from cellperf.emulate.spec import EVDO_SLOT_S, DirectionConfig, parse_link, parse_queue
from cellperf.emulate.units import parse_duration, parse_rate
from cellperf.errors import UserError, os_reason
from cellperf.validate import number

SCHEDULERS = ("pf", "rr", "none")
VARIANTS = ("reno", "newreno", "cubic", "vegas", "westwood")
RTO_ESTIMATORS = ("rfc6298", "classic", "linux")
RTO_TIMERS = ("ack", "segment")
TIMEOUT_RECOVERIES = ("go-back-n", "one-segment")
RECOVERIES = ("classic", "linux")
SCHEDULINGS = ("backlog", "channel")

#: Seed 001 §3 Table 1, and the choices where it is silent (docs/simulate.md gives reasons).
DEFAULTS = {
    "users": 3,
    "scheduler": "pf",
    "alpha": 1 / 1000,
    "slot": EVDO_SLOT_S,
    "scheduling": "backlog",
    "channel": ["ge:good=1mbit,bad=100kbit,switch=1"],
    "uplink": "100mbit",
    "queue": "packets=10",
    "profile": None,
    "wired_hops": 2,
    "wired_rate": "100mbit",
    "wired_delay": "10ms",
    "tcp": "reno",
    "packet": "2000bit",
    "initial_ssthresh": 16,
    "initial_window": 1,
    "rwnd": None,
    "delayed_ack": "off",
    "min_rto": "1s",
    "initial_rto": "1s",
    "rto": "rfc6298",
    "rto_timer": "ack",
    "timeout_recovery": "go-back-n",
    "recovery": "classic",
    "byte_counting": "off",
    "duration": 1000.0,
    "seed": 1,
    "repetitions": 1,
}

#: Most repetitions one command may ask for (each is a full run).
MAX_REPETITIONS = 10_000


def parse_packet(text, what: str) -> int:
    """Bytes of a data packet: `2000bit`, `250B`, `250` (bytes)."""
    t = str(text).strip().lower()
    try:
        if t.endswith("bit"):
            bits = float(t[:-3])
            if bits % 8:
                raise UserError(f"{what}: {text!r} is not a whole number of bytes")
            value = bits / 8
        else:
            value = float(t[:-1] if t.endswith("b") else t)
    except ValueError:
        raise UserError(f"{what}: {text!r} is not a packet size (examples: 2000bit, 250B, 1500)") from None
    if not (16 <= value <= 65535) or not value.is_integer():
        raise UserError(f"{what}: {text!r} must be a whole number of bytes from 16 to 65535")
    return int(value)


def _count(value, what: str, lo: int, hi: int) -> int:
    try:
        return int(number(value, lo=lo, hi=hi, integer=True))
    except ValueError as e:
        raise UserError(f"{what}: {e}") from None


def _real(value, what: str, lo: float, hi: float, lo_open: bool = False) -> float:
    try:
        return float(number(value, lo=lo, hi=hi, lo_open=lo_open))
    except ValueError as e:
        raise UserError(f"{what}: {e}") from None


def _seconds(value, what: str, least: float = 0.0) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = f"{value}s"
    return parse_duration(str(value), what, least=least)


def _switch(value, what: str) -> bool:
    """`on`/`off` (or a TOML boolean)."""
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("on", "off"):
        return str(value).lower() == "on"
    raise UserError(f"{what}: {value!r} is not on or off")


def read_toml(path: str) -> dict:
    """The scenario file's keys (the long options' names with `_`); an unknown key or a
    value of the wrong kind is `FILE:LINE: ...`."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise UserError(f"{path}: cannot read the scenario ({os_reason(e)})") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: not a TOML scenario ({e})") from None
    if not data:
        raise UserError(f"{path}: the scenario is empty (keys: {', '.join(DEFAULTS)})")
    where = TomlLocator(text)

    def fail(key: str, problem: str):
        raise UserError(f"{path}:{where.line((key,))}: {key}: {problem}")

    data = check_keys(data, fail)
    data["_where"] = (path, where)
    return data


def check_keys(data: dict, fail, also: tuple = ()) -> dict:
    """A scenario's keys (a file's, or a campaign test's of `type = "simulate"`, which also
    takes the keys `also`): an unknown key or a table where a value belongs is
    `fail(key, problem)`; a single `channel` becomes a list."""
    for key, value in data.items():
        if key not in DEFAULTS:
            fail(key, f"unknown key (keys: {', '.join((*also, *DEFAULTS))})")
        if isinstance(value, dict):
            fail(key, "expected a value, not a table")
    if isinstance(data.get("channel"), str):
        data = {**data, "channel": [data["channel"]]}
    return data


def _variants(given, users: int, what: str) -> list[str]:
    """The TCP variant of every user: one for all (a name) or one per user (a list, or the
    option given once per user)."""
    names = [str(v).lower() for v in (given if isinstance(given, list) else [given])]
    for v in names:
        if v not in VARIANTS:
            raise UserError(f"{what}: unknown TCP variant {v!r} ({', '.join(VARIANTS)})")
    if len(names) == 1:
        return names
    if len(names) != users:
        raise UserError(f"{what}: given {len(names)} times for {users} users (once, or once per user)")
    return names


@dataclass
class Scenario:
    """What `cellperf simulate` runs: the options after defaults, and the JSON of one run."""

    options: dict
    base: dict

    def run_json(self, seed: int, record: bool) -> str:
        return json.dumps({**self.base, "seed": seed, "record": record})


def build(options: dict, label=None) -> Scenario:
    """`options`: the merged TOML keys and command-line values (missing keys take DEFAULTS).
    `label(key)` names a key in an error (a campaign's `FILE:LINE: tests[2].key`); by default
    the TOML line when the value came from the file, else the option."""
    o = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    path, where = options.get("_where") or (None, None)

    def name(key: str) -> str:
        if label is not None:
            return label(key)
        if path and key in options.get("_from_file", ()):
            return f"{path}:{where.line((key,))}: {key}"
        return "--" + key.replace("_", "-")

    users = _count(o["users"], name("users"), 1, 4096)
    scheduler = str(o["scheduler"]).lower()
    if scheduler not in SCHEDULERS:
        raise UserError(f"{name('scheduler')}: unknown scheduler {o['scheduler']!r} (pf, rr, none)")
    variants = _variants(o["tcp"], users, name("tcp"))
    choices = {}
    for key, accepted in (("rto", RTO_ESTIMATORS), ("rto_timer", RTO_TIMERS), ("timeout_recovery", TIMEOUT_RECOVERIES),
                          ("recovery", RECOVERIES)):
        choices[key] = str(o[key]).lower()
        if choices[key] not in accepted:
            raise UserError(f"{name(key)}: {o[key]!r} is not one of {', '.join(accepted)}")
    seed = _count(o["seed"], name("seed"), 0, 2**63 - 1)
    repetitions = _count(o["repetitions"], name("repetitions"), 1, MAX_REPETITIONS)
    duration = _seconds(o["duration"], name("duration"))
    if duration <= 0:
        raise UserError(f"{name('duration')}: the duration must be positive")

    if o["profile"]:
        from cellperf.emulate.profiles import profile

        try:
            cfg = profile(str(o["profile"]))
        except UserError as e:  # "--profile: unknown profile ..."
            raise UserError(f"{name('profile')}: {str(e).split(': ', 1)[1]}") from None
        downlinks = [cfg.downlink] * users
        uplink = cfg.uplink
        radio_states = cfg.radio_states
    else:
        channels = o["channel"]
        if len(channels) not in (1, users):
            raise UserError(f"{name('channel')}: given {len(channels)} times for {users} users (once, or once per user)")
        queue = parse_queue(str(o["queue"]), name("queue"))
        downlinks = [DirectionConfig(rate=parse_link(str(c), name("channel")), queue=queue) for c in channels]
        downlinks = downlinks * users if len(downlinks) == 1 else downlinks
        uplink = DirectionConfig(rate=parse_link(str(o["uplink"]), name("uplink")))
        radio_states = None
    packet = parse_packet(o["packet"], name("packet"))
    tcp = {
        "variant": variants[0],
        "packet_bytes": packet,
        "initial_window": _real(o["initial_window"], name("initial_window"), 1, 1e6),
        "initial_ssthresh": None if str(o["initial_ssthresh"]).lower() in ("off", "none", "inf")
        else _real(o["initial_ssthresh"], name("initial_ssthresh"), 2, 1e9),
        "min_rto_s": _seconds(o["min_rto"], name("min_rto"), least=1e-6),
        "initial_rto_s": _seconds(o["initial_rto"], name("initial_rto"), least=1e-6),
        "byte_counting": _switch(o["byte_counting"], name("byte_counting")),
        **choices,
    }
    if o["rwnd"] is not None:
        tcp["receive_window"] = _count(o["rwnd"], name("rwnd"), 1, 2**30)
    if str(o["delayed_ack"]).lower() != "off":
        tcp["delayed_ack_s"] = _seconds(o["delayed_ack"], name("delayed_ack"), least=1e-6)
    base = {
        "users": [{"downlink": d.to_json(), "uplink": uplink.to_json(),
                   **({"tcp_variant": variants[i]} if len(variants) > 1 else {})} for i, d in enumerate(downlinks)],
        "wired": {
            "hops": _count(o["wired_hops"], name("wired_hops"), 0, 64),
            "rate_bps": parse_rate(str(o["wired_rate"]), name("wired_rate")),
            "delay_s": _seconds(o["wired_delay"], name("wired_delay")),
        },
        "tcp": tcp,
        "duration_s": duration,
        **({"radio_states": radio_states} if radio_states else {}),
    }
    scheduling = str(o["scheduling"]).lower()
    if scheduling not in SCHEDULINGS:
        raise UserError(f"{name('scheduling')}: {o['scheduling']!r} is not one of {', '.join(SCHEDULINGS)}")
    if scheduler != "none":
        base["cell"] = {
            "scheduling": scheduling,
            "scheduler": scheduler,
            "alpha": _real(o["alpha"], name("alpha"), 0, 1, lo_open=True),
            "slot_s": _seconds(o["slot"], name("slot"), least=1e-4),
        }
    o.update(users=users, scheduler=scheduler, tcp=",".join(variants), seed=seed, repetitions=repetitions, duration=duration)
    o.pop("_where", None)
    o.pop("_from_file", None)
    return Scenario(options=o, base=base)
