"""The emulator's configuration: parsed from the command line and profiles, written as the
JSON specification `cellperf._native.LinkEmulator` reads (documented in docs/emulator.md)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from cellperf import _native
from cellperf.emulate.units import (
    key_values,
    parse_duration,
    parse_probability,
    parse_rate,
    parse_size,
)
from cellperf.errors import UserError
from cellperf.textlines import lines

# EV-DO slot: 1/600 s (002 §2).
EVDO_SLOT_S = 1.0 / 600.0


def drc_rates_bps() -> list[float]:
    """The EV-DO DRC rate table, from cellperf-channel (one table in the project)."""
    rates, _slot = _native.channel.drc_rate_table()
    return list(rates)


@dataclass
class DirectionConfig:
    """One direction of the link: rate source, queue, loss, link-layer ARQ, uplink frames,
    delay (in that order on the packets' way; docs/emulator.md)."""

    rate: dict
    queue: dict = field(default_factory=lambda: {"kind": "unbounded"})
    loss: dict | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    arq: dict | None = None
    frames: dict | None = None
    #: The base delay's slow wander: {"wander_s": SD, "wander_tau_s": T}, or None for a fixed base.
    wander: dict | None = None

    def to_json(self) -> dict:
        out = {"rate": self.rate, "queue": self.queue, "delay_s": self.delay_s, "jitter_s": self.jitter_s,
               **(self.wander or {})}
        for key in ("loss", "arq", "frames"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass
class EmulationConfig:
    downlink: DirectionConfig
    uplink: DirectionConfig
    users: int = 1
    scheduler: str | None = None
    alpha: float = 1.0 / 1000.0
    slot_s: float = EVDO_SLOT_S
    outages: dict = field(default_factory=dict)
    handoffs: dict | None = None
    technology: str = "emulated"
    seed: int = 1
    pcap_dir: str | None = None
    radio_log: str | None = None
    radio_log_interval_s: float = 0.1
    # mahimahi-format event logs of each direction's bottleneck (docs/emulator.md).
    uplink_log: str | None = None
    downlink_log: str | None = None
    # One downlink rate source per user (a shared cell's users each have their own channel).
    user_downlink_rates: list[dict] | None = None
    # The link's MTU (both ends' TUN devices; None: the kernel's default, 1500) and whether
    # the MN's namespace does path-MTU discovery (seed 004 §II.A; set in `netns.configure`).
    mtu: int | None = None
    pmtu_discovery: bool = True
    #: Each user's radio state machine (promotion, tails, DRX; docs/emulator.md), or None.
    radio_states: dict | None = None

    def with_(self, **changes) -> EmulationConfig:
        return replace(self, **changes)

    def spec_json(self, users: list[dict]) -> str:
        """The emulator specification; `users` holds each user's namespace and TUN names."""
        spec = {
            "users": [
                {**u, "downlink": self._downlink(i).to_json(), "uplink": self.uplink.to_json()} for i, u in enumerate(users)
            ],
            "outages": self.outages,
            "technology": self.technology,
            "seed": self.seed,
            "radio_log_interval_s": self.radio_log_interval_s,
        }
        if self.scheduler:
            spec["cell"] = {"scheduler": self.scheduler, "alpha": self.alpha, "slot_s": self.slot_s}
        if self.handoffs:
            spec["handoffs"] = self.handoffs
        if self.radio_states:
            spec["radio_states"] = self.radio_states
        if self.pcap_dir:
            spec["pcap_dir"] = self.pcap_dir
        if self.radio_log:
            spec["radio_log"] = self.radio_log
        if self.uplink_log:
            spec["uplink_log"] = self.uplink_log
        if self.downlink_log:
            spec["downlink_log"] = self.downlink_log
        return json.dumps(spec)

    def _downlink(self, user: int) -> DirectionConfig:
        if self.user_downlink_rates is None:
            return self.downlink
        return replace(self.downlink, rate=self.user_downlink_rates[user])

    def check(self) -> None:
        """Validates both directions in Rust (traces read, numbers checked) before anything
        is created on the machine. A replay's bundle is checked by its manifest and files:
        the link's build parses its series, once, and reports their errors."""
        if self.user_downlink_rates is not None and len(self.user_downlink_rates) != self.users:
            raise UserError(f"--downlink: given {len(self.user_downlink_rates)} times for {self.users} users (give it once, or once per user)")
        # The logs' folders must exist (the capture folder is created, so a log may go there).
        created = os.path.abspath(self.pcap_dir) if self.pcap_dir else None
        for option, path in (("--radio-log", self.radio_log), ("--uplink-log", self.uplink_log), ("--downlink-log", self.downlink_log)):
            folder = os.path.dirname(os.path.abspath(path)) if path else None
            if folder and folder != created and not os.path.isdir(folder):
                raise UserError(f"{option}: folder {folder} does not exist")
        if (self.uplink_log or self.downlink_log) and (self.users > 1 or self.scheduler):
            option = "--uplink-log" if self.uplink_log else "--downlink-log"
            raise UserError(f"{option}: a mahimahi event log describes one link; it needs --users 1")
        downlinks = [self._downlink(i) for i in range(self.users if self.user_downlink_rates else 1)]
        for name, d in [("--downlink", d) for d in downlinks] + [("--uplink", self.uplink)]:
            if d.rate.get("kind") == "replay":
                name = "--replay"
            try:
                _native.check_link_spec(json.dumps(d.to_json()))
            except _native.InputError as e:
                raise UserError(f"{name}: {e}") from None


def replay_link(bundle: str, direction: str, mode: str = "full", outage_mode: str = "buffer") -> dict:
    """One direction of a recorded link (crates/cellperf-link/src/replay.rs): it brings its
    own delay, loss and outages."""
    return {"kind": "replay", "bundle": os.path.abspath(bundle), "direction": direction, "mode": mode,
            "outage_mode": outage_mode}


def parse_link(text: str, what: str) -> dict:
    """A rate source: `10mbit`, `constant:10mbit`, a mahimahi trace path (or `mahimahi:PATH`),
    `slots:PATH,slot=1.667ms[,states=drc]`, `markov:MODEL.json`,
    `ge:good=1mbit,bad=100kbit,switch=1[,slot=1.667ms]`, `replay:BUNDLE[,mode=heavy]` (the
    bundle's uplink for an uplink option, else its downlink)."""
    kind, sep, rest = text.partition(":")
    if not sep:
        if os.path.isfile(text):
            return {"kind": "mahimahi", "path": text}
        if text and (text[0].isdigit() or text[0] == "."):
            return {"kind": "constant", "bps": parse_rate(text, what)}
        raise UserError(f"{what}: {text!r} is neither a rate (e.g. 10mbit) nor an existing trace file")
    kind = kind.lower()
    if kind == "constant":
        return {"kind": "constant", "bps": parse_rate(rest, what)}
    if kind == "mahimahi":
        return {"kind": "mahimahi", "path": rest}
    if kind == "markov":
        return {"kind": "markov", "path": rest}
    if kind == "replay":
        path, _, opts = rest.partition(",")
        kv = key_values(opts, what)
        if set(kv) - {"mode"} or kv.get("mode", "full") not in ("full", "heavy"):
            raise UserError(f"{what}: expected replay:BUNDLE[,mode=full|heavy]")
        return replay_link(path, "uplink" if what.lstrip("-").endswith("uplink") else "downlink", kv.get("mode", "full"))
    if kind == "slots":
        path, _, opts = rest.partition(",")
        kv = key_values(opts, what)
        unknown = set(kv) - {"slot", "states"}
        if unknown:
            raise UserError(f"{what}: unknown slots option {sorted(unknown)[0]!r} (slot=, states=drc)")
        out = {"kind": "slots", "path": path, "slot_s": parse_duration(kv.get("slot", "1.667ms"), what, least=1e-4)}
        if "states" in kv:
            if kv["states"].lower() != "drc":
                raise UserError(f"{what}: states={kv['states']!r}: the only state table is drc (EV-DO)")
            out["state_rates_bps"] = drc_rates_bps()
            out["slot_s"] = EVDO_SLOT_S if "slot" not in kv else out["slot_s"]
        return out
    if kind == "ge":
        kv = key_values(rest, what)
        unknown = set(kv) - {"good", "bad", "switch", "g2b", "b2g", "slot"}
        if unknown or "good" not in kv or "bad" not in kv:
            raise UserError(f"{what}: expected ge:good=RATE,bad=RATE,switch=PER_S[,slot=DURATION]")
        switch = kv.get("switch", "1")

        def per_s(key: str) -> float:
            try:
                v = float(kv.get(key, switch))
            except ValueError:
                raise UserError(f"{what}: {key}={kv.get(key, switch)!r} is not a rate per second") from None
            if v < 0:
                raise UserError(f"{what}: {key} must not be negative")
            return v

        return {
            "kind": "gilbert_elliott",
            "good_bps": parse_rate(kv["good"], what),
            "bad_bps": parse_rate(kv["bad"], what),
            "good_to_bad_per_s": per_s("g2b"),
            "bad_to_good_per_s": per_s("b2g"),
            "slot_s": parse_duration(kv.get("slot", "1.667ms"), what, least=1e-4),
        }
    raise UserError(f"{what}: unknown link kind {kind!r} (constant, mahimahi, slots, markov, ge, replay)")


def parse_queue(text: str, what: str = "--queue") -> dict:
    """`packets=N`, `bytes=N` (units allowed: 1126KB), `codel[,target=5ms,interval=100ms,packets=N]`,
    or `unbounded`."""
    t = text.strip().lower()
    if t in ("unbounded", "infinite"):
        return {"kind": "unbounded"}
    if t.startswith("codel"):
        kv = key_values(text[5:].lstrip(":,"), what)
        unknown = set(kv) - {"target", "interval", "packets"}
        if unknown:
            raise UserError(f"{what}: unknown CoDel option {sorted(unknown)[0]!r} (target=, interval=, packets=)")
        out = {"kind": "codel"}
        if "target" in kv:
            out["target_s"] = parse_duration(kv["target"], what)
        if "interval" in kv:
            out["interval_s"] = parse_duration(kv["interval"], what)
        if "packets" in kv:
            out["packets"] = parse_size(kv["packets"], what)
        return out
    kv = key_values(text, what)
    if len(kv) != 1 or not set(kv) <= {"packets", "bytes"}:
        raise UserError(f"{what}: {text!r} is not packets=N, bytes=N, codel or unbounded")
    (key, value), = kv.items()
    return {"kind": "droptail", key: parse_size(value, what)}


def parse_loss(text: str) -> dict | None:
    """`P` (i.i.d., e.g. 0.01 or 1%) or `ge:p=..,r=..[,good=0,bad=1]` (Gilbert–Elliott)."""
    what = "--loss"
    if text.lower().startswith("ge:"):
        kv = key_values(text[3:], what)
        unknown = set(kv) - {"p", "r", "good", "bad"}
        if unknown or "p" not in kv or "r" not in kv:
            raise UserError(f"{what}: expected ge:p=P_GOOD_TO_BAD,r=P_BAD_TO_GOOD[,good=LOSS,bad=LOSS]")
        return {
            "kind": "gilbert_elliott",
            "p": parse_probability(kv["p"], what),
            "r": parse_probability(kv["r"], what),
            "loss_good": parse_probability(kv.get("good", "0"), what),
            "loss_bad": parse_probability(kv.get("bad", "1"), what),
        }
    p = parse_probability(text, what)
    return None if p == 0 else {"kind": "iid", "p": p}


ARQ_KEYS = {"bler": "block_error", "harq-bler": "harq_error", "harq": "harq_retries", "harq-rtt": "harq_rtt_s",
            "arq": "arq_retries", "arq-delay": "arq_delay_s", "fade-every": "fade_every_s", "fade": "fade_s",
            "fade-bler": "fade_error", "block": "block_s"}


def parse_arq(text: str, what: str) -> dict | None:
    """`bler=0.1,harq=3,harq-rtt=12ms[,harq-bler=0.3],arq=3,arq-delay=120ms`
    `[,fade-every=10s,fade=300ms[,fade-bler=1]][,block=0.5ms]` (ms unless a unit is given), or `off`."""
    if text.strip().lower() == "off":
        return None
    kv = key_values(text, what)
    unknown = set(kv) - set(ARQ_KEYS)
    if unknown or "bler" not in kv:
        raise UserError(f"{what}: expected bler=P[,harq=N,harq-rtt=T,harq-bler=P,arq=N,arq-delay=T,"
                        "fade-every=T,fade=T,fade-bler=P,block=T] or off"
                        + (f" (unknown {', '.join(sorted(unknown))})" if unknown else ""))
    out = {}
    for key, value in kv.items():
        name = ARQ_KEYS[key]
        if key in ("bler", "harq-bler", "fade-bler"):
            out[name] = parse_probability(value, f"{what} {key}")
        elif key in ("harq", "arq"):
            if not value.isdigit() or int(value) > 64:
                raise UserError(f"{what}: {key}={value} is not a retry limit from 0 to 64")
            out[name] = int(value)
        else:
            most = 3600.0 if key == "fade-every" else MAX_RADIO_DELAY_S
            out[name] = _bounded_seconds(value, f"{what} {key}", "ms", most)
    return out


def parse_frames(text: str, what: str) -> dict | None:
    """`frame=26.67ms[,grant=20ms][,bytes=1500]`, or `off`."""
    if text.strip().lower() == "off":
        return None
    kv = key_values(text, what)
    unknown = set(kv) - {"frame", "grant", "bytes"}
    if unknown or "frame" not in kv:
        raise UserError(f"{what}: expected frame=T[,grant=T,bytes=N] or off"
                        + (f" (unknown {', '.join(sorted(unknown))})" if unknown else ""))
    frame = _bounded_seconds(kv["frame"], f"{what} frame", "ms", 1.0)
    if frame < 1e-4:
        raise UserError(f"{what}: frame={kv['frame']} is shorter than 0.1 ms")
    out = {"frame_s": frame}
    if "grant" in kv:
        out["grant_s"] = _bounded_seconds(kv["grant"], f"{what} grant", "ms", MAX_RADIO_DELAY_S)
    if "bytes" in kv:
        out["frame_bytes"] = parse_size(kv["bytes"], f"{what} bytes")
    return out


def parse_wander(text: str, what: str) -> dict | None:
    """`sd=5ms[,tau=10s]` (the base delay's standard deviation and correlation time), or `off`."""
    if text.strip().lower() == "off":
        return None
    kv = key_values(text, what)
    unknown = set(kv) - {"sd", "tau"}
    if unknown or "sd" not in kv:
        raise UserError(f"{what}: expected sd=T[,tau=T] or off" + (f" (unknown {', '.join(sorted(unknown))})" if unknown else ""))
    out = {"wander_s": _bounded_seconds(kv["sd"], f"{what} sd", "ms", MAX_RADIO_DELAY_S)}
    if "tau" in kv:
        out["wander_tau_s"] = parse_duration(kv["tau"], f"{what} tau", least=0.1)
    return out


#: `--radio-states` keys: (JSON key, kind); durations take ms unless a unit is given.
RADIO_STATE_KEYS = {
    "promotion": ("promotion_s", "s"), "tail": ("tail_s", "s"), "paging": ("paging_cycle_s", "s"),
    "low": ("low_state", "name"), "low-tail": ("low_tail_s", "s"), "low-promotion": ("low_promotion_s", "s"),
    "fach-rate": ("fach_rate_bps", "rate"), "fach-up": ("fach_up_bytes", "size"), "fach-down": ("fach_down_bytes", "size"),
    "drx-inactivity": ("drx_inactivity_s", "s"), "drx-on": ("drx_on_s", "s"), "drx-short": ("drx_short_cycle_s", "s"),
    "drx-short-cycles": ("drx_short_cycles", "count"), "drx-long": ("drx_long_cycle_s", "s"),
}
#: The longest radio-state timer accepted (an hour).
MAX_RADIO_TIMER_S = 3600.0


def parse_radio_states(text: str, base: dict | None, what: str = "--radio-states") -> dict | None:
    """`off`, or KEY=VALUE pairs (RADIO_STATE_KEYS) changing `base` (the profile's radio
    states), e.g. `tail=2s,promotion=300ms`; without a base, promotion= and tail= are needed.
    `drx-long=0` turns DRX off, `low=none` the state between connected and idle."""
    if text.strip().lower() == "off":
        return None
    kv = key_values(text, what)
    unknown = set(kv) - set(RADIO_STATE_KEYS)
    if unknown or not kv:
        raise UserError(f"{what}: expected off or KEY=VALUE pairs of {', '.join(RADIO_STATE_KEYS)}"
                        + (f" (unknown {', '.join(sorted(unknown))})" if unknown else ""))
    out = dict(base or {})
    for key, value in kv.items():
        name, kind = RADIO_STATE_KEYS[key]
        label = f"{what} {key}"
        if kind == "s":
            out[name] = _bounded_seconds(value, label, "ms", MAX_RADIO_TIMER_S)
        elif kind == "rate":
            out[name] = parse_rate(value, label)
        elif kind == "size":
            out[name] = parse_size(value, label)
        elif kind == "count":
            if not value.isdigit() or int(value) > 16:
                raise UserError(f"{label}: {value!r} is not a count from 0 to 16")
            out[name] = int(value)
        elif value.lower() == "none":
            out.pop(name, None)
        elif value.lower() in ("fach", "inactive"):
            out[name] = value.lower()
        else:
            raise UserError(f"{label}: {value!r} is not fach, inactive or none")
    if "promotion_s" not in out or "tail_s" not in out:
        raise UserError(f"{what}: the link has no radio states to change: give promotion= and tail=")
    if out.get("low_state") == "fach" and not out.get("fach_rate_bps"):
        raise UserError(f"{what}: low=fach needs fach-rate=RATE")
    if out.get("drx_long_cycle_s"):
        on, short, long_ = out.get("drx_on_s", 0), out.get("drx_short_cycle_s", 0), out["drx_long_cycle_s"]
        if not (0 < on <= long_) or (out.get("drx_short_cycles") and not on <= short <= long_):
            raise UserError(f"{what}: DRX needs 0 < drx-on <= drx-short <= drx-long")
    return out


#: The longest radio-layer wait accepted (a status delay, a grant delay): longer is a typo.
MAX_RADIO_DELAY_S = 10.0


def _bounded_seconds(text: str, what: str, unit: str, most: float) -> float:
    value = parse_duration(text, what, default_unit=unit)
    if not (0 <= value <= most):
        raise UserError(f"{what}: {text!r} is outside 0 to {most:g} s")
    return value


def parse_outage(text: str) -> list[float]:
    """`START:DURATION` (seconds unless a unit is given), e.g. `10:2` or `10s:500ms`."""
    start, sep, duration = text.partition(":")
    if not sep:
        raise UserError(f"--outage: {text!r} is not START:DURATION (e.g. 10s:2s)")
    return [parse_duration(start, "--outage"), parse_duration(duration, "--outage")]


def parse_random_outages(text: str) -> dict:
    """`every=30s,duration=2s` (both means of exponential distributions)."""
    kv = key_values(text, "--random-outages")
    if set(kv) != {"every", "duration"}:
        raise UserError("--random-outages: expected every=DURATION,duration=DURATION")
    every = parse_duration(kv["every"], "--random-outages")
    duration = parse_duration(kv["duration"], "--random-outages")
    if every <= 0 or duration <= 0:
        raise UserError("--random-outages: every and duration must be positive")
    return {"mean_interval_s": every, "mean_duration_s": duration}


def read_handoffs(path: str) -> dict:
    """A handoff schedule CSV: header `time_s,bs_id,sector_id[,outage_ms]`, one row per handoff,
    times in seconds from the start of the run. Read a line at a time (`textlines`); a file
    that is not such text is refused naming the line, never quoting it."""
    what = "a handoff schedule (a CSV of time_s,bs_id,sector_id[,outage_ms])"
    rows = []
    for number, raw in lines(Path(path), what):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "\0"
        if "\0" in text:
            raise UserError(f"{path}: line {number}: not text: not {what}")
        row = next(csv.reader([text]), [])
        if row and not row[0].lstrip().startswith("#"):
            rows.append((number, row))
    if not rows:
        raise UserError(f"{path}: the handoff schedule is empty (header time_s,bs_id,sector_id[,outage_ms])")
    first, header = rows[0][0], [h.strip() for h in rows[0][1]]
    if header[:3] != ["time_s", "bs_id", "sector_id"] or header[3:] not in ([], ["outage_ms"]):
        raise UserError(f"{path}: line {first}: the header must be time_s,bs_id,sector_id[,outage_ms]")
    out = []
    for i, row in rows[1:]:
        if len(row) != len(header):
            raise UserError(f"{path}: line {i}: expected {len(header)} fields, found {len(row)}")
        try:
            t = float(row[0])
            outage = float(row[3]) / 1000 if len(row) > 3 else 0.0
        except ValueError:
            raise UserError(f"{path}: line {i}: time_s and outage_ms must be numbers") from None
        if t < 0 or outage < 0:
            raise UserError(f"{path}: line {i}: negative time or outage")
        out.append({"time_s": t, "bs_id": row[1].strip(), "sector_id": row[2].strip(), "outage_s": outage})
    if any(b["time_s"] < a["time_s"] for a, b in zip(out, out[1:])):
        raise UserError(f"{path}: handoff times must not decrease")
    return {"listed": out}
