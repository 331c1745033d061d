"""`cellperf version`: versions of cellperf and its native core, for bug reports."""

import json
import platform

import click

from cellperf import _native


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(as_json: bool) -> None:
    """Print the versions of cellperf, its compiled core and Python.

    \b
    Examples:
      cellperf version
      cellperf version --json       # for bug reports and campaign records
    """
    info = {"cellperf": _native.__version__, "python": platform.python_version()}
    click.echo(json.dumps(info) if as_json else "\n".join(f"{k} {v}" for k, v in info.items()))
