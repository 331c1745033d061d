"""Measurement campaigns: a TOML file describes networks, scenarios, tests and repetitions
(`spec`); the runner executes the run matrix on the emulated testbed or a real network
(`testbed`, `radio`), analyses each run (`analyse`) and commits it to the results store.

    >>> from cellperf.campaign import load_campaign, run_campaign
    >>> c = load_campaign("campaign.toml")
    >>> summary = run_campaign(c, Path("results"))

Format and resume rules: docs/campaigns.md.
"""

import importlib

# Loaded when first named: the launcher that runs inside an emulated MN
# (`python -m cellperf.campaign.inside`) would otherwise import the runner, the analysis,
# polars and DuckDB before every group or TCP-option run's test (0.65 s on a quiet host).
_FROM = {"run_campaign": "runner", "RunStatus": "summary", "Summary": "summary", "Campaign": "spec",
         "RunSpec": "spec", "load_campaign": "spec"}

__all__ = sorted(_FROM)


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"cellperf.campaign.{_FROM[name]}"), name)
