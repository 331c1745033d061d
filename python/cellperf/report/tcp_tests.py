"""The TCP test flows seed 000's Fig. 4.3 (throughput box plot) and Table 4.2 (retransmission
classes) are made of, from every kind of run that has them: a `tcp-bulk` run's data flows, a
group run's `tcp-bulk` members' and a `window-sweep` run's steps' connections, each only in the
direction its probe ran (a download's connection also carries the probe's few bytes up: no
test flow), each with the label its box and table row carry."""

from __future__ import annotations

import json

import polars as pl

from cellperf.report.probe_docs import DIRECTIONS, probe_doc, sweep_steps
from cellperf.store import Store

COLUMNS = {"run_id": pl.Utf8, "flow_id": pl.Int64, "direction": pl.Utf8, "network": pl.Utf8, "scenario": pl.Utf8,
           "label": pl.Utf8}


def tcp_test_flows(store: Store) -> pl.DataFrame:
    """(run_id, flow_id, direction) of each TCP test flow with its network, scenario and label:
    the network for a `tcp-bulk` run; "network test:member" for a group's member; "network
    window N KB" for a window-sweep step."""
    flows = store.frame("""
        SELECT r.network, r.scenario, r.test, r.test_type, r.run_id, r.config, r.result, r.direction AS test_direction,
               f.flow_id, f.direction, f.member
        FROM runs r JOIN flows f USING (run_id)
        WHERE r.status = 'ok' AND r.test_type IN ('tcp-bulk', 'group', 'window-sweep')
          AND f.role = 'data' AND f.proto = 'tcp'
        ORDER BY r.run_id, f.direction, f.start_s, f.flow_id""")
    rows = []
    for (run_id,), g in flows.group_by(["run_id"], maintain_order=True):
        first = g.row(0, named=True)
        base = {"run_id": run_id, "network": first["network"], "scenario": first["scenario"]}

        def add(fl: pl.DataFrame, label: str) -> None:
            rows.extend({**base, "flow_id": f, "direction": d, "label": label}
                        for f, d in zip(fl["flow_id"], fl["direction"]))

        if first["test_type"] == "tcp-bulk":
            # The run's own direction; imported captures (no direction) keep every flow.
            wanted = DIRECTIONS.get(first["test_direction"])
            add(g.filter(pl.col("direction").is_in(wanted)) if wanted else g, first["network"])
        elif first["test_type"] == "group":
            config = json.loads(first["config"]) if isinstance(first["config"], str) else first["config"] or {}
            for name, mtype, _ in config.get("members") or []:
                if mtype != "tcp-bulk":
                    continue
                wanted = DIRECTIONS.get(probe_doc(first["result"], name).get("direction"), ())
                add(g.filter((pl.col("member") == name) & pl.col("direction").is_in(wanted)),
                    f"{first['network']} {first['test']}:{name}")
        else:
            config = json.loads(first["config"]) if isinstance(first["config"], str) else first["config"] or {}
            _, steps = sweep_steps(probe_doc(first["result"], None), config.get("options") or {}, g)
            for step, fl in steps:
                if fl is not None:
                    add(fl, f"{first['network']} window {step['window_bytes'] / 1024:g} KB")
    return pl.DataFrame(rows, schema=COLUMNS)
