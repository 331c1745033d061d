"""What `cellperf run` and `cellperf import --captures` return: each run's status and the
campaign's summary (`--json`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cellperf.store import Store


@dataclass
class RunStatus:
    run_id: str
    status: str
    reason: str | None
    seconds: float
    phases: dict | None = None  # seconds per phase (cellperf.campaign.phases), the commit's too
    host: str | None = None


@dataclass
class Summary:
    out_dir: Path
    total: int
    skipped: int  # finished before this invocation
    finished: list[RunStatus] = field(default_factory=list)
    removed_debris: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RunStatus]:
        return [r for r in self.finished if r.status == "failed"]

    def to_json(self, store: Store | None = None) -> dict:
        out = {
            "out_dir": str(self.out_dir), "database": str(self.out_dir / "results.duckdb"),
            "runs_total": self.total, "runs_skipped": self.skipped,
            "runs_done": sum(r.status == "ok" for r in self.finished),
            "runs_failed": [{"run_id": r.run_id, "reason": r.reason} for r in self.failed],
            "runs": [r.__dict__ for r in self.finished],
        }
        if self.removed_debris:
            out["removed_unfinished"] = self.removed_debris
        return out
