"""How `cellperf import --captures` cuts a corpus into Dask tasks (docs/scale.md): every run in
exactly one task, in order; large tasks first, so the scheduler's cost per task is spread over
many runs, and single runs at the end, so the workers finish together."""

from __future__ import annotations

import pytest

from cellperf.campaign.corpus import BATCH_RUNS, BATCH_SPLIT, batches


@pytest.mark.parametrize(("runs", "slots"), [(1, 1), (5, 2), (200, 1), (200, 2), (1000, 2), (10_000, 64)])
def test_every_run_once_large_tasks_first_single_runs_last(runs, slots):
    jobs = list(range(runs))
    tasks = batches(jobs, slots)
    assert [j for t in tasks for j in t] == jobs
    sizes = [len(t) for t in tasks]
    assert all(a >= b for a, b in zip(sizes, sizes[1:])) and max(sizes) <= BATCH_RUNS
    assert sizes[-1] == 1
    # Each task is at most 1/BATCH_SPLIT of what every slot had left when it was cut.
    left = runs
    for size in sizes:
        assert size <= max(1, -(-left // (BATCH_SPLIT * slots)))
        left -= size


def test_two_slots_get_far_fewer_tasks_than_runs():
    # 200 runs on 2 workers: a few dozen tasks, not 200 (the benchmark's corpus).
    assert 10 <= len(batches(list(range(200)), 2)) <= 40
