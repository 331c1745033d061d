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


def test_an_import_in_this_process_analyses_each_run_on_one_thread(monkeypatch):
    """`--workers 1` analyses in the importing process as one worker would: with
    CELLPERF_ANALYSIS_THREADS=1 while each batch runs (the analysis reads it, docs/scale.md),
    and the environment as it was afterwards. Workers get it from WORKER_ENV."""
    from cellperf.campaign import corpus

    seen = []
    monkeypatch.setattr(corpus, "analyse_batch", lambda batch: seen.append(
        (batch, corpus.os.environ.get("CELLPERF_ANALYSIS_THREADS"))) or [])
    monkeypatch.setenv("CELLPERF_ANALYSIS_THREADS", "7")
    done = list(corpus._in_process(["run-a", "run-b", "run-c"]))
    assert [b for b, _ in seen] == [t for t in batches(["run-a", "run-b", "run-c"], 1)]
    assert {threads for _, threads in seen} == {"1"} and len(done) == len(seen)
    assert corpus.os.environ["CELLPERF_ANALYSIS_THREADS"] == "7"
    monkeypatch.delenv("CELLPERF_ANALYSIS_THREADS")
    list(corpus._in_process(["run-a"]))
    assert "CELLPERF_ANALYSIS_THREADS" not in corpus.os.environ
    assert corpus.WORKER_ENV["CELLPERF_ANALYSIS_THREADS"] == "1"
