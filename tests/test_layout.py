"""The package layout: no import cycles among torchfits modules (imports inside functions count),
no import that runs up the layer table of the architecture page (imports through the lazy root
count too), every module in the architecture page's module map, and no module named like a root
function or a standard-library module except the 1.x paths that must keep their names."""
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
# imports up the layer table that docs/architecture.md names as deliberate, and why
UPWARD_BY_DESIGN = {
    ("torchfits.tables.dataset", "torchfits.dask.partitions"):
        "FitsDataset.to_dask_dataframe, the pyarrow-dataset-style method, builds the Dask frame",
}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _lazy_root_names() -> dict[str, str]:
    """The root namespace's public names → the modules that define them."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_LAZY" for t in node.targets):
            lazy = ast.literal_eval(node.value)
            return {name: f"torchfits.{module}" for name, module in lazy.items()}
    raise AssertionError("torchfits/__init__.py has no _LAZY table")


def _imports(name: str, path: Path, known: set[str], lazy: dict[str, str] | None = None) -> set[str]:
    """Every torchfits module ``name`` imports, at any depth of the source. With ``lazy`` (the root's
    name → module table), names reached through the root (``import torchfits; torchfits.read``,
    ``from torchfits import read``) count as imports of the modules that define them; a root name
    that table does not know counts as an import of the root itself."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    found = set()
    root_aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
            if lazy is not None and target == "torchfits":
                candidates = candidates[1:]
                for alias in node.names:
                    if f"torchfits.{alias.name}" not in known:
                        found.add(lazy.get(alias.name, "torchfits"))
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
            if lazy is not None and "torchfits" in candidates:
                # what the root is used for is found below, from the attributes read off it
                candidates.remove("torchfits")
                root_aliases |= {a.asname or a.name for a in node.names if a.name == "torchfits"}
        else:
            continue
        found |= {c for c in candidates if c in known}
    if lazy is not None and root_aliases:
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in root_aliases):
                attribute = f"torchfits.{node.attr}"
                found.add(attribute if attribute in known else lazy.get(node.attr, "torchfits"))
    if lazy is not None and name != "torchfits":
        # through the root, the root itself is a module above every other
        return {t for t in found if t != name and (t == "torchfits" or not name.startswith(t + "."))}
    # a package importing its own children is its job, not a cycle
    return {t for t in found if t != name and not name.startswith(t + ".")}


def _layer_ranks() -> list[tuple[str, int]]:
    """The layer table of docs/architecture.md as (package, rank): rows from the bottom up, and inside
    a row, tiers separated by "then" (``image, query, then tables, then writing``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    ranks = []
    rank = 0
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= set("-"):
            continue
        for tier in cells[1].split(", then "):
            rank += 1
            for package in re.findall(r"`(torchfits(?:\.[A-Za-z_]\w*)*)`", tier):
                ranks.append((package, rank))
    return ranks


def _rank_of(module: str, ranks: list[tuple[str, int]]) -> int | None:
    """The rank of the longest layer-table package that holds ``module``; the root is above all."""
    if module == "torchfits":
        return max(r for _, r in ranks) + 1
    best = None
    for package, rank in ranks:
        if module == package or module.startswith(package + "."):
            if best is None or len(package) > len(best[0]):
                best = (package, rank)
    return None if best is None else best[1]


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


def test_every_module_has_a_layer():
    ranks = _layer_ranks()
    unplaced = sorted(name for name in _modules() if name != "torchfits" and _rank_of(name, ranks) is None)
    assert unplaced == [], f"modules in no row of docs/architecture.md's layer table: {unplaced}"


def test_no_import_runs_up_the_layers():
    mods = _modules()
    lazy = _lazy_root_names()
    ranks = _layer_ranks()
    upward = []
    for name, path in sorted(mods.items()):
        if name == "torchfits":
            continue
        own = _rank_of(name, ranks)
        for target in sorted(_imports(name, path, set(mods), lazy)):
            other = _rank_of(target, ranks)
            if own is not None and other is not None and other > own \
                    and (name, target) not in UPWARD_BY_DESIGN:
                upward.append(f"{name} (layer {own}) imports {target} (layer {other})")
    assert upward == [], "imports that run up docs/architecture.md's layer table:\n" + "\n".join(upward)


def test_layer_checker_sees_lazy_root_and_function_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    import torchfits\n    return torchfits.read(1)\n"
                      "def g():\n    from torchfits import open_image\n")
    known = {"torchfits", "torchfits.compat.reads", "torchfits.image.plain"}
    lazy = {"read": "torchfits.compat.reads", "open_image": "torchfits.image.plain"}
    assert _imports("torchfits.fits.m", source, known, lazy) == {"torchfits.compat.reads",
                                                                  "torchfits.image.plain"}


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
    body = ast.parse((PACKAGE / f"{shim}.py").read_text()).body
    statements = [node for node in body if not (isinstance(node, ast.Expr)
                                                and isinstance(node.value, ast.Constant))]
    assert len(statements) <= 10, f"torchfits/{shim}.py should only re-export its implementation"
    assert all(isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef))
               for node in statements), f"torchfits/{shim}.py should only re-export"


def test_no_module_imports_another_modules_private_names():
    """What another module needs is public in its module: no ``from .x import _name`` across
    modules (private compiled modules of ``torchfits._kernels`` are modules, not names)."""
    mods = _modules()
    known = set(mods)
    found = []
    for name, path in sorted(mods.items()):
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("torchfits") or target == "torchfits._kernels":
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{target}.{alias.name}" not in known:
                    found.append(f"{name} imports {target}.{alias.name}")
    assert found == [], "private names imported across modules:\n" + "\n".join(found)
