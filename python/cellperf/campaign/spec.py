"""The campaign file (TOML): what to run, where, how often. Format: docs/campaigns.md.

Validation reports the first problem as one line `FILE:LINE: key: problem`. TOML syntax
errors come from the TOML parser with its position; for values that parse but make no
sense (an unknown profile, a rate that is not a rate) the line is found by `_Locator`, which
follows table headers and keys through the text.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cellperf.agents import TESTS, parse_rate, parse_size
from cellperf.emulate.profiles import PROFILE_NAMES
from cellperf.errors import UserError, os_reason
from cellperf.validate import looks_binary, number, plain_text

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


@dataclass(frozen=True)
class TestSpec:
    name: str
    type: str
    options: dict  # probe options as campaign keys (direction, rate, duration, ...)


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

    @property
    def profile(self) -> str | None:
        return f"{self.network.profile}-{self.scenario}" if self.network.profile else None

    def config(self, campaign: Campaign) -> dict:
        """What determines the run's result; stored with it and compared on resume."""
        return {
            "network": self.network.name, "scenario": self.scenario, "test": self.test.name,
            "test_type": self.test.type, "repetition": self.repetition, "options": self.options,
            "duration_s": self.duration_s, "profile": self.profile, "seed": self.network.seed + self.repetition,
            "handoffs": _file_digest(self.network.handoffs) if self.scenario == "mobile" and self.network.handoffs else None,
            "testbed": campaign.testbed.kind, "capture": campaign.capture, "interval_s": campaign.interval_s,
            "radio_log": campaign.radio_log.kind,
            # Only when off, so that stores made before the key existed still resume.
            **({} if self.network.radio_mechanisms else {"radio_mechanisms": False}),
        }

    def config_sha256(self, campaign: Campaign) -> str:
        return hashlib.sha256(json.dumps(self.config(campaign), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Testbed:
    kind: str  # emulated | real
    server: str | None = None  # real: HOST[:PORT] of `cellperf server`
    token_file: Path | None = None
    mn_interface: str | None = None  # real: capture here (this host is the MN)
    cn_capture: str | None = None  # real: shell command writing the CN's pcap to stdout


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


#: Test types the agents do not run: application tests (METHODS §13), run by their own tools.
APP_TESTS = ("web", "stream", "interactive")
TEST_TYPES = (*TESTS, *APP_TESTS)

TEST_OPTIONS = {
    "direction": ("--direction", _choice("up", "down", "both"), ("udp-cbr", "tcp-bulk")),
    "duration": ("--duration", parse_duration, None),
    "rate": ("--rate", _rate, ("udp-cbr", "stream")),
    "payload": ("--payload", _payload, ("udp-cbr", "sparse", "min-delay")),
    "bytes": ("--bytes", _size, ("tcp-bulk",)),
    "congestion": ("--congestion", _text, ("tcp-bulk", "window-sweep")),
    "window": ("--window", _size, ("tcp-bulk",)),
    "mss": ("--mss", _count, ("tcp-bulk", "window-sweep")),
    "streams": ("--streams", _count, ("tcp-bulk", "window-sweep")),
    "codec": ("--codec", _choice("g711", "g729"), ("voip",)),
    "sizes": ("--sizes", _size_list, ("ping-sweep",)),
    "count": ("--count", _count, ("ping-sweep", "interactive")),
    "interval": ("--interval", _positive, ("ping-sweep", "sparse", "interactive")),
    "timeout": ("--timeout", _positive, None),
    "windows": ("--windows", _size_list, ("window-sweep",)),
    "mss_values": ("--mss-values", _size_list, ("window-sweep",)),
    "owd": ("--owd", _choice("raw", "excess", "offset", "half-rtt"), TESTS),
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


def probe_args(options: dict) -> list[str]:
    """`cellperf probe` arguments for a run's test options."""
    args = []
    for key, value in options.items():
        flag = TEST_OPTIONS[key][0]
        if flag is None:
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        args += [flag, str(value)]
    return args


class _Checker:
    def __init__(self, path: Path, text: str):
        self.path, self.loc = path, _Locator(text)

    def fail(self, where: tuple, message: str):
        line = self.loc.line(where)
        key = ".".join(str(k) if isinstance(k, str) else f"[{k}]" for k in where).replace(".[", "[")
        pos = f"{self.path}:{line}" if line else str(self.path)
        raise UserError(f"{pos}: {key}: {message}" if key else f"{pos}: {message}")

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
    scenarios = c.value(camp, ("campaign",), "scenarios", _scenarios, default=["stationary"])

    tb = c.table(doc.get("testbed", {"kind": "emulated"}), ("testbed",),
                 {"kind", "server", "token_file", "mn_interface", "cn_capture"})
    kind = c.value(tb, ("testbed",), "kind", _choice(*TESTBEDS), default="emulated")
    if kind == "emulated":
        for k in ("server", "token_file", "mn_interface", "cn_capture"):
            if k in tb:
                c.fail(("testbed", k), "only for kind = \"real\" (the emulated testbed starts its own server)")
        testbed = Testbed("emulated")
    else:
        server = c.value(tb, ("testbed",), "server", _text, required=True)
        token = c.value(tb, ("testbed",), "token_file", _text, required=True)
        token_path = (path.parent / token)
        if not token_path.is_file():
            c.fail(("testbed", "token_file"), f"{token_path}: no such file")
        if parallel > 1:
            c.fail(("campaign", "parallel"), "a real network runs one test at a time (parallel = 1)")
        testbed = Testbed("real", server, token_path, c.value(tb, ("testbed",), "mn_interface", _text),
                          c.value(tb, ("testbed",), "cn_capture", _text))
        if capture and not (testbed.mn_interface or testbed.cn_capture):
            c.fail(("testbed",), "capture = true needs mn_interface and/or cn_capture (or set campaign.capture = false)")

    radio = _radio_log(c, camp.get("radio_log"), kind, path)

    nets_doc = doc.get("networks")
    if not isinstance(nets_doc, list) or not nets_doc:
        c.fail(("networks",) if "networks" in doc else (), "give at least one [[networks]] table")
    tests_doc = doc.get("tests")
    if not isinstance(tests_doc, list) or not tests_doc:
        c.fail(("tests",) if "tests" in doc else (), "give at least one [[tests]] table")

    tests: list[TestSpec] = []
    for i, t in enumerate(tests_doc):
        where = ("tests", i)
        c.table(t, where, {"type", "name", *TEST_OPTIONS})
        ttype = c.value(t, where, "type", _choice(*TEST_TYPES), required=True)
        options = _test_options(c, where, ttype, {k: v for k, v in t.items() if k not in ("type", "name")})
        if ttype == "web":
            _check_web(c, where, options, kind, path)
        for key in ("port", "identity"):
            if key in options and kind != "real":
                c.fail(where + (key,), "is for kind = \"real\" (the emulated testbed starts its own server)")
        if ttype == "interactive" and kind == "real" and "identity" not in options:
            c.fail(where, "missing required key 'identity' (the ssh key that logs in at the CN)")
        label = c.value(t, where, "name", _name_check, default=ttype + (f"-{options['direction']}" if "direction" in options else ""))
        if any(x.name == label for x in tests):
            c.fail(where + ("name",) if "name" in t else where, f"test name '{label}' is used twice; give each a distinct name")
        tests.append(TestSpec(label, ttype, options))
    by_name = {t.name: t for t in tests}

    networks: list[Network] = []
    for i, n in enumerate(nets_doc):
        where = ("networks", i)
        c.table(n, where, {"name", "profile", "seed", "handoffs", "tests", "radio_mechanisms"})
        nname = c.value(n, where, "name", _name_check, required=True)
        if any(x.name == nname for x in networks):
            c.fail(where + ("name",), f"network name '{nname}' is used twice")
        profile = c.value(n, where, "profile", _text)
        if kind == "emulated":
            if profile is None:
                c.fail(where, f"missing required key 'profile' (one of {', '.join(FAMILIES)})")
            if profile not in FAMILIES:
                c.fail(where + ("profile",), f"unknown profile '{profile}' (choose from {', '.join(FAMILIES)}; "
                                             "each is run as -stationary and -mobile)")
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
            try:
                with open(handoff_path, "rb") as f:
                    binary = looks_binary(f.read(8192))
            except OSError as e:
                c.fail(where + ("handoffs",), f"{handoff_path}: cannot read ({os_reason(e)})")
            if binary:
                c.fail(where + ("handoffs",), f"{handoff_path}: not a text file (a CSV of time_s,bs_id,...)")
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
        mechanisms = c.value(n, where, "radio_mechanisms", _bool, default=True)
        if not mechanisms and kind != "emulated":
            c.fail(where + ("radio_mechanisms",), "is for the emulated testbed (a real network has its own)")
        networks.append(Network(nname, profile, seed, handoff_path, overrides, mechanisms))

    n_runs = repetitions * len(networks) * len(scenarios) * len(tests)
    if n_runs > MAX_RUNS:
        c.fail(("campaign", "repetitions") if "repetitions" in camp else ("campaign",),
               f"{repetitions:,} repetitions × {len(networks)} networks × {len(scenarios)} scenarios × "
               f"{len(tests)} tests is {n_runs:,} runs, more than the {MAX_RUNS:,} a campaign may hold")
    campaign = Campaign(path, text, name, description, testbed, radio, capture, repetitions, interval_s,
                        parallel, scenarios, networks, tests)
    campaign.runs = expand(campaign, default_duration)
    return campaign


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
    for key, value in opts.items():
        _, check, applies = TEST_OPTIONS[key]
        if applies is not None and ttype not in applies:
            c.fail(where + (key,), f"does not apply to test type {ttype} (only {', '.join(applies)})")
        out[key] = c.value(opts, where, key, check)
    return out


def expand(campaign: Campaign, default_duration: float) -> list[RunSpec]:
    """The run matrix, repetition-major so that an interrupted campaign has every
    network, scenario and test about equally often."""
    runs = []
    for rep in range(1, campaign.repetitions + 1):
        for net in campaign.networks:
            for scenario in campaign.scenarios:
                for test in campaign.tests:
                    options = {**test.options, **net.options.get(test.name, {})}
                    duration = options.get("duration", default_duration)
                    options["duration"] = duration
                    run_id = f"{net.name}.{scenario}.{test.name}.{rep}"
                    runs.append(RunSpec(run_id, net, scenario, test, rep, options, duration))
    return runs


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
        return RadioLog("csv", path=p)
    if testbed == "emulated":
        c.fail(where + ("command",), "a modem command is for a real network; the emulated testbed logs its own radio")
    return RadioLog("command", command=c.value(value, where, "command", _text),
                    format=c.value(value, where, "format", _choice(*RADIO_FORMATS), required=True),
                    interval_s=c.value(value, where, "interval", _positive, default=1.0))


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


def _scenarios(value, where):
    if not isinstance(value, list) or not value or any(v not in SCENARIOS for v in value) or len(set(value)) != len(value):
        raise ValueError(f"must be a list of distinct scenarios from {', '.join(SCENARIOS)}")
    return value
