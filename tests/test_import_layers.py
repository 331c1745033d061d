"""The Python package stands in layers: no module imports, directly or through others, a
module that imports it back (issue 28 §7). Function-level imports count too: a lazy import
only hides a cycle until the two modules are read together. A shared type or constant goes
down into a module both import; a list of items (the report's sections) into a registry that
the items do not import."""

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "cellperf"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


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
