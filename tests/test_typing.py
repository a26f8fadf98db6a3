"""The package type-checks cleanly (STYLE: annotated public API, mypy clean on torchfits/), the
public modules under ``mypy --strict``, and the main entry points carry real types."""
import inspect
import subprocess
import sys
import typing
from pathlib import Path

import pytest

pytest.importorskip("mypy")
ROOT = Path(__file__).resolve().parent.parent

# the modules users import from (through the root namespace) and the CLI's shared grammar
PUBLIC = ["torchfits/__init__.py", "torchfits/errors.py", "torchfits/_progress.py",
          "torchfits/fits/aliases.py", "torchfits/fits/metadata.py", "torchfits/fits/header.py",
          "torchfits/image/plain.py", "torchfits/tables/scan.py", "torchfits/tables/dataset.py",
          "torchfits/tables/sql.py", "torchfits/writing/api.py", "torchfits/cli/common.py",
          "torchfits/sky/cutouts.py", "torchfits/sky/crossmatch.py",
          "torchfits/writing/png.py", "torchfits/image/thumbnail.py"]


def _mypy(tmp_path, *args):
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )


def test_mypy_clean(tmp_path):
    result = _mypy(tmp_path, "torchfits")
    assert result.returncode == 0, result.stdout + result.stderr
    # the public modules themselves; what they import is checked by the plain run above
    result = _mypy(tmp_path, "--strict", "--follow-imports=silent", *PUBLIC)
    assert result.returncode == 0, result.stdout + result.stderr


def test_entry_points_are_typed_beyond_any():
    import torchfits

    for fn, params in [(torchfits.scan, ("source", "hdu", "columns")),
                       (torchfits.dataset, ("source", "hdu")),
                       (torchfits.read_numpy, ("source", "hdu")),
                       (torchfits.open_image, ("source", "hdu")),
                       (torchfits.info, ("path",)),
                       (torchfits.read_header, ("path", "hdu")),
                       (torchfits.sql, ("query", "hdu")),
                       (torchfits.write, ("path",)),
                       (torchfits.update_header, ("path", "hdu")),
                       (torchfits.read, ("path", "hdu", "device", "mmap")),
                       (torchfits.read_tensor, ("path", "hdu")),
                       (torchfits.read_subset, ("path", "hdu")),
                       (torchfits.open_subset_reader, ("path", "hdu")),
                       (torchfits.open, ("path",)),
                       (torchfits.table.read, ("path", "hdu", "columns"))]:
        sig = inspect.signature(fn)  # annotations stay strings (postponed evaluation)
        for name in params:
            annotation = sig.parameters[name].annotation
            assert annotation not in ("Any", typing.Any, inspect.Parameter.empty), \
                f"{fn.__name__}({name}) is typed {annotation!r}"
        assert sig.return_annotation not in ("Any", typing.Any, inspect.Signature.empty), \
            f"{fn.__name__} returns {sig.return_annotation!r}"  # None ("None") is a real type
