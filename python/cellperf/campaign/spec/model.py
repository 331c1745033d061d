"""A checked campaign as data: its testbed, radio log, networks and tests, and the runs they
expand to (`RunSpec`: one network × scenario × test × repetition, with what determines its
result for resuming)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from cellperf.campaign.spec.options import SIMULATE, TCP_SETTINGS, option_applies
from cellperf.campaign.spec.values import SCENARIOS

#: Seconds of set-up and analysis expected per measured run beyond its test duration (ETA).
EXPECTED_OVERHEAD_S = 3.0
#: A real network's run that fails for a network reason is tried again (`[testbed] retries`,
#: `retry_wait`): once, after 10 s, by default (a modem re-attaching takes seconds).
DEFAULT_RETRIES = 1
DEFAULT_RETRY_WAIT_S = 10.0


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
    # `cellperf emulate` options of the link (`[networks.link]`, key → value), after or instead
    # of the profile: any link `cellperf emulate` accepts (trace files, ge:, markov:, ARQ, ...).
    link: tuple = ()

    def emulate_args(self) -> list[str]:
        """The link's `cellperf emulate` options (profile aside)."""
        return [a for key, value in self.link for a in (f"--{key.replace('_', '-')}", str(value))]


@dataclass(frozen=True)
class TestSpec:
    name: str
    type: str
    options: dict  # probe options as campaign keys (direction, rate, duration, ...)
    # type = "group": the tests started together on one link (or, with `cell`, one user each
    # of a shared PF/RR cell); each member's flows are labelled with its name in the store.
    members: tuple = ()
    cell: str | None = None  # "pf" | "rr" (emulated): each member a user of one shared cell
    # type = "simulate": the scenario `cellperf simulate` runs (cellperf.simulate.scenario);
    # `options` are then its options after defaults.
    simulation: object = None


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
    mobile: bool | None = None  # the scenario's mobility (None: a free label that did not say)
    speed: str | None = None  # the scenario's speed (cellperf.emulate.mobility.JOURNEYS), if it gives one

    @property
    def seed(self) -> int:
        """The seed of the run's channels: a simulated run's is its scenario's seed + the run's
        number − 1 (as repetition k of `cellperf simulate`), an emulated run's the network's
        seed + repetition."""
        if self.test.type == SIMULATE:
            return self.options["seed"] + self.repetition - 1
        return self.network.seed + self.repetition

    @property
    def simulated(self) -> bool:
        return self.test.type == SIMULATE

    @property
    def planned_s(self) -> float:
        """Wall seconds the run is expected to take (for the ETA): its test plus set-up, or
        for a simulated run its user-slots at ~4 M per second (docs/simulate.md, Speed)."""
        if self.simulated:
            slot = self.test.simulation.base.get("cell", {}).get("slot_s", 1e-3)
            return self.options["users"] * self.duration_s / slot / 4e6 + 0.1
        return self.duration_s + EXPECTED_OVERHEAD_S

    @property
    def profile(self) -> str | None:
        if not self.network.profile:
            return None
        if self.mobile and self.speed:
            return f"{self.network.profile}-{self.speed}"  # a 3G profile at the scenario's speed
        return f"{self.network.profile}-{'mobile' if self.mobile else 'stationary'}"

    @property
    def tcp_options(self) -> dict:
        """The run's TCP settings the runner applies in its namespaces (SACK, timestamps,
        initial windows), not the probe."""
        return {k: self.options[k] for k in TCP_SETTINGS if k in self.options}

    def config(self, campaign: Campaign) -> dict:
        """What determines the run's result; stored with it and compared on resume."""
        if self.simulated:
            # The scenario after defaults and the run's seed; not the repetitions (more of
            # them adds runs and keeps the stored ones) nor the campaign's testbed settings.
            return {"network": self.network.name, "scenario": self.scenario, "test": self.test.name,
                    "test_type": self.test.type, "repetition": self.repetition, "duration_s": self.duration_s,
                    "options": {k: v for k, v in self.options.items() if k not in ("seed", "repetitions")},
                    "seed": self.seed}
        return {
            "network": self.network.name, "scenario": self.scenario, "test": self.test.name,
            "test_type": self.test.type, "repetition": self.repetition, "options": self.options,
            "duration_s": self.duration_s, "profile": self.profile, "seed": self.network.seed + self.repetition,
            "handoffs": _file_digest(self.network.handoffs) if self.mobile and self.network.handoffs else None,
            "testbed": campaign.testbed.kind, "capture": campaign.capture, "interval_s": campaign.interval_s,
            "radio_log": campaign.radio_log.kind,
            # Only when off, so that stores made before the key existed still resume.
            **({} if self.network.radio_mechanisms else {"radio_mechanisms": False}),
            # Likewise only when used: a free scenario label's mobility, a link spec, a group.
            **({} if self.scenario in SCENARIOS else {"mobile": self.mobile}),
            **({"speed": self.speed} if self.speed else {}),
            **({"link": [list(kv) for kv in self.network.link]} if self.network.link else {}),
            **({"members": [[m.name, m.type, self.member_options(m)] for m in self.test.members],
                "cell": self.test.cell} if self.test.members else {}),
        }

    def member_options(self, member: TestSpec) -> dict:
        """A group member's options: the group's duration unless the member gives its own."""
        options = {"duration": self.options.get("duration", self.duration_s), **member.options}
        if not option_applies("duration", member.type):
            options.pop("duration")
        return options

    def config_sha256(self, campaign: Campaign) -> str:
        return hashlib.sha256(json.dumps(self.config(campaign), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Testbed:
    kind: str  # emulated | real
    server: str | None = None  # real: HOST[:PORT] of `cellperf server`
    token_file: Path | None = None
    mn_interface: str | None = None  # real: capture here (this host is the MN)
    cn_capture: str | None = None  # real: shell command writing the CN's pcap to stdout
    # real: a run that fails for a network reason (no route, refused, reset, timed out) is
    # tried again this many times, `retry_wait_s` apart: a real link goes away for a while.
    retries: int = DEFAULT_RETRIES
    retry_wait_s: float = DEFAULT_RETRY_WAIT_S
    # real: shell command printing the CN host's `chronyc -c tracking` line (its clock state).
    cn_clock: str | None = None


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
    mobility: dict = field(default_factory=dict)  # scenario label → mobile (True/False/None)
    speeds: dict = field(default_factory=dict)  # scenario label → speed, for those that give one

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

