"""Binary-table column plans: how one input column (NumPy or Arrow) is laid out in FITS rows.

A `ColumnPlan` is decided once per column (TFORM, TNULL, TZERO, TDIM, metadata cards); then
`encode_rows` turns each batch of `ColumnValues` into big-endian row bytes plus heap bytes.
This is the inverse of the reader's FITS → Arrow mapping (docs/tables.md).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..fits.header import Card
from ..fits.layout import flip_sign_bit

__all__ = ["ColumnValues", "ColumnPlan", "plan_column", "encode_rows", "column_cards",
           "parse_tform", "apply_header_tnulls", "tnull_sentinel"]

# NumPy dtype → (TFORM code, TZERO for the offset-binary conventions)
_NUMERIC = {
    np.dtype(np.bool_): ("L", None),
    np.dtype(np.uint8): ("B", None), np.dtype(np.int8): ("B", -128),
    np.dtype(np.int16): ("I", None), np.dtype(np.uint16): ("I", 32768),
    np.dtype(np.int32): ("J", None), np.dtype(np.uint32): ("J", 2147483648),
    np.dtype(np.int64): ("K", None), np.dtype(np.uint64): ("K", 9223372036854775808),
    np.dtype(np.float32): ("E", None), np.dtype(np.float64): ("D", None),
    np.dtype(np.complex64): ("C", None), np.dtype(np.complex128): ("M", None),
}
# TFORM code → big-endian storage dtype of one element
STORAGE = {"L": "u1", "B": "u1", "I": ">i2", "J": ">i4", "K": ">i8", "E": ">f4", "D": ">f8",
           "C": ">c8", "M": ">c16", "A": "S1", "X": "u1"}
_CODE_DTYPE = {"L": np.bool_, "B": np.uint8, "I": np.int16, "J": np.int32, "K": np.int64,
               "E": np.float32, "D": np.float64, "C": np.complex64, "M": np.complex128}
_TFORM = re.compile(r"^\s*(\d*)\s*([LXBIJKAEDCMPQ])\s*([LXBIJKAEDCM])?\s*(?:\((\d+)\))?\s*$")


def parse_tform(tform: str) -> tuple[int, str, str | None]:
    """``"3E"`` → (3, "E", None); ``"1PJ(7)"`` → (1, "P", "J")."""
    m = _TFORM.match(tform.upper())
    if not m:
        raise ValueError(f"invalid TFORM {tform!r}")
    repeat = int(m.group(1)) if m.group(1) else 1
    return repeat, m.group(2), m.group(3)


@dataclass
class ColumnValues:
    """One column of one batch, normalised.

    ``data``: fixed-width values, shape ``(n,)`` or ``(n, *cell)`` (``S`` bytes for strings), or
    for variable-length columns the flat element array with ``offsets`` (n + 1 positions).
    ``mask``: True where the value is null (None when nothing is null).
    """

    data: np.ndarray
    mask: np.ndarray | None = None
    offsets: np.ndarray | None = None
    #: Variable-length columns: True where an element (not a row) is null, aligned with data.
    element_mask: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.offsets is not None else len(self.data)


@dataclass
class ColumnPlan:
    """Where and how one column is stored."""

    name: str
    code: str                      # element code (of the heap elements for P/Q)
    repeat: int = 1                # elements (characters for A, bits for X) per row
    vla: str | None = None      # "P" or "Q"
    flip: bool = False             # offset-binary: stored = value with its top bit flipped
    tnull: int | None = None
    scale: tuple[float, float] | None = None  # (tscal, tzero) applied to physical floats
    header_tscal: float | None = None
    header_tzero: float | None = None
    tdim: str | None = None
    meta: dict = field(default_factory=dict)  # TUNIT/TUCD/TDISP/... → value
    max_elements: int = 0          # emax of a variable-length column (grows while writing)
    string_width: int = 0          # bytes per string for A columns with several strings

    @property
    def tform(self) -> str:
        if self.vla:
            return f"1{self.vla}{self.code}({self.max_elements})"
        if self.repeat == 1 and self.code != "A" and not self.tdim:
            return self.code
        return f"{self.repeat}{self.code}"

    @property
    def field_dtype(self) -> np.dtype:
        if self.vla:
            return np.dtype((">i4" if self.vla == "P" else ">i8", (2,)))
        if self.code == "A":
            return np.dtype(f"S{self.repeat}") if self.repeat else np.dtype((np.uint8, (0,)))
        if self.code == "X":
            nbytes = (self.repeat + 7) // 8
            return np.dtype((np.uint8, (nbytes,))) if nbytes != 1 else np.dtype(np.uint8)
        base = np.dtype(STORAGE[self.code])
        if self.flip:
            base = np.dtype(f">u{base.itemsize}") if base.itemsize > 1 else np.dtype(np.uint8)
        return np.dtype((base, (self.repeat,))) if self.repeat != 1 else base

    @property
    def element_dtype(self) -> np.dtype:
        """Big-endian dtype of one heap element (variable-length columns)."""
        return np.dtype(STORAGE[self.code])


def column_cards(plans: list[ColumnPlan]) -> list[Card]:
    """TTYPEn/TFORMn and the optional per-column keywords, column by column."""
    cards: list[Card] = []
    for n, p in enumerate(plans, start=1):
        cards.append(Card(f"TTYPE{n}", p.name))
        cards.append(Card(f"TFORM{n}", p.tform))
        if p.tnull is not None:
            cards.append(Card(f"TNULL{n}", int(p.tnull)))
        if p.header_tscal is not None:
            cards.append(Card(f"TSCAL{n}", _number(p.header_tscal)))
        if p.header_tzero is not None:
            cards.append(Card(f"TZERO{n}", _number(p.header_tzero)))
        if p.tdim:
            cards.append(Card(f"TDIM{n}", p.tdim))
        for key, value in p.meta.items():
            cards.append(Card(f"{key}{n}", value))
    return cards


def _number(x: float) -> Any:
    if isinstance(x, (int, np.integer)):
        return int(x)
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


# ------------------------------------------------------------------------------ planning


def tnull_sentinel(code: str, flip: bool) -> int:
    """A stored value for nulls that is least likely to collide with real data."""
    bits = np.dtype(STORAGE[code]).itemsize * 8
    if code == "B":
        return 0 if flip else 255  # int8 -128 / uint8 255
    if flip:
        return (1 << (bits - 1)) - 1  # the unsigned maximum
    return -(1 << (bits - 1))


def plan_column(name: str, sample: ColumnValues, *, nullable: bool = False,
                max_string: int | None = None, max_elements: int = 0,
                meta: dict | None = None, compat_int8: bool = False) -> ColumnPlan:
    """Choose the FITS layout of a column from (a sample of) its values.

    Parameters
    ----------
    nullable : bool
        Reserve a TNULL sentinel for integer columns even if ``sample`` has no nulls (streams).
    max_string, max_elements : int
        Widest string / longest list over the whole column, when known beforehand.
    meta : dict
        Field metadata: ``fits_tform``, ``fits_tnull``, ``fits_tdim``, ``fits_tscal``,
        ``fits_tzero``, ``fits_tunit``/``unit``, ``fits_tucd``, ``fits_tdisp``.
    """
    meta = dict(meta or {})
    data = sample.data
    hint = meta.get("fits_tform")
    hint_parsed = None
    if hint:
        try:
            hint_parsed = parse_tform(hint)
        except ValueError:
            hint_parsed = None
    if hint and hint_parsed is None:
        # Storage hints read from an ASCII table (TFORM ``I5``, TNULL ``'*'``) describe no
        # binary field: the values alone decide the layout.
        for key in ("fits_tnull", "fits_tscal", "fits_tzero", "fits_tdim"):
            meta.pop(key, None)
    extra = {}
    for key, card in (("fits_tunit", "TUNIT"), ("unit", "TUNIT"), ("fits_tucd", "TUCD"),
                      ("fits_tdisp", "TDISP")):
        if meta.get(key) and card not in extra:
            extra[card] = meta[key]
    if sample.offsets is not None and hint_parsed and hint_parsed[0] == 0 \
            and hint_parsed[1] not in "PQ" and not max_elements \
            and not np.diff(sample.offsets).any():
        # A zero-width column (TFORM ``0E``), read back as lists that are all empty: keep it
        # zero-width rather than turning it into a variable-length column.
        return ColumnPlan(name, hint_parsed[1], repeat=0, tdim=meta.get("fits_tdim") or None,
                          meta=extra)
    if sample.offsets is not None:  # variable-length
        dtype = data.dtype.newbyteorder("=")
        if dtype.kind in "SUO":
            raise TypeError(f"column {name!r}: variable-length string columns are not supported")
        if dtype not in _NUMERIC:
            raise TypeError(f"column {name!r}: unsupported list element type {data.dtype}")
        code, tzero = _NUMERIC[dtype]
        if tzero is not None:
            raise TypeError(f"column {name!r}: unsigned/int8 list elements are not supported")
        longest = max_elements
        if len(sample):
            longest = max(longest, int(np.diff(sample.offsets).max(initial=0)))
        vla = "Q" if (hint_parsed and hint_parsed[1] == "Q") or meta.get("large") else "P"
        return ColumnPlan(name, code, vla=vla, max_elements=longest, meta=extra)
    cell = data.shape[1:]
    repeat = int(math.prod(cell)) if cell else 1
    tdim = meta.get("fits_tdim")
    if data.dtype.kind == "S":
        width = max(max_string or 0, data.dtype.itemsize, 1) if max_string is None else max(max_string, 1)
        if hint_parsed and hint_parsed[1] == "A" and not cell:
            width = max(width, hint_parsed[0])
        plan = ColumnPlan(name, "A", repeat=width * repeat, string_width=width, meta=extra)
        if cell:
            plan.tdim = "(" + ",".join(str(d) for d in (width, *reversed(cell))) + ")"
        return plan
    dtype = data.dtype.newbyteorder("=")
    if dtype not in _NUMERIC:
        raise TypeError(f"column {name!r}: unsupported dtype {data.dtype}")
    code, tzero = _NUMERIC[dtype]
    if compat_int8 and dtype == np.int8:
        tzero = -128
    plan = ColumnPlan(name, code, repeat=repeat, meta=extra)
    if hint_parsed and hint_parsed[1] == "X" and dtype == np.bool_:
        plan.code, plan.repeat = "X", repeat
    elif hint_parsed and hint_parsed[1] in ("C", "M") and dtype.kind == "f" and cell and cell[-1] == 2:
        # complex stored as fixed_size_list<float, 2> by the reader
        plan.code = hint_parsed[1]
        plan.repeat = repeat // 2
        cell = cell[:-1]
    elif tzero is not None:
        plan.flip = True
        plan.header_tscal, plan.header_tzero = 1, tzero
    elif dtype.kind == "f" and hint_parsed and hint_parsed[1] in "BIJK" and hint_parsed[2] is None:
        tscal = float(meta.get("fits_tscal", 1.0))
        tz = float(meta.get("fits_tzero", 0.0))
        if (tscal, tz) != (1.0, 0.0):
            plan.code = hint_parsed[1]
            plan.scale = (tscal, tz)
            plan.header_tscal, plan.header_tzero = tscal, tz
            # NaN (a null read back through the scaling) needs a code of its own.
            plan.tnull = int(np.iinfo(_CODE_DTYPE[plan.code]).min) if plan.code != "B" else 255
    if tdim and not plan.tdim:
        plan.tdim = tdim
    elif (len(cell) > 1 or cell == (1,)) and plan.code != "X":
        # a one-element cell needs its TDIM too: without it every reader gives scalars back
        plan.tdim = "(" + ",".join(str(d) for d in reversed(cell)) + ")"
    if plan.code in "BIJK":
        has_nulls = sample.mask is not None and bool(sample.mask.any())
        hinted = _hinted_tnull(meta.get("fits_tnull"), plan)
        if hinted is not None:
            plan.tnull = hinted
        elif plan.tnull is None and (has_nulls or nullable):
            plan.tnull = tnull_sentinel(plan.code, plan.flip)
        avoid_valid_values(plan, _valid_values(data, sample.mask))
    return plan


def _valid_values(data: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return np.asarray(data)[~_broadcast_mask(mask, data)] if mask is not None else np.ravel(data)


def avoid_valid_values(plan: ColumnPlan, valid: np.ndarray) -> None:
    """Move an integer column's TNULL (hinted or the usual sentinel) off the values ``valid``
    (the column's non-null values, logical) hold: a TNULL equal to a value turns it into a null.
    The new one is the nearest stored value inward from the usual sentinel that none takes."""
    if plan.tnull is None or plan.scale is not None or plan.code not in "BIJK":
        return
    offset = int(plan.header_tzero or 0) if plan.flip else 0
    if not (valid == plan.tnull + offset).any():
        return
    tnull = tnull_sentinel(plan.code, plan.flip)
    used = {int(v) - offset for v in np.unique(valid)}
    bits = np.dtype(STORAGE[plan.code]).itemsize * 8
    lo, hi = (0, 255) if plan.code == "B" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    step = 1 if tnull == lo else -1
    for candidate in range(tnull, tnull + step * (len(used) + 1), step):
        if lo <= candidate <= hi and candidate not in used:
            plan.tnull = candidate
            return
    raise ValueError(f"column {plan.name!r}: every stored value of TFORM {plan.code!r} is a "
                     "valid value, so no TNULL is left to mark its nulls")


def _hinted_tnull(text: Any, plan: ColumnPlan) -> int | None:
    """TNULL carried in field metadata, if it is an integer the field can store, else None."""
    if text in (None, ""):
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    bits = np.dtype(STORAGE[plan.code]).itemsize * 8
    lo, hi = (0, 255) if plan.code == "B" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return value if lo <= value <= hi else None


def apply_header_tnulls(plans: list[ColumnPlan], header: Any) -> None:
    """Take the ``TNULLn`` cards of the caller's header as the null values of columns ``n``.

    A TNULL in ``header=`` is a statement about the data (values equal to it are nulls), so
    it is never silently lost: an integer that the integer field of column ``n`` can store
    becomes that column's TNULL (its nulls are written as it, and values equal to it read back
    null); any other number for an existing column is refused with `HeaderCardError` naming
    the keyword, the column and why. Like storage hints read from an ASCII table, a TNULLn
    that is a string (an ASCII table's null text, ``'*'``) describes no binary field and is
    dropped, as is a TNULLn for a column the table does not have.
    """
    from ..errors import HeaderCardError

    if header is None:
        return
    for card in getattr(header, "cards", ()):
        key = str(card.key).upper()
        if not (key.startswith("TNULL") and key[5:].isdigit()):
            continue
        n = int(key[5:])
        value = card.value
        if not 1 <= n <= len(plans) or isinstance(value, str):
            continue
        plan = plans[n - 1]
        where = f"{key} = {value!r} in the header: column {plan.name!r} ({plan.tform})"
        if plan.vla or plan.code not in "BIJK" or plan.repeat == 0:
            kind = {"E": "float", "D": "float", "C": "complex", "M": "complex", "A": "string",
                    "L": "logical", "X": "bit"}.get(plan.code, "variable-length")
            kind = "variable-length" if plan.vla else kind
            raise HeaderCardError(f"{where} is a {kind} column; TNULL applies only to integer "
                                  "columns (float nulls are NaN, logical nulls a zero byte)")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not float(value).is_integer():
            raise HeaderCardError(f"{where}: TNULL must be an integer")
        hinted = _hinted_tnull(int(value), plan)
        if hinted is None:
            raise HeaderCardError(f"{where}: {int(value)} is out of the field's range")
        plan.tnull = hinted


# ------------------------------------------------------------------------------ encoding


def _stored(plan: ColumnPlan, values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Values in storage terms (still native byte order), nulls replaced."""
    code = plan.code
    if code == "L":
        out = np.where(values.astype(bool), np.uint8(ord("T")), np.uint8(ord("F")))
        if mask is not None:
            out[_broadcast_mask(mask, out)] = 0
        return out
    if code == "X":
        bits = np.asarray(values, dtype=bool).reshape(len(values), -1)
        return np.packbits(bits, axis=1)
    if plan.scale is not None:
        tscal, tzero = plan.scale
        info = np.iinfo(_CODE_DTYPE[code])
        codes = np.rint((np.asarray(values, np.float64) - tzero) / tscal)
        bad = ~np.isfinite(codes)
        codes = np.clip(np.where(bad, 0, codes), info.min, info.max).astype(_CODE_DTYPE[code])
        if bad.any():
            if plan.tnull is None:
                plan.tnull = int(info.min)
            codes[bad] = plan.tnull
        values = codes
    elif plan.flip:
        values = flip_sign_bit(values, big_endian=False)
    if mask is not None and mask.any():
        values = np.array(values, copy=True)
        m = _broadcast_mask(mask, values)
        if values.dtype.kind == "f" or values.dtype.kind == "c":
            values[m] = np.nan
        elif plan.tnull is not None:
            tnull = plan.tnull
            if plan.flip or values.dtype.kind == "u":
                tnull = tnull & ((1 << (8 * values.dtype.itemsize)) - 1)
            values[m] = tnull
        else:
            raise ValueError(f"column {plan.name!r} has nulls but no TNULL value to store them")
    return values


def _broadcast_mask(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    return mask.reshape(mask.shape + (1,) * (values.ndim - mask.ndim)) & np.ones(values.shape, bool)


def _pad_with_spaces(cells: np.ndarray) -> None:
    """Fill each fixed-width string cell after its end (the first NUL) with spaces, in place, as
    CFITSIO writes short strings (readers strip trailing spaces; the standard calls them
    insignificant)."""
    if not cells.size or not cells.dtype.itemsize:
        return
    raw = cells.view(np.uint8).reshape(cells.size, cells.dtype.itemsize)
    raw[np.logical_or.accumulate(raw == 0, axis=1)] = 0x20


def _strings(plan: ColumnPlan, values: np.ndarray) -> np.ndarray:
    width = plan.repeat
    if values.dtype.itemsize > (plan.string_width or width):
        longest = int(np.char.str_len(values).max(initial=0)) if values.size else 0
        if longest > (plan.string_width or width):
            raise ValueError(f"column {plan.name!r}: a string of {longest} bytes does not fit the "
                             f"{plan.string_width or width}-byte field")
    # the strings per cell spelled out: reshape(n, -1) cannot infer it when there are no rows
    per_cell = math.prod(values.shape[1:])
    flat = values.reshape(len(values), per_cell).astype(f"S{plan.string_width or width}")
    if per_cell == 1:  # strings of a TDIM array keep NUL ends: astropy strips only those there
        _pad_with_spaces(flat)
    return flat.view(f"S{width}").reshape(len(values)) if flat.shape[1] > 1 else flat.reshape(len(values))


def _native_storage(plan: ColumnPlan) -> tuple[np.dtype, int]:
    """Native-endian dtype of one stored element and the byte-swap unit."""
    if plan.code in ("A", "L", "X"):
        return np.dtype(np.uint8), 1
    big = np.dtype(STORAGE[plan.code])
    if plan.flip:
        native = np.dtype(f"u{big.itemsize}")
    else:
        native = big.newbyteorder("=")
    unit = big.itemsize // 2 if big.kind == "c" else big.itemsize
    return native, unit


def encode_rows(plans: list[ColumnPlan], columns: list[ColumnValues], heap: Any,
                heap_size: int) -> tuple[np.ndarray, int]:
    """Row bytes of one batch, ``(n, row_bytes)`` uint8 in FITS order, and the new heap size.

    Each column is first brought to its stored values in native byte order (nulls replaced,
    offsets applied); the `_rowpack` kernel then interleaves and byte-swaps every column into
    the rows in one pass. Variable-length cells are appended to ``heap``; their descriptors
    point at ``heap_size`` onwards.
    """
    from .._kernels import _rowpack

    n = len(columns[0]) if columns else 0
    widths = [p.field_dtype.itemsize for p in plans]
    out = np.empty((n, sum(widths)), np.uint8)
    keep: list[np.ndarray] = []
    units: list[int] = []
    for plan, col, width in zip(plans, columns, widths):
        if len(col) != n:
            raise ValueError(f"Column row count mismatch: {plan.name!r} has {len(col)} rows, expected {n}")
        if plan.vla:
            desc, heap_size = _encode_vla(plan, col, heap, heap_size)
            cells, unit = desc, desc.dtype.itemsize
        elif width == 0:
            if col.offsets is not None and np.diff(col.offsets).any():
                raise ValueError(f"column {plan.name!r}: values in a zero-width column ({plan.tform})")
            cells, unit = np.empty((n, 0), np.uint8), 1
        elif plan.code == "A":
            cells, unit = _strings(plan, col.data), 1
        else:
            values = col.data
            if plan.code in ("C", "M") and values.dtype.kind == "f":
                values = np.ascontiguousarray(values).view(_CODE_DTYPE[plan.code]).reshape(n, -1)
            native, unit = _native_storage(plan)
            stored = _stored(plan, values, col.mask)
            cells = np.ascontiguousarray(stored, dtype=native)
        cells = np.ascontiguousarray(cells)
        if cells.nbytes != n * width:
            raise ValueError(f"column {plan.name!r}: repeat mismatch: {cells.nbytes // max(n, 1)} bytes "
                             f"per row for a {width}-byte field ({plan.tform})")
        keep.append(cells)
        units.append(unit)
    if n and keep:
        offsets = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
        ptrs = np.array([a.ctypes.data for a in keep], dtype=np.uint64)
        _rowpack.pack_rows(ptrs, np.array(widths, np.int64), np.array(units, np.int64), offsets, out)
    return out, heap_size


def _encode_vla(plan: ColumnPlan, col: ColumnValues, heap: Any,
                heap_size: int) -> tuple[np.ndarray, int]:
    offsets = np.asarray(col.offsets, dtype=np.int64)
    counts = np.diff(offsets)
    if col.mask is not None:
        counts = np.where(col.mask, 0, counts)
    start = offsets[0]
    elements = np.asarray(col.data[start:offsets[-1]])
    itemsize = plan.element_dtype.itemsize
    element_nulls = None
    if col.element_mask is not None:
        element_nulls = np.asarray(col.element_mask[start:offsets[-1]], bool)
    if col.mask is not None and col.mask.any():
        keep = np.repeat(~col.mask, np.diff(offsets))
        elements = elements[keep]
        if element_nulls is not None:
            element_nulls = element_nulls[keep]
    if element_nulls is not None and not element_nulls.any():
        element_nulls = None
    stored: np.ndarray = elements.astype(_CODE_DTYPE[plan.code], copy=False)
    if plan.code == "L":
        stored = np.where(stored, np.uint8(ord("T")), np.uint8(ord("F")))
        if element_nulls is not None:
            stored[element_nulls] = 0  # the FITS null of a logical
    elif element_nulls is not None and plan.code in "BIJK":
        raise ValueError(f"column {plan.name!r}: null elements inside variable-length integer "
                         "lists have no FITS form; fill them or use a float list (NaN)")
    elif element_nulls is not None:
        stored = np.where(element_nulls, np.nan, stored).astype(stored.dtype)
    encoded = stored.astype(plan.element_dtype)
    positions = counts
    if len(counts):
        positions = heap_size + np.concatenate([[0], np.cumsum(counts)[:-1]]) * itemsize
    desc = np.empty((len(counts), 2), dtype=np.int32 if plan.vla == "P" else np.int64)
    desc[:, 0] = counts
    desc[:, 1] = positions
    if plan.vla == "P" and (heap_size + encoded.nbytes) >= 2**31:
        raise ValueError(f"column {plan.name!r}: the heap exceeds 2 GiB; use large_list (Q descriptors)")
    heap.write(memoryview(encoded.reshape(-1).view(np.uint8)))  # type: ignore[arg-type]
    if len(counts):
        plan.max_elements = max(plan.max_elements, int(counts.max()))
    return desc, heap_size + encoded.nbytes


#: Rows per batch when a whole table is packed: the row buffer of one batch stays small.
BATCH_ROWS = 1 << 18


def slices(columns: list[ColumnValues]) -> Iterator[list[ColumnValues]]:
    """Batches of at most BATCH_ROWS rows, so the row buffer of one batch stays small."""
    n = len(columns[0]) if columns else 0
    if n <= BATCH_ROWS:
        yield columns
        return
    for start in range(0, n, BATCH_ROWS):
        stop = min(n, start + BATCH_ROWS)
        batch = []
        for c in columns:
            mask = None if c.mask is None else c.mask[start:stop]
            if c.offsets is not None:
                batch.append(ColumnValues(c.data, mask, c.offsets[start:stop + 1], c.element_mask))
            else:
                batch.append(ColumnValues(c.data[start:stop], mask))
        yield batch
