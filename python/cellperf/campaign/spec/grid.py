"""The expansions of a campaign: a sweep's grid of option values into one test per
combination, and the campaign into its run matrix (network × scenario × test × repetition)."""

from __future__ import annotations

import itertools
import json
import re

from cellperf.agents import TESTS
from cellperf.campaign.spec.checker import Checker
from cellperf.campaign.spec.model import Campaign, Network, RunSpec
from cellperf.campaign.spec.options import SIMULATE, SIMULATED, TEST_OPTIONS, applicable_types, option_applies
from cellperf.errors import UserError

#: The most runs one campaign may expand to (`repetitions = 100000000000` must be refused, not
#: expanded into memory).
MAX_RUNS = 100_000


#: The grid keys of a sweep take lists; each combination is one test `NAME-KEYVALUE-...`.
def sweep(c: Checker, where: tuple, ttype: str, label: str, options: dict, doc, n_runs_each: int) -> list[tuple[str, dict]]:
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
                                        campaign.mobility.get(scenario), campaign.speeds.get(scenario)))
    return runs


def _sweep_seconds(options: dict) -> float:
    """A ping sweep's length (it takes no duration): count probes `interval` apart per size,
    and the wait for the last replies (the probe's defaults: 5 sizes, 100, 1 s, 10 s)."""
    return (len(options.get("sizes", [0] * 5)) * options.get("count", 100) * options.get("interval", 1.0)
            + options.get("timeout", 10.0))

