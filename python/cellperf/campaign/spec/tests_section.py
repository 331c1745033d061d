"""The `[[tests]]` section of a campaign: each test's type and options (checked as the probe and
this host's kernel would check them), groups of tests started together, application tests'
sites and simulated tests' scenarios; a sweep is expanded by `grid.sweep`."""

from __future__ import annotations

import json
from pathlib import Path

from cellperf.agents import TESTS
from cellperf.campaign.spec import values as check
from cellperf.campaign.spec.checker import Checker
from cellperf.campaign.spec.grid import sweep
from cellperf.campaign.spec.model import TestSpec
from cellperf.campaign.spec.options import (APP_TESTS, GROUP, SIMULATE, TCP_SETTINGS, TEST_OPTIONS, TEST_TYPES,
                                            applicable_types, option_applies)
from cellperf.errors import UserError


def tests_section(c: Checker, tests_doc: list, kind: str, path: Path, n_runs_each: int) -> list[TestSpec]:
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
        ttype = c.value(t, where, "type", check.choice(*TEST_TYPES), required=True)
        for key in ("members", "cell"):
            if key in t and ttype != GROUP:
                c.fail(where + (key,), f"is for type = \"{GROUP}\" (tests started together), not {ttype}")
        if "sweep" in t and ttype in (GROUP, *APP_TESTS):
            c.fail(where + ("sweep",), f"a sweep is for the probe's tests, not {ttype}")
        plain = {k: v for k, v in t.items() if k not in ("type", "name", "sweep", "members", "cell")}
        options = test_options(c, where, ttype, plain)
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
        label = c.value(t, where, "name", check.identifier, default=ttype + (f"-{options['direction']}" if "direction" in options else ""))
        variants = [(label, options)]
        if "sweep" in t:
            variants = sweep(c, where, ttype, label, options, t["sweep"], n_runs_each)
        for m_index, m in enumerate(members):
            kernel_check(c, where + ("members", m_index), m.type, m.options, kind)
        for variant, opts in variants:
            kernel_check(c, where, ttype, opts, kind, sweep_keys=set(t.get("sweep") or ()))
            if any(x.name == variant for x in tests):
                c.fail(where + ("name",) if "name" in t else where, f"test name '{variant}' is used twice; give each a distinct name")
            tests.append(TestSpec(variant, ttype, opts, members, cell))
    return tests

def _check_web(c: Checker, where: tuple, options: dict, testbed: str, path: Path) -> None:
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


def test_options(c: Checker, where: tuple, ttype: str, opts: dict) -> dict:
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


def kernel_check(c: Checker, where: tuple, ttype: str, options: dict, testbed: str, sweep_keys: set = frozenset()) -> None:
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


def _simulate_test(c: Checker, where: tuple, t: dict) -> TestSpec:
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
    name = c.value(t, where, "name", check.identifier, default=SIMULATE)
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


def _group(c: Checker, where: tuple, t: dict, testbed: str) -> tuple[tuple, str | None]:
    """The members of a group (`[[tests.members]]`, probe tests) and its shared cell."""
    cell = c.value(t, where, "cell", check.choice("pf", "rr"))
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
        mtype = c.value(m, w, "type", check.choice(*TESTS), required=True)
        opts = {k: v for k, v in m.items() if k not in ("type", "name")}
        for key in opts:
            if key in TCP_SETTINGS:
                c.fail(w + (key,), "is a setting of the whole link (a sysctl or route of the run's namespace): "
                                   "give it on the group, not on one member")
        options = test_options(c, w, mtype, opts)
        default = mtype + (f"-{options['direction']}" if "direction" in options else "")
        name = c.value(m, w, "name", check.identifier, default=default)
        if any(x.name == name for x in members):
            c.fail(w + ("name",) if "name" in m else w, f"member name '{name}' is used twice in the group; give each a name")
        members.append(TestSpec(name, mtype, options))
    return tuple(members), cell

