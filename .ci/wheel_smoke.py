"""Smoke test of an installed torchfits wheel (issue 27, "Installing").

Run by ``.ci/wheel`` in a fresh venv that holds only the wheel and its dependencies, and by
cibuildwheel's ``test-command``, always from a directory outside the source tree with
``python -I``, so nothing of the checkout can stand in for the installed package. It checks:

- ``torchfits`` is imported from the running interpreter's site-packages;
- every compiled kernel (each ``.pyi`` stub of ``torchfits._kernels`` has one) imports;
- an image written and read back (whole, sliced, header), a table scan with a where-filter,
  and GZIP_1/GZIP_2 tile-compressed images read back equal to what was written;
- with ``--libdeflate``: GZIP tiles inflate through libdeflate, and the libdeflate loaded is the
  copy auditwheel bundled in ``torchfits.libs/`` (the Linux wheel's promise).

It lives in ``.ci/`` rather than ``tests/``: it tests an installed wheel, not the source tree, and
pytest must not collect it there.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np


def check_installed() -> Path:
    """Where torchfits was imported from; fails unless that is this interpreter's site-packages."""
    import torchfits

    package = Path(torchfits.__file__).resolve().parent
    site = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    assert package.parent in site, f"torchfits imported from {package}, not from {sorted(site)}"
    print(f"torchfits {torchfits.__version__} from {package}")
    return package


def check_kernels(package: Path) -> None:
    """Every compiled kernel (one per stub) imports as an extension module."""
    names = sorted(p.stem for p in (package / "_kernels").glob("_*.pyi"))
    assert names, "no kernel stubs in the installed package"
    for name in names:
        module = importlib.import_module(f"torchfits._kernels.{name}")
        assert module.__file__ and not module.__file__.endswith(".py"), module.__file__
    print(f"{len(names)} compiled kernels import: {', '.join(names)}")


def check_image(tmp: Path) -> None:
    import torchfits

    rng = np.random.default_rng(7)
    image = rng.normal(0.0, 1.0, (64, 96)).astype(np.float32)
    path = tmp / "image.fits"
    torchfits.write(path, image, header={"OBJECT": "smoke"})
    assert np.array_equal(torchfits.read_numpy(path), image)
    assert np.array_equal(torchfits.open_image(path)[10:20, 5:50], image[10:20, 5:50])
    assert torchfits.read_header(path)["OBJECT"] == "smoke"
    print("image: written, read whole and sliced, header read back")


def check_table(tmp: Path) -> None:
    import torchfits

    rng = np.random.default_rng(8)
    n = 5_000
    columns = {"id": np.arange(n, dtype=np.int64), "x": rng.random(n),
               "name": [f"s{i:04d}" for i in range(n)]}
    path = tmp / "table.fits"
    torchfits.write(path, columns)
    table = torchfits.scan(path, columns=["id", "x", "name"], where="x > 0.5 AND id < 2000").to_arrow()
    keep = (columns["x"] > 0.5) & (columns["id"] < 2000)
    assert table.column_names == ["id", "x", "name"]
    assert np.array_equal(table.column("id").to_numpy(), columns["id"][keep])
    assert np.array_equal(table.column("x").to_numpy(), columns["x"][keep])
    assert table.column("name").to_pylist() == [s for s, k in zip(columns["name"], keep) if k]
    print(f"table: where-scan kept {table.num_rows} of {n} rows, equal to NumPy's selection")


def check_gzip_tiles(tmp: Path, want_libdeflate: bool) -> None:
    import torchfits
    from torchfits._kernels import _gziptiles
    from torchfits.writing.compress_write import write_compressed

    rng = np.random.default_rng(9)
    images = {"int16": rng.integers(-2000, 2000, (200, 300)).astype(np.int16),
              "float32": rng.normal(0.0, 1.0, (200, 300)).astype(np.float32)}
    for codec in ("GZIP_1", "GZIP_2"):
        for dtype, image in images.items():
            path = tmp / f"{codec}-{dtype}.fits"
            write_compressed(path, image, compress=codec, tile=(16, 300), quantize=False)
            assert np.array_equal(torchfits.read_numpy(path, 1), image), (codec, dtype)
    inflater = _gziptiles.inflater()
    print(f"GZIP tiles: GZIP_1 and GZIP_2, int16 and float32, 13 tiles each read back equal; "
          f"inflated by {inflater}")
    if want_libdeflate:
        assert inflater.startswith("libdeflate"), f"GZIP tiles inflate through {inflater}"
        maps = Path("/proc/self/maps").read_text()
        loaded = sorted({line.split()[-1] for line in maps.splitlines()
                         if "libdeflate" in line.rsplit("/", 1)[-1]})
        assert loaded and all("/torchfits.libs/" in p for p in loaded), loaded
        print(f"libdeflate loaded from the wheel: {', '.join(loaded)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--libdeflate", action="store_true",
                        help="require GZIP tiles to inflate through the libdeflate bundled in the wheel")
    args = parser.parse_args(argv)
    package = check_installed()
    check_kernels(package)
    with tempfile.TemporaryDirectory(prefix="torchfits-smoke-") as tmp:
        check_image(Path(tmp))
        check_table(Path(tmp))
        check_gzip_tiles(Path(tmp), args.libdeflate)
    print(f"wheel smoke test passed (Python {sys.version.split()[0]}, {sysconfig.get_platform()}, "
          f"cwd {os.getcwd()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
