"""Answer SQL (DuckDB dialect) over a campaign's results store.

Tables of the store in STORE_DIR: campaign, runs, flows, intervals, tcp_retransmissions,
ack_compression, voip_windows, handoffs, channel_stats; per-packet views over the runs' Parquet
files: packets, udp_packets, rtt, agent_log, server_log. Schema: docs/store.md. The SQL runs
read-only: one query (SELECT, WITH, FROM, DESCRIBE, SHOW, EXPLAIN ...), no access to files other
than the store's own; --upgrade migrates an older store first.

Examples:
  cellperf query results/ --tables
  cellperf query results/ "SELECT network, scenario, median(throughput_bps) FROM intervals JOIN runs USING (run_id) GROUP BY ALL"
  cellperf query results/ "SELECT run_id, reason FROM runs WHERE status = 'failed'" --json
  cellperf query results/ "SELECT * FROM voip_windows WHERE near_handoff" --csv > near.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cellperf.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_dir", metavar="STORE_DIR", type=Path, help="The campaign's results folder (its --out).")
    parser.add_argument("sql", metavar="SQL", nargs="?", help="The query.")
    parser.add_argument("--tables", dest="list_tables", action="store_true",
                        help="List the tables and views with their row counts.")
    parser.add_argument("--csv", dest="as_csv", action="store_true", help="Print the result as CSV.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print the result as JSON (one object per row).")
    parser.add_argument("--upgrade", action="store_true",
                        help="Migrate a store made by an older cellperf to this schema version.")


def run(args: argparse.Namespace) -> None:
    import duckdb

    from cellperf.store import Store

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
        try:
            frame = store.frame(sql)
        except duckdb.Error as e:
            raise UserError(f"query: {str(e).splitlines()[0]}") from None
    if args.as_json:
        print(frame.write_json())
    elif args.as_csv:
        print(frame.write_csv(), end="")
    else:
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
            print(frame)
