"""Names of our own code in prose stay true: every module file (`fits/hdu_index.py`,
`cython_src/_rice.pyx`) and every dotted `torchfits.…` name that the docs, the README, docstrings
and comments mention exists today. Renames that forget the prose fail here."""
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torchfits"
ROLES = "fits|image|query|tables|writing|compat|dask|data|cli|transforms|_kernels"
FILE = re.compile(rf"(?<![\w/.])(?:torchfits/)?((?:{ROLES})(?:/\w+)*/\w+\.py"
                  r"|cython_src/\w+\.(?:pyx|pxd|h))\b")
DOTTED = re.compile(r"`(torchfits(?:\.[A-Za-z_]\w*)+)")


def _texts():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield from sorted(PACKAGE.rglob("*.py"))
    yield from sorted((ROOT / "cython_src").glob("*.p*"))


def _exists(mention: str) -> bool:
    if mention.startswith("cython_src/"):
        return (ROOT / mention).exists()
    return (PACKAGE / mention).exists() or (ROOT / mention).exists()


def _resolves(dotted: str) -> bool:
    """``torchfits.a.b.attr``: the longest importable module prefix holds the rest as attributes."""
    parts = dotted.split(".")
    if "__main__" in parts:  # importing it would run the program
        return importlib.util.find_spec(".".join(parts[:parts.index("__main__")])) is not None \
            and (PACKAGE.parent / Path(*parts[:parts.index("__main__") + 1])).with_suffix(".py").exists()
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


@pytest.mark.parametrize("path", list(_texts()), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_files_named_in_prose_exist(path):
    missing = sorted({m for m in FILE.findall(path.read_text()) if not _exists(m)})
    assert missing == [], f"{path.relative_to(ROOT)} names files that do not exist: {missing}"


@pytest.mark.parametrize("path", list(_texts()), ids=lambda p: str(p.relative_to(ROOT)))
def test_dotted_names_in_prose_resolve(path):
    pytest.importorskip("torch")  # torchfits.data and torchfits.transforms import it
    # a line that says a name is not supported (the 1.x compatibility table) may name what is absent
    text = "\n".join(line for line in path.read_text().splitlines() if "not supported" not in line)
    missing = sorted({m for m in DOTTED.findall(text) if not _resolves(m)})
    assert missing == [], f"{path.relative_to(ROOT)} names what does not exist: {missing}"


def test_the_checker_catches_a_stale_name(tmp_path):
    assert not _exists("fits/no_such_module.py")
    assert _exists("fits/hdu_index.py")
    assert _resolves("torchfits.fits.header.Header")
    assert not _resolves("torchfits.fits.header.NoSuchName")
    assert not _resolves("torchfits.no_such_module")
