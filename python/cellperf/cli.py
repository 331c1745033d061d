"""`cellperf` command line: one group, one module per subcommand in `cellperf.commands`.

Each module in `cellperf/commands/` defines a click command named `command`; the group
finds them by listing the package, so adding a subcommand touches one new file only.

Exit status: 0 success, 1 a problem with the input or environment, 2 a usage error
(unknown option, missing argument); either error is one line on stderr.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from cellperf import __version__, commands
from cellperf.errors import UserError


class _Group(click.Group):
    """Loads subcommands lazily so `cellperf analyze` does not import the report stack."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(commands.__path__))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.list_commands(ctx):
            return None
        module = importlib.import_module(f"cellperf.commands.{name.replace('-', '_')}")
        return module.command


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cellperf")
def cli() -> None:
    """Measure, emulate and explain cellular data links.

    \b
    Examples:
      cellperf demo                          # emulated testbed, campaign, report
      cellperf analyze --mn mn.pcap --cn cn.pcap --json
      cellperf analyze capture.pcapng
    """


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except UserError as e:
        click.echo(f"cellperf: error: {e}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("cellperf: interrupted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        # One line, like every other error; the command's --help has the usage.
        command = e.ctx.command_path if e.ctx is not None else "cellperf"
        click.echo(f"cellperf: error: {e.format_message()} (see '{command} --help')", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"cellperf: error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo("cellperf: interrupted", err=True)
        sys.exit(130)
