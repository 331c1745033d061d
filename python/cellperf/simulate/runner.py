"""Runs a scenario's repetitions (seeds seed, seed+1, ...) and gathers what each flow did,
the spread over repetitions, and the cwnd/RTT time series as Arrow tables."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

from cellperf import _native
from cellperf.errors import UserError
from cellperf.simulate.scenario import Scenario

#: Per-flow numbers summarised over repetitions.
SPREAD_KEYS = ("goodput_bps", "throughput_bps", "retransmissions", "timeouts", "rtt_mean_s", "cwnd_mean")


@dataclass
class Outcome:
    scenario: Scenario
    runs: list[dict]
    wall_s: float
    #: Table name → pyarrow tables of all repetitions (with `seed` added); empty unless recorded.
    tables: dict = field(default_factory=dict)

    def spread(self) -> list[dict]:
        """Per user: mean, standard deviation (n−1), min and max over repetitions of each
        key in SPREAD_KEYS."""
        out = []
        for u in range(len(self.runs[0]["flows"])):
            row = {"user": u}
            for key in SPREAD_KEYS:
                values = [r["flows"][u][key] for r in self.runs if r["flows"][u][key] is not None]
                if not values:
                    row[key] = None
                    continue
                mean = sum(values) / len(values)
                sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
                row[key] = {"mean": mean, "sd": sd, "min": min(values), "max": max(values)}
            out.append(row)
        return out

    def to_json(self) -> dict:
        return {"options": self.scenario.options, "runs": self.runs, "per_user": self.spread(), "wall_s": self.wall_s,
                "simulated_s_per_wall_s": self.scenario.options["duration"] * len(self.runs) / self.wall_s
                if self.wall_s > 0 else None}


def run_seed(scenario: Scenario, seed: int, record: bool = False) -> tuple[dict, dict]:
    """One repetition: the run's result document (with its `seed`) and, with `record`, its
    time series (table name → pyarrow table: `cwnd`, `rtt`)."""
    import pyarrow as pa

    try:
        text, batches = _native.simulate(scenario.run_json(seed, record))
    except _native.InputError as e:
        raise UserError(f"simulate: {e}") from None
    result = json.loads(text)
    result["seed"] = seed
    return result, {name: pa.Table.from_batches([batch]) for name, batch in batches}


def run(scenario: Scenario, record: bool = False) -> Outcome:
    import pyarrow as pa

    first = scenario.options["seed"]
    runs, tables = [], {}
    started = time.perf_counter()
    for seed in range(first, first + scenario.options["repetitions"]):
        result, series = run_seed(scenario, seed, record)
        runs.append(result)
        for name, t in series.items():
            tables.setdefault(name, []).append(t.append_column("seed", pa.array([seed] * len(t), pa.uint64())))
    wall = time.perf_counter() - started
    return Outcome(scenario, runs, wall, {k: pa.concat_tables(v) for k, v in tables.items()} if record else {})
