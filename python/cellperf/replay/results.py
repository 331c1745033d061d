"""Replay fidelity checks kept in a results store (table `replay_samples`, docs/store.md): the
samples `cellperf replay check --store` and `bench/replay.py --store` measured, per workload
measure, live and replayed in each mode. The report (cellperf.report.replay) reads them back and
scores them with `cellperf.replay.scorecard`, so the scorecard has one implementation and a
report can be rebuilt from the store alone."""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pyarrow as pa

from cellperf.store import Store


def store_check(store_dir: str | os.PathLike, bundle: str, label: str, results: dict[str, dict[str, list]]) -> str:
    """Writes one check's samples (`results`: mode (`live`, `full`, `heavy`) → measure → values)
    into the store at `store_dir` (created when missing); returns the check's id."""
    check_id = f"replay-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    rows = [(mode, measure, float(v)) for mode, measures in results.items() for measure, values in measures.items()
            for v in values]
    table = pa.table({"check_id": [check_id] * len(rows), "checked_at": [dt.datetime.now(dt.timezone.utc)] * len(rows),
                      "bundle": [str(bundle)] * len(rows), "label": [label] * len(rows),
                      "mode": [r[0] for r in rows], "measure": [r[1] for r in rows], "value": [r[2] for r in rows]})
    with Store.open(store_dir, create=True) as store:
        store.con.register("_replay_rows", table)
        try:
            store.con.execute("INSERT INTO replay_samples SELECT check_id, checked_at, bundle, label, mode, measure, value "
                              "FROM _replay_rows")
        finally:
            store.con.unregister("_replay_rows")
    return check_id


def read_checks(store: Store) -> list[dict]:
    """Every stored check, oldest first: `{"check_id", "bundle", "label", "results": {mode:
    {measure: [values]}}}`."""
    df = store.frame("SELECT check_id, min(checked_at) OVER (PARTITION BY check_id) AS t, bundle, label, mode, measure, "
                     "value FROM replay_samples ORDER BY t, check_id, mode, measure")
    checks: dict[str, dict] = {}
    for r in df.iter_rows(named=True):
        c = checks.setdefault(r["check_id"], {"check_id": r["check_id"], "bundle": r["bundle"], "label": r["label"],
                                              "results": {}})
        c["results"].setdefault(r["mode"], {}).setdefault(r["measure"], []).append(r["value"])
    return list(checks.values())
