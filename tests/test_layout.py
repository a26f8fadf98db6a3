"""The package layout: no import cycles among torchfits modules (imports inside functions count),
every module in the architecture page's module map, and no module named like a root function
or a standard-library module except the 1.x paths that must keep their names."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torchfits"
# 1.x module paths that must exist under these names (thin re-export modules)
REQUIRED_NAMES = {"io"}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every torchfits module ``name`` imports, at any depth of the source."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        found |= {c for c in candidates if c in known}
    # a package importing its own children is its job, not a cycle
    return {t for t in found if t != name and not name.startswith(t + ".")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
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


def test_no_import_cycles():
    mods = _modules()
    graph = {name: _imports(name, path, set(mods)) for name, path in mods.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_every_module_is_in_the_architecture_map():
    text = (ROOT / "docs" / "architecture.md").read_text()
    mapped = set(re.findall(r"`(torchfits(?:\.[A-Za-z_]\w*)*)`", text))
    missing = sorted(name for name in _modules() if name not in mapped)
    assert missing == [], f"modules missing from docs/architecture.md's module map: {missing}"


def test_module_names_shadow_neither_stdlib_nor_root_functions():
    import torchfits

    root_functions = {n for n in torchfits.__all__ if n.islower()}
    for name in _modules():
        leaf = name.rsplit(".", 1)[-1]
        if name.count(".") == 1 and leaf in REQUIRED_NAMES:
            continue
        assert leaf not in sys.stdlib_module_names, f"{name} shadows the stdlib module {leaf!r}"
        # importing torchfits.X sets the attribute X of the package: a root function would be lost
        if name.count(".") == 1:
            assert leaf not in root_functions, f"{name} would shadow torchfits.{leaf}() once imported"


@pytest.mark.parametrize("shim", ["table", "where", "io", "hdu", "cache"])
def test_old_paths_are_thin_re_exports(shim):
    source = (PACKAGE / f"{shim}.py").read_text()
    code = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 15, f"torchfits/{shim}.py should only re-export its implementation"
