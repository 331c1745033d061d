"""The kinds of test a campaign runs and the options each takes (docs/campaigns.md, "Tests"):
the test types, the options' table (campaign key → probe option, check, test types), which
option applies to which type, and a run's `cellperf probe` arguments."""

from __future__ import annotations

from cellperf.agents import TESTS
from cellperf.campaign.spec import values as check

#: Test types the agents do not run: application tests (docs/methods.md §13), run by their own tools,
#: and `hops` (§2: `cellperf hops` from the MN, no server).
APP_TESTS = ("web", "stream", "interactive", "hops")
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
    "direction": ("--direction", check.choice("up", "down", "both"), ()),
    "duration": ("--duration", check.parse_duration, (*APP_TESTS, GROUP)),
    "rate": ("--rate", check.rate, ("stream",)),
    "payload": ("--payload", check.payload, ()),
    "bytes": ("--bytes", check.size, ()),
    "congestion": ("--congestion", check.text, ()),
    "window": ("--window", check.size, ()),
    "mss": ("--mss", check.count, ()),
    "streams": ("--streams", check.count, ()),
    "codec": ("--codec", check.choice("g711", "g729"), ()),
    "sizes": ("--sizes", check.size_list, ()),
    "count": ("--count", check.count, ("interactive",)),
    "interval": ("--interval", check.parse_duration, ("interactive", "hops")),
    "timeout": ("--timeout", check.parse_duration, ("web", "hops")),
    "windows": ("--windows", check.size_list, ()),
    "mss_values": ("--mss-values", check.size_list, ()),
    "owd": ("--owd", check.choice("raw", "excess", "offset", "half-rtt"), ()),
    "lengths": ("--lengths", check.count_list, ()),
    "period": ("--period", check.parse_duration, ()),
    # TCP settings (runner, not probe): TCP_SETTINGS.
    "sack": (None, check.boolean, (*TCP_TESTS, GROUP)),
    "timestamps": (None, check.boolean, (*TCP_TESTS, GROUP)),
    "initcwnd": (None, check.segments, (*TCP_TESTS, GROUP)),
    "initrwnd": (None, check.segments, (*TCP_TESTS, GROUP)),
    # web (docs/web.md): pages of `site` (default: the shipped 004 Table VI set) or real `urls`.
    "site": (None, check.text, ("web",)),
    "pages": (None, check.page_names, ("web",)),
    "urls": (None, check.urls, ("web",)),
    "connections": ("--connections", check.connections, ("web",)),
    "compression": (None, check.boolean, ("web",)),
    "http": ("--http", check.choice("1.1", "2"), ("web",)),
    "cache": ("--cache", check.choice("cold", "warm"), ("web",)),
    "loads": ("--loads", check.count, ("web",)),
    "idle": ("--idle", check.idle_time, ("web",)),
    # stream and interactive (docs/apps.md); interactive types `count` keys `interval` apart.
    "transport": ("--transport", check.choice("udp", "tcp"), ("stream",)),
    "packet": ("--packet", check.packet, ("stream",)),
    "buffer": ("--buffer", check.parse_duration, ("stream",)),
    "fast_start": ("--fast-start", check.parse_duration, ("stream",)),
    "probe_packets": ("--probe-packets", check.probe_packets, ("stream",)),
    "port": (None, check.port, ("stream", "interactive")),
    "identity": (None, check.text, ("interactive",)),
    # hops (docs/methods.md §2): rounds `interval` apart over the run's duration.
    "max_hops": ("--max-hops", check.hop_limit, ("hops",)),
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

