"""Answer SQL (DuckDB dialect) over a campaign's results store.

Tables of the store in STORE_DIR: campaign, runs, run_attempts, flows, intervals,
tcp_retransmissions, ack_compression, voip_windows, handoffs, channel_stats, page_loads,
positions, streams, terminal_sessions, gaps, delay_spikes, handoff_bursts, min_owd, handover_zones,
hop_rtt, rtp_streams, replay_samples; per-packet views
over the runs' Parquet files: packets, udp_packets, rtt, agent_log, server_log, page_objects,
keystrokes, radio_samples, sim_cwnd, sim_rtt. Schema: docs/store.md. The SQL runs read-only: one query (SELECT, WITH, FROM, DESCRIBE, SHOW, EXPLAIN ...), no access to files other
than the store's own; --upgrade migrates an older store first. Ctrl-C stops a running query
(exit 130); --timeout stops it after that many seconds (exit 1). A query that reads a view over
a damaged Parquet file is refused, naming the file; the rest of the store answers as usual
(`cellperf check` lists the damage).

On a terminal the answer is a table, floats to 6 significant digits; a result too wide for
it shows the columns that fit and names the others (a few rows: one block per row); --csv
and --json give every column and digit.

Examples:
  cellperf query results/ --tables
  cellperf query results/ "SELECT network, scenario, median(throughput_bps) \\
       FROM intervals JOIN runs USING (run_id) GROUP BY ALL"
  cellperf query results/ --json \\
       "SELECT run_id, reason FROM runs WHERE status = 'failed'"
  cellperf query results/ "SELECT * FROM voip_windows WHERE near_handoff" \\
       --csv > near.csv
  cellperf query results/ "SELECT count(*) FROM packets" --timeout 60
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cellperf.cli import terminal_width
from cellperf.errors import UserError
from cellperf.validate import number_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_dir", metavar="STORE_DIR", type=Path, help="The campaign's results folder (its --out).")
    parser.add_argument("sql", metavar="SQL", nargs="?", help="The query.")
    parser.add_argument("--tables", dest="list_tables", action="store_true",
                        help="List the tables and views with their row counts.")
    parser.add_argument("--csv", dest="as_csv", action="store_true", help="Print the result as CSV.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the result as JSON (one object per row).")
    parser.add_argument("--upgrade", action="store_true",
                        help="Migrate a store made by an older cellperf to this schema version.")
    parser.add_argument("--timeout", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=86400 * 365, unit="seconds"),
                        help="Stop the query after this many seconds (default: no limit; Ctrl-C stops it any time).")


def run(args: argparse.Namespace) -> None:
    import duckdb

    from cellperf.store import Store
    from cellperf.store.interrupt import interruptible

    sql = args.sql
    if not sql and not args.list_tables and not args.upgrade:
        raise UserError("give an SQL query, or --tables")
    if args.upgrade:
        with Store.open(args.store_dir) as store:
            print(f"{store.db_file}: schema version {store.version}")
        if not sql and not args.list_tables:
            return
    # The query itself always runs on a read-only, confined connection (docs/store.md).
    with Store.open(args.store_dir, read_only=True) as store:
        if args.list_tables:
            sql = ("SELECT table_name AS name, 'TABLE' AS kind, estimated_size AS rows "
                   "FROM duckdb_tables() WHERE schema_name = 'main' UNION ALL "
                   "SELECT view_name, 'VIEW', NULL FROM duckdb_views() WHERE NOT internal ORDER BY 1")
        store.check_read_only_sql(sql)
        damaged = store.damaged_files_read_by(sql)
        if damaged:
            more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
            raise UserError(f"{damaged[0].path}: {damaged[0].problem}{more}: the query reads view "
                            f"{damaged[0].table}, which needs it (`cellperf check {args.store_dir}` lists the damage)")
        with interruptible(store.con, args.timeout) as watch:
            try:
                frame = store.frame(sql)
            except duckdb.Error as e:
                if watch.timed_out:
                    raise UserError(f"query: stopped after --timeout {args.timeout:g} s") from None
                raise UserError(f"query: {_failure(store, sql, e)}") from None
    if args.as_json:
        print(frame.write_json())
    elif args.as_csv:
        print(frame.write_csv(), end="")
    else:
        print(format_frame(frame, terminal_width()))


def _failure(store, sql: str, e: Exception) -> str:
    """DuckDB's reason, on one line of printable text; a query that failed while reading
    per-packet files (a page damaged inside a file whose frame is whole) says where to look."""
    import duckdb

    from cellperf.store.damage import tables_read_by
    from cellperf.store.schema import PARQUET_TABLES

    text = "".join(c if c.isprintable() else "?" for c in (str(e).splitlines() or [""])[0])
    if isinstance(e, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)):
        return text
    views = tables_read_by(store.con, sql, set(PARQUET_TABLES))
    if views:
        text += (f" (while reading {', '.join(sorted(views))}: a damaged Parquet file? "
                 f"`cellperf check {store.root}` finds it)")
    return text


#: Rows printed at most (the rest is counted); a longer answer wants --csv or --json.
MAX_ROWS = 200


#: Rows up to which a result too wide for the terminal is shown as one block per row (a row
#: of a run, say); a longer one shows the columns that fit and names the others.
MAX_RECORD_ROWS = 3


def format_frame(frame, width: int) -> str:
    """The result as polars prints it when that fits `width` columns. Else, for a few rows,
    one block per row, a `column  value` line per field (like psql's expanded display); for
    more rows, the first columns that fit and the names of the others (a 36-row answer in
    blocks was 330 lines), so that a wide row never wraps into columns a few characters wide."""
    import polars as pl

    import polars.selectors as cs

    # Floats to 6 significant digits, written out (1808340, 0.00001) rather than as 1.80834e6:
    # read at a glance; --csv and --json keep every digit.
    shown = frame.head(MAX_ROWS).with_columns(cs.float().round_sig_figs(6))
    more = "" if frame.height <= MAX_ROWS else f"\n({frame.height - MAX_ROWS} more rows: use --csv or --json)"

    def table(columns: list[str]) -> str | None:
        with pl.Config(tbl_rows=MAX_ROWS, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=10_000, fmt_float="full"):
            text = str(shown.select(columns))
        return text if max(map(len, text.splitlines())) <= width else None

    whole = table(frame.columns)
    if whole is not None:
        return whole + more
    if shown.height > MAX_RECORD_ROWS:
        fits, k = None, 0
        while k < frame.width and (text := table(frame.columns[:k + 1])) is not None:
            fits, k = text, k + 1
        if fits is not None:
            left = frame.columns[k:]
            note = f"({len(left)} more columns: {', '.join(left)}; name them in SELECT, or use --csv or --json)"
            return fits + more + "\n" + "\n".join(_wrapped(note, width))
    return _records(shown, frame.height, width) + more


def _wrapped(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_on_hyphens=False)


def _records(shown, height: int, width: int) -> str:
    """One block per row, a `column  value` line per field, values cut to the width."""
    names = max(map(len, shown.columns))
    room = max(width - names - 2, 10)
    blocks = []
    for i, row in enumerate(shown.iter_rows()):
        lines = [f"-- row {i + 1} " + "-" * max(width - len(f"-- row {i + 1} "), 0)]
        for name, value in zip(shown.columns, row):
            text = "null" if value is None else str(value).replace("\n", " ")
            if len(text) > room:
                text = text[:room - 1] + "…"
            lines.append(f"{name:<{names}}  {text}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + f"\n({height} rows)"
