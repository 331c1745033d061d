"""`cellperf query`: SQL over a campaign's results store."""

from __future__ import annotations

from pathlib import Path

import click
import duckdb

from cellperf.errors import UserError
from cellperf.store import Store


@click.command()
@click.argument("store_dir", type=click.Path(path_type=Path))
@click.argument("sql", required=False)
@click.option("--tables", "list_tables", is_flag=True, help="List the tables and views with their row counts.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the result as CSV.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (one object per row).")
@click.option("--upgrade", is_flag=True, help="Migrate a store made by an older cellperf to this schema version.")
def command(store_dir, sql, list_tables, as_csv, as_json, upgrade) -> None:
    """Answer SQL (DuckDB dialect) over the results store in STORE_DIR. Tables: campaign,
    runs, flows, intervals, tcp_retransmissions, ack_compression, voip_windows, handoffs,
    channel_stats; per-packet views over the runs' Parquet files: packets, udp_packets, rtt,
    agent_log, server_log. Schema: docs/store.md. Read-only unless --upgrade.

    \b
    Examples:
      cellperf query results/ --tables
      cellperf query results/ "SELECT network, scenario, median(throughput_bps) FROM intervals JOIN runs USING (run_id) GROUP BY ALL"
      cellperf query results/ "SELECT run_id, reason FROM runs WHERE status = 'failed'" --json
      cellperf query results/ "SELECT * FROM voip_windows WHERE near_handoff" --csv > near.csv
    """
    if not sql and not list_tables and not upgrade:
        raise UserError("give an SQL query, or --tables")
    with Store.open(store_dir, read_only=not upgrade) as store:
        if list_tables:
            sql = ("SELECT table_name AS name, 'TABLE' AS kind, estimated_size AS rows "
                   "FROM duckdb_tables() WHERE schema_name = 'main' UNION ALL "
                   "SELECT view_name, 'VIEW', NULL FROM duckdb_views() WHERE NOT internal ORDER BY 1")
        if upgrade and not sql:
            click.echo(f"{store.db_file}: schema version {store.version}")
            return
        try:
            frame = store.frame(sql)
        except duckdb.Error as e:
            raise UserError(f"query: {str(e).splitlines()[0]}") from None
    if as_json:
        click.echo(frame.write_json())
    elif as_csv:
        click.echo(frame.write_csv(), nl=False)
    else:
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
            click.echo(frame)
