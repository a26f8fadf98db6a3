"""Every compiled module has a .pyi stub whose names, and the parameters of whose functions and
methods, match what the module really defines."""
import ast
import importlib
import inspect
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


def _stub_functions(path: Path):
    """``(qualified name, ast.FunctionDef)`` for each function and method in a stub."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


_P = inspect.Parameter
_KINDS = {"posonly": _P.POSITIONAL_ONLY, "args": _P.POSITIONAL_OR_KEYWORD,
          "vararg": _P.VAR_POSITIONAL, "kwonly": _P.KEYWORD_ONLY, "kwarg": _P.VAR_KEYWORD}
_NO_DEFAULT = object()


def _stub_parameters(fn: ast.FunctionDef) -> list[tuple[str, inspect._ParameterKind, object]]:
    """``(name, kind, default)`` of a stub function; ``...`` as a default means "some default"."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [_NO_DEFAULT] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = []
    for arg, default in zip(positional, defaults):
        kind = _KINDS["posonly"] if arg in a.posonlyargs else _KINDS["args"]
        out.append((arg.arg, kind, default))
    if a.vararg:
        out.append((a.vararg.arg, _KINDS["vararg"], _NO_DEFAULT))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, _KINDS["kwonly"], _NO_DEFAULT if default is None else default))
    if a.kwarg:
        out.append((a.kwarg.arg, _KINDS["kwarg"], _NO_DEFAULT))
    return [(n, k, d if d is _NO_DEFAULT or not isinstance(d, ast.AST) else _literal(d))
            for n, k, d in out]


def _literal(node: ast.AST) -> object:
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return Ellipsis
    return ast.literal_eval(node)


def _compiled_signature(obj) -> inspect.Signature:
    """The signature Cython embedded (``embedsignature=True``): from ``inspect`` when the object
    carries one, else parsed from the first line of its docstring."""
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        first = (obj.__doc__ or "").splitlines()[0] if obj.__doc__ else ""
        name = getattr(obj, "__name__", "")
        assert first.startswith(f"{name}("), f"no embedded signature on {obj!r}: {first!r}"
        src = f"def {first.split(' -> ')[0]}: ..."
        fn = ast.parse(src).body[0]
        params = [_P(n, k, default=_P.empty if d is _NO_DEFAULT else d)
                  for n, k, d in _stub_parameters(fn)]
        return inspect.Signature(params)


def _signature_cases():
    for name in COMPILED:
        stub = PACKAGE / f"{name}.pyi"
        if stub.exists():
            for qualname, fn in _stub_functions(stub):
                if not (qualname.rsplit(".", 1)[-1].startswith("__")):
                    yield pytest.param(name, qualname, fn, id=f"{name}.{qualname}")


@pytest.mark.parametrize("name, qualname, fn", list(_signature_cases()))
def test_stub_signature_matches_compiled(name, qualname, fn):
    """Parameter names, kinds and defaults of each stub function and method are those of the
    compiled object (a stub default of ``...`` stands for any default)."""
    obj = importlib.import_module(f"torchfits._kernels.{name}")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)
    assert is_property == (not callable(obj)), f"{name}.pyi {qualname}: property in one only"
    if is_property:
        return
    compiled = _compiled_signature(obj)
    expected = [(p.name, p.kind, _NO_DEFAULT if p.default is _P.empty else p.default)
                for p in compiled.parameters.values()]
    got = _stub_parameters(fn)
    assert [(n, k) for n, k, _ in got] == [(n, k) for n, k, _ in expected], \
        f"{name}.pyi {qualname}{compiled}"
    for (pname, _, stub_default), (_, _, real_default) in zip(got, expected):
        if stub_default is Ellipsis:
            assert real_default is not _NO_DEFAULT, f"{qualname}: {pname} has no default"
        else:
            assert stub_default == real_default, f"{qualname}: {pname} default {real_default!r}"
