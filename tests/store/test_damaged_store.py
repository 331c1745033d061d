"""A damaged per-packet file fails only what reads it (issue 31 item 5): truncating one Parquet
file made every `query` (even `SELECT count(*) FROM runs`) and `report` fail with a traceback.
The store here is real: a campaign of simulated runs (no root), whose window series are
Parquet in the dataset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from cellperf.store import Store
from cellperf.store.schema import SCHEMA_VERSION
from cellperf.store.verify import verify_store
from tests.conftest import cellperf

CAMPAIGN = """\
[campaign]
name = "damaged"

[[tests]]
name = "pf"
type = "simulate"
scheduler = "pf"
duration = 20
repetitions = 3
channel = "ge:good=1mbit,bad=100kbit,switch=1"
"""
DAMAGED_RUN = "simulated.simulated.pf.2"


@pytest.fixture(scope="module")
def whole_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("damaged")
    (root / "c.toml").write_text(CAMPAIGN)
    cellperf("run", root / "c.toml", "--out", root / "store", timeout=120)
    return root / "store"


def part(store: Path, table: str, run_id: str) -> Path:
    (path,) = (store / "dataset" / table).glob(f"network=*/date=*/run={run_id}/part-0.parquet")
    return path


@pytest.fixture
def truncated(whole_store, tmp_path) -> tuple[Path, Path]:
    """A copy of the store with one run's sim_cwnd file cut to 100 bytes."""
    store = tmp_path / "store"
    shutil.copytree(whole_store, store)
    victim = part(store, "sim_cwnd", DAMAGED_RUN)
    with open(victim, "r+b") as f:
        f.truncate(100)
    return store, victim


def one_line(p) -> str:
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cellperf: error: "), p.stderr
    return lines[0]


def test_a_truncated_file_fails_only_the_queries_that_read_it(truncated):
    store, victim = truncated
    # The tables and the other per-packet view answer.
    p = cellperf("query", store, "SELECT (SELECT count(*) FROM runs) AS runs, "
                 "(SELECT count(DISTINCT run_id) FROM sim_rtt) AS rtt_runs", "--csv")
    assert p.stdout == "runs,rtt_runs\n3,3\n"
    p = cellperf("query", store, "SELECT count(*) FROM sim_cwnd", check=False)
    assert p.returncode == 1
    line = one_line(p)
    assert str(victim) in line and "truncated (100 bytes" in line and "view sim_cwnd" in line


def test_the_report_marks_the_run_and_draws_the_rest(truncated):
    store, _ = truncated
    cellperf("report", store, timeout=120)
    page = (store / "report.html").read_text()
    note = page[page.index('id="damaged-runs"'):]
    note = note[:note.index("</section>")]
    assert f"<td>{DAMAGED_RUN}</td><td>sim_cwnd</td>" in note and "truncated" in note
    assert 'id="sim-001-cwnd"' in page or "data-kind=\"figure\"" in page  # the figures are still drawn


def test_a_view_is_read_by_name_not_by_a_column_of_the_same_name(truncated):
    with Store.open(truncated[0], read_only=True) as s:
        assert [d.run_id for d in s.damaged] == [DAMAGED_RUN]
        for sql in ("SELECT * FROM sim_cwnd", "WITH x AS (FROM Sim_Cwnd) SELECT 1", "DESCRIBE sim_cwnd",
                    "SELECT 1 WHERE 2 IN (SELECT 1 FROM runs JOIN sim_cwnd USING (run_id))",
                    "EXPLAIN SELECT * FROM sim_cwnd"):
            assert [d.table for d in s.damaged_files_read_by(sql)] == ["sim_cwnd"], sql
        for sql in ("SELECT sim_cwnd FROM (SELECT 1 AS sim_cwnd)", "SELECT 'sim_cwnd'", "SELECT * FROM sim_rtt"):
            assert s.damaged_files_read_by(sql) == [], sql


def test_check_lists_the_damage_and_exits_1(whole_store, tmp_path):
    verdict = verify_store(whole_store)
    assert not verdict.damaged and verdict.runs == 3 and verdict.parquet_files == 6

    store = tmp_path / "store"
    shutil.copytree(whole_store, store)
    with open(part(store, "sim_cwnd", DAMAGED_RUN), "r+b") as f:
        f.truncate(100)
    # A page damaged inside a file whose frame (magic, footer) is whole: found by reading it all.
    inside = part(store, "sim_rtt", "simulated.simulated.pf.1")
    data = bytearray(inside.read_bytes())
    data[40:200] = bytes(b ^ 0x5A for b in data[40:200])
    inside.write_bytes(bytes(data))

    p = cellperf("check", store, "--json", check=False)
    assert p.returncode == 1
    verdict = json.loads(p.stdout)
    assert verdict["damaged"] and verdict["schema_version"] == verdict["current_version"]
    found = {(d["run_id"], d["table"]): d["problem"] for d in verdict["problems"]}
    assert set(found) == {(DAMAGED_RUN, "sim_cwnd"), ("simulated.simulated.pf.1", "sim_rtt")}, found
    assert found[DAMAGED_RUN, "sim_cwnd"].startswith("truncated")
    assert found["simulated.simulated.pf.1", "sim_rtt"].startswith("unreadable")

    p = cellperf("check", store, check=False)
    assert p.returncode == 1 and p.stderr == ""
    assert max(map(len, p.stdout.splitlines())) <= 80
    assert "damaged: 2" in p.stdout and DAMAGED_RUN in p.stdout

    # The damaged page fails the query that reads it, in one line that says where to look.
    line = one_line(cellperf("query", store, "SELECT * FROM sim_rtt", check=False))
    assert "sim_rtt" in line and "cellperf check" in line


def test_rows_of_a_run_without_a_runs_row_are_damage(whole_store, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(whole_store, store)
    with duckdb.connect(str(store / "results.duckdb")) as con:
        con.execute("DELETE FROM runs WHERE run_id = ?", [DAMAGED_RUN])
        con.execute("ALTER TABLE gaps DROP COLUMN lost")
    verdict = verify_store(store)
    assert {(d.table, d.run_id) for d in verdict.problems} == {
        ("flows", DAMAGED_RUN), ("sim_cwnd", DAMAGED_RUN), ("sim_rtt", DAMAGED_RUN), ("gaps", None)}, verdict
    assert [d.problem for d in verdict.problems if d.table == "gaps"] == [
        f"schema version {SCHEMA_VERSION}: column lost is missing"]
