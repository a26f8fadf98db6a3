"""Column specifications of FITS binary and ASCII tables, and their Arrow and NumPy types.

`parse_columns` turns the TFORMn/TTYPEn/TDIMn/... keywords of a table header into validated
`ColumnSpec` records (byte offset and width of every field); `arrow_type` maps one spec to the
Arrow type a decode produces. pyarrow is imported only inside the functions that need it.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from ..errors import CorruptHeaderError, UnsupportedColumnError
from .record import FrozenRecord

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyarrow as pa

__all__ = [
    "ColumnSpec",
    "Conversion",
    "arrow_type",
    "conversion",
    "element_arrow_type",
    "field_metadata",
    "parse_columns",
]

MappingName = Literal["native", "compat", "torch"]

# Bytes per stored element of every binary-table type code (X is counted in bits elsewhere).
ELEMENT_BYTES = {"L": 1, "X": 1, "B": 1, "I": 2, "J": 4, "K": 8, "A": 1, "E": 4, "D": 8, "C": 8, "M": 16}
_INTEGER_CODES = frozenset("BIJK")
_NUMERIC_CODES = frozenset("BIJKEDCM")
# The storage dtype of every numeric code, in native byte order.
_STORAGE = {"B": "u1", "I": "i2", "J": "i4", "K": "i8", "E": "f4", "D": "f8", "C": "f4", "M": "f8"}
# TZERO offsets of the unsigned conventions (and the signed-byte one for B).
_UNSIGNED_ZERO = {"B": -128.0, "I": 32768.0, "J": 2147483648.0, "K": 9223372036854775808.0}
_UNSIGNED_DTYPE = {"B": "i1", "I": "u2", "J": "u4", "K": "u8"}

_BIN_TFORM = re.compile(r"^\s*(\d*)\s*([A-Z])(.*)$")
# Compiled where first used (``re`` caches them): a plain binary table has no variable-length
# column, no ASCII TFORM and often no TDIM, and each compile costs a fresh process ~0.25 ms.
_VLA_REST = r"^([LXBIJKAEDCM])\s*(?:\(\s*(\d+)\s*\))?\s*$"
_ASCII_TFORM = r"^\s*([AIFED])\s*(\d+)(?:\.(\d+))?\s*$"
_TDIM = r"^\s*\(\s*(\d+(?:\s*,\s*\d+)*)\s*\)\s*$"

# The torch mapping follows the 1.x contract (docs/compatibility.md): an unsigned TZERO within this
# distance of the convention still counts (files written with imprecise floats exist).
_TORCH_TZERO_TOLERANCE = 1e-5
# The largest repeat count a column may declare: Arrow's fixed-size lists (and CFITSIO's element
# counts) are 32-bit; a larger one is a header lie, refused before anything is sized from it.
MAX_REPEAT = 2**31 - 1


class ColumnSpec(FrozenRecord):
    """One column of a FITS table, as its header describes it.

    Attributes
    ----------
    index : int
        0-based position; the column's keywords carry ``index + 1`` (``TFORM{index+1}``).
    name : str
        ``TTYPEn`` (trailing blanks removed), or ``col{n}`` when the header has none.
    tform : str
        ``TFORMn`` exactly as written.
    code : str
        Element type: ``L X B I J K A E D C M`` for binary tables (the element type of a
        variable-length column), ``A I F E D`` for ASCII tables.
    repeat : int
        Elements per row: bits for ``X``, characters for ``A``; 1 for a variable-length
        descriptor (0 for ``0P...``).
    width : int
        Bytes the field occupies in a row.
    offset : int
        Byte offset of the field from the start of a row.
    tdim : tuple of int or None
        ``TDIMn`` as written, fastest-varying axis first; None when absent or unparseable.
    tnull : int, str or None
        ``TNULLn`` (an integer in binary tables, the null string in ASCII tables).
    tscal, tzero : float
        ``TSCALn`` and ``TZEROn`` (1 and 0 when absent).
    tunit, tucd, tdisp : str or None
        ``TUNITn``, ``TUCDn``, ``TDISPn``.
    is_vla : bool
        True for ``P``/``Q`` columns, whose rows hold a descriptor into the heap.
    descriptor : str or None
        ``"P"`` (two int32) or ``"Q"`` (two int64) for variable-length columns.
    max_elements : int or None
        The ``(emax)`` of a variable-length TFORM, when written.
    kind : str
        ``"bintable"`` or ``"table"`` (ASCII).
    tbcol : int or None
        ``TBCOLn`` (1-based) of an ASCII column.
    decimals : int or None
        ``d`` of an ASCII ``Fw.d``/``Ew.d``/``Dw.d`` format.
    tdim_text : str or None
        ``TDIMn`` as written, kept for metadata even when it does not parse.

    A `FrozenRecord` (repr, equality, hashing and pickling as a frozen dataclass), not a
    dataclass: the decorator's ``exec`` was the largest import cost of a where-scan's first call.
    """

    __slots__ = ("index", "name", "tform", "code", "repeat", "width", "offset", "tdim", "tnull",
                 "tscal", "tzero", "tunit", "tucd", "tdisp", "is_vla", "descriptor", "max_elements",
                 "kind", "tbcol", "decimals", "tdim_text")
    index: int
    name: str
    tform: str
    code: str
    repeat: int
    width: int
    offset: int
    tdim: tuple[int, ...] | None
    tnull: int | str | None
    tscal: float
    tzero: float
    tunit: str | None
    tucd: str | None
    tdisp: str | None
    is_vla: bool
    descriptor: str | None
    max_elements: int | None
    kind: str
    tbcol: int | None
    decimals: int | None
    tdim_text: str | None

    def __init__(self, index: int, name: str, tform: str, code: str, repeat: int, width: int,
                 offset: int, tdim: tuple[int, ...] | None = None, tnull: int | str | None = None,
                 tscal: float = 1.0, tzero: float = 0.0, tunit: str | None = None,
                 tucd: str | None = None, tdisp: str | None = None, is_vla: bool = False,
                 descriptor: str | None = None, max_elements: int | None = None,
                 kind: str = "bintable", tbcol: int | None = None, decimals: int | None = None,
                 tdim_text: str | None = None) -> None:
        values = (index, name, tform, code, repeat, width, offset, tdim, tnull, tscal, tzero, tunit,
                  tucd, tdisp, is_vla, descriptor, max_elements, kind, tbcol, decimals, tdim_text)
        for field, value in zip(self.__slots__, values):
            object.__setattr__(self, field, value)

    @property
    def number(self) -> int:
        """The 1-based column number used in keyword names (``TFORMn``)."""
        return self.index + 1

    @property
    def is_ascii(self) -> bool:
        """True for a column of an ASCII (``XTENSION='TABLE'``) table."""
        return self.kind == "table"

    @property
    def element_bytes(self) -> int:
        """Stored bytes per element (per descriptor element for variable-length columns)."""
        return 1 if self.is_ascii else ELEMENT_BYTES[self.code]

    @property
    def shape(self) -> tuple[int, ...] | None:
        """C-order shape of one cell from ``TDIMn``, or None when TDIM is absent or inconsistent.

        For character columns the first TDIM axis is the string length, so the shape counts
        strings. TDIM is ignored (None) when its product does not equal the repeat count.
        """
        if self.tdim is None or self.is_vla or self.is_ascii or self.code == "X":
            return None
        if math.prod(self.tdim) != self.repeat:
            return None
        dims = self.tdim[1:] if self.code == "A" else self.tdim
        return tuple(reversed(dims))

    @property
    def string_width(self) -> int:
        """Bytes per string of a character column (the first TDIM axis when TDIM applies)."""
        if self.code != "A":
            raise ValueError(f"column {self.name!r} is not a character column")
        if self.is_ascii:
            return self.width
        if self.shape is not None and self.tdim:
            return self.tdim[0]
        return self.repeat

    def describe(self) -> str:
        """``column 3 ('FLUX', TFORM3='2E')``: how error messages name this column."""
        return f"column {self.number} ({self.name!r}, TFORM{self.number}={self.tform!r})"


# ----------------------------------------------------------------------------- parsing


def _int_keyword(header: Mapping[str, Any], key: str, *, required: bool, minimum: int = 0,
                 default: int | None = None) -> int | None:
    value = header.get(key)
    if value is None:
        if required:
            raise CorruptHeaderError(f"table header has no {key} keyword")
        return default
    # bool is an int subclass; T/F is never a valid count.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise CorruptHeaderError(f"{key} = {value!r} is not an integer")
    value = int(value)
    if value < minimum:
        raise CorruptHeaderError(f"{key} = {value} is out of range (must be >= {minimum})")
    return value


def _float_keyword(header: Mapping[str, Any], key: str, default: float) -> float:
    value = header.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise CorruptHeaderError(f"{key} = {value!r} is not a number")
    if isinstance(value, str):
        try:
            return float(value.strip().replace("D", "E").replace("d", "e"))
        except ValueError:
            raise CorruptHeaderError(f"{key} = {value!r} is not a number") from None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise CorruptHeaderError(f"{key} = {value!r} is not a number") from None


def _str_keyword(header: Mapping[str, Any], key: str) -> str | None:
    value = header.get(key)
    if value is None:
        return None
    return str(value).rstrip() if isinstance(value, str) else str(value)


def _parse_tdim(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    m = re.match(_TDIM, text)
    if m is None:
        return None
    return tuple(int(d) for d in m.group(1).split(","))


def _tnull_value(header: Mapping[str, Any], n: int, kind: str) -> int | str | None:
    value = header.get(f"TNULL{n}")
    if value is None:
        return None
    if kind == "table":
        # ASCII tables compare the field text; keep what the header says as text.
        return str(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def parse_columns(header: Mapping[str, Any], kind: Literal["bintable", "table"]) -> list[ColumnSpec]:
    """Parse and validate the column keywords of a table header.

    Parameters
    ----------
    header : Mapping[str, Any]
        Typed keyword values (a ``torchfits.Header`` or a plain dict of upper-case keywords).
    kind : {"bintable", "table"}
        ``"bintable"`` for ``XTENSION='BINTABLE'``, ``"table"`` for ASCII tables.

    Returns
    -------
    list of ColumnSpec
        One spec per column, in header order.

    Raises
    ------
    CorruptHeaderError
        A TFORM that does not parse, a missing TFIELDS/NAXIS1/TFORMn/TBCOLn, a field that runs
        past the end of a row (NAXIS1) (fields covering less than NAXIS1 leave row padding,
        read where NAXIS1 puts the rows), a repeat count above 2**31 - 1, or a TDIMn that
        describes more elements than its column's repeat count; the message names the column
        and the keyword. Callers add the file and the HDU.
    """
    if kind not in ("bintable", "table"):
        raise ValueError(f"kind must be 'bintable' or 'table', not {kind!r}")
    tfields = _int_keyword(header, "TFIELDS", required=True)
    assert tfields is not None
    if tfields > 999:
        raise CorruptHeaderError(f"TFIELDS = {tfields} is out of range (0..999)")
    naxis1 = _int_keyword(header, "NAXIS1", required=True)
    assert naxis1 is not None
    specs: list[ColumnSpec] = []
    offset = 0
    for i in range(tfields):
        n = i + 1
        ttype = header.get(f"TTYPE{n}")
        # A TTYPE that is not a string (a number, T/F) names no column: colN, as read_colnames says.
        name = ttype.rstrip() if isinstance(ttype, str) else ""
        if not name:
            name = f"col{n}"
        tform = header.get(f"TFORM{n}")
        where = f"column {n} ({name!r})"
        if tform is None:
            raise CorruptHeaderError(f"{where}: the header has no TFORM{n} keyword")
        if not isinstance(tform, str):
            raise CorruptHeaderError(f"{where}: TFORM{n} = {tform!r} is not a string")
        common = dict(
            index=i,
            name=name,
            tform=tform,
            tnull=_tnull_value(header, n, kind),
            tscal=_float_keyword(header, f"TSCAL{n}", 1.0),
            tzero=_float_keyword(header, f"TZERO{n}", 0.0),
            tunit=_str_keyword(header, f"TUNIT{n}"),
            tucd=_str_keyword(header, f"TUCD{n}"),
            tdisp=_str_keyword(header, f"TDISP{n}"),
            kind=kind,
        )
        if kind == "table":
            specs.append(_parse_ascii_column(header, n, where, naxis1, common))
            continue
        tdim_text = _str_keyword(header, f"TDIM{n}")
        spec = _parse_binary_column(n, where, tform, offset, tdim_text, common)
        if spec.offset + spec.width > naxis1:
            raise CorruptHeaderError(
                f"{spec.describe()} ends at byte {spec.offset + spec.width} of a row, "
                f"past NAXIS1 = {naxis1}"
            )
        offset += spec.width
        specs.append(spec)
    return specs


def _parse_binary_column(n: int, where: str, tform: str, offset: int, tdim_text: str | None,
                         common: dict[str, Any]) -> ColumnSpec:
    m = _BIN_TFORM.match(tform.upper())
    if m is None or m.group(2) not in "LXBIJKAEDCMPQ":
        raise CorruptHeaderError(f"{where}: TFORM{n} = {tform!r} is not a valid binary-table format")
    repeat = int(m.group(1)) if m.group(1) else 1
    code = m.group(2)
    rest = m.group(3)
    if repeat > MAX_REPEAT:
        raise CorruptHeaderError(
            f"{where}: TFORM{n} = {tform!r}: repeat count {repeat} exceeds {MAX_REPEAT}"
        )
    if code in "PQ":
        v = re.match(_VLA_REST, rest.strip())
        if v is None:
            raise CorruptHeaderError(
                f"{where}: TFORM{n} = {tform!r} is not a valid variable-length array format"
            )
        if repeat > 1:
            raise CorruptHeaderError(
                f"{where}: TFORM{n} = {tform!r} has repeat {repeat}; a descriptor repeat must be 0 or 1"
            )
        width = repeat * (8 if code == "P" else 16)
        return ColumnSpec(code=v.group(1), repeat=repeat, width=width, offset=offset,
                          is_vla=True, descriptor=code,
                          max_elements=int(v.group(2)) if v.group(2) else None,
                          tdim=_parse_tdim(tdim_text), tdim_text=tdim_text, **common)
    # Anything after the code (e.g. the ``rAw`` substring convention) is kept in tform only.
    width = (repeat + 7) // 8 if code == "X" else repeat * ELEMENT_BYTES[code]
    tdim = _parse_tdim(tdim_text)
    if tdim is not None and math.prod(tdim) > repeat:
        # Fewer elements than the repeat count is allowed (the rest is padding; the cell is then
        # read as a flat vector); more is a lie about the field's size.
        raise CorruptHeaderError(
            f"{where}: TDIM{n} = {tdim_text!r} describes {math.prod(tdim)} elements, more than "
            f"the repeat count {repeat} of TFORM{n} = {tform!r}"
        )
    return ColumnSpec(code=code, repeat=repeat, width=width, offset=offset,
                      tdim=tdim, tdim_text=tdim_text, **common)


def _parse_ascii_column(header: Mapping[str, Any], n: int, where: str, naxis1: int,
                        common: dict[str, Any]) -> ColumnSpec:
    tform = common["tform"]
    m = re.match(_ASCII_TFORM, tform.upper())
    if m is None:
        raise CorruptHeaderError(f"{where}: TFORM{n} = {tform!r} is not a valid ASCII-table format")
    code, width = m.group(1), int(m.group(2))
    decimals = int(m.group(3)) if m.group(3) is not None else None
    if width < 1:
        raise CorruptHeaderError(f"{where}: TFORM{n} = {tform!r} has zero width")
    if code in "FED" and decimals is None:
        raise CorruptHeaderError(f"{where}: TFORM{n} = {tform!r} lacks the .d of a real format")
    tbcol = header.get(f"TBCOL{n}")
    if tbcol is None:
        raise CorruptHeaderError(f"{where}: the header has no TBCOL{n} keyword")
    if isinstance(tbcol, bool) or not isinstance(tbcol, (int, np.integer)) or tbcol < 1:
        raise CorruptHeaderError(f"{where}: TBCOL{n} = {tbcol!r} is not a positive integer")
    tbcol = int(tbcol)
    if tbcol - 1 + width > naxis1:
        raise CorruptHeaderError(
            f"{where}: TBCOL{n} = {tbcol} with TFORM{n} = {tform!r} ends at character "
            f"{tbcol - 1 + width}, past NAXIS1 = {naxis1}"
        )
    return ColumnSpec(code=code, repeat=width if code == "A" else 1, width=width,
                      offset=tbcol - 1, tbcol=tbcol, decimals=decimals, **common)


# ----------------------------------------------------------------------------- conversions


class Conversion(NamedTuple):
    """How stored elements become output values for one column under one mapping.

    ``kind`` is one of ``"logical"``, ``"bits"``, ``"string"``, ``"raw"`` (byte swap only),
    ``"flip"`` (byte swap and flip the sign bit: unsigned and signed-byte conventions),
    ``"scale"`` (``TZERO + TSCAL * stored`` in floating point), ``"complex"``; ASCII columns
    use ``"ascii_int"``, ``"ascii_float"`` and ``"string"``. ``dtype`` is the NumPy dtype of
    one output element (of one real/imaginary half for complex columns; None for strings).
    """

    kind: str
    dtype: np.dtype | None


def _is_unsigned(spec: ColumnSpec, mapping: str) -> bool:
    target = _UNSIGNED_ZERO[spec.code]
    if mapping == "torch":
        tol = _TORCH_TZERO_TOLERANCE
        return abs(spec.tscal - 1.0) <= tol and abs(spec.tzero - target) <= tol
    return spec.tscal == 1.0 and spec.tzero == target


def conversion(spec: ColumnSpec, mapping: MappingName = "native") -> Conversion:
    """Decide how one column's elements are converted under ``mapping``.

    ``"native"`` follows docs/tables.md, ``"compat"`` the Arrow mapping of the 1.2.3 contract
    (docs/compatibility.md) and ``"torch"`` its tensor mapping (docs/compatibility.md). All three
    share one decoder; only this choice differs.
    """
    code = spec.code
    if spec.is_ascii:
        if code == "A":
            return Conversion("string", None)
        if spec.tscal != 1.0 or spec.tzero != 0.0:
            return Conversion("ascii_int" if code == "I" else "ascii_float", np.dtype("f8"))
        if code == "I":
            if mapping == "native":
                # Up to 9 digits always fit int32; wider fields may not.
                return Conversion("ascii_int", np.dtype("i4" if spec.width <= 9 else "i8"))
            # The 1.x mappings (Arrow and tensor) read every Iw as int32, as CFITSIO's TLONG
            # does; a value that does not fit is refused (CFITSIO: NUM_OVERFLOW), never wrapped.
            return Conversion("ascii_int", np.dtype("i4"))
        if code == "E" and mapping == "compat":
            return Conversion("ascii_float", np.dtype("f4"))
        return Conversion("ascii_float", np.dtype("f8"))
    if code == "L":
        return Conversion("logical", np.dtype("?"))
    if code == "X":
        return Conversion("bits", np.dtype("?"))
    if code == "A":
        return Conversion("string", None)
    if code in "CM":
        # TSCAL/TZERO on complex columns are not applied: no writer we know produces them.
        return Conversion("complex", np.dtype(_STORAGE[code]))
    storage = np.dtype(_STORAGE[code])
    if spec.tscal == 1.0 and spec.tzero == 0.0:
        return Conversion("raw", storage)
    if code in _INTEGER_CODES and _is_unsigned(spec, mapping):
        # int8 and uint64 have no place in the 1.2.3 mappings: there they are scaled floats.
        if mapping == "native" or code in "IJ":
            return Conversion("flip", np.dtype(_UNSIGNED_DTYPE[code]))
    # A scaled E column is computed in float64 (TZERO + TSCAL * stored): a float32 result
    # would round it away (a TZERO of 2450000 leaves float32 a resolution of 0.25).
    return Conversion("scale", np.dtype("f8"))


def element_arrow_type(spec: ColumnSpec, conv: Conversion, decode_bytes: bool,
                       binary_strings: bool, mapping: str) -> pa.DataType:
    """The Arrow type of one element of a column (a list column's value type; a scalar column's type)."""
    import pyarrow as pa

    if conv.kind == "string":
        if spec.is_vla:
            large = spec.descriptor == "Q" and mapping == "native"
            if decode_bytes and not binary_strings:
                return pa.large_string() if large else pa.string()
            return pa.large_binary() if large else pa.binary()
        if not decode_bytes:
            return pa.binary(spec.string_width if mapping == "native" else spec.repeat)
        return pa.binary() if binary_strings else pa.string()
    if conv.kind in ("logical", "bits"):
        return pa.bool_()
    assert conv.dtype is not None
    value = pa.from_numpy_dtype(conv.dtype)
    if conv.kind == "complex":
        return pa.list_(value, 2)
    return value


def arrow_type(spec: ColumnSpec, mapping: Literal["native", "compat"] = "native",
               decode_bytes: bool = True, *, binary_strings: bool = False) -> pa.DataType:
    """The Arrow type a decode of ``spec`` produces.

    Parameters
    ----------
    spec : ColumnSpec
        The column.
    mapping : {"native", "compat"}
        ``"native"`` follows docs/tables.md (TDIM nesting, int8/uint64, complex pairs, a zero
        logical byte is null); ``"compat"`` follows the 1.2.3 Arrow mapping
        (docs/compatibility.md) (flat vectors, float64 for int8 and uint64, a zero logical byte is
        False, complex refused).
    decode_bytes : bool
        Character columns as strings (True) or raw fixed-width binary (False).
    binary_strings : bool
        With ``decode_bytes``, return stripped bytes (``binary``) instead of decoded strings.

    Raises
    ------
    UnsupportedColumnError
        For a complex column under ``mapping="compat"``.
    """
    import pyarrow as pa

    if mapping not in ("native", "compat"):
        raise ValueError(f"mapping must be 'native' or 'compat', not {mapping!r}")
    conv = conversion(spec, mapping)
    if conv.kind == "complex" and mapping == "compat":
        raise UnsupportedColumnError(
            f"complex {spec.describe()} cannot be read as Arrow; use read_torch for complex columns"
        )
    value = element_arrow_type(spec, conv, decode_bytes, binary_strings, mapping)
    if spec.is_vla:
        if conv.kind == "string":
            return value
        return pa.large_list(value) if (spec.descriptor == "Q" and mapping == "native") else pa.list_(value)
    if spec.is_ascii or (conv.kind == "string" and (mapping != "native" or spec.shape is None)):
        return value
    if conv.kind == "bits":
        if mapping == "compat" and spec.repeat == 1:
            return value
        return _fixed_lists(pa, value, (spec.repeat,))
    shape = spec.shape if mapping == "native" else None
    if shape is not None:
        return _fixed_lists(pa, value, shape)
    return value if spec.repeat == 1 else _fixed_lists(pa, value, (spec.repeat,))


def _fixed_lists(pa: Any, value: pa.DataType, shape: tuple[int, ...]) -> pa.DataType:
    """Nested ``fixed_size_list`` types for a cell of C-order ``shape``.

    A cell with no elements (repeat 0, or a 0 axis in TDIM) is a variable ``list`` whose rows
    are all empty instead: a ``fixed_size_list`` of size 0 is valid Arrow, but Polars panics
    on it and Parquet cannot read it back.
    """
    if 0 in shape:
        return pa.list_(value)
    for dim in reversed(shape):
        value = pa.list_(value, dim)
    return value


def _format_float(x: float) -> str:
    return repr(float(x))


def field_metadata(spec: ColumnSpec) -> dict[bytes, bytes]:
    """Field metadata describing where a column came from.

    ``fits_tform``, ``fits_tscal`` and ``fits_tzero`` are always present (``b"1.0"``,
    ``b"0.0"`` by default, as in 1.2.3); ``fits_tnull``, ``fits_tunit``, ``fits_tdim``,
    ``fits_tucd``, ``fits_tdisp`` when the header has them.
    """
    meta = {
        b"fits_tform": spec.tform.strip().encode("ascii", "replace"),
        b"fits_tscal": _format_float(spec.tscal).encode(),
        b"fits_tzero": _format_float(spec.tzero).encode(),
    }
    optional = {
        b"fits_tnull": spec.tnull,
        b"fits_tunit": spec.tunit,
        b"fits_tdim": spec.tdim_text,
        b"fits_tucd": spec.tucd,
        b"fits_tdisp": spec.tdisp,
    }
    for key, value in optional.items():
        if value is not None:
            meta[key] = str(value).encode("utf-8", "replace")
    return meta
