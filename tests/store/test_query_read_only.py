"""`cellperf query` is read-only for real (issue 18 item 1): no statement a user types can
write the store, its Parquet files or anything else, nor read files outside the store."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import datetime, timezone

import duckdb
import polars as pl
import pytest

from cellperf.store import RunRecord, Store, write_parquet
from tests.conftest import cellperf


def make_store(root):
    with Store.open(root, create=True) as s:
        staging = s.staging_dir("r1")
        write_parquet(pl.DataFrame({"ts": [1.0, 2.0, 3.0], "size": [60, 1500, 1500]}), staging / "packets.parquet")
        row = {"run_id": "r1", "network": "WiBro", "scenario": "mobile", "test": "bulk", "test_type": "tcp-bulk",
               "repetition": 1, "config": {}, "config_sha256": "x", "status": "ok",
               "started_at": datetime(2026, 11, 24, tzinfo=timezone.utc)}
        s.commit_run(RunRecord(row, {}, staging))
    return root


def digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


def query(*args):
    return cellperf("query", *map(str, args), check=False, timeout=60)


def test_queries_still_read_tables_and_the_runs_parquet(tmp_path):
    store = make_store(tmp_path / "out")
    p = query(store, "--json", "SELECT count(*) AS n, sum(size)::BIGINT AS bytes FROM packets")
    assert p.returncode == 0, p.stderr
    assert '"n":3' in p.stdout.replace(" ", "") and '"bytes":3060' in p.stdout.replace(" ", "")
    p = query(store, "SELECT run_id, status FROM runs")
    assert p.returncode == 0 and "r1" in p.stdout


def test_an_interval_is_given_in_seconds(tmp_path):
    store = make_store(tmp_path / "out")
    p = query(store, "--json", "SELECT started_at + INTERVAL 90 SECOND - started_at AS \"run time\", run_id FROM runs")
    assert p.returncode == 0 and not p.stderr, p.stderr  # polars cannot read DuckDB's interval: a traceback
    assert json.loads(p.stdout) == [{"run time": 90.0, "run_id": "r1"}]


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO '{store}/results.duckdb'",
    "COPY (SELECT 42 AS size) TO '{store}/runs/r1/packets.parquet' (FORMAT parquet)",
    "COPY runs TO '{tmp}/leak.csv'",
    "EXPORT DATABASE '{tmp}/export'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM glob('/root/*')",
    "SELECT * FROM read_text('/etc/hostname')",
    "ATTACH '{tmp}/other.duckdb' (READ_WRITE)",
    "SET enable_external_access = true",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE TABLE evil AS SELECT 1",
    "DROP TABLE runs",
    "DELETE FROM runs",
    "SELECT 1; COPY (SELECT 1) TO '{tmp}/two.csv'",
])
def test_writes_and_outside_reads_are_refused_and_the_store_unchanged(tmp_path, sql):
    store = make_store(tmp_path / "out")
    other = duckdb.connect(str(tmp_path / "other.duckdb"))
    other.execute("CREATE TABLE keep AS SELECT 1 AS a")
    other.close()
    before = digest(tmp_path)
    p = query(store, sql.format(store=store, tmp=tmp_path))
    assert p.returncode == 1, p.stdout
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "query" in p.stderr
    assert digest(tmp_path) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["other.duckdb", "out"]
    # The store still opens and answers.
    assert query(store, "SELECT count(*) FROM runs").returncode == 0


def test_options_are_accepted_after_the_folder(tmp_path):
    store = make_store(tmp_path / "out")
    p = query(store, "--json", "SELECT run_id FROM runs")
    assert p.returncode == 0, p.stderr
    assert '"run_id":"r1"' in p.stdout.replace(" ", "")
    p = query("--csv", store, "SELECT run_id FROM runs")
    assert p.returncode == 0 and p.stdout.splitlines() == ["run_id", "r1"]


#: A value of each column type the store uses, for filling every table with one row.
_SAMPLE = {"VARCHAR": "'x'", "JSON": "'{}'", "BOOLEAN": "true", "DOUBLE": "1.5", "INTEGER": "1", "BIGINT": "1",
           "UINTEGER": "1", "UBIGINT": "1", "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ '2026-11-24 10:00:00+00'"}


def test_every_table_reads_with_plain_duckdb(tmp_path):
    """docs/store.md: the store is plain DuckDB. Every table, filled with a row of every
    column type (TIMESTAMPTZ converts to Python through pytz), reads with the `duckdb`
    package alone, in a fresh interpreter that imports nothing of cellperf."""
    store = make_store(tmp_path / "out")
    db = store / "results.duckdb"
    con = duckdb.connect(str(db))
    tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    for table in tables:
        cols = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                           "ORDER BY column_index", [table]).fetchall()
        values = ", ".join("'ok'" if name == "status" else _SAMPLE[kind] for name, kind in cols)
        con.execute(f'INSERT INTO "{table}" VALUES ({values})')
    con.close()
    script = ("import duckdb, sys, datetime\n"
              "con = duckdb.connect(sys.argv[1], read_only=True)\n"
              "for t in sys.argv[2:]:\n"
              "    rows = con.execute(f'SELECT * FROM \"{t}\"').fetchall()\n"
              "    stamps = [v for r in rows for v in r if isinstance(v, datetime.datetime)]\n"
              "    print(t, len(rows), len(stamps))\n")
    out = subprocess.run([sys.executable, "-I", "-c", script, str(db), *tables], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    counts = {t: (int(n), int(k)) for t, n, k in (line.split() for line in out.stdout.splitlines())}
    assert set(counts) == set(tables) and {"runs", "flows", "intervals", "tcp_retransmissions"} <= set(counts)
    assert all(n >= 1 for n, _ in counts.values()), counts
    assert counts["runs"][1] >= 2 and counts["intervals"][1] >= 1, counts


@pytest.mark.parametrize("command", [("report",), ("query", "SELECT * FROM runs")])
def test_a_truncated_store_is_one_line(tmp_path, command):
    """Issue 18 item 8: a store cut to half its size opens, and fails where a block is missing:
    one line naming the file, exit 1, no traceback."""
    store = make_store(tmp_path / "out")
    db = store / "results.duckdb"
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 2)
    p = cellperf(command[0], store, *command[1:], check=False, timeout=60)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "results.duckdb" in p.stderr, p.stderr
