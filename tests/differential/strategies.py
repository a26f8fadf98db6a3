"""Hypothesis strategies that describe FITS files, and writers that build them with astropy or
fitsio (never with torchfits, so the oracle stays independent of the code under test)."""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from _oracles import OFFSET_BZERO, make_stored, write_image

# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

BITPIXES = (8, 16, 32, 64, -32, -64)
#: scaling conventions: stored values as they are, the unsigned/signed-byte offset, a linear
#: scaling to physical floats, BLANK alone, scaling with BLANK
CONVENTIONS = ("raw", "offset", "scaled", "blank", "scaled-blank")


@dataclass
class ImageSpec:
    bitpix: int
    shape: tuple[int, ...]
    convention: str
    bscale: float | None
    bzero: float | None
    seed: int
    writer: str
    extension: bool

    @property
    def hdu(self) -> int:
        return 1 if self.extension else 0


@st.composite
def image_specs(draw: Any) -> ImageSpec:
    bitpix = draw(st.sampled_from(BITPIXES))
    ndim = draw(st.integers(1, 3))
    # length-1 axes are common; a zero-size axis is rare but must read as an empty array
    shape = tuple(draw(st.one_of(st.integers(1, 7), st.just(1), st.just(0)))
                  for _ in range(ndim))
    conventions = ["raw", "scaled"] + (["offset", "blank", "scaled-blank"] if bitpix > 0 else [])
    convention = draw(st.sampled_from(conventions))
    bscale = bzero = None
    if convention == "offset":
        bscale, bzero = 1.0, float(OFFSET_BZERO[bitpix])
    elif convention.startswith("scaled"):
        bscale = draw(st.sampled_from([1.0, 2.0, 0.5, 0.001, -3.25, 1e-7]))
        bzero = draw(st.sampled_from([0.0, 1.0, -100.5, 32768.0, 1e6]))
    writer = draw(st.sampled_from(["astropy", "fitsio"]))
    return ImageSpec(bitpix, shape, convention, bscale, bzero,
                     draw(st.integers(0, 2**16)), writer, draw(st.booleans()))


def write_image_spec(path: Path, spec: ImageSpec) -> Path:
    """Write ``spec`` (the stored values come from ``make_stored``: extremes, NaN payloads, ±Inf)."""
    stored = make_stored(spec.bitpix, spec.shape, spec.seed)
    blank = None
    if spec.convention.endswith("blank"):
        blank = int(stored.ravel()[0]) if stored.size else 7
    bzero: Any = spec.bzero
    if spec.convention == "offset":
        bzero = OFFSET_BZERO[spec.bitpix]
    if 0 in spec.shape:
        # write_image checks the bytes it wrote, which a zero-size array has none of
        from astropy.io import fits

        hdu = fits.PrimaryHDU(stored) if not spec.extension else fits.ImageHDU(stored)
        for key, value in (("BSCALE", spec.bscale), ("BZERO", bzero), ("BLANK", blank)):
            if value is not None:
                hdu.header[key] = value
        hdus = [fits.PrimaryHDU(), hdu] if spec.extension else [hdu]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.HDUList(hdus).writeto(path, overwrite=True)
        return path
    return write_image(path, stored, bitpix=spec.bitpix, bscale=spec.bscale, bzero=bzero,
                       blank=blank, writer=spec.writer, extension=spec.extension)


@st.composite
def index_for(draw: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A basic NumPy index into ``shape``: per axis an integer or a slice with any step."""
    out: list[Any] = []
    for n in shape:
        if n and draw(st.booleans()) and len(out) < len(shape) - 1:
            out.append(draw(st.integers(-n, n - 1)))
            continue
        start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
        stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
        step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
        out.append(slice(start, stop, step))
    return tuple(out)


# --------------------------------------------------------------------------------------------
# Binary tables
# --------------------------------------------------------------------------------------------

NAN = "NaN"  # canonical NaN: compares equal to itself, unlike float("nan")

INT_TYPES = {"B": np.uint8, "I": np.int16, "J": np.int32, "K": np.int64}
#: TZERO that turns a stored integer type into another integer type
INT_OFFSETS = {"B": (-128, np.int8), "I": (2**15, np.uint16), "J": (2**31, np.uint32),
               "K": (2**63, np.uint64)}
PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E)


@dataclass
class ColumnSpec:
    """One binary-table column and its logical values in canonical form (see :func:`canon`):
    ``values[row]`` is None for a null, a Python scalar, or a tuple (vectors, TDIM in C order)."""

    name: str
    code: str                      # the TFORM type letter
    tform: str
    values: list[Any]
    kind: str                      # bool bits int uint scaled float complex str vla
    dim: tuple[int, ...] | None = None   # C-order cell shape of a TDIM column
    tnull: int | None = None
    tscal: float | None = None
    tzero: float | None = None
    unit: str | None = None
    array: Any = None              # what astropy's Column gets
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_vector(self) -> bool:
        return self.kind in ("bits", "complex", "vla") or self.dim is not None \
            or self.extra.get("repeat", 1) != 1


@dataclass
class TableSpec:
    nrows: int
    columns: list[ColumnSpec]

    def expected(self) -> dict[str, list[Any]]:
        return {c.name: c.values for c in self.columns}


def canon(v: Any) -> Any:
    """A value from any route in one comparable form: None for null, NaN as :data:`NAN`,
    bytes and str stripped of trailing blanks, sequences and arrays as tuples, complex as
    ``(re, im)``, NumPy scalars as Python scalars."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return tuple(canon(x) for x in v)
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "c":
            return tuple(canon(x) for x in v.tolist())
        return tuple(canon(x) for x in v.tolist()) if v.ndim else canon(v.item())
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode("ascii").rstrip(" ")
    if isinstance(v, str):
        return v.rstrip(" ")
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return NAN if math.isnan(f) else f
    if isinstance(v, (complex, np.complexfloating)):
        return (canon(v.real), canon(v.imag))
    if type(v).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(v, "tolist"):
        return canon(v.tolist())
    raise TypeError(f"no canonical form for {type(v)}: {v!r}")


def _floats(draw: Any, dtype: Any, n: int) -> np.ndarray:
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.25]
    return np.array([draw(st.one_of(st.sampled_from(specials),
                                    st.floats(width=32 if dtype == np.float32 else 64,
                                              allow_nan=False)))
                     for _ in range(n)], dtype=dtype)


def _nest(flat: list[Any], dim: tuple[int, ...] | None) -> Any:
    if dim is None:
        return tuple(flat)
    arr = np.empty(len(flat), dtype=object)
    arr[:] = flat
    return canon_obj(arr.reshape(dim))


def canon_obj(arr: np.ndarray) -> Any:
    if arr.ndim == 1:
        return tuple(arr.tolist())
    return tuple(canon_obj(a) for a in arr)


KINDS = ("bool", "bits", "int", "uint", "scaled", "float", "complex", "str", "vla")


@st.composite
def column_specs(draw: Any, name: str, nrows: int, kinds: Sequence[str] = KINDS,
                 vla_codes: str = "BIJKED") -> ColumnSpec:
    kind = draw(st.sampled_from(list(kinds)))
    repeat = draw(st.sampled_from([1, 1, 1, 2, 3, 6]))
    dim = None
    if repeat == 6 and draw(st.booleans()):
        dim = draw(st.sampled_from([(2, 3), (3, 2), (1, 6)]))
    unit = draw(st.sampled_from([None, "m", "erg/s", "deg"]))
    n = nrows * repeat

    def cells(flat: list[Any]) -> list[Any]:
        if repeat == 1:
            return flat
        return [_nest(flat[i * repeat:(i + 1) * repeat], dim) for i in range(nrows)]

    def shaped(a: np.ndarray) -> np.ndarray:
        if repeat == 1:
            return a
        return a.reshape((nrows,) + (dim if dim else (repeat,)))

    tdim = None if dim is None else "(" + ",".join(str(d) for d in reversed(dim)) + ")"
    extra: dict[str, Any] = {"repeat": repeat, "tdim": tdim}
    if kind == "bool":
        a = np.array([draw(st.booleans()) for _ in range(n)], dtype=bool)
        return ColumnSpec(name, "L", f"{repeat}L", cells([bool(x) for x in a]), kind, dim,
                          unit=unit, array=shaped(a), extra=extra)
    if kind == "bits":
        nbits = draw(st.integers(1, 12))
        a = np.array([[draw(st.booleans()) for _ in range(nbits)] for _ in range(nrows)],
                     dtype=bool).reshape(nrows, nbits)
        return ColumnSpec(name, "X", f"{nbits}X", [tuple(bool(x) for x in r) for r in a], kind,
                          array=a, extra={"repeat": nbits, "tdim": None})
    if kind in ("int", "uint", "scaled"):
        code = draw(st.sampled_from("BIJK"))
        stored_t = INT_TYPES[code]
        ii = np.iinfo(stored_t)
        stored = np.array([draw(st.one_of(st.sampled_from([ii.min, ii.max, 0, 1]),
                                          st.integers(ii.min, ii.max))) for _ in range(n)],
                          dtype=stored_t)
        if kind == "uint":
            tzero, logical_t = INT_OFFSETS[code]
            if code == "K":
                logical = stored.view(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
            elif code == "B":
                logical = (stored.astype(np.int16) - 128).astype(np.int8)
            else:
                logical = (stored.astype(np.int64) + tzero).astype(logical_t)
            return ColumnSpec(name, code, f"{repeat}{code}", cells([int(x) for x in logical]),
                              kind, dim, tzero=tzero, unit=unit, array=shaped(logical),
                              extra=extra)
        if kind == "scaled":
            # small stored values, so astropy's physical → stored conversion is exact
            stored = (stored.astype(np.int64) % 100).astype(stored_t)
            tscal = draw(st.sampled_from([0.5, 2.0, 0.25, -4.0]))
            tzero = draw(st.sampled_from([0.0, 100.0, -0.5]))
            phys = stored.astype(np.float64) * tscal + tzero
            return ColumnSpec(name, code, f"{repeat}{code}", cells([float(x) for x in phys]),
                              kind, dim, tscal=tscal, tzero=tzero, unit=unit,
                              array=shaped(stored), extra=extra)
        tnull = None
        logical_vals: list[Any] = [int(x) for x in stored]
        if draw(st.booleans()) and n:
            tnull = int(draw(st.sampled_from([ii.min, ii.max, 0])))
            for i in range(n):
                if draw(st.integers(0, 3)) == 0:
                    stored[i] = tnull
            # in a vector cell a TNULL nulls that element (one validity bit per element)
            logical_vals = [None if int(x) == tnull else int(x) for x in stored]
        return ColumnSpec(name, code, f"{repeat}{code}", cells(logical_vals), kind, dim,
                          tnull=tnull, unit=unit, array=shaped(stored), extra=extra)
    if kind == "float":
        code = draw(st.sampled_from("ED"))
        a = _floats(draw, np.float32 if code == "E" else np.float64, n)
        return ColumnSpec(name, code, f"{repeat}{code}", cells([canon(x) for x in a]), kind,
                          dim, unit=unit, array=shaped(a), extra=extra)
    if kind == "complex":
        code = draw(st.sampled_from("CM"))
        dt = np.float32 if code == "C" else np.float64
        re, im = _floats(draw, dt, n), _floats(draw, dt, n)
        a = np.empty(n, dtype=np.complex64 if code == "C" else np.complex128)
        a.real, a.imag = re, im  # set the parts: inf * 1j would make NaN
        return ColumnSpec(name, code, f"{code}", [(canon(a[i].real), canon(a[i].imag))
                                                   for i in range(nrows)], kind,
                          unit=unit, array=a[:nrows], extra={"repeat": 1, "tdim": None})
    if kind == "str":
        width = draw(st.integers(1, 12))
        vals = [draw(st.text(PRINTABLE, max_size=width)).rstrip(" ") for _ in range(nrows)]
        vals = [v.lstrip(" ") if not v.strip() else v for v in vals]
        return ColumnSpec(name, "A", f"{width}A", vals, kind, unit=unit,
                          array=np.array(vals, dtype=f"U{width}"),
                          extra={"repeat": 1, "tdim": None})
    # variable-length arrays
    heap = draw(st.sampled_from("PQ"))
    code = draw(st.sampled_from(vla_codes))
    dt = {"B": np.uint8, "I": np.int16, "J": np.int32, "K": np.int64, "E": np.float32,
          "D": np.float64}[code]
    rows = []
    for _ in range(nrows):
        k = draw(st.integers(0, 4))
        if code in "ED":
            rows.append(_floats(draw, dt, k))
        else:
            ii = np.iinfo(dt)
            rows.append(np.array([draw(st.integers(ii.min, ii.max)) for _ in range(k)], dtype=dt))
    arr = np.empty(nrows, dtype=object)
    arr[:] = rows
    return ColumnSpec(name, code, f"{heap}{code}()", [canon(r) for r in rows], "vla",
                      unit=unit, array=arr, extra={"repeat": 1, "tdim": None, "heap": heap})


@st.composite
def table_specs(draw: Any, max_columns: int = 5, kinds: Sequence[str] = KINDS,
                vla_codes: str = "BIJKED") -> TableSpec:
    nrows = draw(st.sampled_from([0, 1, 2, 3, 5, 9]))
    ncols = draw(st.integers(1, max_columns))
    cols = [draw(column_specs(f"c{i}", nrows, kinds, vla_codes)) for i in range(ncols)]
    return TableSpec(nrows, cols)


def write_table_spec(path: Path, spec: TableSpec) -> Path:
    """Write ``spec`` as HDU 1 after an empty primary, with astropy."""
    from astropy.io import fits

    cols = []
    for c in spec.columns:
        kw: dict[str, Any] = dict(name=c.name, format=c.tform, array=c.array, unit=c.unit)
        if c.tnull is not None:
            kw["null"] = c.tnull
        if c.kind == "uint":
            kw["bzero"] = c.tzero
        if c.extra.get("tdim"):
            kw["dim"] = c.extra["tdim"]
        if c.kind == "vla" and spec.nrows == 0:
            kw["format"] = c.tform.replace("()", "(0)")
        cols.append(fits.Column(**kw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hdu = fits.BinTableHDU.from_columns(cols, nrows=spec.nrows)
        fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path, overwrite=True)
    scaled = [(i, c) for i, c in enumerate(spec.columns, 1) if c.kind == "scaled"]
    if scaled:
        # astropy converts physical values to stored ones itself (and refuses integer arrays):
        # the stored integers are written as they are and the scaling cards added afterwards
        import fitsio

        with fitsio.FITS(str(path), "rw") as f:
            for i, c in scaled:
                f[1].write_key(f"TSCAL{i}", c.tscal)
                f[1].write_key(f"TZERO{i}", c.tzero)
    return path
