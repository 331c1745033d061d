"""The examples of every `--help` and of README.md and docs/*.md, run as written (issue 28 §5).

Each example is run in one folder holding the sample data of examples/data (docs: its
README.md), in the order the help texts give them, so an example may read what an earlier
one wrote (`channel fit ... -o model.json`, then `channel generate model.json ...`). An
example that needs what this host cannot give a test (a remote server, root and network
namespaces, a browser, files of the user's own) is not run: `why_not_run` says which, and
the test keeps that list from growing unnoticed.
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
        # A group's sub-commands: `{stats,fit,generate}` in its usage line.
        group = re.search(r"^Usage: cellperf " + name + r" \[-h\] \{([a-z0-9,-]+)\}", text, re.M)
        out += [[name, sub] for sub in group.group(1).split(",")] if group else []
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
    (r"^sudo |\$CELLPERF_CN|cellperf demo", "root: network namespaces and a TUN link (the netns tests run these commands)"),
    (r"--seed001", "minutes of simulation (tests/simulate/test_seed001.py runs it)"),
    (r"cn\.example\.net|cellperf (probe|record) cn\b|192\.0\.2\.|\bSERVER\b|tcp://|https?://|URL1", "a server or cluster elsewhere"),
    (r"cellperf (server|stream serve|term serve|web serve)", "a server that runs until stopped"),
    (r"cellperf web (load|pages)", "headless Chromium and a page folder"),
    (r"\[|\|", "a synopsis with optional parts, not a command"),
)


def _run(shell: str, folder: Path, timeout: float = 60) -> tuple[int, str]:
    """Runs a shell line in its own process group, all of which a timeout stops."""
    p = subprocess.Popen(shell, shell=True, cwd=folder, env=ENV, text=True, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise AssertionError(f"{shell}: still running after {timeout:g} s") from None
    return p.returncode, err


def why_not_run(example: str, folder: Path) -> str | None:
    for pattern, reason in _CANNOT:
        if re.search(pattern, example):
            return reason
    words = shlex.split(example.split("#", 1)[0].split(">", 1)[0])
    missing = [w for w in words[2:] if re.search(r"\.(pcap|pcapng|csv|parquet|json|txt|toml|down)$|/$", w)
               and not w.startswith("-") and not (folder / w).exists() and not _written_by(words, w)]
    # A results store (what `cellperf run` or `demo` made) or a recording bundle (`record`).
    store = re.match(r"cellperf (query|check|report|import|replay info|replay export|record --check) (?!-)(\S+)", example)
    if store and not (folder / store.group(2)).exists():
        missing.append(store.group(2))
    if re.fullmatch(r"cellperf (query|check|report)( --\S+)*", example):
        missing.append("a results store in the current folder")
    return f"the user's own files: {', '.join(dict.fromkeys(missing))}" if missing else None


def _written_by(words: list[str], name: str) -> bool:
    """Whether `name` is what the example writes (after -o, --out, --figures, --mahimahi, ...)."""
    i = words.index(name)
    return i > 0 and words[i - 1] in ("-o", "--out", "--figures", "--mahimahi", "--objects", "--log", "--server-log")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    here = tmp_path_factory.mktemp("examples")
    for f in DATA.iterdir():
        if f.is_file():
            shutil.copy(f, here / f.name)
    return here


def test_every_example_that_this_host_can_run_runs(folder):
    ran, skipped = [], {}
    for example in dict.fromkeys(help_examples() + doc_examples()):
        why = why_not_run(example, folder)
        if why:
            skipped[example] = why
            continue
        command = example.split("#", 1)[0].strip()
        # As a shell would run it (redirections, `&&`), with this tree's cellperf.
        shell = command.replace("cellperf ", f"{shlex.join(CELLPERF)} ")
        started = time.monotonic()
        code, err = _run(shell, folder)
        assert code == 0, f"{example}\n{err[-2000:]}"
        ran.append(f"{example}  ({time.monotonic() - started:.1f} s)")
    # The examples on the sample data: analyze (two-sided, with the radio log), channel
    # stats/fit/generate, sched, simulate, voip, version, replay info of the shipped bundle.
    assert len(ran) >= 15, ran
    assert any("analyze --mn mn.pcap --cn cn.pcap --radio-log radio.csv" in e for e in ran)
    assert any("channel stats evdo.down" in e for e in ran)
    print(f"{len(ran)} run:\n" + "\n".join(f"  {e}" for e in ran))
    print(f"{len(ran)} run, {len(skipped)} not run:\n" + "\n".join(f"  {e}: {w}" for e, w in skipped.items()))


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
