"""`cellperf server`: the traffic agent at the correspondent node (CN)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cellperf.agents import DEFAULT_PORT, parse_rate, read_token, serve
from cellperf.errors import UserError


@click.command()
@click.option("--listen", default=f"[::]:{DEFAULT_PORT}", show_default=True, help="Control address; [::] takes IPv4 too.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), help="Shared token (else $CELLPERF_TOKEN).")
@click.option("--max-rate", default="100M", show_default=True, help="Per test and direction, bit/s (k/M/G).")
@click.option("--max-duration", default=600.0, show_default=True, type=float, help="Longest test, seconds.")
@click.option("--max-tests", default=16, show_default=True, type=int, help="Tests running at once.")
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path), help="Write a per-packet CSV log per test here.")
@click.option("--json", "as_json", is_flag=True, help="Print the listening address as one JSON line.")
def command(listen, token_file, max_rate, max_duration, max_tests, log_dir, as_json) -> None:
    """Serve `cellperf probe` tests until stopped (Ctrl-C).

    Each client authenticates with the shared token (HMAC challenge; the token never
    crosses the network), and each test is held to --max-rate, --max-duration and
    --max-tests. Data goes only to the address of the control connection that asked.

    \b
    Examples:
      cellperf server --token-file /etc/cellperf/token
      CELLPERF_TOKEN=s3cret cellperf server --listen 0.0.0.0:5250 --max-rate 50M
      cellperf server --token-file t --log-dir /var/log/cellperf
    """
    token = read_token(token_file)
    rate = parse_rate(max_rate, "--max-rate")
    if max_duration <= 0:
        raise UserError(f"--max-duration: must be positive, not {max_duration}")
    if max_tests < 1:
        raise UserError(f"--max-tests: must be at least 1, not {max_tests}")
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--log-dir {log_dir}: cannot create ({e.strerror})") from None

    def ready(address: str) -> None:
        if as_json:
            click.echo(json.dumps({"listening": address, "max_rate_bps": rate, "max_duration_s": max_duration, "max_tests": max_tests}))
        else:
            click.echo(f"cellperf server listening on {address} (max {rate:.3g} bit/s, {max_duration:g} s, {max_tests} tests)")

    try:
        serve(listen, token, rate, max_duration, max_tests, log_dir, ready)
    except KeyboardInterrupt:
        click.echo("cellperf server: stopped", err=True)
