"""Helpers for the table-decoding tests: write tables with independent writers (astropy, fitsio,
or raw bytes under a header astropy formats), locate their bytes, decode them with torchfits and
compare with what astropy and fitsio read, bit for bit.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pytest

from _oracles import assert_bits_equal, native_array  # noqa: F401 - shared with the table tests
from torchfits.fits.columns import parse_columns
from torchfits.tables.decode import decode_table, decode_table_numpy
from torchfits.tables.decode_options import DecodeOptions
from torchfits.tables.source import TableSource

BLOCK = 2880


def _astropy():
    return pytest.importorskip("astropy.io.fits")


def _fitsio():
    return pytest.importorskip("fitsio")


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

def write_astropy(path: os.PathLike | str, columns: Sequence[Any], *, ascii: bool = False,
                  extra: dict | None = None) -> str:
    """Write ``columns`` (astropy ``Column`` objects) as HDU 1; ``extra`` keywords are then set
    in the header alone, so the stored bytes stay what the columns held (how TSCAL/TNULL reach
    a file whose data were written raw)."""
    fits = _astropy()
    cls = fits.TableHDU if ascii else fits.BinTableHDU
    cls.from_columns(list(columns)).writeto(path, overwrite=True)
    for key, value in (extra or {}).items():
        fits.setval(path, key, value=value, ext=1)
    return str(path)


def write_fitsio(path: os.PathLike | str, array: np.ndarray, **kwargs: Any) -> str:
    """Write a structured array with fitsio (cfitsio underneath) as HDU 1."""
    fitsio = _fitsio()
    fitsio.write(str(path), array, clobber=True, **kwargs)
    return str(path)


def write_raw_bintable(path: os.PathLike | str, cards: Sequence[tuple], rows: bytes, nrows: int,
                       row_bytes: int, heap: bytes = b"", gap: int = 0) -> str:
    """A BINTABLE whose data are exactly ``rows`` + ``gap`` zero bytes + ``heap``.

    ``cards`` are the column keywords (TTYPEn, TFORMn, ...); the structural ones are added here,
    with THEAP when ``gap`` is not zero. astropy formats the header cards; no torchfits code
    takes part in writing.
    """
    fits = _astropy()
    assert len(rows) == nrows * row_bytes
    header = fits.Header()
    header["XTENSION"] = "BINTABLE"
    header["BITPIX"] = 8
    header["NAXIS"] = 2
    header["NAXIS1"] = row_bytes
    header["NAXIS2"] = nrows
    header["PCOUNT"] = gap + len(heap)
    header["GCOUNT"] = 1
    header["TFIELDS"] = sum(1 for c in cards if c[0].startswith("TFORM"))
    for card in cards:
        header[card[0]] = card[1]
    if gap:
        header["THEAP"] = nrows * row_bytes + gap
    data = rows + bytes(gap) + heap
    with open(path, "wb") as f:
        f.write(fits.PrimaryHDU().header.tostring().encode("ascii"))
        f.write(header.tostring().encode("ascii"))
        f.write(data + bytes(-len(data) % BLOCK))
    return str(path)


# --------------------------------------------------------------------------------------------
# Locating and decoding
# --------------------------------------------------------------------------------------------

def table_bytes(path: os.PathLike | str, hdu: int = 1) -> tuple[dict, memoryview, memoryview]:
    """(header as a plain dict, row bytes, heap bytes) of a table HDU: the header as astropy
    reads it, the rows and heap where torchfits' HDU index places them."""
    fits = _astropy()
    with fits.open(path) as hdul:
        header = dict(hdul[hdu].header)
    rows, heap = TableSource.open(str(path), hdu).buffers()
    return header, rows, heap


def kind_of(header: dict) -> str:
    return "table" if header["XTENSION"].strip() == "TABLE" else "bintable"


def decode(path: os.PathLike | str, hdu: int = 1, **kwargs: Any):
    """torchfits' Arrow decode of a whole table HDU."""
    header, rows, heap = table_bytes(path, hdu)
    specs = parse_columns(header, kind_of(header))
    where = {k: kwargs.pop(k) for k in ("columns", "rows", "row_range") if k in kwargs}
    return decode_table(rows, heap, specs, header["NAXIS1"], header["NAXIS2"],
                        options=DecodeOptions(**kwargs), **where)


def decode_numpy(path: os.PathLike | str, hdu: int = 1, **kwargs: Any) -> dict:
    """torchfits' NumPy (tensor-mapping) decode of a whole table HDU."""
    header, rows, heap = table_bytes(path, hdu)
    specs = parse_columns(header, kind_of(header))
    return decode_table_numpy(rows, heap, specs, header["NAXIS1"], header["NAXIS2"], **kwargs)


# --------------------------------------------------------------------------------------------
# Oracles
# --------------------------------------------------------------------------------------------

def astropy_column(path: os.PathLike | str, name: str, hdu: int = 1) -> Any:
    """What astropy reads for one column (physical values), detached from the file."""
    fits = _astropy()
    with fits.open(path) as hdul:
        col = hdul[hdu].data[name]
        if col.dtype == object:
            return [np.array(v) for v in col]
        return np.array(col)


def fitsio_column(path: os.PathLike | str, name: str, hdu: int = 1) -> Any:
    """What fitsio reads for one column."""
    fitsio = _fitsio()
    data = fitsio.read(str(path), ext=hdu, columns=[name], vstorage="object")
    col = data[name]
    if col.dtype == object:
        return [np.asarray(v) for v in col]
    return np.array(col)


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------

def assert_values_equal(actual: Any, expected: Any) -> None:
    """Same values after casting ``expected`` to ``actual``'s dtype; NaN equals NaN."""
    actual = native_array(np.asarray(actual))
    expected = native_array(np.asarray(expected)).astype(actual.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


def arrow_to_numpy(arr: Any, fill: Any = 0) -> np.ndarray:
    """A (nested) fixed-size-list Arrow array as an ``(N, *shape)`` NumPy array; nulls → ``fill``."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    shape = []
    t = arr.type
    while pa.types.is_fixed_size_list(t):
        shape.append(t.list_size)
        t = t.value_type
    leaf = arr
    for _ in shape:
        leaf = leaf.flatten()
    if leaf.null_count:
        leaf = leaf.fill_null(fill)
    values = leaf.to_numpy(zero_copy_only=False)
    return values.reshape((n, *shape))


def arrow_valid(arr: Any) -> np.ndarray:
    """Validity of the leaf values of a (nested) fixed-size-list array, shaped like its values."""
    import pyarrow as pa

    n = len(arr)
    shape = []
    t = arr.type
    leaf = arr
    while pa.types.is_fixed_size_list(t):
        shape.append(t.list_size)
        t = t.value_type
        leaf = leaf.flatten()
    return leaf.is_valid().to_numpy(zero_copy_only=False).reshape((n, *shape))


def complex_from_pairs(values: np.ndarray) -> np.ndarray:
    """``(..., 2)`` real/imaginary pairs as a complex array."""
    values = np.ascontiguousarray(values)
    return values.view(np.complex64 if values.dtype == np.float32 else np.complex128)[..., 0]


def raw_field_bytes(path: os.PathLike | str, name: str, hdu: int = 1) -> np.ndarray:
    """The stored bytes of one fixed-width column, ``(NAXIS2, width)``, sliced by position."""
    header, rows, _ = table_bytes(path, hdu)
    specs = {s.name: s for s in parse_columns(header, kind_of(header))}
    spec = specs[name]
    table = np.frombuffer(rows, dtype=np.uint8).reshape(header["NAXIS2"], header["NAXIS1"])
    return table[:, spec.offset:spec.offset + spec.width].copy()


def iter_rows(values: Iterable[Any]) -> list:
    return [np.asarray(v) for v in values]


def _bits_type(t: Any) -> Any:
    """``t`` with every floating-point leaf replaced by the unsigned integer of its width."""
    import pyarrow as pa

    if pa.types.is_floating(t):
        return {16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}[t.bit_width]
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_bits_type(t.value_type), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(_bits_type(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_bits_type(t.value_type))
    return t


def assert_batches_equal(actual: Any, expected: Any) -> None:
    """Same schema and the same values, floats compared bit for bit (so NaN equals NaN)."""
    assert actual.schema == expected.schema
    assert actual.num_rows == expected.num_rows
    for name, a, b in zip(actual.schema.names, actual.columns, expected.columns):
        bits = _bits_type(a.type)
        if bits != a.type:
            a, b = a.view(bits), b.view(bits)
        assert a.equals(b), name


# -- a variable-length table larger than a tiny residency budget ---------------------------------
VLA_ROWS = 6_000


def write_vla_table(path: os.PathLike | str, nrows: int = VLA_ROWS, seed: int = 0) -> None:
    """``nrows`` rows written by astropy: ``V`` (``PE``, 0-63 float32s a cell), ``K`` (``QK``,
    0-63 int64s) and ``X`` (``J``, the row number); about 2.5 MB, rows and heap, so that a
    budget of 1 MiB (`residency`) releases ranges while a scan is under way (few rows: astropy
    reads variable-length cells one row at a time)."""
    fits = _astropy()
    rng = np.random.default_rng(seed)

    def cells(dtype: Any) -> np.ndarray:
        lens = rng.integers(0, 64, nrows)
        flat = (rng.standard_normal(int(lens.sum())) * 100).astype(dtype)
        out = np.empty(nrows, dtype=object)
        out[:] = np.split(flat, np.cumsum(lens)[:-1])
        return out

    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([
        fits.Column("V", "PE()", array=cells(np.float32)),
        fits.Column("K", "QK()", array=cells(np.int64)),
        fits.Column("X", "J", array=np.arange(nrows, dtype=np.int32))])]).writeto(path)


def vla_parts(cells: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, concatenated values) of an iterable of cells (arrays or lists)."""
    arrays = [np.asarray(c) for c in cells]
    values = np.concatenate(arrays) if arrays else np.empty(0)
    return np.array([a.size for a in arrays], np.int64), values


def arrow_vla_parts(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, concatenated values) of a pyarrow list column (array or chunked array)."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return arr.value_lengths().to_numpy(zero_copy_only=False).astype(np.int64), arr.flatten().to_numpy()


def astropy_vla(path: os.PathLike | str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """What astropy reads of `write_vla_table`'s file: ``V`` and ``K`` as `vla_parts`, ``X``
    as ``(X, X)``."""
    data = _astropy().getdata(str(path), 1)
    x = np.asarray(data["X"]).astype(np.int64)
    return {"V": vla_parts(data["V"]), "K": vla_parts(data["K"]), "X": (x, x)}


def assert_vla_equal(got: dict[str, tuple[np.ndarray, np.ndarray]],
                     want: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Every column's lengths and values equal (values as numbers, byte order aside)."""
    for name, (lengths, values) in want.items():
        np.testing.assert_array_equal(got[name][0], lengths, err_msg=name)
        np.testing.assert_array_equal(got[name][1], values, err_msg=name)
