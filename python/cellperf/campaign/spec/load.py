"""The campaign file (TOML): what to run, where, how often. Format: docs/campaigns.md.

`load_campaign` reads a file and checks it section by section (`testbed_section`,
`tests_section`, `networks_section`), then expands it into its runs (`grid.expand`). The first
problem is reported as one line `FILE:LINE: key: problem`: TOML syntax errors come from the
TOML parser with its position; for values that parse but make no sense (an unknown profile, a
rate that is not a rate) the line is found by `cellperf.toml_locator.TomlLocator`.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from cellperf.campaign.spec import values as check
from cellperf.campaign.spec.checker import Checker
from cellperf.campaign.spec.grid import MAX_RUNS, expand
from cellperf.campaign.spec.model import Campaign
from cellperf.campaign.spec.networks_section import networks_section
from cellperf.campaign.spec.options import SIMULATE
from cellperf.campaign.spec.testbed_section import radio_log, testbed_section
from cellperf.campaign.spec.tests_section import tests_section
from cellperf.errors import UserError, os_reason


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
    c = Checker(path, text)
    c.table(doc, (), {"campaign", "testbed", "networks", "tests"})
    camp = c.table(doc.get("campaign", {}), ("campaign",),
                   {"name", "description", "repetitions", "duration", "interval", "capture", "radio_log",
                    "scenarios", "parallel"})
    name = c.value(camp, ("campaign",), "name", check.identifier, required=True)
    description = c.value(camp, ("campaign",), "description", check.free_text, default="")
    repetitions = c.value(camp, ("campaign",), "repetitions", check.count, default=1)
    default_duration = c.value(camp, ("campaign",), "duration", check.parse_duration, default=30.0)
    interval_s = c.value(camp, ("campaign",), "interval", check.positive, default=5.0)
    capture = c.value(camp, ("campaign",), "capture", check.boolean, default=True)
    parallel = c.value(camp, ("campaign",), "parallel", check.count, default=1)
    scenario_list = c.value(camp, ("campaign",), "scenarios", check.scenarios, default=[("stationary", False, None)])
    scenarios = [name for name, *_ in scenario_list]
    mobility = {name: mobile for name, mobile, _ in scenario_list}
    speeds = {name: speed for name, _, speed in scenario_list if speed}

    kind, testbed = testbed_section(c, doc, path, parallel, capture)
    radio = radio_log(c, camp.get("radio_log"), kind, path)

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
    tests = tests_section(c, tests_doc, kind, path, n_runs_each)

    networks = networks_section(c, nets_doc, kind, tests, scenario_list, path)

    measured = [t for t in tests if t.type != SIMULATE]
    simulated = sum(t.options["repetitions"] for t in tests if t.type == SIMULATE)
    n_runs = repetitions * (len(networks) * len(scenarios) * len(measured) + simulated)
    if n_runs > MAX_RUNS:
        c.fail(("campaign", "repetitions") if "repetitions" in camp else ("campaign",),
               f"{repetitions:,} repetitions × ({len(networks)} networks × {len(scenarios)} scenarios × "
               f"{len(measured)} tests + {simulated:,} simulated runs) is {n_runs:,} runs, more than the "
               f"{MAX_RUNS:,} a campaign may hold")
    campaign = Campaign(path, text, name, description, testbed, radio, capture, repetitions, interval_s,
                        parallel, scenarios, networks, tests, mobility=mobility, speeds=speeds)
    campaign.runs = expand(campaign, default_duration)
    return campaign

