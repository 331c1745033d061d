"""A campaign's progress: runs done, failed and left, and when it should end (issue 34 §3).

The ETA starts from the plan (each run's `planned_s`: its test and the expected overhead,
or a simulation's expected wall time) and is corrected by what the finished runs really took:
the planned seconds left, times the measured ratio of wall time to planned time of the runs
finished so far, over the slots that run at the same time (`parallel`, or the workers)."""

from __future__ import annotations

import time

from cellperf.campaign.spec import RunSpec


def planned_wall_s(runs: list[RunSpec], slots: int) -> float:
    """The planned wall time of `runs` on `slots` slots at a time, overhead included."""
    return sum(r.planned_s for r in runs) / max(1, slots)


class Progress:
    def __init__(self, todo: list[RunSpec], slots: int):
        self.slots = max(1, slots)
        self.total = len(todo)
        self.done = 0
        self.failed = 0
        self.planned_left = sum(r.planned_s for r in todo)
        self._planned_done = 0.0
        self._wall_done = 0.0  # the finished runs' own wall seconds, summed
        self._running: dict[str, tuple[float, float]] = {}  # run id → (started, planned s)
        self.started_at = time.time()

    @property
    def running(self) -> list[str]:
        """The ids of the runs started and not yet finished, in the order they started."""
        return list(self._running)

    @property
    def left(self) -> int:
        return self.total - self.done - self.failed

    def started(self, run: RunSpec) -> None:
        self._running[run.run_id] = (time.time(), run.planned_s)

    def finished(self, run: RunSpec, status) -> None:
        self._running.pop(run.run_id, None)
        self.done += status.status == "ok"
        self.failed += status.status != "ok"
        self.planned_left -= run.planned_s
        self._planned_done += run.planned_s
        self._wall_done += status.seconds

    @property
    def ratio(self) -> float:
        """Measured wall time per planned second (1 before a run has finished)."""
        return self._wall_done / self._planned_done if self._planned_done > 0 else 1.0

    def eta_s(self) -> float:
        """Seconds until the last run should be committed."""
        now = time.time()
        # A running run's part already spent is not left (at most its whole planned time).
        spent = sum(min(now - t0, planned * self.ratio) for t0, planned in self._running.values())
        return max(0.0, (self.planned_left * self.ratio - spent) / self.slots)

    def to_json(self) -> dict:
        return {"done": self.done, "failed": self.failed, "left": self.left, "eta_s": round(self.eta_s(), 1),
                "elapsed_s": round(time.time() - self.started_at, 1)}
