"""The campaign file (TOML): what to run, where, how often. Format: docs/campaigns.md.

Validation reports the first problem as one line `FILE:LINE: key: problem`. TOML syntax
errors come from the TOML parser with its position; for values that parse but make no
sense (an unknown profile, a rate that is not a rate) the line is found by `_Locator`, which
follows table headers and keys through the text.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cellperf.agents import TESTS, parse_rate, parse_size
from cellperf.emulate.profiles import PROFILE_NAMES
from cellperf.errors import UserError, os_reason
from cellperf.validate import number, plain_text

#: Scenario labels whose mobility is known; any other label (car, campus, KTX, subway,
#: pedestrian, vehicular, ...) is free text and says `mobile = true/false` where the code needs it.
SCENARIOS = ("stationary", "mobile")
FAMILIES = sorted({p.rsplit("-", 1)[0] for p in PROFILE_NAMES})
TESTBEDS = ("emulated", "real")
RADIO_FORMATS = ("mmcli", "qmicli")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,39}")
#: Bounds of a campaign's numbers: a day for times, and the most runs one campaign may expand
#: to (`repetitions = 100000000000` must be refused, not expanded into memory).
MAX_SECONDS = 86400.0
MAX_COUNT = 10**9
MAX_RUNS = 100_000
#: Seconds of set-up and analysis expected per measured run beyond its test duration (ETA).
EXPECTED_OVERHEAD_S = 3.0
#: A real network's run that fails for a network reason is tried again (`[testbed] retries`,
#: `retry_wait`): once, after 10 s, by default (a modem re-attaching takes seconds).
DEFAULT_RETRIES = 1
DEFAULT_RETRY_WAIT_S = 10.0
MAX_RETRIES = 100


class _Locator:
    """Line numbers of TOML keys: `line(("tests", 2, "rate"))` → the line of `rate` in the
    third `[[tests]]` table. Falls back to the nearest enclosing table's header line."""

    _header = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    _key = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = {}
        prefix: tuple = ()
        for n, line in enumerate(text.splitlines(), start=1):
            m = self._header.match(line)
            if m:
                keys = self._split(m.group(2))
                if m.group(1) == "[[":
                    base = self._resolve(keys[:-1], counts) + (keys[-1],)
                    counts[base] = counts.get(base, -1) + 1
                    prefix = base + (counts[base],)
                    self.lines.setdefault(base, n)  # the array itself: its first table
                else:
                    prefix = self._resolve(keys, counts)
                self.lines.setdefault(prefix, n)
                continue
            m = self._key.match(line)
            if m:
                self.lines.setdefault(prefix + tuple(self._split(m.group(1))), n)

    @staticmethod
    def _split(dotted: str) -> list[str]:
        return [p.strip().strip("\"'") for p in re.findall(r"""(?:"[^"]*"|'[^']*'|[^.]+)""", dotted)]

    @staticmethod
    def _resolve(keys: list[str], counts: dict) -> tuple:
        # `[tests.options]` after `[[tests]]` belongs to the latest element of `tests`.
        out: tuple = ()
        for k in keys:
            out += (k,)
            if out in counts:
                out += (counts[out],)
        return out

    def line(self, path: tuple) -> int | None:
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None


@dataclass(frozen=True)
class Network:
    name: str
    profile: str | None  # profile family (emulated)
    seed: int
    handoffs: Path | None  # handoff schedule for the mobile scenario (emulated)
    options: dict  # per-test overrides: test name → {option: value}
    # false: the profile without link-layer ARQ and uplink frames (a mahimahi-like link:
    # rate, queue, fixed delay), to see what the radio mechanisms change (bench/fidelity.py).
    radio_mechanisms: bool = True
    # `cellperf emulate` options of the link (`[networks.link]`, key → value), after or instead
    # of the profile: any link `cellperf emulate` accepts (trace files, ge:, markov:, ARQ, ...).
    link: tuple = ()

    def emulate_args(self) -> list[str]:
        """The link's `cellperf emulate` options (profile aside)."""
        return [a for key, value in self.link for a in (f"--{key.replace('_', '-')}", str(value))]


@dataclass(frozen=True)
class TestSpec:
    name: str
    type: str
    options: dict  # probe options as campaign keys (direction, rate, duration, ...)
    # type = "group": the tests started together on one link (or, with `cell`, one user each
    # of a shared PF/RR cell); each member's flows are labelled with its name in the store.
    members: tuple = ()
    cell: str | None = None  # "pf" | "rr" (emulated): each member a user of one shared cell
    # type = "simulate": the scenario `cellperf simulate` runs (cellperf.simulate.scenario);
    # `options` are then its options after defaults.
    simulation: object = None


@dataclass(frozen=True)
class RunSpec:
    """One run of the matrix network × scenario × test × repetition."""

    run_id: str
    network: Network
    scenario: str
    test: TestSpec
    repetition: int
    options: dict  # the test's options with the network's overrides applied
    duration_s: float
    mobile: bool | None = None  # the scenario's mobility (None: a free label that did not say)

    @property
    def seed(self) -> int:
        """The seed of the run's channels: a simulated run's is its scenario's seed + the run's
        number − 1 (as repetition k of `cellperf simulate`), an emulated run's the network's
        seed + repetition."""
        if self.test.type == SIMULATE:
            return self.options["seed"] + self.repetition - 1
        return self.network.seed + self.repetition

    @property
    def simulated(self) -> bool:
        return self.test.type == SIMULATE

    @property
    def planned_s(self) -> float:
        """Wall seconds the run is expected to take (for the ETA): its test plus set-up, or
        for a simulated run its user-slots at ~4 M per second (docs/simulate.md, Speed)."""
        if self.simulated:
            slot = self.test.simulation.base.get("cell", {}).get("slot_s", 1e-3)
            return self.options["users"] * self.duration_s / slot / 4e6 + 0.1
        return self.duration_s + EXPECTED_OVERHEAD_S

    @property
    def profile(self) -> str | None:
        if not self.network.profile:
            return None
        return f"{self.network.profile}-{'mobile' if self.mobile else 'stationary'}"

    @property
    def tcp_options(self) -> dict:
        """The run's TCP settings the runner applies in its namespaces (SACK, timestamps,
        initial windows), not the probe."""
        return {k: self.options[k] for k in TCP_SETTINGS if k in self.options}

    def config(self, campaign: Campaign) -> dict:
        """What determines the run's result; stored with it and compared on resume."""
        if self.simulated:
            # The scenario after defaults and the run's seed; not the repetitions (more of
            # them adds runs and keeps the stored ones) nor the campaign's testbed settings.
            return {"network": self.network.name, "scenario": self.scenario, "test": self.test.name,
                    "test_type": self.test.type, "repetition": self.repetition, "duration_s": self.duration_s,
                    "options": {k: v for k, v in self.options.items() if k not in ("seed", "repetitions")},
                    "seed": self.seed}
        return {
            "network": self.network.name, "scenario": self.scenario, "test": self.test.name,
            "test_type": self.test.type, "repetition": self.repetition, "options": self.options,
            "duration_s": self.duration_s, "profile": self.profile, "seed": self.network.seed + self.repetition,
            "handoffs": _file_digest(self.network.handoffs) if self.mobile and self.network.handoffs else None,
            "testbed": campaign.testbed.kind, "capture": campaign.capture, "interval_s": campaign.interval_s,
            "radio_log": campaign.radio_log.kind,
            # Only when off, so that stores made before the key existed still resume.
            **({} if self.network.radio_mechanisms else {"radio_mechanisms": False}),
            # Likewise only when used: a free scenario label's mobility, a link spec, a group.
            **({} if self.scenario in SCENARIOS else {"mobile": self.mobile}),
            **({"link": [list(kv) for kv in self.network.link]} if self.network.link else {}),
            **({"members": [[m.name, m.type, self.member_options(m)] for m in self.test.members],
                "cell": self.test.cell} if self.test.members else {}),
        }

    def member_options(self, member: TestSpec) -> dict:
        """A group member's options: the group's duration unless the member gives its own."""
        options = {"duration": self.options.get("duration", self.duration_s), **member.options}
        if not option_applies("duration", member.type):
            options.pop("duration")
        return options

    def config_sha256(self, campaign: Campaign) -> str:
        return hashlib.sha256(json.dumps(self.config(campaign), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Testbed:
    kind: str  # emulated | real
    server: str | None = None  # real: HOST[:PORT] of `cellperf server`
    token_file: Path | None = None
    mn_interface: str | None = None  # real: capture here (this host is the MN)
    cn_capture: str | None = None  # real: shell command writing the CN's pcap to stdout
    # real: a run that fails for a network reason (no route, refused, reset, timed out) is
    # tried again this many times, `retry_wait_s` apart: a real link goes away for a while.
    retries: int = DEFAULT_RETRIES
    retry_wait_s: float = DEFAULT_RETRY_WAIT_S


@dataclass(frozen=True)
class RadioLog:
    kind: str  # none | emulator | csv | command
    path: Path | None = None
    command: str | None = None
    format: str | None = None
    interval_s: float = 1.0


@dataclass
class Campaign:
    path: Path
    text: str
    name: str
    description: str
    testbed: Testbed
    radio_log: RadioLog
    capture: bool
    repetitions: int
    interval_s: float
    parallel: int
    scenarios: list[str]
    networks: list[Network]
    tests: list[TestSpec]
    runs: list[RunSpec] = field(default_factory=list)
    mobility: dict = field(default_factory=dict)  # scenario label → mobile (True/False/None)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Test options: campaign key → (probe option, parser to check it, tests it applies to or None for all).
def _positive(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("must be a positive number")
    return number(value, lo=0, lo_open=True, hi=MAX_SECONDS)


def _count(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number ≥ 1")
    return number(value, lo=1, hi=MAX_COUNT, integer=True)


def _payload(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of bytes")
    # The probe's 20-byte header up to the largest UDP payload over IPv4 (what the agents accept).
    return number(value, lo=20, hi=65507, integer=True, unit="bytes")


def _packet(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of bytes")
    # RTP header, sequence number and send time up to the largest UDP payload.
    return number(value, lo=28, hi=65507, integer=True, unit="bytes")


def _port(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a port number")
    return number(value, lo=1, hi=65535, integer=True)


def _seed(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return number(value, lo=0, hi=2**32 - 1, integer=True)


def _rate(value, where):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _positive(value, where)
    return parse_rate(str(value), where)


def _size(value, where):
    if isinstance(value, int) and not isinstance(value, bool):
        return _count(value, where)
    return parse_size(str(value), where)


def _size_list(value, where):
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list, e.g. [\"16K\", \"64K\"]")
    return [_size(v, where) for v in value]


def _count_list(value, where):
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list of whole numbers, e.g. [10, 100]")
    return [_count(v, where) for v in value]


def _choice(*allowed):
    def check(value, where):
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return check


def _text(value, where):
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return plain_text(value)


def parse_duration(value, where) -> float:
    """Seconds: a number, or a string with unit s/ms/min (`"30s"`, `"2min"`)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(_positive(value, where))
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m)?\s*", str(value))
    if not m:
        raise ValueError("is not a duration (e.g. 30, \"30s\", \"2min\")")
    scale = {"ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0, "m": 60.0}[m.group(2)]
    return _positive(float(m.group(1)) * scale, where)


def _connections(value, where):
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 32 for v in values):
        raise ValueError("must be a whole number 1..32 or a list of them, e.g. [2, 4, 6, 8, 10]")
    return values


def _names(value, where):
    if not isinstance(value, list) or not value or any(not isinstance(v, str) or not _NAME.fullmatch(v) for v in value):
        raise ValueError("must be a list of page names (sub-folders of the site), e.g. [\"yahoo\", \"cnn\"]")
    return value


def _urls(value, where):
    if not isinstance(value, list) or not value or any(
            not isinstance(v, str) or not v.startswith(("http://", "https://")) for v in value):
        raise ValueError("must be a list of http:// or https:// URLs")
    return [plain_text(v) for v in value]


def _on_off(value, where):
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _segments(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number of segments")
    # `ip route` takes any u32; Linux caps a route's initcwnd at the window clamp, and more
    # than 1000 segments is no initial window but a typo.
    return number(value, lo=1, hi=1000, integer=True, unit="segments")


#: Test types the agents do not run: application tests (docs/methods.md §13), run by their own tools.
APP_TESTS = ("web", "stream", "interactive")
#: Tests started together in one run (`members`), on one link or one shared cell.
GROUP = "group"
#: A TCP-over-a-scheduled-cell scenario in virtual time (`cellperf simulate`, docs/simulate.md):
#: no testbed, no root. Its runs' network and scenario are SIMULATED (the cell is the test's own).
SIMULATE = "simulate"
SIMULATED = "simulated"
TEST_TYPES = (*TESTS, *APP_TESTS, GROUP, SIMULATE)
TCP_TESTS = ("tcp-bulk", "window-sweep")
#: TCP settings the runner makes in the run's namespaces (docs/campaigns.md "TCP options"):
#: SACK and timestamps per network namespace (sysctl; negotiated, so the MN's SYN decides for
#: the connection), the initial congestion and receive windows per route (`ip route`).
TCP_SETTINGS = ("sack", "timestamps", "initcwnd", "initrwnd")


def _probe_option_tests() -> dict[str, tuple[str, ...]]:
    """The agents' one table of which probe option applies to which test (CLI names;
    crate cellperf-agent, plan::OPTION_TESTS): `cellperf probe` refuses by it, and so does
    `cellperf run --check`."""
    from cellperf import _native

    return {option: tuple(tests) for option, tests in _native.probe_option_tests()}


PROBE_OPTION_TESTS = _probe_option_tests()

#: Campaign key → (probe option or None, parser, the test types outside the probe it applies
#: to). For the probe's tests the rule is PROBE_OPTION_TESTS of the option (never this column):
#: the application tests and the runner's own settings are what this column says.
TEST_OPTIONS = {
    "direction": ("--direction", _choice("up", "down", "both"), ()),
    "duration": ("--duration", parse_duration, (*APP_TESTS, GROUP)),
    "rate": ("--rate", _rate, ("stream",)),
    "payload": ("--payload", _payload, ()),
    "bytes": ("--bytes", _size, ()),
    "congestion": ("--congestion", _text, ()),
    "window": ("--window", _size, ()),
    "mss": ("--mss", _count, ()),
    "streams": ("--streams", _count, ()),
    "codec": ("--codec", _choice("g711", "g729"), ()),
    "sizes": ("--sizes", _size_list, ()),
    "count": ("--count", _count, ("interactive",)),
    "interval": ("--interval", _positive, ("interactive",)),
    "timeout": ("--timeout", _positive, ("web",)),
    "windows": ("--windows", _size_list, ()),
    "mss_values": ("--mss-values", _size_list, ()),
    "owd": ("--owd", _choice("raw", "excess", "offset", "half-rtt"), ()),
    "lengths": ("--lengths", _count_list, ()),
    "period": ("--period", parse_duration, ()),
    # TCP settings (runner, not probe): TCP_SETTINGS.
    "sack": (None, _on_off, (*TCP_TESTS, GROUP)),
    "timestamps": (None, _on_off, (*TCP_TESTS, GROUP)),
    "initcwnd": (None, _segments, (*TCP_TESTS, GROUP)),
    "initrwnd": (None, _segments, (*TCP_TESTS, GROUP)),
    # web (docs/web.md): pages of `site` (default: the shipped 004 Table VI set) or real `urls`.
    "site": (None, _text, ("web",)),
    "pages": (None, _names, ("web",)),
    "urls": (None, _urls, ("web",)),
    "connections": ("--connections", _connections, ("web",)),
    "compression": (None, lambda v, w: _bool(v, w), ("web",)),
    "http": ("--http", _choice("1.1", "2"), ("web",)),
    "cache": ("--cache", _choice("cold", "warm"), ("web",)),
    "loads": ("--loads", _count, ("web",)),
    # stream and interactive (docs/apps.md); interactive types `count` keys `interval` apart.
    "transport": ("--transport", _choice("udp", "tcp"), ("stream",)),
    "packet": ("--packet", _packet, ("stream",)),
    "buffer": ("--buffer", parse_duration, ("stream",)),
    "port": (None, _port, ("stream", "interactive")),
    "identity": (None, _text, ("interactive",)),
}


def option_applies(key: str, test_type: str) -> bool:
    """Whether campaign option `key` applies to `test_type`: for the probe's tests by the
    agents' table (the same rule `cellperf probe` applies), otherwise by TEST_OPTIONS."""
    flag, _, others = TEST_OPTIONS[key]
    if test_type in TESTS and key not in TCP_SETTINGS:
        return flag is not None and test_type in PROBE_OPTION_TESTS.get(flag.removeprefix("--"), ())
    return test_type in others


def applicable_types(key: str) -> list[str]:
    return [t for t in TEST_TYPES if option_applies(key, t)]


def probe_args(options: dict, test_type: str | None = None) -> list[str]:
    """`cellperf probe` arguments for a run's test options (with `test_type`, only those the
    probe takes for it: a ping sweep's `duration` is the run's budget, not a probe option)."""
    args = []
    for key, value in options.items():
        flag = TEST_OPTIONS[key][0]
        if flag is None or (test_type is not None and not option_applies(key, test_type)):
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        args += [flag, str(value)]
    return args


class _Checker:
    def __init__(self, path: Path, text: str):
        self.path, self.loc = path, _Locator(text)

    def label(self, where: tuple) -> str:
        """`FILE:LINE: key` of a key (`FILE:LINE` when `where` is empty)."""
        line = self.loc.line(where)
        key = ".".join(str(k) if isinstance(k, str) else f"[{k}]" for k in where).replace(".[", "[")
        pos = f"{self.path}:{line}" if line else str(self.path)
        return f"{pos}: {key}" if key else pos

    def fail(self, where: tuple, message: str):
        raise UserError(f"{self.label(where)}: {message}")

    def table(self, doc: dict, where: tuple, allowed: set[str]) -> dict:
        if not isinstance(doc, dict):
            self.fail(where, "must be a table")
        for k in doc:
            if k not in allowed:
                self.fail(where + (k,), f"unknown key (expected one of {', '.join(sorted(allowed))})")
        return doc

    def value(self, doc: dict, where: tuple, key: str, check, default=None, required: bool = False):
        if key not in doc:
            if required:
                self.fail(where, f"missing required key '{key}'")
            return default
        try:
            return check(doc[key], key)
        except (ValueError, UserError) as e:
            msg = str(e)
            # Agent parsers name their option ("--rate: ..."): keep just the problem.
            msg = msg.split(": ", 1)[1] if msg.startswith(f"{key}: ") else msg
            self.fail(where + (key,), msg)


def load_campaign(path: str | Path) -> Campaign:
    """Reads and validates a campaign file; UserError `FILE:LINE: key: problem` on the first problem."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such campaign file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a campaign file (binary; expected TOML)") from None
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise UserError(f"{path}: invalid TOML: tables or arrays nested too deep") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        reason = re.sub(r"\s*\(at line.*\)", "", str(e))
        raise UserError(f"{path}:{m.group(1)}:{m.group(2)}: invalid TOML: {reason}" if m else f"{path}: invalid TOML: {e}") from None
    return _validate(path, text, doc)


def _validate(path: Path, text: str, doc: dict) -> Campaign:
    c = _Checker(path, text)
    c.table(doc, (), {"campaign", "testbed", "networks", "tests"})
    camp = c.table(doc.get("campaign", {}), ("campaign",),
                   {"name", "description", "repetitions", "duration", "interval", "capture", "radio_log",
                    "scenarios", "parallel"})
    name = c.value(camp, ("campaign",), "name", _name_check, required=True)
    description = c.value(camp, ("campaign",), "description", _text_any, default="")
    repetitions = c.value(camp, ("campaign",), "repetitions", _count, default=1)
    default_duration = c.value(camp, ("campaign",), "duration", parse_duration, default=30.0)
    interval_s = c.value(camp, ("campaign",), "interval", _positive, default=5.0)
    capture = c.value(camp, ("campaign",), "capture", _bool, default=True)
    parallel = c.value(camp, ("campaign",), "parallel", _count, default=1)
    scenario_list = c.value(camp, ("campaign",), "scenarios", _scenarios, default=[("stationary", False)])
    scenarios = [name for name, _ in scenario_list]
    mobility = dict(scenario_list)

    tb = c.table(doc.get("testbed", {"kind": "emulated"}), ("testbed",),
                 {"kind", "server", "token_file", "mn_interface", "cn_capture", *RETRY_KEYS})
    kind = c.value(tb, ("testbed",), "kind", _choice(*TESTBEDS), default="emulated")
    if kind == "emulated":
        for k in ("server", "token_file", "mn_interface", "cn_capture", *RETRY_KEYS):
            if k in tb:
                c.fail(("testbed", k), "only for kind = \"real\" (the emulated testbed starts its own server)")
        testbed = Testbed("emulated")
    else:
        # Web tests load their `urls` and need no agents' server: a campaign of web tests only
        # may leave both keys out.
        tests_doc = doc.get("tests")
        agents = not (isinstance(tests_doc, list) and tests_doc
                      and all(isinstance(t, dict) and t.get("type") in ("web", SIMULATE) for t in tests_doc))
        server = c.value(tb, ("testbed",), "server", _text, required=agents)
        token = c.value(tb, ("testbed",), "token_file", _text, required=agents)
        token_path = (path.parent / token) if token is not None else None
        if token_path is not None and not token_path.is_file():
            c.fail(("testbed", "token_file"), f"{token_path}: no such file")
        if parallel > 1:
            c.fail(("campaign", "parallel"), "a real network runs one test at a time (parallel = 1)")
        testbed = Testbed("real", server, token_path, c.value(tb, ("testbed",), "mn_interface", _text),
                          c.value(tb, ("testbed",), "cn_capture", _text),
                          c.value(tb, ("testbed",), "retries", _retries, default=DEFAULT_RETRIES),
                          c.value(tb, ("testbed",), "retry_wait", parse_duration, default=DEFAULT_RETRY_WAIT_S))
        if capture and not (testbed.mn_interface or testbed.cn_capture):
            c.fail(("testbed",), "capture = true needs mn_interface and/or cn_capture (or set campaign.capture = false)")

    radio = _radio_log(c, camp.get("radio_log"), kind, path)

    tests_doc = doc.get("tests")
    if not isinstance(tests_doc, list) or not tests_doc:
        c.fail(("tests",) if "tests" in doc else (), "give at least one [[tests]] table")
    nets_doc = doc.get("networks")
    # Simulated tests bring their own cell: a campaign of them only needs no network.
    only_simulated = all(isinstance(t, dict) and t.get("type") == SIMULATE for t in tests_doc)
    if nets_doc is None and only_simulated:
        nets_doc = []
    if not isinstance(nets_doc, list) or (not nets_doc and not only_simulated):
        c.fail(("networks",) if "networks" in doc else (), "give at least one [[networks]] table")

    n_runs_each = repetitions * len(scenarios) * len(nets_doc)
    tests = _tests(c, tests_doc, kind, path, n_runs_each)
    by_name = {t.name: t for t in tests}

    networks: list[Network] = []
    for i, n in enumerate(nets_doc):
        where = ("networks", i)
        c.table(n, where, {"name", "profile", "seed", "handoffs", "tests", "radio_mechanisms", "link"})
        nname = c.value(n, where, "name", _name_check, required=True)
        if any(x.name == nname for x in networks):
            c.fail(where + ("name",), f"network name '{nname}' is used twice")
        if nname == SIMULATED and any(t.type == SIMULATE for t in tests):
            c.fail(where + ("name",), f"'{SIMULATED}' names the simulated tests' runs; call the network otherwise")
        profile = c.value(n, where, "profile", _text)
        link = ()
        if "link" in n:
            if kind != "emulated":
                c.fail(where + ("link",), "a link spec is for the emulated testbed; a real network is its own link")
            link = _link(c, where + ("link",), n["link"], profile, path)
        if kind == "emulated":
            if profile is None and not link:
                c.fail(where, f"missing required key 'profile' (one of {', '.join(FAMILIES)}) or a [networks.link] "
                              "table of `cellperf emulate` options")
            if profile is not None and profile not in FAMILIES:
                c.fail(where + ("profile",), f"unknown profile '{profile}' (choose from {', '.join(FAMILIES)}; "
                                             "each is run as -stationary and -mobile)")
            if profile is not None:
                for label, mobile in scenario_list:
                    if mobile is None:
                        c.fail(("campaign", "scenarios"), f"scenario '{label}' needs mobile = true or false "
                               f"(network {nname}'s profile has a -stationary and a -mobile link): "
                               f"{{ name = \"{label}\", mobile = true }}")
        elif profile is not None:
            c.fail(where + ("profile",), "profiles are for the emulated testbed; a real network has none")
        seed = c.value(n, where, "seed", _seed, default=1)
        handoffs = c.value(n, where, "handoffs", _text)
        handoff_path = None
        if handoffs is not None:
            if kind != "emulated":
                c.fail(where + ("handoffs",), "a handoff schedule is for the emulated testbed")
            handoff_path = path.parent / handoffs
            if not handoff_path.is_file():
                c.fail(where + ("handoffs",), f"{handoff_path}: no such file")
            from cellperf.emulate.spec import read_handoffs

            try:
                read_handoffs(str(handoff_path))
            except UserError as e:
                c.fail(where + ("handoffs",), str(e))
        overrides = {}
        per_test = c.table(n.get("tests", {}), where + ("tests",), set(by_name))
        for tname, opts in per_test.items():
            w = where + ("tests", tname)
            c.table(opts, w, set(TEST_OPTIONS))
            overrides[tname] = _test_options(c, w, by_name[tname].type, opts)
            _kernel(c, w, by_name[tname].type, {**by_name[tname].options, **overrides[tname]}, kind)
        mechanisms = c.value(n, where, "radio_mechanisms", _bool, default=True)
        if not mechanisms and kind != "emulated":
            c.fail(where + ("radio_mechanisms",), "is for the emulated testbed (a real network has its own)")
        networks.append(Network(nname, profile, seed, handoff_path, overrides, mechanisms, link))

    measured = [t for t in tests if t.type != SIMULATE]
    simulated = sum(t.options["repetitions"] for t in tests if t.type == SIMULATE)
    n_runs = repetitions * (len(networks) * len(scenarios) * len(measured) + simulated)
    if n_runs > MAX_RUNS:
        c.fail(("campaign", "repetitions") if "repetitions" in camp else ("campaign",),
               f"{repetitions:,} repetitions × ({len(networks)} networks × {len(scenarios)} scenarios × "
               f"{len(measured)} tests + {simulated:,} simulated runs) is {n_runs:,} runs, more than the "
               f"{MAX_RUNS:,} a campaign may hold")
    campaign = Campaign(path, text, name, description, testbed, radio, capture, repetitions, interval_s,
                        parallel, scenarios, networks, tests, mobility=mobility)
    campaign.runs = expand(campaign, default_duration)
    return campaign


def _tests(c: _Checker, tests_doc: list, kind: str, path: Path, n_runs_each: int) -> list[TestSpec]:
    """The `[[tests]]` tables, a sweep expanded into one test per combination. A function of
    its own so that a test's name can never become the campaign's (#27: a loop variable
    `name` in the validator once named every campaign after its last test)."""
    tests: list[TestSpec] = []
    for i, t in enumerate(tests_doc):
        where = ("tests", i)
        if isinstance(t, dict) and t.get("type") == SIMULATE:
            test = _simulate_test(c, where, t)
            if any(x.name == test.name for x in tests):
                c.fail(where + ("name",) if "name" in t else where,
                       f"test name '{test.name}' is used twice; give each a distinct name")
            tests.append(test)
            continue
        c.table(t, where, {"type", "name", "sweep", "members", "cell", *TEST_OPTIONS})
        ttype = c.value(t, where, "type", _choice(*TEST_TYPES), required=True)
        for key in ("members", "cell"):
            if key in t and ttype != GROUP:
                c.fail(where + (key,), f"is for type = \"{GROUP}\" (tests started together), not {ttype}")
        if "sweep" in t and ttype in (GROUP, *APP_TESTS):
            c.fail(where + ("sweep",), f"a sweep is for the probe's tests, not {ttype}")
        plain = {k: v for k, v in t.items() if k not in ("type", "name", "sweep", "members", "cell")}
        options = _test_options(c, where, ttype, plain)
        members, cell = ((), None)
        if ttype == GROUP:
            members, cell = _group(c, where, t, kind)
        if ttype == "web":
            _check_web(c, where, options, kind, path)
        for key in ("port", "identity"):
            if key in options and kind != "real":
                c.fail(where + (key,), "is for kind = \"real\" (the emulated testbed starts its own server)")
        if ttype == "interactive" and kind == "real" and "identity" not in options:
            c.fail(where, "missing required key 'identity' (the ssh key that logs in at the CN)")
        label = c.value(t, where, "name", _name_check, default=ttype + (f"-{options['direction']}" if "direction" in options else ""))
        variants = [(label, options)]
        if "sweep" in t:
            variants = _sweep(c, where, ttype, label, options, t["sweep"], n_runs_each)
        for m_index, m in enumerate(members):
            _kernel(c, where + ("members", m_index), m.type, m.options, kind)
        for variant, opts in variants:
            _kernel(c, where, ttype, opts, kind, sweep_keys=set(t.get("sweep") or ()))
            if any(x.name == variant for x in tests):
                c.fail(where + ("name",) if "name" in t else where, f"test name '{variant}' is used twice; give each a distinct name")
            tests.append(TestSpec(variant, ttype, opts, members, cell))
    return tests


#: `cellperf emulate` options a network's `[networks.link]` may give (key = option without
#: the dashes, `_` for `-`); users and the scheduler come from a group's `cell`.
LINK_KEYS = ("downlink", "uplink", "delay", "jitter", "delay_wander", "loss", "queue", "downlink_arq", "uplink_arq",
             "uplink_frames", "outage", "random_outages", "outage_mode", "slot", "technology", "mtu", "pmtu_discovery",
             "replay", "replay_mode")


class _ArgError(Exception):
    pass


def _link(c: _Checker, where: tuple, doc, profile: str | None, path: Path) -> tuple:
    """The link table as (key, value) pairs, checked by `cellperf emulate`'s own parser and
    config builder (so a campaign accepts exactly the links `cellperf emulate` does). A
    trace file is relative to the campaign file."""
    import argparse

    from cellperf.commands import emulate

    if not isinstance(doc, dict) or not doc:
        c.fail(where, "must be a table of `cellperf emulate` options, e.g. { downlink = \"ge:good=2mbit,bad=200kbit,"
                      "switch=1\", uplink = \"1mbit\", delay = \"40ms\" }")
    pairs = []
    for key, value in doc.items():
        if key not in LINK_KEYS:
            c.fail(where + (key,), f"unknown link option (expected one of {', '.join(LINK_KEYS)})")
        values = value if key == "outage" and isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                c.fail(where + (key,), "must be a string or a number, as given to `cellperf emulate`")
            v = str(v)
            if key in ("downlink", "uplink") and (path.parent / v).is_file():
                v = str((path.parent / v).resolve())
            if key == "replay" and (path.parent / v).is_dir():
                v = str((path.parent / v).resolve())
            pairs.append((key, v))

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise _ArgError(message)

    parser = Parser(add_help=False)
    emulate.add_arguments(parser)
    argv = (["--profile", f"{profile}-stationary"] if profile in FAMILIES else [])
    argv += [a for k, v in pairs for a in (f"--{k.replace('_', '-')}", v)]
    try:
        # check(): trace and model files are read now, not when the run starts (a file that is
        # not a trace is refused by --check, without its content being quoted).
        emulate.build_config(parser.parse_args([*argv, "--", "true"])).check()
    except _ArgError as e:
        c.fail(where, str(e))
    except UserError as e:
        m = re.match(r"--([a-z-]+)", str(e))
        key = m.group(1).replace("-", "_") if m else None
        msg = str(e).split(": ", 1)[1] if m and ": " in str(e) else str(e)
        c.fail(where + ((key,) if key in doc else ()), msg)
    return tuple(pairs)


def _check_web(c: _Checker, where: tuple, options: dict, testbed: str, path: Path) -> None:
    """A web test loads pages of a site folder (emulated or real) or real URLs (real network)."""
    from cellperf.web.pages import PAGE_NAMES

    if "urls" in options:
        if testbed != "real":
            c.fail(where + ("urls",), "real URLs are for kind = \"real\"; the emulated testbed serves a site folder")
        for k in ("site", "pages", "compression"):
            if k in options:
                c.fail(where + (k,), "does not go with urls (the real server decides)")
        return
    if testbed == "real":
        c.fail(where, "missing required key 'urls' (on a real network the pages come from a server at the CN)")
    if "site" in options:
        from cellperf.commands.web import check_site

        site = path.parent / options["site"]
        try:
            check_site(site)
        except UserError as e:
            c.fail(where + ("site",), str(e))
        names = [p.parent.name for p in sorted(site.glob("*/index.html"))] or [site.name]
    else:
        names = list(PAGE_NAMES)
    for page in options.get("pages", []):
        if page not in names:
            c.fail(where + ("pages",), f"no page '{page}' in the site (it has {', '.join(names)})")


def _test_options(c: _Checker, where: tuple, ttype: str, opts: dict) -> dict:
    out = {}
    for key in opts:
        if key not in TEST_OPTIONS:
            c.fail(where + (key,), f"unknown key (expected one of {', '.join(sorted(TEST_OPTIONS))})")
        if not option_applies(key, ttype):
            c.fail(where + (key,), f"does not apply to test type {ttype} (only {', '.join(applicable_types(key)) or 'none'})")
        out[key] = c.value(opts, where, key, TEST_OPTIONS[key][1])
    return out


#: Campaign keys whose probe option (JSON) is named otherwise.
_PROBE_JSON = {"rate": "rate_bps", "duration": "duration_s", "interval": "interval_s", "timeout": "timeout_s",
               "period": "period_s"}


def _kernel(c: _Checker, where: tuple, ttype: str, options: dict, testbed: str, sweep_keys: set = frozenset()) -> None:
    """Refuses what the probe's own plan or this host's kernel would refuse of a test's options
    (the rules of crate cellperf-agent: plan::plan and plan::KERNEL_RULES, the ones the probe
    applies before it connects): a congestion control the kernel lacks, an MSS outside
    TCP_MAXSEG's bounds, a window over net.core.rmem_max, a sysctl it does not have. On the
    emulated testbed both ends are this kernel; on a real network only the MN's end is (the
    CN's congestion control of a download is the CN's, found at run time)."""
    from cellperf import _native

    def at(key: str) -> tuple:
        return where + (("sweep", key) if key in sweep_keys else (key,))

    for key in TCP_SETTINGS:
        if key in options:
            why = _native.kernel_refusal(key, json.dumps(options[key]))
            if why:
                c.fail(at(key), why)
    if ttype not in TESTS:
        return
    probe = {_PROBE_JSON.get(k, k): v for k, v in options.items()
             if k in TEST_OPTIONS and TEST_OPTIONS[k][0] is not None and option_applies(k, ttype)}
    problem = _native.probe_check(ttype, json.dumps(probe), testbed == "emulated")
    if problem:
        flag, _, why = problem.partition(": ")
        key = flag.removeprefix("--").replace("-", "_")
        if key in options and why:
            c.fail(at(key), why)
        c.fail(where, problem)


#: The grid keys of a sweep take lists; each combination is one test `NAME-KEYVALUE-...`.
def _sweep(c: _Checker, where: tuple, ttype: str, label: str, options: dict, doc, n_runs_each: int) -> list[tuple[str, dict]]:
    """A grid over options (e.g. `sweep = { mss = [536, 1460], window = ["16K", "64K"],
    sack = [true, false] }`): one test per combination, named after its values."""
    w = where + ("sweep",)
    if not isinstance(doc, dict) or not doc:
        c.fail(w, "must be a table of option = [values], e.g. { mss = [536, 1460], window = [\"16K\", \"64K\"] }")
    grid: list[tuple[str, list]] = []
    for key, values in doc.items():
        if key not in TEST_OPTIONS:
            c.fail(w + (key,), f"unknown option (expected one of {', '.join(sorted(TEST_OPTIONS))})")
        if not option_applies(key, ttype):
            c.fail(w + (key,), f"does not apply to test type {ttype} (only {', '.join(applicable_types(key)) or 'none'})")
        if key in options:
            c.fail(w + (key,), "is also given as a plain option of the test; give it in one place")
        if not isinstance(values, list) or not values:
            c.fail(w + (key,), "must be a non-empty list of values")
        checked = []
        for v in values:
            try:
                checked.append((TEST_OPTIONS[key][1](v, key), v))
            except (ValueError, UserError) as e:
                msg = str(e)
                c.fail(w + (key,), f"{v!r}: {msg.split(': ', 1)[1] if msg.startswith(f'{key}: ') else msg}")
        if len({json.dumps(x[0]) for x in checked}) != len(checked):
            c.fail(w + (key,), "a value is given twice")
        grid.append((key, checked))
    combos = 1
    for _, values in grid:
        combos *= len(values)
    runs = combos * n_runs_each
    if runs > MAX_RUNS:
        per = options.get("duration", 30.0)
        c.fail(w, f"{' × '.join(str(len(v)) for _, v in grid)} = {combos:,} combinations would take {runs:,} runs "
                  f"(with the repetitions, scenarios and networks; about {runs * (per + 3) / 86400:,.0f} days), "
                  f"more than the {MAX_RUNS:,} a campaign may hold")
    out = []
    for combo in itertools.product(*(values for _, values in grid)):
        opts = dict(options)
        parts = []
        for (key, _), (value, raw) in zip(grid, combo):
            opts[key] = value
            shown = ("on" if raw else "off") if isinstance(raw, bool) else str(raw)
            parts.append(key.replace("_", "") + re.sub(r"[^A-Za-z0-9_+-]", "_", shown))
        out.append((f"{label}-{'-'.join(parts)}", opts))
    return out


def _simulate_test(c: _Checker, where: tuple, t: dict) -> TestSpec:
    """A `type = "simulate"` test: `cellperf simulate`'s scenario keys (docs/simulate.md),
    checked by its own parser, so a campaign test and a scenario file take the same keys,
    defaults and values."""
    from cellperf.simulate import scenario as sim

    keys = {k: v for k, v in t.items() if k not in ("type", "name")}
    keys = sim.check_keys(keys, lambda key, problem: c.fail(where + (key,), problem), also=("type", "name"))
    # Trace and model files are relative to the campaign file, as a network's link's are.
    for key in ("channel", "uplink"):
        if isinstance(keys.get(key), (str, list)):
            values = [_beside(v, c.path) for v in (keys[key] if isinstance(keys[key], list) else [keys[key]])]
            keys[key] = values if isinstance(keys[key], list) else values[0]
    built = sim.build(keys, label=lambda key: c.label(where + (key,)))
    name = c.value(t, where, "name", _name_check, default=SIMULATE)
    return TestSpec(name, SIMULATE, built.options, simulation=built)


def _beside(value, path: Path):
    """A rate source (`cellperf emulate --downlink` forms) with its file, when one exists
    beside the campaign file, made absolute: `trace.down`, `mahimahi:`, `markov:` or `slots:PATH,...`."""
    if not isinstance(value, str):
        return value
    kind, sep, rest = value.partition(":")
    if not sep:
        kind, rest = "", value
    elif kind.lower() not in ("mahimahi", "markov", "slots"):
        return value
    file, comma, tail = rest.partition(",") if kind.lower() == "slots" else (rest, "", "")
    near = path.parent / file
    if not file or Path(file).is_absolute() or not near.is_file():
        return value
    return f"{kind}{sep}{near.resolve()}{comma}{tail}"


def _group(c: _Checker, where: tuple, t: dict, testbed: str) -> tuple[tuple, str | None]:
    """The members of a group (`[[tests.members]]`, probe tests) and its shared cell."""
    cell = c.value(t, where, "cell", _choice("pf", "rr"))
    if cell is not None and testbed != "emulated":
        c.fail(where + ("cell",), "a shared cell is emulated (a real network has its own scheduler)")
    docs = t.get("members")
    if not isinstance(docs, list) or len(docs) < 2:
        c.fail(where + ("members",) if "members" in t else where,
               "give at least two [[tests.members]] tables (the tests started together)")
    if len(docs) > 63:
        c.fail(where + ("members",), f"{len(docs)} members; at most 63")
    members: list[TestSpec] = []
    for j, m in enumerate(docs):
        w = where + ("members", j)
        c.table(m, w, {"type", "name", *TEST_OPTIONS})
        mtype = c.value(m, w, "type", _choice(*TESTS), required=True)
        opts = {k: v for k, v in m.items() if k not in ("type", "name")}
        for key in opts:
            if key in TCP_SETTINGS:
                c.fail(w + (key,), "is a setting of the whole link (a sysctl or route of the run's namespace): "
                                   "give it on the group, not on one member")
        options = _test_options(c, w, mtype, opts)
        default = mtype + (f"-{options['direction']}" if "direction" in options else "")
        name = c.value(m, w, "name", _name_check, default=default)
        if any(x.name == name for x in members):
            c.fail(w + ("name",) if "name" in m else w, f"member name '{name}' is used twice in the group; give each a name")
        members.append(TestSpec(name, mtype, options))
    return tuple(members), cell


#: The network of simulated runs (their cell is the test's own).
SIMULATED_NETWORK = Network(SIMULATED, None, 0, None, {})


def expand(campaign: Campaign, default_duration: float) -> list[RunSpec]:
    """The run matrix, repetition-major so that an interrupted campaign has every
    network, scenario and test about equally often. A simulated test gives its own
    `repetitions` runs per campaign repetition (run n: the scenario's seed + n − 1), on
    network and scenario SIMULATED."""
    runs = []
    for rep in range(1, campaign.repetitions + 1):
        for test in campaign.tests:
            if test.type != SIMULATE:
                continue
            per = test.options["repetitions"]
            for n in range((rep - 1) * per + 1, rep * per + 1):
                runs.append(RunSpec(f"{SIMULATED}.{SIMULATED}.{test.name}.{n}", SIMULATED_NETWORK, SIMULATED, test,
                                    n, test.options, test.options["duration"]))
        for net in campaign.networks:
            for scenario in campaign.scenarios:
                for test in campaign.tests:
                    if test.type == SIMULATE:
                        continue
                    options = {**test.options, **net.options.get(test.name, {})}
                    if option_applies("duration", test.type) or test.type not in TESTS:
                        duration = options.get("duration", default_duration)
                        options["duration"] = duration
                        # A group lasts as long as its longest member.
                        duration = max([duration, *(m.options.get("duration", 0.0) if option_applies("duration", m.type)
                                                    else _sweep_seconds(m.options) for m in test.members)])
                    else:
                        duration = _sweep_seconds(options)
                    run_id = f"{net.name}.{scenario}.{test.name}.{rep}"
                    runs.append(RunSpec(run_id, net, scenario, test, rep, options, duration,
                                        campaign.mobility.get(scenario)))
    return runs


def _sweep_seconds(options: dict) -> float:
    """A ping sweep's length (it takes no duration): count probes `interval` apart per size,
    and the wait for the last replies (the probe's defaults: 5 sizes, 100, 1 s, 10 s)."""
    return (len(options.get("sizes", [0] * 5)) * options.get("count", 100) * options.get("interval", 1.0)
            + options.get("timeout", 10.0))


def _radio_log(c: _Checker, value, testbed: str, path: Path) -> RadioLog:
    where = ("campaign", "radio_log")
    if value is None:
        return RadioLog("emulator" if testbed == "emulated" else "none")
    if isinstance(value, str):
        if value == "none":
            return RadioLog("none")
        if value == "emulator":
            if testbed != "emulated":
                c.fail(where, "\"emulator\" needs the emulated testbed")
            return RadioLog("emulator")
        c.fail(where, "must be \"emulator\", \"none\", { csv = \"FILE\" } or { command = \"...\", format = \"mmcli\" }")
    if not isinstance(value, dict):
        c.fail(where, "must be a string or an inline table")
    c.table(value, where, {"csv", "command", "format", "interval"})
    if ("csv" in value) == ("command" in value):
        c.fail(where, "give exactly one of csv = \"FILE\" or command = \"...\"")
    if "csv" in value:
        p = path.parent / c.value(value, where, "csv", _text)
        if not p.is_file():
            c.fail(where + ("csv",), f"{p}: no such file")
        from cellperf.handoffs import read_radio_log

        try:
            read_radio_log(p)  # a file that is not a radio log is refused now, not in every run
        except UserError as e:
            c.fail(where + ("csv",), str(e))
        return RadioLog("csv", path=p)
    if testbed == "emulated":
        c.fail(where + ("command",), "a modem command is for a real network; the emulated testbed logs its own radio")
    return RadioLog("command", command=c.value(value, where, "command", _text),
                    format=c.value(value, where, "format", _choice(*RADIO_FORMATS), required=True),
                    interval_s=c.value(value, where, "interval", _positive, default=1.0))


#: `[testbed]` keys of a real network's retries.
RETRY_KEYS = ("retries", "retry_wait")


def _retries(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number 0..{MAX_RETRIES} (0: no retry)")
    return number(value, lo=0, hi=MAX_RETRIES, integer=True)


def _name_check(value, where):
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError("must be 1–40 letters, digits, '_', '+' or '-', starting with a letter or digit")
    return value


def _text_any(value, where):
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value  # free text (a description): newlines are fine


def _bool(value, where):
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def scenario_label(name) -> str:
    """A scenario label (a run id's SCENARIO, the store's `scenario`): stationary, mobile or
    any other (car, campus, KTX, subway, ...), checked as `cellperf run` and `cellperf import`
    check it; ValueError otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{name!r}: a scenario label is 1–40 letters, digits, '_', '+' or '-'")
    return name


def _scenarios(value, where) -> list[tuple[str, bool | None]]:
    """Labels (stationary and mobile say their mobility; car, campus, KTX, ... are free) or
    tables `{ name = "KTX", mobile = true }`: [(label, mobile or None)]."""
    usage = ("must be a list of scenario labels or { name = \"KTX\", mobile = true } tables, "
             "e.g. [\"stationary\", { name = \"car\", mobile = true }]")
    if not isinstance(value, list) or not value:
        raise ValueError(usage)
    out = []
    for v in value:
        if isinstance(v, str):
            name, mobile = v, {"stationary": False, "mobile": True}.get(v)
        elif isinstance(v, dict) and set(v) <= {"name", "mobile"} and "name" in v:
            name, mobile = v["name"], v.get("mobile")
            if mobile is not None and not isinstance(mobile, bool):
                raise ValueError(f"{name!r}: mobile must be true or false")
            if name in SCENARIOS and mobile is not None and mobile != (name == "mobile"):
                raise ValueError(f"{name!r} is {'' if name == 'mobile' else 'not '}mobile by its name")
            if mobile is None:
                mobile = {"stationary": False, "mobile": True}.get(name)
        else:
            raise ValueError(usage)
        scenario_label(name)
        if any(name == n for n, _ in out):
            raise ValueError(f"scenario {name!r} is given twice")
        out.append((name, mobile))
    return out
