"""The command line: every subcommand has --help with examples; usage errors are one line on
stderr with exit status 2; `cellperf CMD` imports only what CMD needs."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cellperf import __version__, cli
from cellperf.errors import UserError
from tests.analysis.pcapcraft import ACK, SYN, Pcap, tcp_packet
from tests.conftest import CELLPERF, cellperf

COMMANDS_DIR = Path(cli.__file__).parent / "commands"
#: Every subcommand, from the files of the package (not from the CLI's own listing).
COMMANDS = sorted(p.stem.replace("_", "-") for p in COMMANDS_DIR.glob("*.py") if not p.stem.startswith("_"))


def _subcommands(name: str) -> dict[str, argparse.ArgumentParser]:
    _, parser = cli.command_parser(name)
    return {
        sub: p
        for action in parser._actions if isinstance(action, argparse._SubParsersAction)
        for sub, p in action.choices.items()
    }


#: Commands with subcommands (`cellperf channel`), their subcommands (`cellperf channel stats`),
#: and every command line that runs something.
GROUPS = [c for c in COMMANDS if _subcommands(c)]
SUBCOMMANDS = [f"{g} {s}" for g in GROUPS for s in _subcommands(g)]
LEAVES = [c for c in COMMANDS if c not in GROUPS] + SUBCOMMANDS


def _help_text(path: str) -> str:
    """The description a command's --help must show: its module's docstring, or for a
    subcommand its function's docstring, without the indentation."""
    name, _, sub = path.partition(" ")
    module = importlib.import_module(f"cellperf.commands.{name.replace('-', '_')}")
    return inspect.cleandoc(_subcommands(name)[sub].get_default("subcommand").__doc__ if sub else module.__doc__)


def test_commands_are_the_modules_of_the_package():
    assert COMMANDS == cli.command_names()
    assert {"analyze", "channel", "emulate", "import", "probe", "server", "version"} <= set(COMMANDS)
    assert GROUPS == ["channel", "interop", "replay", "stream", "term", "web"]


def test_root_help_lists_every_command_with_its_summary():
    r = cellperf("--help")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("Usage: cellperf ") and "Examples:" in r.stdout
    listed = r.stdout.split("\nCommands:\n")[1].split("\n\n")[0].splitlines()
    width = max(map(len, COMMANDS))
    assert listed == [f"  {c:{width}}  {_help_text(c).splitlines()[0]}" for c in COMMANDS]
    # The listing is not wrapped by argparse: summaries are kept short enough for 80 columns.
    assert all(len(line) <= 80 for line in listed), listed


def test_root_help_imports_no_command_module():
    code = ("import sys\nfrom cellperf.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit as e:\n"
            "    assert e.code == 0\nprint(' '.join(sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    modules = set(r.stderr.split())
    assert not [m for m in modules if m.startswith("cellperf.commands.")]
    assert not modules & {"rich", "polars", "pyarrow", "duckdb", "numpy"}
    assert "Commands:" in r.stdout


def test_version():
    r = cellperf("--version")
    assert r.stdout == f"cellperf, version {__version__}\n"
    assert json.loads(cellperf("version", "--json").stdout)["cellperf"] == __version__


@pytest.mark.parametrize("path", COMMANDS + SUBCOMMANDS)
def test_help_keeps_the_description_and_examples(path):
    r = cellperf(*path.split(), "--help")
    assert r.stderr == ""
    assert r.stdout.startswith(f"Usage: cellperf {path} ")
    text = _help_text(path)
    assert "\nExamples:\n" in text, f"cellperf {path}: no examples in its docstring"
    # Shown whole: the paragraphs' words in order (refilled to the terminal when wider than
    # it), example lines as written.
    assert " ".join(text.split()) in " ".join(r.stdout.split())
    for line in text.splitlines():
        if line.startswith(" "):
            assert line in r.stdout.splitlines(), line


def _required(path: str) -> list[str]:
    """Values for the required arguments of a command line ("1" parses as any of them)."""
    name, _, sub = path.partition(" ")
    parser = _subcommands(name)[sub] if sub else cli.command_parser(name)[1]
    return [arg for a in parser._actions if a.required for arg in (*a.option_strings[:1], "1")]


@pytest.mark.parametrize("path", LEAVES)
def test_unknown_option_is_one_line(path):
    r = cellperf(*path.split(), *_required(path), "--no-such-option", check=False)
    assert r.returncode == 2 and r.stdout == ""
    # Named by the parser of the command itself, even below a group (`channel stats`).
    assert r.stderr == f"cellperf: error: unrecognized arguments: --no-such-option (see 'cellperf {path} --help')\n"


@pytest.mark.parametrize("group", GROUPS)
def test_group_without_subcommand_is_one_line(group):
    for args in ([], ["--no-such-option"], ["no-such-subcommand"]):
        r = cellperf(group, *args, check=False)
        assert (r.returncode, r.stderr.count("\n")) == (2, 1), r.stderr
        assert r.stderr.startswith("cellperf: error: ") and f"(see 'cellperf {group} --help')" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["no-such-command"], "argument COMMAND: invalid choice: 'no-such-command' (choose from 'analyze', "),
    ([], "the following arguments are required: COMMAND"),
    (["--no-such-option"], "the following arguments are required: COMMAND"),
])
def test_bad_command_is_one_line(args, message):
    r = cellperf(*args, check=False)
    assert (r.returncode, r.stderr.count("\n")) == (2, 1), r.stderr
    assert r.stderr.startswith(f"cellperf: error: {message}") and r.stderr.endswith("(see 'cellperf --help')\n")


@pytest.mark.parametrize(("args", "message"), [
    ("analyze --interval x a.pcap", "argument --interval: expected a finite number of seconds > 0 and ≤ 86,400, got 'x'"),
    ("analyze --side up a.pcap", "argument --side: invalid choice: 'up' (choose from 'mn', 'cn')"),
    ("analyze {folder}", "argument CAPTURE: '{folder}' is a folder, not a file"),
    ("analyze a.pcap --out {file}", "argument --out: '{file}' is a file, not a folder"),
    ("probe cn", "the following arguments are required: -t/--test"),
    ("import {folder} --network X --date 2009-13-01", "argument --date: '2009-13-01' is not a date (YYYY-MM-DD)"),
    ("import {folder} --network X --interval 0", "argument --interval: expected a finite number of seconds > 0 and ≤ 86,400, got '0'"),
    ("interop ditg f.txt --interval -1", "argument --interval: expected a finite number of seconds > 0 and ≤ 86,400, got '-1'"),
    ("sched a.csv --users 2..4", "argument --users: the range starts at 1 (e.g. 1..8)"),
    ("sched a.csv --handoffs r.csv --handoff-interval 20", "argument --handoff-interval: not allowed with argument --handoffs"),
    ("emulate --outage-mode pause", "argument --outage-mode: invalid choice: 'pause' (choose from 'buffer', 'drop')"),
])
def test_bad_value_is_one_line_usage_error(tmp_path, args, message):
    file = tmp_path / "f"
    file.write_text("")
    fill = {"folder": tmp_path, "file": file}
    argv = args.format(**fill).split()
    prog = " ".join(argv[:2] if argv[0] in GROUPS else argv[:1])
    r = cellperf(*argv, check=False)
    assert r.returncode == 2
    assert r.stderr == f"cellperf: error: {message.format(**fill)} (see 'cellperf {prog} --help')\n"


def test_defaults_shown_in_help():
    out = cellperf("sched", "--help").stdout
    assert "[default: 1..4]" in out and "[default: 0]" in out  # --seed 0 too, though 0 == False
    assert "[default:" not in cellperf("version", "--help").stdout


@pytest.fixture
def capture(tmp_path) -> Path:
    """One TCP connection, 10 segments of 1000 bytes."""
    p = Pcap()
    p.add(0.0, tcp_packet("10.0.0.2", 40000, "10.0.0.1", 80, 100, 0, SYN, ttl=63))
    p.add(0.05, tcp_packet("10.0.0.1", 80, "10.0.0.2", 40000, 500, 101, SYN | ACK))
    p.add(0.1, tcp_packet("10.0.0.2", 40000, "10.0.0.1", 80, 101, 501, ACK, ttl=63))
    for i in range(10):
        p.add(0.1 + 0.01 * i, tcp_packet("10.0.0.1", 80, "10.0.0.2", 40000, 501 + 1000 * i, 101, ACK, data=b"x" * 1000))
    return p.write(tmp_path / "c.pcap")


def test_analyze_json_imports_only_what_it_needs(capture, tmp_path):
    """`cellperf analyze --json` is timed against tcptrace on short captures: its process loads
    neither the other commands nor the heavy libraries (checked on sys.modules, not by timing)."""
    listing = tmp_path / "modules.txt"
    code = ("import sys\nfrom cellperf.cli import main\nmain(sys.argv[2:])\n"
            "open(sys.argv[1], 'w').write(' '.join(sys.modules))")
    r = subprocess.run([sys.executable, "-c", code, listing, "analyze", "--json", capture],
                       capture_output=True, text=True, timeout=60, check=True)
    (flow,) = json.loads(r.stdout)["flows"]
    assert flow["packets"] == 13 and flow["proto"] == "tcp"
    modules = set(listing.read_text().split())
    assert {"cellperf.cli", "cellperf.commands.analyze", "cellperf._native"} <= modules
    assert [m for m in modules if m.startswith("cellperf.commands.")] == ["cellperf.commands.analyze"]
    heavy = {"click", "rich", "pyarrow", "polars", "numpy", "duckdb", "dataclasses", "inspect", "typing",
             "tempfile", "shutil", "pathlib", "datetime", "platform"}
    assert not modules & heavy, modules & heavy


def test_broken_pipe_exits_quietly(capture):
    """`cellperf analyze --json c.pcap | head -c 0`: the reader is gone before the first write."""
    read, write = os.pipe()
    os.close(read)
    with subprocess.Popen([CELLPERF, "analyze", "--json", str(capture)], stdout=write, stderr=subprocess.PIPE,
                          text=True) as p:
        os.close(write)
        _, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (0, "")


class _Command:
    """A stand-in command module whose run raises `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def run(self, args) -> None:
        raise self.error


@pytest.mark.parametrize(("error", "status", "line"), [
    (UserError("x.pcap: truncated record"), 1, "cellperf: error: x.pcap: truncated record\n"),
    (KeyboardInterrupt(), 130, "cellperf: interrupted\n"),
])
def test_errors_of_a_command(monkeypatch, capsys, error, status, line):
    monkeypatch.setattr(cli, "command_parser", lambda name: (_Command(error), cli.Parser()))
    with pytest.raises(SystemExit) as e:
        cli.main(["version"])
    assert e.value.code == status
    assert capsys.readouterr().err == line


def test_query_help_names_every_table_and_view_of_the_store():
    import re

    from cellperf.store.schema import MIGRATIONS, PARQUET_TABLES

    tables = {t for m in MIGRATIONS for t in re.findall(r"CREATE TABLE (\w+)", m)} - {"schema_info"}
    text = " ".join(cellperf("query", "--help").stdout.split())
    missing = [t for t in sorted(tables | set(PARQUET_TABLES)) if not re.search(rf"\b{t}\b", text)]
    assert missing == []



@pytest.mark.parametrize("when", ["thread", "atexit"])
def test_ctrl_c_after_the_output_ends_the_clean_up_with_exit_0(capture, when):
    """A Ctrl-C after a command's output is complete, while the libraries clean up at exit
    (CI saw `cellperf import --workers 2` die by the signal there: exit -2, nothing said)."""
    code = f"""
import atexit, os, signal, sys, threading, time
from cellperf import cli

def ctrl_c_during_clean_up():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)

if {when!r} == "atexit":  # registered before the command's own: runs after it
    atexit.register(ctrl_c_during_clean_up)
else:  # a thread the interpreter joins at exit, started once the output is complete
    done = cli._quiet_exit_on_ctrl_c
    cli._quiet_exit_on_ctrl_c = lambda: (done(), threading.Thread(target=ctrl_c_during_clean_up).start())
sys.argv[1:] = ["analyze", "--json", sys.argv[1]]
cli.main()
"""
    r = subprocess.run([sys.executable, "-c", code, capture], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    assert json.loads(r.stdout)["flows"][0]["packets"] == 13
