"""Variable-length (P/Q) columns: heap descriptors checked and gathered into list outputs, and
the logical columns that old astropy wrote as 0x00/0x01 bytes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .._kernels import _bintable
from ..errors import CorruptHeaderError, UnsupportedColumnError
from ..fits.columns import ColumnSpec
from .column_plan import ColumnOutput, address, allocate, binary_program, check_string_bytes, element_size
from .decode_options import STRIP_NONE
from .selection import RowSelection

__all__ = [
    "decode_vla",
    "legacy_logical_vla",
]


# Variable-length cells may share heap bytes, but a decode that gathers more than this many
# times the heap (and more than the floor) comes from descriptors that lie.
_VLA_MAX_OVERLAP = 16


_VLA_MIN_BOUND = 256 << 20
# Elements one Arrow list array (32-bit offsets) can address.
_LIST_MAX = 2**31 - 1


def _vla_error(spec: ColumnSpec, data: np.ndarray, row_bytes: int, row: int,
               heap_size: int) -> CorruptHeaderError:
    n, off = _read_descriptor(data, row * row_bytes + spec.offset, spec.descriptor == "Q")
    return CorruptHeaderError(
        f"{spec.describe()}, row {row}: corrupt heap descriptor (count {n}, offset {off}) "
        f"points outside the {heap_size}-byte heap"
    )


def _read_descriptor(data: np.ndarray, p: int, q: bool) -> tuple[int, int]:
    dt = np.dtype(">i8" if q else ">i4")
    pair = np.frombuffer(data[p:p + 2 * dt.itemsize].tobytes(), dtype=dt)
    return int(pair[0]), int(pair[1])


#: Descriptors read at a time while looking for the 0x00/0x01 logical heaps of old writers.
_LEGACY_SCAN_ROWS = 1 << 16


def legacy_logical_vla(spec: ColumnSpec, data: np.ndarray, heap: np.ndarray, row_bytes: int, nrows: int,
                       fetch: Callable[[int, int], None] | None = None) -> bool:
    """True when a logical variable-length column holds 0x00/0x01 bytes (astropy <= 7.2.0
    wrote booleans so) rather than the FITS ``'T'``/``'F'``/0x00.

    The rule is astropy's, over the whole column: at least one 0x01 byte and no byte above it.
    A heap of zeros only stays all-null. The scan stops at the first byte above 0x01, so a
    column written to the standard costs about one row of it. ``fetch(first, n)``, for a
    lazily fetched source, brings in rows ``first .. first + n`` and their heap cells before
    they are judged: bytes never fetched read as zeros and would look all-null.
    """
    rows = min(nrows, len(data) // row_bytes) if row_bytes else 0
    seen_one = False
    for first in range(0, rows, _LEGACY_SCAN_ROWS):
        n = min(_LEGACY_SCAN_ROWS, rows - first)
        if fetch is not None:
            fetch(first, n)
        counts = np.zeros(n, dtype=np.int64)
        starts = np.zeros(n, dtype=np.int64)
        bad = _bintable.vla_descriptors(data, row_bytes, first, None, n, spec.offset,
                                        spec.descriptor == "Q", 8, heap.size, counts, starts)
        if bad >= 0:
            n = bad  # the decode names the corrupt descriptor; judge the rows before it
            counts, starts = counts[:n], starts[:n]
        total = int(counts.sum())
        if total:
            ends = np.cumsum(counts)
            where = np.repeat(starts - (ends - counts), counts) + np.arange(total, dtype=np.int64)
            top = int(heap[where].max())
            if top > 1:
                return False
            seen_one = seen_one or top == 1
        if bad >= 0:
            break
    return seen_one


def _legacy_logical_values(out: ColumnOutput, heap: np.ndarray, counts: np.ndarray,
                           heap_offsets: np.ndarray, offsets: np.ndarray, arrow: bool) -> None:
    """Fill ``out`` for a legacy logical column: any non-zero byte is True, none is null."""
    total = int(offsets[-1])
    where = np.repeat(heap_offsets - offsets[:-1], counts) + np.arange(total, dtype=np.int64)
    values = heap[where] != 0
    if arrow:
        packed = np.packbits(values, bitorder="little")
        out.values = allocate(packed.size, np.uint8, True)
        out.values[:] = packed
    else:
        out.values = values.view(np.uint8)
    out.valid = None
    out.nulls = 0


def decode_vla(out: ColumnOutput, data: np.ndarray, heap: np.ndarray, row_bytes: int, sel: RowSelection,
               *, arrow: bool, apply_nulls: bool, decode_strings: bool, strip: int,
               large: bool, zero_null: bool = False, nrows: int = 0,
               legacy_logical: Callable[[ColumnSpec], bool] | None = None) -> None:
    """Decode the variable-length column of ``out`` for the rows ``sel``. ``legacy_logical``
    says whether a logical column holds old astropy's 0x00/0x01 bytes (decided once per
    column by its caller); without it, each call judges the whole column again."""
    spec, conv = out.spec, out.conv
    n = sel.count
    counts = np.zeros(n, dtype=np.int64)
    heap_offsets = np.zeros(n, dtype=np.int64)
    if spec.repeat and n:
        elem_bits = 1 if spec.code == "X" else 8 * {"C": 8, "M": 16}.get(spec.code, element_size(spec.code))
        bad = _bintable.vla_descriptors(data, row_bytes, sel.first, sel.index, n, spec.offset,
                                        spec.descriptor == "Q", elem_bits, heap.size, counts,
                                        heap_offsets)
        if bad >= 0:
            row = sel.source(bad)
            raise _vla_error(spec, data, row_bytes, row, heap.size)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    if spec.repeat and n:
        payload = total * elem_bits // 8
        if payload > max(_VLA_MIN_BOUND, _VLA_MAX_OVERLAP * heap.size):
            # Each descriptor lies inside the heap, but together they point at the same bytes
            # many times over: the output would dwarf the file.
            raise CorruptHeaderError(
                f"{spec.describe()}: the descriptors of {n} rows reference {payload} bytes of a "
                f"{heap.size}-byte heap (more than {_VLA_MAX_OVERLAP} times over): corrupt "
                "descriptors"
            )
    if arrow and not large and total > _LIST_MAX:
        raise UnsupportedColumnError(
            f"{spec.describe()}: {total} elements in one batch exceed a 32-bit Arrow list; "
            "decode fewer rows at a time"
        )
    out.list_offsets = offsets
    out.items = total
    if conv.kind == "string":
        # Each row is one string of `count` characters: the leaf has one item per row.
        out.string_width = 1
        out.items = n
        if arrow:
            check_string_bytes(spec, total)
            out.values = allocate(total, np.uint8, arrow)
            out.offsets = allocate(n + 1, np.int32, arrow)
            out.offsets[0] = 0
            prog = [0] * _bintable.P_NFIELDS
            prog[_bintable.P_OP] = _bintable.OP_STRING
            prog[_bintable.P_STRIP] = strip if decode_strings else STRIP_NONE
            prog[_bintable.P_OUT] = address(out.values)
            prog[_bintable.P_OFFSETS] = address(out.offsets)
            scale = (1.0, 0.0)
        else:
            out.values = allocate(total, np.uint8, arrow)
            prog = [0] * _bintable.P_NFIELDS
            prog[_bintable.P_OP] = _bintable.OP_COPY
            prog[_bintable.P_ESIZE] = 1
            prog[_bintable.P_OUT] = address(out.values)
            scale = (1.0, 0.0)
    elif conv.kind == "logical" and total and (
            legacy_logical(spec) if legacy_logical is not None
            else legacy_logical_vla(spec, data, heap, row_bytes, max(nrows, sel.count))):
        _legacy_logical_values(out, heap, counts, heap_offsets, offsets, arrow)
        return
    else:
        prog, scale = binary_program(out, 1, total, arrow=arrow, apply_nulls=apply_nulls,
                                     decode_strings=decode_strings, strip=strip, zero_null=zero_null)
        if conv.kind in ("bits", "logical") and not arrow:
            prog[_bintable.P_ESIZE] = 1
    stats = np.zeros((1, _bintable.S_NFIELDS), dtype=np.int64)
    if total or (conv.kind == "string" and arrow and n):
        _bintable.vla_gather(heap, heap_offsets, offsets,
                             np.array([prog], dtype=np.int64), np.array([scale], dtype=np.float64),
                             stats)
    out.nulls = int(stats[0, _bintable.S_NULLS])
    out.high = bool(stats[0, _bintable.S_HIGH])
