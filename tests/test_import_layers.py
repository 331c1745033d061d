"""The Python package and each Rust crate stand in layers: no module uses, directly or through
others, a module that uses it back (issue 28 §7). Python's function-level imports count too: a
lazy import only hides a cycle until the two modules are read together. A shared type or
constant goes down into a module both use; a list of items (the report's sections) into a
registry that the items do not import."""

import ast
import functools
import graphlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "cellperf"
CRATES = sorted(p.parent for p in (ROOT / "crates").glob("*/src"))


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports anywhere in its text (`from a.b import c`
    counts as importing the module a.b.c when there is one, else a.b)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                found = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in found:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    # A function-level import (cellperf.report.simulated reads seed 001's paper values lazily).
    assert "cellperf.simulate.seed001" in graph["cellperf.report.simulated"]
    assert "cellperf.campaign.spec.values" in graph["cellperf.campaign.spec.options"]
    assert len(graph) > 100  # every module of the package


def test_no_module_imports_one_that_imports_it_back():
    try:
        list(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as e:
        raise AssertionError(f"import cycle: {' -> '.join(e.args[1])}") from None


def _without_comments_and_tests(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # A module's unit tests (at its end) may use any module of the crate.
    tests = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    return text[:tests.start()] if tests else text


def rust_module_graph(src: Path) -> dict[str, set[str]]:
    """A crate's top-level module → the top-level modules its code names (`crate::m::...`,
    `crate::{m::..., ...}`), unit tests aside; the crate root (lib.rs) is not a module here."""
    files = {p: p.stem for p in src.glob("*.rs") if p.stem not in ("lib", "main")}
    files.update({p: p.relative_to(src).parts[0] for p in src.glob("*/**/*.rs")})
    modules = set(files.values())
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path, module in files.items():
        text = _without_comments_and_tests(path.read_text())
        for m in re.finditer(r"crate::(\{[^;]*?\}|\w+)", text):
            names = [m.group(1)]
            if names[0].startswith("{"):
                names, depth, part = [], 0, ""
                for ch in m.group(1)[1:-1] + ",":
                    depth += (ch == "{") - (ch == "}")
                    if ch == "," and depth == 0:
                        names.append(part.strip().split("::")[0])
                        part = ""
                    else:
                        part += ch
            graph[module] |= {n for n in names if n in modules and n != module}
    return graph


def test_the_rust_graph_sees_grouped_and_inline_paths():
    analysis = rust_module_graph(ROOT / "crates" / "cellperf-analysis" / "src")
    assert {"pass", "side", "tcp_feed"} <= analysis["report"]  # use crate::{...} and use crate::m::X
    agent = rust_module_graph(ROOT / "crates" / "cellperf-agent" / "src")
    assert "limits" in agent["plan"]  # an inline path: crate::limits::MAX_PACKETS


@pytest.mark.parametrize("crate", CRATES, ids=[c.name for c in CRATES])
def test_no_rust_module_uses_one_that_uses_it_back(crate):
    try:
        list(graphlib.TopologicalSorter(rust_module_graph(crate / "src")).static_order())
    except graphlib.CycleError as e:
        raise AssertionError(f"{crate.name}: module cycle: {' -> '.join(e.args[1])}") from None
