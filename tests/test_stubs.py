"""Every compiled module has a .pyi stub whose names match what the module really defines."""
import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "torchfits" / "_kernels"
SOURCES = Path(__file__).resolve().parent.parent / "cython_src"
COMPILED = sorted(p.stem for p in SOURCES.glob("_*.pyx"))


def _stub_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")}


def test_every_compiled_module_is_listed():
    assert COMPILED, "no Cython sources found"


@pytest.mark.parametrize("name", COMPILED)
def test_stub_matches_module(name):
    stub = PACKAGE / f"{name}.pyi"
    assert stub.exists(), f"missing stub {stub}"
    module = importlib.import_module(f"torchfits._kernels.{name}")
    public = {n for n in dir(module) if not n.startswith("_")}
    # Names a Cython module gets without defining them.
    public -= {"np", "cnp", "numpy"}
    assert _stub_names(stub) == public
