"""`cellperf import`: iperf3 and D-ITG results of older campaigns into a results store."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cellperf.agents.interop import DEFAULT_INTERVAL_S
from cellperf.campaign.imports import Source, import_results


@click.command()
@click.argument("store_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--iperf3", "iperf3_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Output of `iperf3 -c SERVER -J` (repeatable); the client is the mobile node.")
@click.option("--ditg", "ditg_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Per-packet text of `ITGDec RECV_LOG -l FILE` (repeatable).")
@click.option("--network", required=True, help="Network label of the imported runs (as a campaign's [[networks]] name).")
@click.option("--scenario", default="stationary", show_default=True, help="stationary or mobile.")
@click.option("--test", "test_name", help="Test label (default: TOOL-TYPE-DIRECTION, e.g. iperf3-udp-cbr-down).")
@click.option("--direction", "ditg_direction", default="up", show_default=True, type=click.Choice(["up", "down"]),
              help="D-ITG: up if its sender was the mobile node, down if its receiver was.")
@click.option("--date", type=click.DateTime(["%Y-%m-%d"]),
              help="D-ITG: day the test started, YYYY-MM-DD (default: the file's date).")
@click.option("--interval", default=DEFAULT_INTERVAL_S, show_default=True, type=click.FloatRange(0, min_open=True),
              help="D-ITG: interval of the series, seconds (iperf3 keeps its own -i intervals).")
@click.option("--campaign", "campaign_name", help="Campaign name when STORE_DIR has no store yet (default: its folder name).")
@click.option("--json", "as_json", is_flag=True, help="Print the imported runs as one JSON document.")
def command(store_dir, iperf3_files, ditg_files, network, scenario, test_name, ditg_direction, date, interval,
            campaign_name, as_json) -> None:
    """Import results measured with iperf3 (-J) or D-ITG (ITGDec -l) into the results store in
    STORE_DIR (created if absent; usually a campaign's --out), one run per file, with flows,
    per-interval series and (D-ITG) the per-packet log, so `cellperf report` and `cellperf
    query` show them beside the campaign's own runs. Importing a file again does nothing.

    \b
    Examples:
      cellperf import results/ --network SKT-WiBro --scenario mobile --iperf3 old/run-*.json
      cellperf import results/ --network KT-HSDPA --ditg recv.txt --direction down --date 2009-05-14
      cellperf report results/
    """
    sources = [Source("iperf3", p) for p in iperf3_files] + [Source("ditg", p) for p in ditg_files]
    runs = import_results(store_dir, sources, network=network, scenario=scenario, test=test_name,
                          ditg_direction=ditg_direction, date=date.date() if date else None, interval_s=interval, campaign=campaign_name)
    if as_json:
        click.echo(json.dumps({"store": str(store_dir), "runs": [r.__dict__ for r in runs]}))
        return
    for r in runs:
        click.echo(f"{r.file}: {r.status} as {r.run_id}")
    click.echo(f"results: {store_dir / 'results.duckdb'}")
