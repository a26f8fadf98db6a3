"""The torchfits.dask package itself: importing it imports nothing of Dask, and the engine
reaches it in one place only (`FitsDataset.to_dask_dataframe`, docs/architecture.md "Dask")."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import torchfits

PACKAGE = Path(torchfits.__file__).resolve().parent
ENGINE = ("errors.py", "fits", "image", "query", "tables", "writing")


def test_importing_torchfits_dask_does_not_import_dask():
    code = ("import sys, torchfits, torchfits.dask; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]; "
            "assert not bad, bad; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "dask" in dir(torchfits)


def _dask_imports(path: Path) -> list[tuple[str, str]]:
    """(enclosing function, imported module) for every import of torchfits.dask in ``path``."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = list(rel[:-1])
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{where}.{child.name}" if where else child.name
            targets: list[str] = []
            if isinstance(child, ast.ImportFrom):
                base = package[: len(package) - child.level + 1] if child.level else []
                module = ".".join(base + ([child.module] if child.module else []))
                targets = [module] + [f"{module}.{a.name}" for a in child.names]
            elif isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            hits = {t for t in targets if t == "torchfits.dask" or t.startswith("torchfits.dask.")}
            if hits:
                found.append((name, min(hits)))
            visit(child, name)

    visit(ast.parse(path.read_text()), "")
    return found


def test_the_engine_imports_torchfits_dask_only_inside_to_dask_dataframe():
    seen = {}
    for entry in ENGINE:
        root = PACKAGE / entry
        for path in ([root] if root.is_file() else sorted(root.rglob("*.py"))):
            for where, module in _dask_imports(path):
                seen[f"{path.relative_to(PACKAGE).as_posix()}:{where}"] = module
    assert seen == {"tables/dataset.py:FitsDataset.to_dask_dataframe": "torchfits.dask.partitions"}
