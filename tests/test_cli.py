"""Usage errors of every subcommand are one line on stderr with exit status 2."""

from __future__ import annotations

import click
import pytest

from cellperf.cli import cli
from tests.conftest import cellperf

COMMANDS = cli.list_commands(click.Context(cli))


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_option_is_one_line(command):
    r = cellperf(command, "--no-such-option", check=False)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("cellperf: error: No such option") and f"cellperf {command} --help" in r.stderr


def test_unknown_command_is_one_line():
    r = cellperf("no-such-command", check=False)
    assert (r.returncode, r.stderr.count("\n")) == (2, 1)
    assert "No such command 'no-such-command'" in r.stderr


def test_every_command_has_help_with_examples():
    for command in COMMANDS:
        out = cellperf(command, "--help").stdout
        assert "Usage: cellperf " + command in out
        assert "Example" in out, f"cellperf {command} --help has no examples"
