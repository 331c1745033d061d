"""The examples of every `--help` and of README.md and docs/*.md, run as written (issue 28 §5).

Each example is run in one folder holding the sample data of examples/data (docs: its
README.md), in the order the help texts give them, so an example may read what an earlier
one wrote (`channel fit ... -o model.json`, then `channel generate model.json ...`); those
that make the results store `results/` run first (`cellperf import results/ --captures
runs.csv`, the shipped capture pair), so the query, check and report examples read it (one
without a folder runs inside it). Examples that need root (`sudo ...`: the emulator, a
measured campaign) run in a folder of their own under the netns marker. An example that
needs what this host cannot give a test (a server elsewhere, a cluster, minutes of
emulation) is not run: `why_not_run` says which, and the test keeps that list from growing
unnoticed. What an example prints for people must fit 80 columns (issue 28 §2). An example
with shell syntax runs in a shell; the plain ones run one after another in one Python process
through cellperf's entry point (`_Worker`), which saves an interpreter start per example.
"""

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "data"
#: The installed console script beside the running Python, as conftest.CELLPERF.
CELLPERF = [str(Path(sys.executable).with_name("cellperf"))]
ENV = {**os.environ, "COLUMNS": "80"}


def _cellperf(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CELLPERF, *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=timeout)


@functools.cache
def _help(*command: str) -> str:
    return _cellperf(*command, "--help").stdout


@functools.cache
def _commands() -> list[list[str]]:
    """Every command and sub-command, as `cellperf --help` and each group's help list them."""
    out = []
    top = _help()
    for name in re.findall(r"^  ([a-z]+)  ", top.split("Commands:", 1)[1], re.M):
        out.append([name])
        text = _help(name)
        # A group's sub-commands, listed under `commands:` (`  COMMAND`, then one per line).
        group = re.search(r"^commands:\n  COMMAND\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
        out += [[name, sub] for sub in re.findall(r"^    ([a-z0-9-]+)\b", group.group(1), re.M)] if group else []
    return out


def help_examples() -> list[str]:
    """The example lines of every help text (a line ending in a backslash joined with the next)."""
    examples = []
    for command in [[], *_commands()]:
        text = _help(*command)
        block = re.search(r"^Examples:\n(.*?)(?:\n\S|\Z)", text, re.M | re.S)
        if not block:
            continue
        joined = re.sub(r"\\\n\s*", "", block.group(1))
        examples += [line.strip() for line in joined.splitlines() if "cellperf " in line]
    return list(dict.fromkeys(examples))


def doc_examples() -> list[str]:
    """The command lines in README.md's and docs/*.md's code blocks that start with cellperf."""
    examples = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), re.S):
            for line in re.sub(r"\\\n\s*", "", block).splitlines():
                if re.match(r"(sudo )?cellperf [a-z]", line.strip()):
                    examples.append(line.strip())
    return list(dict.fromkeys(examples))


#: What a test on this host cannot give, by what the example names.
_CANNOT = (
    (r"cellperf demo|cellperf query cellperf-demo", "the main job: minutes of emulated runs (bench/fidelity.py "
                                                    "runs its campaign)"),
    (r"--seed001", "minutes of simulation (tests/simulate/test_seed001.py runs it)"),
    (r"--workers 2", "a local Dask cluster: 15-20 s to start its two processes here (tests/campaign/test_cluster.py "
                     "and test_import_dask.py run Dask)"),
    (r"cn\.example\.net|cellperf (probe|record) cn\b|--server cn\b|192\.0\.2\.|\b(SERVER|BUNDLE)\b|tcp://|https?://(?!\$)|URL1|-c cn\b"
     r"|10\.0\.0\.\d|/nfs/|/shared/", "a server, cluster or shared folder elsewhere"),
    (r"cellperf (server|stream serve|term serve|web serve|replay downloads)", "a server that runs until stopped"),
    (r"\$CELLPERF_CN:(5260|8080)", "a server that runs until stopped, on the host side of the link"),
    (r"\[|\|", "a synopsis with optional parts, not a command"),
)


def _run(shell: str, folder: Path, timeout: float = 60) -> tuple[int, str, str]:
    """Runs a shell line in its own process group, all of which a timeout stops."""
    p = subprocess.Popen(shell, shell=True, cwd=folder, env={**ENV, "HOME": str(folder)}, text=True,
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise AssertionError(f"{shell}: still running after {timeout:g} s") from None
    return p.returncode, out, err


#: A plain `cellperf ...` example (no shell syntax) runs in one long-lived Python process,
#: through the console script's own entry point (cellperf.cli.main), one after another: the
#: same code without an interpreter and its imports started per example (~0.7 s each here).
_WORKER = """
import contextlib, io, json, os, sys
from cellperf.cli import main
results = os.fdopen(int(sys.argv[1]), "w")
for line in sys.stdin:
    job = json.loads(line)
    os.chdir(job["cwd"])
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(job["argv"])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
    results.write(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}) + "\\n")
    results.flush()
"""


class _Worker:
    def __init__(self, home: Path):
        read, write = os.pipe()
        self.p = subprocess.Popen([sys.executable, "-c", _WORKER, str(write)], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, pass_fds=(write,),
                                  env={**ENV, "HOME": str(home)}, start_new_session=True)
        os.close(write)
        self.results = os.fdopen(read)

    def run(self, argv: list[str], cwd: Path, timeout: float = 60) -> tuple[int, str, str]:
        import json
        import select

        self.p.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd)}) + "\n")
        self.p.stdin.flush()
        if not select.select([self.results], [], [], timeout)[0]:
            self.close()
            raise AssertionError(f"cellperf {shlex.join(argv)}: still running after {timeout:g} s")
        done = json.loads(self.results.readline())
        return done["code"], done["out"], done["err"]

    def close(self) -> None:
        os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()
        self.results.close()


def why_not_run(example: str, folder: Path) -> str | None:
    for pattern, reason in _CANNOT:
        if re.search(pattern, example):
            return reason
    if re.search(r"\bmm-\w+", example) and not shutil.which(re.search(r"\bmm-\w+", example).group(0)):
        return "mahimahi's tools (not installed here)"
    words = shlex.split(example.split("#", 1)[0].split(">", 1)[0])
    missing = [w for w in words[2:] if re.search(r"\.(pcap|pcapng|csv|parquet|json|txt|toml|down)$|/$", w)
               and not w.startswith("-") and not _exists(folder, w) and not _written_by(words, w)]
    # A recording bundle the example reads (a folder, named with or without a slash).
    bundle = re.match(r"cellperf (?:replay \w+|record --check) (?!-)(\S+)", example)
    if bundle and not (folder / bundle.group(1)).exists():
        missing.append(bundle.group(1))
    return f"the user's own files: {', '.join(dict.fromkeys(missing))}" if missing else None


def _exists(folder: Path, name: str) -> bool:
    """Whether the file, folder or glob pattern (`run-*.json`) `name` names something."""
    return Path(name).exists() if Path(name).is_absolute() else any(folder.glob(name))


def _written_by(words: list[str], name: str) -> bool:
    """Whether `name` is what the example writes (after -o, --out, --figures, --mahimahi, ...)."""
    i = words.index(name)
    if words[1:3] in (["import", name], ["web", "pages"]):  # the store an import makes, the pages written
        return True
    return i > 0 and words[i - 1] in ("-o", "--out", "--figures", "--mahimahi", "--objects", "--log", "--server-log",
                                      "--pcap-dir", "--downlink-log")


def _in_order(examples: list[str]) -> list[str]:
    """The examples that make the results store or a campaign's runs first, then the others."""
    makes = [e for e in examples if re.match(r"(sudo )?cellperf (import results/|run \S+ --out results/)", e)]
    return makes + [e for e in examples if e not in makes]


def _sample_folder(path: Path) -> Path:
    shutil.copytree(DATA, path, symlinks=True, dirs_exist_ok=True)
    return path


def _wide_lines(example: str, out: str) -> list[str]:
    """Lines of a cellperf command's output for people wider than 80 columns (not JSON, CSV
    or what the example sends to a file; not the output of a command behind the emulator)."""
    from rich.cells import cell_len

    if re.search(r"--json|--csv|>|cellperf emulate", example):
        return []
    return [line for line in out.splitlines() if cell_len(line) > 80]


def _shape(example: str) -> tuple[str, ...]:
    """The example with each file or folder named by its kind (`.pcap`, `/`): two examples of
    one shape run the same code on the same kind of input (`report results/ -o campaign.html
    --figures figs/` in the docs, `-o ~/campaign.html --figures paper-figures/` in --help)."""
    words = example.split("#", 1)[0].removeprefix("sudo ").split()
    return tuple(w if w.startswith("-") or not re.search(r"[./]", w)
                 else "/" if w.endswith("/") else Path(w).suffix or "/" for w in words)


def _read_later(example: str, examples: list[str]) -> bool:
    """Whether another example reads a file this one writes (`channel fit ... -o evdo.json`)."""
    words = example.split("#", 1)[0].split()
    written = [w for w in words if _written_by(words, w)]
    return any(w in words and not _written_by(words, w) for other in examples if other != example
               for words in [other.split("#", 1)[0].split()] for w in written)


def _run_all(examples: list[str], folder: Path, *, as_root: bool = False, before=None) -> tuple[list[str], dict[str, str]]:
    """Runs those that can run here (`before(example)` first), in order; returns them and
    the others with the reason."""
    ran, skipped, shapes = [], {}, {}
    worker = None if as_root else _Worker(folder)
    try:
        _run_each(examples, folder, as_root, before, worker, ran, skipped, shapes)
    finally:
        if worker is not None:
            worker.close()
    print(f"{len(ran)} run:\n" + "\n".join(f"  {e}" for e in ran))
    print(f"{len(skipped)} not run:\n" + "\n".join(f"  {e}: {w}" for e, w in skipped.items()))
    return ran, skipped


def _run_each(examples, folder, as_root, before, worker, ran, skipped, shapes) -> None:
    for example in _in_order(examples):
        why = why_not_run(example, folder)
        if not why and _shape(example) in shapes and not _read_later(example, examples):
            why = f"run above as {shapes[_shape(example)]}"
        if why:
            skipped[example] = why
            continue
        shapes[_shape(example)] = example
        command = example.split("#", 1)[0].strip().removeprefix("sudo " if as_root else "")
        # As a shell would run it (redirections, `&&`), with this tree's cellperf; `query` and
        # `report` without a folder from inside the store.
        shell = re.sub(r"\bcellperf ", f"{shlex.join(CELLPERF)} ", command)
        here = folder / "results" if re.fullmatch(r"cellperf (query|check|report)( --\S+)*", command) else folder
        if before:
            before(example)
        started = time.monotonic()
        if worker is not None and not re.search(r"[$~*>&;|]", command) and command.startswith("cellperf "):
            code, out, err = worker.run(shlex.split(command)[1:], here)
        else:
            code, out, err = _run(shell, here)
        assert code == 0, f"{example}\n{err[-2000:]}"
        wide = _wide_lines(command, out.replace(str(folder), "DIR"))  # the test's long folder is not the tool's
        assert not wide, f"{example}: wider than 80 columns:\n" + "\n".join(wide)
        ran.append(f"{example}  ({time.monotonic() - started:.1f} s)")


def _examples() -> list[str]:
    return list(dict.fromkeys(help_examples() + doc_examples()))


def test_every_example_that_this_host_can_run_runs(tmp_path):
    """Those without sudo (the results store made by importing the shipped captures)."""
    examples = _examples()
    ran, skipped = _run_all([e for e in examples if not e.startswith("sudo ")], _sample_folder(tmp_path))
    # The examples on the sample data: analyze (two-sided, with the radio log), channel
    # stats/fit/generate, sched, simulate, voip, version, import, query, check and report.
    assert len(ran) >= 40, ran
    for expected in ("analyze --mn mn.pcap --cn cn.pcap --radio-log radio.csv", "channel stats evdo.down",
                     "import results/ --captures runs.csv", "query results/ --tables", "check results/",
                     "report results/ -o ~/campaign.html --figures paper-figures/"):
        assert any(expected in e for e in ran), expected
    root = [e for e in examples if e.startswith("sudo ")]
    print(f"{len(ran)} of {len(examples)} run here, {len(root)} need root (test_every_root_example_runs), "
          f"{len(skipped)} cannot run")


@pytest.fixture
def iperf3_servers():
    """The iperf3 servers the emulator's examples reach at $CELLPERF_CN, as their user starts
    them outside the emulator: port 5201, and 5202 for the second user of a cell. Fresh ones
    for each example (`iperf3 -s -1`: one test each; a server may still be busy with the last
    client after its link is gone)."""
    servers: list[subprocess.Popen] = []

    def fresh() -> None:
        stop()
        for port in (5201, 5202):
            servers.append(subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                f":{port} " in subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
                for port in (5201, 5202)):
            time.sleep(0.05)

    def stop() -> None:
        while servers:
            server = servers.pop()
            server.kill()
            server.wait()

    yield fresh
    stop()


@pytest.mark.netns
def test_every_root_example_runs(tmp_path, iperf3_servers):
    """The `sudo` examples, as root: a measured campaign on the emulated testbed, the emulator."""
    examples = [e for e in _examples() if e.startswith("sudo ")]
    fresh_iperf3 = lambda example: iperf3_servers() if "iperf3 -" in example else None  # noqa: E731
    ran, _ = _run_all(examples, _sample_folder(tmp_path), as_root=True, before=fresh_iperf3)
    assert len(ran) >= 6, ran
    assert any("run campaign.toml --out results/" in e for e in ran)


def test_the_sample_data_is_small_and_has_its_source_and_licence():
    readme = (DATA / "README.md").read_text()
    for f in DATA.iterdir():
        if f.name != "README.md":
            assert f"`{f.name}`" in readme, f"{f.name}: no source/licence line in examples/data/README.md"
            assert f.stat().st_size < 200_000, f"{f.name}: {f.stat().st_size} bytes"


def test_query_help_names_every_table_and_view(tmp_path):
    from cellperf.store import Store
    from cellperf.store.schema import PARQUET_TABLES

    with Store.open(tmp_path, create=True) as store:
        tables = [r[0] for r in store.con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    text = " ".join(_help("query").split())
    missing = [t for t in (*tables, *PARQUET_TABLES) if t != "schema_info" and not re.search(rf"\b{t}\b", text)]
    assert not missing, missing


def test_every_help_text_fits_80_columns():
    """Examples included (they are kept as written, so a long one is wrapped in the source
    with a backslash, and a long comment goes on its own line above)."""
    wide = [f"cellperf {' '.join(command)}: {line}" for command in [[], *_commands()]
            for line in _help(*command).splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
