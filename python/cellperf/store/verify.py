"""Verifying a results store (`cellperf check DIR`, docs/store.md): the database opens, its
schema is a version's exactly, every table and every per-packet Parquet file reads to its
last value, and rows agree with each other (a file's rows are those its footer counts, and
belong to its partition's run; a run's rows have a `runs` row).

Everything is read, not sampled: DuckDB checks each block's checksum as it reads it, and a
Parquet page that does not decompress fails the read. Per-run tables are small beside the
Parquet datasets, which are read one file at a time (memory stays that of one row group).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from cellperf.errors import UserError
from cellperf.store import DATASET_DIR, DB_NAME, RUNS_DIR, store_path
from cellperf.store.damage import DamagedFile, frame_problem, one_line
from cellperf.store.schema import MIGRATIONS, PARQUET_TABLES, RUN_TABLES, SCHEMA_VERSION


@dataclass
class Problem:
    """One piece of damage: where (a file relative to the store, or a table's name), the
    table or per-packet view it belongs to, its run if known, and what is wrong."""

    where: str
    table: str | None
    problem: str
    run_id: str | None = None

    @property
    def what(self) -> str:
        """Short: a Parquet file is known by its view and run, a table by its name."""
        if self.where.endswith(".parquet"):
            return f"{self.table} file"
        return self.where if self.table is None else f"table {self.table}"

    def to_json(self) -> dict:
        return {"path": self.where, "table": self.table, "run_id": self.run_id, "problem": self.problem}


@dataclass
class Verdict:
    root: Path
    schema_version: int | None = None
    runs: int = 0
    tables: int = 0
    parquet_files: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        return bool(self.problems)

    def to_json(self) -> dict:
        return {"store": str(self.root), "schema_version": self.schema_version, "current_version": SCHEMA_VERSION,
                "runs": self.runs, "tables": self.tables, "parquet_files": self.parquet_files,
                "damaged": self.damaged, "problems": [p.to_json() for p in self.problems]}


def verify_store(path: str | Path) -> Verdict:
    """Reads the whole store in `path` and lists what is damaged."""
    db_file = store_path(path)
    if not db_file.is_file():
        raise UserError(f"{path}: no results store here (expected {DB_NAME})")
    verdict = Verdict(db_file.parent)
    try:
        con = duckdb.connect(str(db_file), read_only=True, config={"autoinstall_known_extensions": False,
                                                                  "autoload_known_extensions": False})
    except duckdb.Error as e:
        if "lock" in str(e).lower():
            raise UserError(f"{db_file}: in use by another process (is `cellperf run` still writing it?)") from None
        verdict.problems.append(Problem(DB_NAME, None, f"cannot open ({one_line(e)})"))
        con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        _check_parquet(con, verdict, run_ids=None)
        return verdict
    with con:
        run_ids = _check_database(con, verdict)
        _check_parquet(con, verdict, run_ids)
    return verdict


def _check_database(con: duckdb.DuckDBPyConnection, verdict: Verdict) -> set[str] | None:
    """Schema, every table read in full, rows of runs that do not exist. Returns the run ids
    (None when the runs table cannot be read)."""
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1").fetchall()]
    verdict.tables = len(tables)
    try:
        versions = [r[0] for r in con.execute("SELECT version FROM schema_info ORDER BY 1").fetchall()]
    except duckdb.Error as e:
        verdict.problems.append(Problem("schema_info", "schema_info", f"unreadable ({one_line(e)})"))
        versions = []
    verdict.schema_version = max(versions, default=None)
    if versions and versions != list(range(1, len(versions) + 1)):
        verdict.problems.append(Problem("schema_info", "schema_info",
                                        f"versions {versions} are not 1 to {len(versions)}"))
    if verdict.schema_version is not None and verdict.schema_version <= SCHEMA_VERSION:
        verdict.problems += _schema_differences(con, verdict.schema_version)
    for table in tables:
        try:
            # hash() of every column makes DuckDB read (and checksum) every block of the table.
            con.execute(f'SELECT count(*), max(hash(COLUMNS(*))) FROM "{table}"').fetchall()
        except duckdb.Error as e:
            verdict.problems.append(Problem(table, table, f"unreadable ({one_line(e)})"))
    try:
        run_ids = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
    except duckdb.Error:
        return None
    verdict.runs = len(run_ids)
    for table in (t for t in RUN_TABLES if t in tables):
        try:
            orphans = con.execute(f'SELECT run_id, count(*) FROM "{table}" WHERE run_id NOT IN '
                                  "(SELECT run_id FROM runs) GROUP BY ALL ORDER BY 1").fetchall()
        except duckdb.Error:
            continue  # unreadable: listed above
        verdict.problems += [Problem(table, table, f"{n} rows of a run that has no runs row", run)
                             for run, n in orphans]
    return run_ids


def _schema_differences(con: duckdb.DuckDBPyConnection, version: int) -> list[Problem]:
    """Tables and columns that differ from what the migrations up to `version` make."""
    expected = duckdb.connect()
    for step in MIGRATIONS[:version]:
        expected.execute(step)
    query = ("SELECT table_name, column_name, data_type FROM information_schema.columns "
             "WHERE table_schema = 'main' ORDER BY ALL")
    want = {(t, c): d for t, c, d in expected.execute(query).fetchall()}
    have = {(t, c): d for t, c, d in con.execute(query).fetchall()}
    out = []
    for (table, column), kind in want.items():
        if (table, column) not in have:
            out.append(Problem(table, table, f"schema version {version}: column {column} is missing"))
        elif have[table, column] != kind:
            out.append(Problem(table, table, f"column {column} is {have[table, column]}, schema version {version} "
                                             f"has {kind}"))
    return out


def _parquet_files(root: Path) -> list[tuple[str, Path]]:
    files = []
    for name in PARQUET_TABLES:
        files += [(name, f) for f in sorted((root / RUNS_DIR).glob(f"[!.]*/{name}.parquet"))]
        files += [(name, f) for f in sorted((root / DATASET_DIR / name).glob("network=*/date=*/run=*/*.parquet"))]
    return files


def _check_parquet(con: duckdb.DuckDBPyConnection, verdict: Verdict, run_ids: set[str] | None) -> None:
    files = _parquet_files(verdict.root)
    verdict.parquet_files = len(files)
    for table, path in files:
        run = DamagedFile(path, table, "").run_id
        where = str(path.relative_to(verdict.root))
        problem = frame_problem(path) or _read_problem(con, path, run)
        if problem is None and run_ids is not None and run not in run_ids:
            problem = "its run has no runs row (debris of a killed run; the next writer removes it)"
        if problem is not None:
            verdict.problems.append(Problem(where, table, problem, run))


def _read_problem(con: duckdb.DuckDBPyConnection, path: Path, run: str | None) -> str | None:
    """Reads every value of the file; says what does not add up."""
    file = str(path)
    try:
        footer_rows = con.execute("SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata(?)",
                                  [file]).fetchall()[0][0]
        has_run_id = con.execute("SELECT count(*) FROM parquet_schema(?) WHERE name = 'run_id'",
                                 [file]).fetchall()[0][0]
        if has_run_id:
            query, params = ("SELECT count(*), count(*) FILTER (WHERE run_id IS DISTINCT FROM ?), "
                             "max(hash(COLUMNS(*))) FROM read_parquet(?)", [run, file])
        else:
            query, params = "SELECT count(*), 0, max(hash(COLUMNS(*))) FROM read_parquet(?)", [file]
        read_rows, others = con.execute(query, params).fetchall()[0][:2]  # then a hash per column
    except duckdb.Error as e:
        return f"unreadable ({one_line(e)})"
    if read_rows != footer_rows:
        return f"{read_rows} rows read, its footer counts {footer_rows}"
    if others:
        return f"{others} rows of another run than its folder's ({run})"
    return None
