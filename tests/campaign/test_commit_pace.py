"""The campaign writer commits runs that finish close together in one transaction
(`CommitPace`), commits what it holds on Ctrl-C, and a cluster's runs come with a tick while
none finish (issue 34: one transaction per run made the writer the bottleneck of a cluster)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cellperf.campaign import cluster
from cellperf.campaign.runner import _commit_all
from cellperf.campaign.summary import Summary
from cellperf.store import CommitPace, RunRecord


class FakeStore:
    def __init__(self):
        self.commits: list[list[str]] = []

    def commit_runs(self, records: list[RunRecord]) -> None:
        self.commits.append([r.row["run_id"] for r in records])


class FakeProgress:
    def __init__(self):
        self.finished_ids: list[str] = []

    def finished(self, run, status) -> None:
        self.finished_ids.append(run.run_id)


def finished_run(i: int):
    run = SimpleNamespace(run_id=f"n.s.t.{i}")
    record = RunRecord({"run_id": run.run_id, "status": "ok", "reason": None, "phases": {"test": 0.1}})
    return run, record, 0.1


def commit_all(batches, progress: FakeProgress | None = None) -> tuple[FakeStore, Summary, list[tuple[int, int]]]:
    store, summary, seen = FakeStore(), Summary(Path("out"), 10, 0), []
    _commit_all(store, batches, summary, progress or FakeProgress(), None, lambda status, i, n: seen.append((i, n)))
    return store, summary, seen


def test_runs_finishing_together_are_one_transaction_and_all_reported():
    progress = FakeProgress()
    store, summary, seen = commit_all(iter([[finished_run(1)], [], [finished_run(2)], [finished_run(3), finished_run(4)]]),
                                      progress)
    assert store.commits == [["n.s.t.1", "n.s.t.2", "n.s.t.3", "n.s.t.4"]]
    assert [s.run_id for s in summary.finished] == ["n.s.t.1", "n.s.t.2", "n.s.t.3", "n.s.t.4"]
    assert progress.finished_ids == ["n.s.t.1", "n.s.t.2", "n.s.t.3", "n.s.t.4"]
    assert [s.phases["commit"] for s in summary.finished] == [summary.finished[0].phases["commit"]] * 4
    assert seen == [(1, 10), (2, 10), (3, 10), (4, 10)]


def test_a_commit_when_enough_runs_are_held_or_the_pace_has_passed(monkeypatch):
    monkeypatch.setattr(CommitPace, "RUNS", 3)
    monkeypatch.setattr(CommitPace, "EVERY_S", 0.2)

    def batches():
        yield [finished_run(1), finished_run(2)]
        yield [finished_run(3)]  # three held: committed at once
        yield [finished_run(4)]
        time.sleep(0.25)
        yield []  # the tick while nothing finished: run 4 waited long enough
        yield [finished_run(5)]

    store, summary, _ = commit_all(batches())
    assert store.commits == [["n.s.t.1", "n.s.t.2", "n.s.t.3"], ["n.s.t.4"], ["n.s.t.5"]]
    assert len(summary.finished) == 5


def test_ctrl_c_commits_the_runs_held_then_stops():
    def batches():
        yield [finished_run(1)]
        yield [finished_run(2)]
        raise KeyboardInterrupt

    store, summary = FakeStore(), Summary(Path("out"), 10, 0)
    with pytest.raises(KeyboardInterrupt):
        _commit_all(store, batches(), summary, FakeProgress(), None, None)
    assert store.commits == [["n.s.t.1", "n.s.t.2"]]
    assert [s.run_id for s in summary.finished] == ["n.s.t.1", "n.s.t.2"]


class FakeAsCompleted:
    """An `as_completed` whose futures finish at given moments."""

    def __init__(self, at: dict[str, float]):
        self.t0 = time.monotonic()
        self.left = dict(at)

    def next_batch(self, block: bool = True):
        assert not block  # the writer is never held up by a long run
        now = time.monotonic() - self.t0
        done = sorted(k for k, t in self.left.items() if t <= now)
        for k in done:
            del self.left[k]
        return done

    def is_empty(self) -> bool:
        return not self.left


def test_a_cluster_ticks_while_no_run_finishes():
    running = FakeAsCompleted({"a": 0.0, "b": 0.0, "c": 0.9})
    t0 = time.monotonic()
    assert cluster._next_finished(running, tick_s=0.3) == ["a", "b"]
    assert cluster._next_finished(running, tick_s=0.3) == []  # a tick, not a wait for c
    assert 0.25 < time.monotonic() - t0 < 0.9
    while not running.is_empty():
        got = cluster._next_finished(running, tick_s=0.3)
    assert got == ["c"]
    assert cluster._next_finished(running, tick_s=0.3) == []  # none left: at once
