"""Where a run's wall time goes, phase by phase (issue 34): stored with the run
(`runs.phases`, seconds per phase) so that bench/campaign.py and a user read them instead of
guessing. Phases of an emulated run, in order:

- `link_up`: `cellperf emulate` starting: namespaces, TUN devices, the emulator and its
  capture files opened, until the test's command starts in the MN's namespace;
- `test`: the command (the probe's start-up, its control exchange and the test itself);
- `drain`: after it, until the run's TCP connections have closed at both ends (DRAIN_SH);
- `teardown`: the emulator stopping, captures closed, namespaces removed, `cellperf emulate`
  exiting;
- `radio_log` (a CSV radio log cut to the run), `analysis` (the analysis of the captures);
- `commit` (the store's transaction) is measured after the run's row is written: it is in
  `cellperf run --json`'s runs, not in the store.

A simulated run has `simulate` and `analysis`; a real-network run `captures_start`, `test`,
`captures_stop`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class Phases(dict):
    """Phase name → seconds, in the order they happened."""

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.monotonic() - t0

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.items()}


def emulated_phases(started: float, marks: list[tuple[float, float, float]], ended: float) -> Phases:
    """The phases of one `cellperf emulate` from its start and end (wall clock) and each
    user's (command start, command end, drain end) as its shell wrapper wrote them."""
    p = Phases()
    if not marks:
        p["link_up"] = ended - started  # the command never started
        return p
    cmd_start = min(m[0] for m in marks)
    cmd_end = max(m[1] for m in marks)
    drain_end = max(m[2] for m in marks)
    p["link_up"] = max(0.0, cmd_start - started)
    p["test"] = max(0.0, cmd_end - cmd_start)
    p["drain"] = max(0.0, drain_end - cmd_end)
    p["teardown"] = max(0.0, ended - drain_end)
    return p
