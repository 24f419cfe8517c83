"""The floors hold (ARCHITECTURE.md): workflow → gemmbench → kernels, no import upward and no import cycle among the
project's modules, imports inside functions included."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

FLOORS = {"workflow": 0, "gemmbench": 1, "kernels": 2}


def modules() -> dict[str, Path]:
    """Every module of the three floors by its dotted name (a package by its own)."""
    found = {}
    for base in ("gemmbench", "kernels", "workflow/scripts"):
        for path in sorted((ROOT / base).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the project's modules it imports (a package's own submodules left out: importing them is its job)."""
    known = modules()
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + [base] * bool(base))
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            for target in names:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name and not target.startswith(f"{name}."):
                    targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_a_floor_above_its_own():
    graph = import_graph()
    upward = [(a, b) for a, targets in graph.items() for b in targets
              if FLOORS[b.split(".")[0]] < FLOORS[a.split(".")[0]]]
    assert upward == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_graph_sees_every_floor_and_would_see_a_cycle():
    graph = import_graph()
    assert {"gemmbench.stages.measure", "kernels.registry", "workflow.scripts.build"} <= set(graph)
    assert "gemmbench.run.supervise" in graph["gemmbench.stages.measure"]
    assert cycles({**graph, "kernels.registry": graph["kernels.registry"] | {"gemmbench.stages.measure"}})
