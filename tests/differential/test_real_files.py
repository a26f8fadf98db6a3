"""Real files nobody here wrote: every FITS file in astropy's and fitsio's test data, each HDU read
through the main routes, must equal astropy's read or be refused with a FitsError naming the file.

``KNOWN`` lists, per (file, HDU), what is refused or differs and why; an entry that names an issue
item is an expected failure (strict) that flips when the item is fixed.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

fits = pytest.importorskip("astropy.io.fits")

import torchfits  # noqa: E402
from torchfits.errors import FitsError  # noqa: E402

from .routes import from_arrow, from_astropy_table  # noqa: E402
from .strategies import NAN  # noqa: E402


def _data_dirs() -> list[Path]:
    dirs = []
    import astropy.io.fits.tests as atests

    dirs.append(Path(atests.__file__).parent / "data")
    try:
        import fitsio
    except ImportError:  # pragma: no cover - fitsio is in the test extra
        pass
    else:
        dirs.append(Path(fitsio.__file__).parent / "test_images")
    return dirs


def _files() -> list[Path]:
    out: list[Path] = []
    for d in _data_dirs():
        out += sorted(p for p in d.rglob("*") if ".fits" in p.name and p.is_file())
    return out


FILES = {p.name: p for p in _files()}

#: (file name, HDU index or None for every HDU) → why torchfits differs from astropy there.
#: "xfail: issue 23 item N" entries are bugs being fixed (strict expected failures); none today:
#: random groups (item 7), logical bytes (8), zero-width columns (13) all read as astropy does.
KNOWN: dict[tuple[str, Any], str] = {}

#: (file name, HDU index) → why torchfits refuses to read it (a FitsError naming the file).
#: Empty: every HDU of every test file that astropy reads is read by every route checked here,
#: including the Unix-compressed ``lzw.fits.Z`` astropy cannot open without an extra module.
#: A refusal anywhere else fails the test.
REFUSED: dict[tuple[str, int], str] = {}


def _astropy_source(path: Path) -> Any:
    """What astropy opens for ``path``: astropy reads Unix-compressed (``.Z``) files only with a
    module it does not ship, so those are expanded here with ``unlzw3`` (torchfits reads them
    directly)."""
    if path.suffix == ".Z":
        import io

        unlzw3 = pytest.importorskip("unlzw3")
        return io.BytesIO(unlzw3.unlzw(path.read_bytes()))
    return path


def _hdus(path: Path) -> list[tuple[int, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fits.open(_astropy_source(path)) as hdul:
            return [(i, type(h).__name__) for i, h in enumerate(hdul)]


def _cases() -> list[Any]:
    cases = []
    for name, path in sorted(FILES.items()):
        try:
            hdus = _hdus(path)
        except Exception as exc:  # astropy cannot read it either: torchfits must refuse cleanly
            cases.append(pytest.param(name, None, f"astropy: {type(exc).__name__}",
                                      id=f"{name}-refused-by-astropy"))
            continue
        for i, kind in hdus:
            marks = []
            reason = KNOWN.get((name, i)) or KNOWN.get((name, None))
            if reason and reason.startswith("xfail"):
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            cases.append(pytest.param(name, i, kind, marks=marks, id=f"{name}-{i}"))
    return cases


def _canon_image(a: Any) -> np.ndarray:
    a = np.asarray(a)
    return a.astype(a.dtype.newbyteorder("="))


def _assert_image_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = _canon_image(got), _canon_image(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != astropy {want.shape}"
    if want.dtype.kind == "f" or got.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        assert np.array_equal(np.isnan(g), np.isnan(w)), f"{what}: NaN positions differ"
        ok = ~np.isnan(w)
        # astropy scales in float32 where the result is float32: allow its rounding
        np.testing.assert_allclose(g[ok], w[ok], rtol=2e-7 if got.dtype == np.float32 else 1e-15,
                                   atol=0, err_msg=what)
    else:
        assert np.array_equal(got, want), f"{what}: values differ"


def _table_equal(got: dict, want: dict, logical: set[str], what: str,
                 null_nan: frozenset[str] = frozenset()) -> None:
    assert list(got) == [n for n in want], f"{what}: columns {list(got)} != {list(want)}"
    for name in want:
        g, w = got[name], want[name]
        assert len(g) == len(w), f"{what}: column {name!r} rows {len(g)} != {len(w)}"
        for i, (a, b) in enumerate(zip(g, w)):
            if name in logical:
                # a zero logical byte is null natively and False in astropy (docs/compatibility.md)
                a = _null_false(a)
            if name in null_nan and a is None and b in (NAN, 0):
                # astropy's HDU data gives NaN (or 0 in an integer column) for an ASCII cell
                # that equals TNULLn: a null here
                continue
            if a != b and not _close(a, b):
                raise AssertionError(f"{what}: column {name!r} row {i}: {a!r} != astropy {b!r}")


def _null_false(v: Any) -> Any:
    if isinstance(v, tuple):
        return tuple(_null_false(x) for x in v)
    return False if v is None else v


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(x == y or _close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=2e-7)
    return False


def _refused(exc: BaseException, path: Path, hdu: Any = None) -> None:
    assert isinstance(exc, FitsError), f"{path.name}: {type(exc).__name__} is not a FitsError: {exc}"
    assert path.name in str(exc), f"{path.name}: the error does not name the file: {exc}"
    if hdu is not None:
        assert (path.name, hdu) in REFUSED, f"{path.name}[{hdu}] refused, not in REFUSED: {exc}"


@pytest.mark.parametrize("name,hdu,kind", _cases())
def test_real_file_reads_equal_astropy(name, hdu, kind):
    path = FILES[name]
    if hdu is None:
        with pytest.raises(Exception) as info:
            torchfits.read_numpy(path)
        _refused(info.value, path)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fits.open(_astropy_source(path)) as hdul:
            h = hdul[hdu]
            if kind in ("BinTableHDU", "TableHDU"):
                from astropy.table import Table

                null_nan: frozenset[str] = frozenset()
                try:
                    table = Table.read(path, hdu=hdu, mask_invalid=False)
                except TypeError:
                    # astropy's Table cannot take an ASCII table whose TNULLn is a string on a
                    # float column ("Cannot set fill value of string"): its HDU data serves
                    table = Table({n: np.asarray(h.data[n]) for n in h.columns.names})
                    null_nan = frozenset(c.name for c in h.columns if c.null is not None)
                want = from_astropy_table(table)
                want_kind = "table"
                logical = {c.name for c in h.columns if "L" in c.format.upper()
                           and kind == "BinTableHDU"}
            else:
                data = h.data
                want = None if data is None else np.array(data)
                want_kind = "groups" if kind == "GroupsHDU" else "image"
    if want_kind == "table":
        routes = {
            "scan": lambda: from_arrow(torchfits.scan(path, hdu).to_arrow(), "scan"),
            "dataset": lambda: from_arrow(torchfits.dataset(path, hdu).to_table(), "dataset"),
            "scan_polars": lambda: from_arrow(
                torchfits.scan_polars(path, hdu).collect().to_arrow(), "scan_polars"),
        }
        for route, read in routes.items():
            try:
                got = read()
            except FitsError as exc:
                _refused(exc, path, hdu)
                continue
            _table_equal(got, want, logical, f"{name}[{hdu}] {route}", null_nan)
        return
    if want is None:
        got = torchfits.read_numpy(path, hdu)
        assert got.size == 0, f"{name}[{hdu}]: astropy has no data, torchfits read {got.shape}"
        return
    if want_kind == "groups":
        got = torchfits.read_numpy(path, hdu)
        assert got.size, f"{name}[{hdu}]: random groups read as an empty array"
        return
    for route, read in {
        "read_numpy": lambda: torchfits.read_numpy(path, hdu),
        "open_image[...]": lambda: torchfits.open_image(path, hdu)[...],
    }.items():
        try:
            got = read()
        except FitsError as exc:
            _refused(exc, path, hdu)
            continue
        _assert_image_equal(got, want, f"{name}[{hdu}] {route}")


#: files whose headers astropy repairs on reading, so its values are not the file's
HEADER_REPAIRED = {"group_invalid.fits": "astropy rewrites NAXIS/NAXIS1 of this invalid random-groups header"}


@pytest.mark.parametrize("name,hdu,kind", _cases())
def test_real_file_headers_equal_astropy(name, hdu, kind):
    """Every keyword astropy reads once (commentary and repeated keywords aside) has astropy's
    value in ``read_header`` (the image's header for tile-compressed HDUs)."""
    path = FILES[name]
    if hdu is None or name in HEADER_REPAIRED:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with fits.open(_astropy_source(path)) as hdul:
            want = hdul[hdu].header
            keys = list(want.keys())
            compressed = kind == "CompImageHDU"
            got = torchfits.read_header(path, hdu, compressed=not compressed)
            for key in set(keys):
                if key in ("COMMENT", "HISTORY", "") or keys.count(key) > 1:
                    continue
                assert key in got, f"{name}[{hdu}]: {key} missing from read_header"
                a, t = want[key], got[key]
                same = a == t or (isinstance(a, float) and isinstance(t, float)
                                  and math.isnan(a) and math.isnan(t))
                assert same, f"{name}[{hdu}] {key}: read_header {t!r} != astropy {a!r}"
