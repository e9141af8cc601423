"""Imports go one way: no circle among lightx2v's modules (issue 19, item 4).

The graph is read from the source with `ast`: every `import` and `from ... import`, also those inside functions (a
lazy import closes a circle just as well). An edge goes to the module named, or to the nearest package above a
name that is not a module (`from lightx2v.tensorboard import offline` -> `lightx2v.tensorboard.offline`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO_ROOT

DROP_IN = "lightx2v.utils.torch_trace_profiler"


def modules() -> dict[str, Path]:
    found = {}
    for path in (REPO_ROOT / "lightx2v").rglob("*.py"):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()

    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {nearest(alias.name) for alias in node.names if alias.name.startswith("lightx2v")}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
                if base.split(".")[0] == "lightx2v":
                    targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else nearest(base)
                                for a in node.names}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.slow
def test_the_graph_sees_the_imports_it_must():
    graph = import_graph()
    assert "lightx2v.tensorboard.fix" in graph["lightx2v.tensorboard.patches"]
    assert "lightx2v.tensorboard.offline" in graph["lightx2v.tensorboard.patches"]
    assert DROP_IN in graph["lightx2v.tensorboard.offline"]  # the stack depends on the drop-in
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.slow
def test_no_import_circle_in_the_stack():
    """Every import, lazy ones included, points one way: no module reaches itself again."""
    assert circles(import_graph()) == []


@pytest.mark.slow
def test_the_drop_in_imports_nothing_of_this_project():
    """It must run alone in a user's checkout: torch and the standard library only, not even lazily."""
    assert not {name for name in import_graph()[DROP_IN] if name.split(".")[0] == "lightx2v"}
