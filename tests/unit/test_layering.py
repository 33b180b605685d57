"""The package's layering (README.md's Layout): a module imports only from its own layer or the
layers below it, and no two modules import each other, directly or around a circle. Every import
counts, those inside functions and under TYPE_CHECKING too: each is a dependency all the same."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = SRC / "pgpathbench"

# Top to bottom. A unit is a subpackage (studies: every study in it) or a module at the package's
# top; the package itself (pgpathbench/__init__.py: the version) sits at the bottom with the core.
LAYERS = (
    ("cli", "cli_parser", "doctor", "clean"),
    ("runner", "plan", "progress"),
    ("studies",),
    ("store",),
    ("report",),
    ("results",),
    ("datasets",),
    ("tools",),
    ("servers",),
    ("evidence",),
    ("matrix", "user_queries", "workspace", "disk", "environment", "scratch", "procs", "clientenv",
     "files", "validate", "errors", "stats", "metrics", "references", "at_once", "stop_signals", ""),
)
RANK = {unit: len(LAYERS) - i for i, layer in enumerate(LAYERS) for unit in layer}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def unit(module: str) -> str:
    """pgpathbench.servers.guc -> servers; pgpathbench -> '' (the package itself)."""
    return module.split(".")[1] if "." in module else ""


def imported(module: str) -> set[str]:
    """The package's modules `module` imports (X of `from X import name`, or X.name when that is a
    module)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{prefix}.{base}" if base else prefix
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {m for m in found if m in MODULES and m != module}


GRAPH = {m: imported(m) for m in MODULES}


def test_every_unit_has_a_layer():
    unplaced = {unit(m) for m in MODULES} - RANK.keys()
    assert not unplaced, f"give {', '.join(sorted(unplaced))} a place in LAYERS"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [f"{m} imports {t}" for m, targets in sorted(GRAPH.items()) for t in sorted(targets)
              if RANK.get(unit(t), 0) > RANK.get(unit(m), 0)]
    assert not upward, "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# Gone on branch wt-citus (Shape moved to studies/file_fdw_tpch/shape.py): this test says when to
# delete the entry, once that branch is merged.
PENDING_CYCLES: list[list[str]] = []


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not [c for c in found if c not in PENDING_CYCLES], "\n".join(" <-> ".join(c) for c in found)
    assert not [c for c in PENDING_CYCLES if c not in found], "that cycle is gone: delete it from PENDING_CYCLES"


def test_the_checks_can_fail():
    """The graph is read (the runner imports the store) and a circle is found when there is one."""
    assert "pgpathbench.store" in GRAPH["pgpathbench.runner"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
