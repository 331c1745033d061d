"""`cellperf` command line: one module per subcommand in `cellperf.commands`, on argparse.

Each module in `cellperf/commands/` is one subcommand, found by listing the package, so adding
a subcommand touches one new file only. A command module has
- a docstring: the description in `cellperf CMD --help` (with examples); its first line is the
  command's summary in `cellperf --help`;
- `add_arguments(parser)`: declares the arguments on an argparse parser (a `Parser`);
- `run(args)`: does the work with the parsed arguments.

`cellperf CMD` imports only that command's module, and `cellperf --help` reads the summaries
from the modules' source without importing them. Start-up is part of every measurement a
campaign or benchmark makes of a short analysis, so command modules import at top level only
what declaring their arguments needs; heavy libraries (rich, polars, pyarrow, duckdb, plotly)
are imported inside the functions that use them.

Exit status: 0 success, 1 a problem with the input or environment (`UserError`), 2 a usage
error (unknown option or command, missing or malformed argument), 130 interrupted. Every error
is one line on stderr: `cellperf: error: MSG`, for a usage error followed by
`(see 'cellperf CMD --help')`.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import signal
import sys

from cellperf import __version__, commands
from cellperf.errors import UserError

DESCRIPTION = """\
Measure, emulate and explain cellular data links.

Examples:
  cellperf demo                          # emulated testbed, campaign, report
  cellperf analyze --mn mn.pcap --cn cn.pcap --json
  cellperf analyze mn.pcap
  cellperf analyze --help                # a command's options and examples
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their layout (paragraphs and examples as written); an option's help
    ends with its default, when it has one worth showing."""

    def __init__(self, prog: str, **kwargs) -> None:
        # argparse would ask shutil for the terminal width, and it builds a formatter on every
        # add_argument (to check metavars): importing shutil would add ~2 ms to every command.
        kwargs.setdefault("width", terminal_width() - 2)
        kwargs.setdefault("max_help_position", 32)
        super().__init__(prog, **kwargs)

    def add_usage(self, usage, actions, groups, prefix=None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Prose paragraphs refilled to the terminal when a line would not fit it (they are
        written ~95 wide); indented lines (examples, tables) as written."""
        import textwrap

        out, prose = [], []

        def flush() -> None:
            if prose and max(map(len, prose)) > width - len(indent):
                out.extend(textwrap.wrap(" ".join(prose), width - len(indent), break_long_words=False,
                                         break_on_hyphens=False))
            else:
                out.extend(prose)
            prose.clear()

        for line in text.splitlines():
            if line and not line[0].isspace():
                prose.append(line)
            else:
                flush()
                out.append(line)
        flush()
        return "\n".join(indent + line if line else line for line in out)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        # `is`, not `in`: 0 and 0.0 equal False but are defaults worth showing.
        if (action.option_strings and not any(default is v for v in (None, False, argparse.SUPPRESS))
                and not isinstance(default, list) and "%(default)" not in text):
            text += " [default: %(default)s]"
        return text


def terminal_width() -> int:
    """What shutil.get_terminal_size() says: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


class Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line naming the help to read, exit 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        # Strict at every level: argparse hands a subcommand's leftover arguments to its parent,
        # whose error would then name the parent's --help instead of the subcommand's.
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not self._intermixing:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    _intermixing = False

    def parse_anywhere(self, args: list[str]) -> argparse.Namespace:
        """Options before, between or after positionals (`query DIR --json SQL`), as users
        of other commands expect; argparse's plain parse binds an optional positional early.
        Sub-commands and arguments after `--` (`emulate ... -- COMMAND`) keep the plain
        parse: argparse cannot intermix those."""
        if "--" in args or any(a.nargs in (argparse.REMAINDER, argparse.PARSER) for a in self._actions):
            return self.parse_args(args)
        self._intermixing = True
        try:
            namespace, extras = self.parse_known_intermixed_args(args)
        finally:
            self._intermixing = False
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def error(self, message: str):
        sys.stderr.write(f"cellperf: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def add_subcommand(subparsers, name: str, function) -> Parser:
    """A subcommand (`cellperf channel stats`) of a command module: `function(args)` runs it,
    its docstring is the subcommand's description and its first line the summary."""
    import textwrap

    first, _, rest = (function.__doc__ or "").strip().partition("\n")
    parser = subparsers.add_parser(name, help=first, description=f"{first}\n{textwrap.dedent(rest)}")
    parser.set_defaults(subcommand=function)
    return parser


def add_subcommands(parser: Parser):
    """The subcommands of a command module; `run(args)` of that module calls `args.subcommand(args)`."""
    return parser.add_subparsers(title="commands", metavar="COMMAND", required=True)


# Argument types shared by the command modules (argparse reports their errors as usage errors).


def file_path(convert=str):
    """A path that, if it exists, is not a folder."""

    def check(text: str):
        if os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"'{text}' is a folder, not a file")
        return convert(text)

    return check


def folder_path(convert=str):
    """A path that, if it exists, is a folder."""

    def check(text: str):
        if os.path.exists(text) and not os.path.isdir(text):
            raise argparse.ArgumentTypeError(f"'{text}' is a file, not a folder")
        return convert(text)

    return check


def iso_date(text: str):
    """A day, YYYY-MM-DD, as a `datetime.date`."""
    import datetime

    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a date (YYYY-MM-DD)") from None


# The command line itself.


def command_names() -> list[str]:
    """Every subcommand: the modules of `cellperf.commands` (`_` in a module name is `-`)."""
    return sorted(
        name[:-3].replace("_", "-")
        for name in os.listdir(commands.__path__[0])
        if name.endswith(".py") and not name.startswith("_")
    )


def _module_file(name: str) -> str:
    return os.path.join(commands.__path__[0], name.replace("-", "_") + ".py")


def summary(name: str) -> str:
    """The first line of a command module's docstring, read from its source (no import)."""
    import ast
    import tokenize

    with open(_module_file(name), "rb") as f:
        for token in tokenize.tokenize(f.readline):
            if token.type == tokenize.STRING:
                return ast.literal_eval(token.string).strip().partition("\n")[0]
            if token.type not in (tokenize.ENCODING, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                break
    return ""


def root_parser() -> Parser:
    """`cellperf [--version] COMMAND`: used for `cellperf --help` and to report a bad command."""
    names = command_names()
    width = max(map(len, names))
    listing = "\n".join(f"  {name:{width}}  {summary(name)}" for name in names)
    parser = Parser(prog="cellperf", usage="%(prog)s [-h] [--version] COMMAND [ARGS ...]", description=DESCRIPTION,
                    epilog=f"Commands:\n{listing}\n\nRun 'cellperf COMMAND --help' for a command's options and examples.")
    parser.add_argument("--version", action="version", version=f"cellperf, version {__version__}")
    parser.add_argument("command", metavar="COMMAND", choices=names, help="One of the commands below.")
    return parser


def command_parser(name: str):
    """The command's module and its parser (`prog` is `cellperf NAME`)."""
    module = importlib.import_module(f"cellperf.commands.{name.replace('-', '_')}")
    parser = Parser(prog=f"cellperf {name}", description=module.__doc__)
    module.add_arguments(parser)
    return module, parser


def _quiet_exit_on_ctrl_c() -> None:
    """The work is done and said; what follows is the libraries' clean-up at exit (a Dask
    cluster's threads, DuckDB). A Ctrl-C there would kill the process by the signal with nothing
    said (exit -2). While Python still runs (threads joined, then the atexit functions: this
    one first, as the last registered) it ends the clean-up, exit 0; from the atexit functions
    on it is ignored, as the interpreter then hands SIGINT back to its default (death)."""
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(0))
    atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> None:
    """The console script (`argv` None: the process's own arguments), or a command run in
    this process with `argv`."""
    own_process = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv and argv[0] in command_names():
            name, rest = argv[0], argv[1:]
        else:
            # Prints the help or the version, or reports a missing or unknown command.
            name, rest = root_parser().parse_args(argv).command, []
        module, parser = command_parser(name)
        # What start-up made (modules, classes, the parser) lives as long as the process: the
        # cycle collector need not look at it again, at each collection or at exit (7 % of
        # the instructions of a short `cellperf analyze`).
        gc.freeze()
        module.run(parser.parse_anywhere(rest))
        # Output still buffered would meet a closed pipe after this try, at the interpreter's exit.
        sys.stdout.flush()
        if own_process:
            _quiet_exit_on_ctrl_c()
    except UserError as e:
        sys.stderr.write(f"cellperf: error: {e}\n")
        sys.exit(1)
    except BrokenPipeError:
        # The reader went away (`cellperf ... | head`): nothing more to say. Python flushes
        # stdout once more at exit; pointing it at /dev/null keeps that flush quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt:
        sys.stderr.write("cellperf: interrupted\n")
        sys.exit(130)
