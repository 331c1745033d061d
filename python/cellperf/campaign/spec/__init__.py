"""The campaign file (TOML): what to run, where, how often (docs/campaigns.md), read and checked
into a `Campaign` and its runs. One module per concern, each importing only those listed before
it: `values` (single values), `options` (test types and their options), `model` (the
dataclasses), `checker` (`FILE:LINE: key: problem`), `grid` (sweeps, the run matrix), the
sections `tests_section`, `networks_section`, `testbed_section`, and `load` (the file)."""

from cellperf.campaign.spec.grid import MAX_RUNS
from cellperf.campaign.spec.load import load_campaign
from cellperf.campaign.spec.model import Campaign, Network, RadioLog, RunSpec, Testbed, TestSpec
from cellperf.campaign.spec.options import GROUP, SIMULATE, SIMULATED, TEST_OPTIONS, option_applies, probe_args

__all__ = ["GROUP", "MAX_RUNS", "SIMULATE", "SIMULATED", "TEST_OPTIONS", "Campaign", "Network", "RadioLog", "RunSpec",
           "TestSpec", "Testbed", "load_campaign", "option_applies", "probe_args"]
