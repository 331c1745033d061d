"""The results store: migration from the previous schema, atomic run commits, debris removal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import datetime, timezone

import duckdb
import polars as pl
import pytest

from cellperf.errors import UserError
from cellperf.store import RunRecord, Store
from cellperf.store.schema import MIGRATIONS, SCHEMA_VERSION

T0 = 1_700_000_000.0


def run_row(run_id: str, status: str = "ok", interval_s: float = 5.0) -> dict:
    return {"run_id": run_id, "network": "WiBro", "scenario": "mobile", "test": "voip", "test_type": "voip",
            "repetition": 1, "config": {"interval_s": interval_s}, "config_sha256": "x", "status": status,
            "started_at": datetime.fromtimestamp(T0, timezone.utc)}


def make_v1(path) -> None:
    """A store as the previous cellperf (schema 1) wrote it, with one run."""
    con = duckdb.connect(str(path))
    con.execute(MIGRATIONS[0])
    con.execute("INSERT INTO schema_info VALUES (1, now())")
    con.execute("INSERT INTO runs (run_id, network, scenario, test, test_type, repetition, config, config_sha256, status) "
                "VALUES ('r1', 'WiBro', 'mobile', 'voip', 'voip', 1, '{\"interval_s\": 5.0}', 'x', 'ok')")
    # Intervals starting at T0 + 0, 5, ..., 45 s; one handoff at T0 + 22 s.
    for k in range(10):
        con.execute("INSERT INTO intervals (run_id, flow_id, direction, \"interval\", start_ts, throughput_bps) "
                    "VALUES ('r1', 1, 'downlink', ?, to_timestamp(?), 1e6)", [k, T0 + 5 * k])
        con.execute("INSERT INTO voip_windows (run_id, direction, \"window\", window_start, window_end, r, status) "
                    "VALUES ('r1', 'down', ?, to_timestamp(?), to_timestamp(?), 90, 'ok')", [k, T0 + 5 * k, T0 + 5 * k + 5])
    con.execute("INSERT INTO handoffs (run_id, time_s, kind) VALUES ('r1', ?, 'inter-BS')", [T0 + 22])
    con.execute("INSERT INTO flows (run_id, flow_id, role, proto, direction) VALUES ('r1', 7, 'data', 'tcp', 'downlink')")
    con.execute("INSERT INTO tcp_retransmissions (run_id, flow_id, class) VALUES ('r1', 7, 'normal')")
    con.close()


def test_migration_from_version_1_keeps_rows_and_marks_handoff_windows(tmp_path):
    db = tmp_path / "results.duckdb"
    make_v1(db)
    with pytest.raises(UserError, match=f"schema version 1, this cellperf uses {SCHEMA_VERSION}"):
        Store.open(tmp_path, read_only=True)
    with Store.open(tmp_path) as s:
        assert s.version == SCHEMA_VERSION == len(MIGRATIONS)
        near = s.frame('SELECT "interval", near_handoff FROM intervals ORDER BY 1')
        # [start, start + 5) overlaps [22 − 5, 22 + 5] for starts 15, 20 and 25 s: intervals 3, 4, 5.
        assert near.filter(pl.col("near_handoff"))["interval"].to_list() == [3, 4, 5]
        assert near.height == 10
        w = s.frame('SELECT "window" FROM voip_windows WHERE near_handoff ORDER BY 1')["window"].to_list()
        assert w == [3, 4, 5]
        assert s.frame("SELECT count(*) AS n FROM channel_stats")["n"][0] == 0
        for table in ("page_loads", "positions", "streams", "terminal_sessions"):
            assert s.frame(f"SELECT count(*) AS n FROM {table}")["n"][0] == 0
        # Version 4: a stored TCP connection had one entry, its own connection; its
        # retransmissions take its direction.
        assert s.frame("SELECT connection_id FROM flows").rows() == [(7,)]
        assert s.frame("SELECT direction FROM tcp_retransmissions").rows() == [("downlink",)]
    # Migrated once: a read-only open now works, and the history is recorded.
    with Store.open(tmp_path, read_only=True) as s:
        assert s.frame("SELECT version FROM schema_info ORDER BY 1")["version"].to_list() == list(range(1, len(MIGRATIONS) + 1))


def test_newer_store_is_refused(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        s.con.execute("INSERT INTO schema_info VALUES (99, now())")
    with pytest.raises(UserError, match="schema version 99 is newer"):
        Store.open(tmp_path)


def test_not_a_store_and_missing_store(tmp_path):
    with pytest.raises(UserError, match="no results store here"):
        Store.open(tmp_path / "nothing")
    bad = tmp_path / "results.duckdb"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UserError, match="results.duckdb"):
        Store.open(tmp_path)


def test_commit_is_all_or_nothing_and_replaces_a_failed_attempt(tmp_path):
    with Store.open(tmp_path, create=True) as s:
        staging = s.staging_dir("r1-1")
        (staging / "probe.json").write_text("{}")
        s.commit_run(RunRecord(run_row("r1", "failed") | {"reason": "server unreachable"}, {}, staging))
        assert s.run_states() == {"r1": ("failed", "x")}
        # A retry whose rows cannot be stored (a column the schema lacks) leaves the failed row as it was.
        bad = pl.DataFrame({"run_id": ["r1"], "time_s": [1.0], "kind": ["inter-BS"], "no_such_column": [1]})
        with pytest.raises(duckdb.Error):
            s.commit_run(RunRecord(run_row("r1"), {"handoffs": bad}, None))
        assert s.run_states() == {"r1": ("failed", "x")}
        assert s.frame("SELECT count(*) AS n FROM handoffs")["n"][0] == 0
        good = pl.DataFrame({"run_id": ["r1", "r1"], "time_s": [1.0, 2.0], "kind": ["inter-BS", "inter-sector"]})
        s.commit_run(RunRecord(run_row("r1"), {"handoffs": good}, s.staging_dir("r1-2")))
        assert s.run_states() == {"r1": ("ok", "x")}
        assert s.frame("SELECT count(*) AS n FROM runs")["n"][0] == 1
        assert s.frame("SELECT count(*) AS n FROM handoffs")["n"][0] == 2
        assert json.loads(s.frame("SELECT config FROM runs")["config"][0]) == {"interval_s": 5.0}
        # Folders of runs killed before their commit are removed; committed ones stay.
        (s.runs_dir / "r9").mkdir()
        s.staging_dir("r8-7")
        assert sorted(s.remove_debris()) == [".staging-r8-7", "r9"]
        assert sorted(p.name for p in s.runs_dir.iterdir()) == ["r1"]


# A writer killed (SIGKILL) half-way through the migrations: the store must be at a version,
# never between two (issue 31 item 7: a kill -9 early in an import left a store at version 1
# that `query` refused until the next writer). The kill is real: the connection is wrapped so
# that the process kills itself as it is about to run migration step KILL_AT.
KILLED_WRITER = """
import os, signal, sys
import duckdb
from cellperf.store.schema import MIGRATIONS

KILL_AT = int(sys.argv[2])
connect = duckdb.connect


class KilledMidMigration:
    def __init__(self, con):
        self._con = con

    def execute(self, sql, *args):
        if sql == MIGRATIONS[KILL_AT]:
            os.kill(os.getpid(), signal.SIGKILL)
        return self._con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._con, name)


duckdb.connect = lambda *a, **k: KilledMidMigration(connect(*a, **k))
from cellperf.store import Store

Store.open(sys.argv[1], create=True)
"""


def _killed_writer(folder, kill_at: int) -> None:
    p = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(folder), str(kill_at)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr


def test_a_writer_killed_while_making_a_store_leaves_no_store(tmp_path):
    _killed_writer(tmp_path, 3)
    assert not (tmp_path / "results.duckdb").exists()  # not one at version 3
    with pytest.raises(UserError, match="no results store here"):
        Store.open(tmp_path, read_only=True)
    with Store.open(tmp_path, create=True) as s:
        assert s.version == SCHEMA_VERSION
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.duckdb"]  # the killed one's file went


def test_a_writer_killed_while_migrating_leaves_the_old_version(tmp_path):
    make_v1(tmp_path / "results.duckdb")
    _killed_writer(tmp_path, 4)
    with duckdb.connect(str(tmp_path / "results.duckdb"), read_only=True) as con:
        assert con.execute("SELECT max(version), count(*) FROM schema_info").fetchall() == [(1, 1)]
        assert con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'page_loads'"
                           ).fetchall() == [(0,)]
    with Store.open(tmp_path) as s:
        assert s.version == SCHEMA_VERSION
        assert s.frame('SELECT count(*) AS n FROM intervals WHERE near_handoff')["n"][0] == 3
