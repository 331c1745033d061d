"""The `[[networks]]` section of a campaign: each network's profile family or `[networks.link]`
(checked by `cellperf emulate`'s own parser), seed, handoff schedule and per-test overrides."""

from __future__ import annotations

import re
from pathlib import Path

from cellperf.campaign.spec import values as check
from cellperf.campaign.spec.checker import Checker
from cellperf.campaign.spec.model import Network, TestSpec
from cellperf.campaign.spec.options import SIMULATE, SIMULATED, TEST_OPTIONS
from cellperf.campaign.spec.tests_section import kernel_check, test_options
from cellperf.emulate.mobility import REFERENCE_KMH
from cellperf.emulate.profiles import PROFILE_NAMES
from cellperf.errors import UserError

FAMILIES = sorted({p.rsplit("-", 1)[0] for p in PROFILE_NAMES})


#: `cellperf emulate` options a network's `[networks.link]` may give (key = option without
#: the dashes, `_` for `-`); users and the scheduler come from a group's `cell`.
LINK_KEYS = ("downlink", "uplink", "delay", "jitter", "delay_wander", "loss", "queue", "downlink_arq", "uplink_arq",
             "uplink_frames", "outage", "random_outages", "outage_mode", "slot", "technology", "mtu", "pmtu_discovery",
             "replay", "replay_mode", "radio_states")


class _ArgError(Exception):
    pass


def link_options(c: Checker, where: tuple, doc, profile: str | None, path: Path) -> tuple:
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
        # not a trace is refused by --check, without its content being quoted); a replay's
        # bundle below.
        emulate.build_config(parser.parse_args([*argv, "--", "true"])).check()
        replay = dict(pairs).get("replay")
        if replay:
            # check() reads a bundle's manifest only (a run's link parses its series, once):
            # --check parses them here.
            from cellperf.replay.bundle import check as check_bundle

            try:
                check_bundle(replay)
            except UserError as e:
                raise UserError(f"--replay: {e}") from None
    except _ArgError as e:
        c.fail(where, str(e))
    except UserError as e:
        m = re.match(r"--([a-z-]+)", str(e))
        key = m.group(1).replace("-", "_") if m else None
        msg = str(e).split(": ", 1)[1] if m and ": " in str(e) else str(e)
        c.fail(where + ((key,) if key in doc else ()), msg)
    return tuple(pairs)


def networks_section(c: Checker, nets_doc: list, kind: str, tests: list[TestSpec],
                     scenario_list: list[tuple[str, bool | None, str | None]], path: Path) -> list[Network]:
    """The `[[networks]]` tables (`tests`: the campaign's, for the per-test overrides;
    `scenario_list`: the labels and their mobility, which a profile's link needs)."""
    by_name = {t.name: t for t in tests}
    networks: list[Network] = []
    for i, n in enumerate(nets_doc):
        where = ("networks", i)
        c.table(n, where, {"name", "profile", "seed", "handoffs", "tests", "radio_mechanisms", "link"})
        nname = c.value(n, where, "name", check.identifier, required=True)
        if any(x.name == nname for x in networks):
            c.fail(where + ("name",), f"network name '{nname}' is used twice")
        if nname == SIMULATED and any(t.type == SIMULATE for t in tests):
            c.fail(where + ("name",), f"'{SIMULATED}' names the simulated tests' runs; call the network otherwise")
        profile = c.value(n, where, "profile", check.text)
        link = ()
        if "link" in n:
            if kind != "emulated":
                c.fail(where + ("link",), "a link spec is for the emulated testbed; a real network is its own link")
            link = link_options(c, where + ("link",), n["link"], profile, path)
        if kind == "emulated":
            if profile is None and not link:
                c.fail(where, f"missing required key 'profile' (one of {', '.join(FAMILIES)}) or a [networks.link] "
                              "table of `cellperf emulate` options")
            if profile is not None and profile not in FAMILIES:
                c.fail(where + ("profile",), f"unknown profile '{profile}' (choose from {', '.join(FAMILIES)}; "
                                             "each is run as -stationary and -mobile)")
            if profile is not None:
                for label, mobile, speed in scenario_list:
                    if mobile is None:
                        c.fail(("campaign", "scenarios"), f"scenario '{label}' needs mobile = true or false "
                               f"(network {nname}'s profile has a -stationary and a -mobile link): "
                               f"{{ name = \"{label}\", mobile = true }}")
                    if speed is not None and profile not in REFERENCE_KMH:
                        c.fail(("campaign", "scenarios"), f"scenario '{label}' has speed = \"{speed}\", which the "
                               f"3G profiles have ({', '.join(REFERENCE_KMH)}), not network {nname}'s {profile}")
        elif profile is not None:
            c.fail(where + ("profile",), "profiles are for the emulated testbed; a real network has none")
        seed = c.value(n, where, "seed", check.seed, default=1)
        handoffs = c.value(n, where, "handoffs", check.text)
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
            overrides[tname] = test_options(c, w, by_name[tname].type, opts)
            kernel_check(c, w, by_name[tname].type, {**by_name[tname].options, **overrides[tname]}, kind)
        mechanisms = c.value(n, where, "radio_mechanisms", check.boolean, default=True)
        if not mechanisms and kind != "emulated":
            c.fail(where + ("radio_mechanisms",), "is for the emulated testbed (a real network has its own)")
        networks.append(Network(nname, profile, seed, handoff_path, overrides, mechanisms, link))
    return networks
