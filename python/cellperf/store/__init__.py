"""The results store of a campaign: one DuckDB file (`results.duckdb`) and, beside it, one
folder per run (`runs/<run_id>/`) holding its captures, radio log, agent log and per-packet
tables as Parquet. Schema: `schema.py`, documented in docs/store.md.

    >>> from cellperf.store import Store
    >>> with Store.open("results/", read_only=True) as s:
    ...     s.sql("SELECT network, scenario, median(throughput_bps) FROM intervals "
    ...           "JOIN runs USING (run_id) GROUP BY ALL").pl()       # polars
    ...     s.table("voip_windows").df()                                 # pandas

A run is committed in one step: its folder is moved into place, then all its rows go in one
transaction. A run folder without a `runs` row is debris of a killed run and is removed by
the next writer, so a reader sees every run completely or not at all.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from cellperf.errors import UserError, os_reason
from cellperf.store import damage
from cellperf.store.schema import MIGRATIONS, PARQUET_TABLES, RUN_TABLES, SCHEMA_VERSION

DB_NAME = "results.duckdb"
RUNS_DIR = "runs"
STAGING_PREFIX = ".staging-"
#: Per-packet tables of every run: one Hive-partitioned Parquet dataset per table,
#: `dataset/TABLE/network=N/date=YYYY-MM-DD/run=RUN_ID/part-0.parquet` (docs/store.md).
DATASET_DIR = "dataset"
#: A run folder's per-packet files by name, and their tables.
PARQUET_FILES = {f"{name}.parquet": name for name in PARQUET_TABLES}

__all__ = ["DATASET_DIR", "DB_NAME", "PARQUET_TABLES", "RUNS_DIR", "SCHEMA_VERSION", "STAGING_PREFIX", "CommitPace",
           "RunRecord", "Store", "disk_full", "staging_dir", "store_path", "write_parquet"]


def store_path(path: str | os.PathLike) -> Path:
    """The database file for a campaign folder or a path to the file itself."""
    p = Path(path)
    return p / DB_NAME if p.is_dir() or p.suffix != ".duckdb" else p


class RunRecord:
    """Everything one run stores: its `runs` row, its rows in the run tables (polars or
    pyarrow), and its folder of files (staged; moved into place at commit)."""

    def __init__(self, row: dict, tables: dict | None = None, staging_dir: Path | None = None):
        self.row = row
        self.tables = tables or {}
        self.staging_dir = staging_dir


class CommitPace:
    """When a writer commits the finished runs it holds (a corpus import, a campaign): once it
    holds RUNS of them, or EVERY_S after its last commit. One transaction per run made the
    writer the bottleneck of a cluster (a 200-run simulated grid on two workers: 12 ms of the
    writer's CPU per run against 33 ms of a run, on the cores the workers run on); a kill loses
    at most what it holds (found unstored and done again on resume)."""

    RUNS = 32
    EVERY_S = 1.0

    def __init__(self) -> None:
        self.last = time.monotonic()

    def due(self, held: int) -> bool:
        return held >= self.RUNS or (held > 0 and time.monotonic() - self.last >= self.EVERY_S)

    def committed(self) -> None:
        self.last = time.monotonic()


class Store:
    """An open results store. Use `Store.open(...)` as a context manager."""

    def __init__(self, db_file: Path, con: duckdb.DuckDBPyConnection, read_only: bool):
        self.db_file = db_file
        self.root = db_file.parent
        self.runs_dir = self.root / RUNS_DIR
        self.con = con
        self.read_only = read_only
        #: Per-packet files left out of their views (`damage.DamagedFile`), found at open.
        self.damaged: list[damage.DamagedFile] = []

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, read_only: bool = False, create: bool = False) -> Store:
        """Opens the store in folder `path` (or the .duckdb file `path`), migrating an older
        schema when writable. `create` makes a new one when there is none."""
        db_file = store_path(path)
        if not db_file.exists():
            if not create:
                raise UserError(f"{path}: no results store here (expected {db_file.name}; run `cellperf run` first)")
            _create(db_file)
        try:
            # Extensions never load behind the user's back: a read-only store must not fetch or
            # run code (`query` takes SQL from the command line and runs as root).
            con = duckdb.connect(str(db_file), read_only=read_only,
                                 config={"autoinstall_known_extensions": False,
                                         "autoload_known_extensions": False})
        except duckdb.IOException as e:
            msg = str(e).splitlines()[0]
            if "lock" in msg.lower():
                raise UserError(f"{db_file}: in use by another process (is `cellperf run` still writing it?)") from None
            raise UserError(f"{db_file}: cannot open ({msg})") from None
        except duckdb.Error as e:
            raise UserError(f"{db_file}: not a results store ({str(e).splitlines()[0]})") from None
        store = cls(db_file, con, read_only)
        try:
            store._migrate()
            parquet_files = store._register_parquet_views()
            if read_only:
                store._confine(parquet_files)
        except BaseException:
            con.close()
            raise
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def write_on_one_thread(self) -> None:
        """This writer's DuckDB on one thread, for a writer beside workers on the same cores:
        an import's INSERTs from Arrow spent 7-9 ms of CPU per run on two threads (taken from
        the workers), 4.5 ms on one, and were no slower."""
        self.con.execute("SET threads TO 1")

    @property
    def version(self) -> int:
        if not self._has_table("schema_info"):
            return 0
        return self.con.execute("SELECT max(version) FROM schema_info").fetchall()[0][0] or 0

    def _has_table(self, name: str) -> bool:
        return bool(self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = 'main'", [name]
        ).fetchall()[0][0])

    def _migrate(self) -> None:
        version = self.version
        if version > SCHEMA_VERSION:
            raise UserError(f"{self.db_file}: schema version {version} is newer than this cellperf "
                            f"understands ({SCHEMA_VERSION}); upgrade cellperf")
        if version == SCHEMA_VERSION:
            return
        if self.read_only:
            raise UserError(f"{self.db_file}: schema version {version}, this cellperf uses {SCHEMA_VERSION}; "
                            "open it once for writing (e.g. `cellperf run` resume or `cellperf query --upgrade`) to migrate")
        _apply_migrations(self.con, version)

    def _register_parquet_views(self) -> list[Path]:
        """Temporary views over the per-run Parquet files, so SQL can join them with the
        tables (plain DuckDB: `SELECT * FROM 'dataset/packets/**/*.parquet'` in the folder).
        Stores written before the dataset existed keep theirs in `runs/RUN/TABLE.parquet`.
        A damaged file is left out of its view and listed in `self.damaged` (a view over it
        would fail every query, even one of `runs`: DuckDB binds views when they are made).
        Returns the files the views read."""
        every_file = []
        for name in PARQUET_TABLES:
            files = sorted(self.runs_dir.glob(f"[!.]*/{name}.parquet")) + sorted(
                (self.root / DATASET_DIR / name).glob("network=*/date=*/run=*/*.parquet"))
            readable = self._leave_out_damaged(name, files, damage.frame_problem)
            try:
                self._create_view(name, readable)
            except duckdb.Error:
                # A footer whole in length but damaged inside: find it file by file.
                readable = self._leave_out_damaged(name, readable, lambda f: damage.unreadable(self.con, f))
                self._create_view(name, readable)
            every_file += readable
        return every_file

    def _leave_out_damaged(self, table: str, files: list[Path], problem_of) -> list[Path]:
        readable = []
        for f in files:
            problem = problem_of(f)
            if problem is None:
                readable.append(f)
            else:
                self.damaged.append(damage.DamagedFile(f, table, problem))
        return readable

    def _create_view(self, name: str, files: list[Path]) -> None:
        if not files:
            return
        listing = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        # The run id is a column of every file: the partition keys are not repeated here.
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM "
                         f"read_parquet([{listing}], union_by_name = true, hive_partitioning = false)")

    def damaged_files_read_by(self, query: str) -> list[damage.DamagedFile]:
        """The damaged files left out of the views `query` reads: the query would silently
        miss their rows."""
        if not self.damaged:
            return []
        names = damage.tables_read_by(self.con, query, {d.table for d in self.damaged})
        return [d for d in self.damaged if d.table in names]

    def _confine(self, parquet_files: list[Path]) -> None:
        """Shuts a read-only connection off from the file system except the store's own
        Parquet files, then locks the settings so SQL cannot undo it. The database file itself
        is read-only by `duckdb.connect`; this stops `COPY ... TO`, `EXPORT DATABASE`,
        `ATTACH`, `read_csv('/etc/...')`, `glob(...)` and extension loading. Writing into the
        allowed Parquet files is stopped by `check_read_only_sql`, which admits only queries."""
        self.con.execute("SET allowed_paths = ?", [[str(f.resolve()) for f in parquet_files]])
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    # -- reading -------------------------------------------------------------------------

    def sql(self, query: str, params: list | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation: `.pl()` polars, `.df()` pandas, `.arrow()` pyarrow, `.fetchall()`."""
        return self.con.sql(query, params=params)

    def table(self, name: str) -> duckdb.DuckDBPyRelation:
        return self.con.table(name)

    def check_read_only_sql(self, query: str) -> None:
        """Refuses SQL other than one query (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW,
        SUMMARIZE, EXPLAIN): `query` runs what a user typed, as root, next to research data."""
        try:
            statements = self.con.extract_statements(query)
        except duckdb.Error as e:
            raise UserError(f"query: {str(e).splitlines()[0]}") from None
        if len(statements) != 1:
            raise UserError(f"query: give exactly one statement (got {len(statements)})")
        kind = statements[0].type
        if kind not in (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN):
            raise UserError(f"query: only queries are allowed on a store (got {kind.name}); "
                            "the store is read-only")

    def frame(self, query: str, params: list | None = None) -> pl.DataFrame:
        """Query result as a polars DataFrame; an INTERVAL column (`ended_at - started_at`) comes
        out as its seconds (polars reads no Arrow month-day-nano interval)."""
        try:
            rel = self.con.sql(query, params=params or None)
            if rel is not None and any(str(t) == "INTERVAL" for t in rel.types):
                quoted = ['"' + c.replace('"', '""') + '"' for c in rel.columns]
                rel = rel.project(", ".join(f"epoch({q}) AS {q}" if str(t) == "INTERVAL" else q
                                            for q, t in zip(quoted, rel.types)))
            return rel.pl()
        except duckdb.IOException as e:
            # A damaged file opens and fails only when a damaged block is read.
            raise UserError(f"{self.db_file}: cannot read the store, damaged or truncated? "
                            f"({str(e).splitlines()[0]})") from None

    def run_states(self) -> dict[str, tuple[str, str]]:
        """run_id → (status, config_sha256) of every stored run."""
        rows = self.con.execute("SELECT run_id, status, config_sha256 FROM runs").fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    def campaign(self) -> dict | None:
        # Through Arrow: DuckDB's Python conversion of TIMESTAMPTZ would need pytz.
        rows = self.frame("SELECT * FROM campaign LIMIT 1").to_dicts()
        return rows[0] if rows else None

    # -- writing -------------------------------------------------------------------------

    def set_campaign(self, row: dict) -> None:
        """Records the campaign once; later calls keep the first record."""
        if self.campaign() is None:
            cols = ", ".join(row)
            self.con.execute(f"INSERT INTO campaign ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))

    def remove_debris(self) -> list[str]:
        """Deletes staging folders and run folders that have no committed `runs` row (a run
        killed between moving its folder and committing its rows). Returns their names."""
        known = set(self.run_states())
        removed = []
        if self.runs_dir.is_dir():
            for d in self.runs_dir.iterdir():
                if d.is_dir() and (d.name.startswith(STAGING_PREFIX) or d.name not in known):
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(d.name)
        for d in self._partitions():
            if d.name.removeprefix("run=") not in known:
                shutil.rmtree(d, ignore_errors=True)
        return removed

    def _partitions(self, run_id: str = "*") -> list[Path]:
        """The run's folders in the per-packet dataset (every run's with the default)."""
        return list((self.root / DATASET_DIR).glob(f"*/network=*/date=*/run={run_id}"))

    def _move_into_dataset(self, run_folder: Path, row: dict) -> None:
        """The run's per-packet Parquet files from its folder into the dataset's partition of
        its network, day (UTC, of its start) and run."""
        started = row.get("started_at")
        day = started.astimezone(timezone.utc).date().isoformat() if isinstance(started, datetime) else "unknown"
        dataset = os.path.join(self.root, DATASET_DIR)
        # One listing of the folder, not a stat per table (this runs once per run committed).
        for name in sorted(PARQUET_FILES.keys() & set(os.listdir(run_folder))):
            part = os.path.join(dataset, PARQUET_FILES[name], f"network={row['network']}", f"date={day}",
                                f"run={row['run_id']}")
            os.makedirs(part, exist_ok=True)
            os.replace(os.path.join(run_folder, name), os.path.join(part, "part-0.parquet"))

    def staging_dir(self, run_id: str) -> Path:
        return staging_dir(self.runs_dir, run_id)

    def commit_run(self, record: RunRecord) -> None:
        """Stores one run atomically, replacing an earlier failed attempt of the same run."""
        self.commit_runs([record])

    def commit_runs(self, records: list[RunRecord], tables: dict[str, list] | None = None) -> None:
        """Stores several runs in one transaction (a corpus import commits what its workers
        have finished together: one transaction per run would make the writer the bottleneck).
        `tables`: more rows of these runs, table name → tables (polars or pyarrow) holding
        several runs' rows each, as a worker's batch joined them."""
        rows = []
        for record in records:
            run_id = record.row["run_id"]
            final = self.runs_dir / run_id
            try:
                if final.exists():  # an earlier attempt of the run: its files go
                    shutil.rmtree(final)
                    for d in self._partitions(run_id):
                        shutil.rmtree(d)
                if record.staging_dir is not None:
                    os.replace(record.staging_dir, final)
                    self._move_into_dataset(final, record.row)
            except OSError as e:
                raise _write_error(final, e) from None
            row = dict(record.row, data_dir=f"{RUNS_DIR}/{run_id}" if record.staging_dir is not None else None)
            for key in ("config", "versions", "result", "emulator", "analysis", "phases", "clock_sync"):
                if row.get(key) is not None and not isinstance(row[key], str):
                    row[key] = json.dumps(row[key])
            rows.append(row)
        ids = [r["run_id"] for r in rows]
        con = self.con
        try:
            con.execute("BEGIN TRANSACTION")
            # Only a run stored before (a failed attempt) has rows to replace; looking it up by
            # its key is cheap, a DELETE on every run table is not (it scans them).
            again = [r[0] for r in con.execute("SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?))",
                                               [ids]).fetchall()]
            if again:
                for t in ("runs", *RUN_TABLES):
                    con.execute(f"DELETE FROM {t} WHERE run_id IN (SELECT unnest(?))", [again])
            if len(rows) == 1:
                row = rows[0]
                con.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                            list(row.values()))
            else:  # one statement for the batch
                self._insert("runs", pl.DataFrame(rows, infer_schema_length=None))
            by_table: dict[str, list] = {name: list(parts) for name, parts in (tables or {}).items()}
            for record in records:
                for name, table in record.tables.items():
                    by_table.setdefault(name, []).append(table)
            for name in by_table:
                if name not in RUN_TABLES:
                    raise ValueError(f"unknown run table {name}")
            for name, parts in by_table.items():
                self._insert(name, _joined(parts))
            con.execute("COMMIT")
        except BaseException as e:
            # A COMMIT that failed (e.g. the WAL could not be written) has already ended the
            # transaction: there is nothing left to roll back then.
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            if isinstance(e, duckdb.Error) and os.strerror(errno.ENOSPC) in str(e):
                raise disk_full(self.db_file) from None
            raise

    def _insert(self, name: str, table) -> None:
        arrow = table.to_arrow() if isinstance(table, pl.DataFrame) else table
        if arrow.num_rows == 0:
            return
        columns = [c for c in arrow.column_names]
        self.con.register("_incoming", arrow)
        try:
            quoted = ", ".join(f'"{c}"' for c in columns)
            self.con.execute(f"INSERT INTO {name} ({quoted}) SELECT {quoted} FROM _incoming")
        finally:
            self.con.unregister("_incoming")


def _apply_migrations(con: duckdb.DuckDBPyConnection, version: int) -> None:
    """Takes the store from `version` to SCHEMA_VERSION in one transaction: a writer killed
    meanwhile leaves it at `version`, never between two steps."""
    con.execute("BEGIN TRANSACTION")
    try:
        for step in range(version, SCHEMA_VERSION):
            con.execute(MIGRATIONS[step])
            con.execute("INSERT INTO schema_info VALUES (?, ?)", [step + 1, datetime.now(timezone.utc)])
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


#: A new database is made under this name (plus the maker's PID), then linked into place.
NEW_DB_PREFIX = f".{DB_NAME}.new-"


def _create(db_file: Path) -> None:
    """A new store at `db_file`, made whole beside it and then linked into place, so that a
    process killed while making it leaves no store rather than an empty or half-made one
    (which readers would refuse until the next writer). Another process that made the
    store meanwhile wins: its store is kept."""
    try:
        db_file.parent.mkdir(parents=True, exist_ok=True)
        for stale in db_file.parent.glob(NEW_DB_PREFIX + "*"):
            if not _alive(stale.name.removeprefix(NEW_DB_PREFIX).partition(".")[0]):
                stale.unlink(missing_ok=True)
    except OSError as e:
        raise UserError(f"{db_file.parent}: cannot create the results folder ({os_reason(e)})") from None
    new = db_file.with_name(f"{NEW_DB_PREFIX}{os.getpid()}")
    try:
        con = duckdb.connect(str(new), config={"autoinstall_known_extensions": False,
                                               "autoload_known_extensions": False})
        try:
            _apply_migrations(con, 0)
        finally:
            con.close()
        try:
            os.link(new, db_file)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links (FAT): a rename, unless one was made
            if not db_file.exists():
                os.replace(new, db_file)
    except OSError as e:
        raise _write_error(db_file, e) from None
    except duckdb.Error as e:
        if os.strerror(errno.ENOSPC) in str(e):
            raise disk_full(db_file) from None
        raise UserError(f"{db_file}: cannot create ({str(e).splitlines()[0]})") from None
    finally:
        for leftover in (new, new.with_name(new.name + ".wal")):
            leftover.unlink(missing_ok=True)


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # another user's process
    return True


def _joined(parts: list) -> pa.Table:
    """Tables of one run table's rows (polars or pyarrow, from several runs or batches) as one
    Arrow table: their columns' union, a column a part lacks null there. Kept in Arrow: the
    writer's round trip through polars cost a corpus import 2.5 ms of CPU per run."""
    arrow = [t.to_arrow() if isinstance(t, pl.DataFrame) else t for t in parts]
    return arrow[0] if len(arrow) == 1 else pa.concat_tables(arrow, promote_options="permissive")


def staging_dir(runs_dir: Path, name: str) -> Path:
    """A fresh staging folder for a run in the store's `runs/` (also from a process that does
    not hold the store open: a Dask worker writing its run's files)."""
    d = runs_dir / f"{STAGING_PREFIX}{name}"
    shutil.rmtree(d, ignore_errors=True)
    try:
        d.mkdir(parents=True)
    except OSError as e:
        raise _write_error(runs_dir, e) from None
    return d


def disk_full(where: Path) -> UserError:
    """The one-line error that stops a campaign when `where` has no space left."""
    return UserError(f"{where}: disk full (No space left on device); finished runs are kept, "
                     "free space and run again to resume")


def _write_error(where: Path, e: OSError) -> UserError:
    return disk_full(where) if e.errno == errno.ENOSPC else UserError(f"{where}: cannot write ({os_reason(e)})")


def write_parquet(table: pa.Table | pl.DataFrame, path: Path) -> None:
    """A per-packet table written as Parquet (zstd) into a run's staging folder. Only string
    columns are dictionary-encoded (a run id on every row, names): on the numbers of a packet
    table (sequence numbers, times, IP ids) a dictionary page costs time and space, and the
    files came out 30 % smaller and 25-40 % faster to write without one."""
    import pyarrow.parquet as pq

    arrow = table.to_arrow() if isinstance(table, pl.DataFrame) else table
    strings = [f.name for f in arrow.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    try:
        pq.write_table(arrow, path, compression="zstd", use_dictionary=strings)
    except OSError as e:
        raise _write_error(path, e) from None
