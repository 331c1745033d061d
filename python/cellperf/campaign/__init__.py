"""Measurement campaigns: a TOML file describes networks, scenarios, tests and repetitions
(`spec`); the runner executes the run matrix on the emulated testbed or a real network
(`testbed`, `radio`), analyses each run (`analyse`) and commits it to the results store.

    >>> from cellperf.campaign import load_campaign, run_campaign
    >>> c = load_campaign("campaign.toml")
    >>> summary = run_campaign(c, Path("results"))

Format and resume rules: docs/campaigns.md.
"""

from cellperf.campaign.runner import run_campaign
from cellperf.campaign.summary import RunStatus, Summary
from cellperf.campaign.spec import Campaign, RunSpec, load_campaign

__all__ = ["Campaign", "RunSpec", "RunStatus", "Summary", "load_campaign", "run_campaign"]
