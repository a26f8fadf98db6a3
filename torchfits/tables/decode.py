"""Decode the rows of a FITS binary or ASCII table into a pyarrow RecordBatch or NumPy arrays.

Planning happens here: projection, row selection, output allocation at final size and every
bound check; the compiled kernels (`_bintable`, `_asciitable`) then make one GIL-free pass over
the row bytes for all projected columns, in row chunks on a thread pool for big tables.
"""
from __future__ import annotations

import codecs
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Optional, Sequence, Union

import numpy as np

from .._kernels import _asciitable
from .._kernels import _bintable
from ..fits import threads as _threads
from ..fits.columns import ColumnSpec, Conversion, MappingName, conversion
from ..fits.columns import _element_arrow_type, arrow_type
from ..fits.columns import field_metadata as _field_metadata
from ..query.names import case_ambiguity, did_you_mean
from ..errors import (ColumnNotFoundError, CorruptHeaderError, TruncatedFileError,
                     UnsupportedColumnError)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyarrow as pa

__all__ = [
    "DecodeOptions",
    "arrow_schema",
    "decode_ascii_table",
    "decode_table",
    "decode_table_numpy",
    "decode_table_where",
    "select_columns",
    "split_data_unit",
]

Buffer = Any  # anything exposing the buffer protocol: bytes, memoryview, mmap, np.ndarray
ColumnSelector = Union[str, int]

# Tables smaller than this decode on the calling thread: a pool costs more than it saves.
_PARALLEL_MIN_BYTES = 4 << 20
# Chunk starts are multiples of this many rows so that chunks never share a byte of any
# bit-packed output (bool values, validity, X bits) whatever the repeat count.
_CHUNK_ALIGN = 1024
_PIECES_PER_THREAD = 4
# Largest output a piece of a one-pass where-decode plans (for every row of the piece).
_WHERE_PIECE_BYTES = 16 << 20
_INT32_MAX = 2**31 - 1
# Variable-length cells may share heap bytes, but a decode that gathers more than this many
# times the heap (and more than the floor) comes from descriptors that lie.
_VLA_MAX_OVERLAP = 16
_VLA_MIN_BOUND = 256 << 20

_STRIP_NONE, _STRIP_NUL, _STRIP_BLANK = 0, 1, 2
_SCALE_SOURCE = {"B": _bintable.SRC_U8, "I": _bintable.SRC_I16, "J": _bintable.SRC_I32,
                 "K": _bintable.SRC_I64, "E": _bintable.SRC_F32, "D": _bintable.SRC_F64}


# ----------------------------------------------------------------------------- helpers


def _to_int64(x: int) -> int:
    """Two's-complement view of an unsigned 64-bit pattern, as the int64 program stores it."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def _address(arr: Optional[np.ndarray]) -> int:
    return 0 if arr is None else int(arr.__array_interface__["data"][0])


def _bytes_view(buf: Buffer, what: str) -> np.ndarray:
    if buf is None:
        return np.zeros(0, dtype=np.uint8)
    try:
        arr = np.frombuffer(buf, dtype=np.uint8)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must expose a contiguous byte buffer: {exc}") from None
    return arr


@functools.lru_cache(maxsize=32)
def _ascii_compatible(encoding: str) -> bool:
    """True when plain ASCII bytes decode to the same characters, so they pass through as is."""
    try:
        sample = bytes(range(1, 128))
        return sample.decode(encoding) == sample.decode("ascii")
    except (LookupError, UnicodeDecodeError):
        return False


def _check_encoding(encoding: str) -> None:
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}") from None


def _default_threads(threads: Optional[int]) -> int:
    if threads is None:
        return _threads.default_threads()
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, not {threads}")
    return int(threads)


def _chunk_bounds(n_out: int, row_bytes: int, threads: int) -> list[int]:
    if threads <= 1 or n_out * max(row_bytes, 1) < _PARALLEL_MIN_BYTES or n_out < 2 * _CHUNK_ALIGN:
        return [0, n_out]
    # A few pieces per thread, taken by whichever thread is free (`run_shared`): a thread
    # that starts late on a busy machine leaves its share to the others.
    step = -(-n_out // (threads * _PIECES_PER_THREAD))
    step = -(-step // _CHUNK_ALIGN) * _CHUNK_ALIGN
    return list(range(0, n_out, step)) + [n_out]


def select_columns(specs: Sequence[ColumnSpec],
                   columns: Optional[Union[ColumnSelector, Iterable[ColumnSelector]]]) -> list[ColumnSpec]:
    """Resolve a projection to specs, in the requested order with duplicates collapsed.

    Parameters
    ----------
    specs : sequence of ColumnSpec
        Every column of the table.
    columns : str, int, iterable of them, or None
        Column names (exact match first, then the one case-insensitive match) or 0-based
        positions;
        a bare string names one column; None selects every column, ``[]`` none.

    Raises
    ------
    ColumnNotFoundError
        For a name or position the table does not have (``"Column 'X' not found"``), or a name
        that is no column's exact spelling and matches several columns only by case.
    """
    if columns is None:
        return list(specs)
    if isinstance(columns, (str, int, np.integer)):
        columns = [columns]
    chosen: list[ColumnSpec] = []
    seen: set[int] = set()
    by_name: dict[str, ColumnSpec] = {}
    by_folded: dict[str, ColumnSpec] = {}
    for s in specs:
        by_name.setdefault(s.name, s)
        by_folded.setdefault(s.name.casefold(), s)
    for col in columns:
        if isinstance(col, (int, np.integer)) and not isinstance(col, bool):
            if not 0 <= int(col) < len(specs):
                raise ColumnNotFoundError(f"Column {int(col)} not found (the table has {len(specs)} columns)")
            spec = specs[int(col)]
        elif isinstance(col, str):
            spec = by_name.get(col) or by_folded.get(col.casefold())  # type: ignore[assignment]
            if spec is None:
                raise ColumnNotFoundError(f"Column {col!r} not found"
                                          f"{did_you_mean(col, [s.name for s in specs])}")
            # As in where-expressions: a case-insensitive match must be the only one.
            ambiguity = "" if col in by_name else case_ambiguity(col, [s.name for s in specs])
            if ambiguity:
                raise ColumnNotFoundError(f"Column {col!r} {ambiguity}; write the one you mean exactly")
        else:
            raise TypeError(f"a column is selected by name or position, not {type(col).__name__}")
        if spec.index not in seen:
            seen.add(spec.index)
            chosen.append(spec)
    return chosen


@dataclass
class _Rows:
    """The output rows: table rows ``first + k``, or ``index[k]`` when an index is given."""

    count: int
    first: int = 0
    index: Optional[np.ndarray] = None

    def source(self, k: int) -> int:
        return int(self.index[k]) if self.index is not None else self.first + k


def check_row_indices(rows: Any, nrows: int) -> np.ndarray:
    """Validate 0-based row indices of an ``nrows``-row table; returns them as int64.

    Raises
    ------
    ValueError
        Not a 1-D sequence of integers, or a negative index.
    IndexError
        An index at or beyond ``nrows``.
    """
    index = np.asarray(rows)
    if index.ndim != 1:
        raise ValueError("rows must be a 1-D sequence of integer row indices")
    if index.size == 0:
        return np.empty(0, np.int64)
    if index.dtype.kind not in "iu":
        raise ValueError(f"rows must be a 1-D sequence of integer row indices, not {index.dtype}")
    index = np.ascontiguousarray(index, dtype=np.int64)
    lo, hi = int(index.min()), int(index.max())
    if lo < 0:
        raise ValueError(f"row {lo} is negative; rows are 0-based indices")
    if hi >= nrows:
        raise IndexError(f"row {hi} out of range for a {nrows}-row table")
    return index


def _plan_rows(nrows: int, rows: Any, row_range: Optional[tuple[int, int]]) -> _Rows:
    if rows is not None and row_range is not None:
        raise ValueError("Only one of rows or row_range may be provided")
    if rows is not None:
        index = check_row_indices(rows, nrows)
        return _Rows(len(index), index=index) if len(index) else _Rows(0)
    if row_range is None:
        return _Rows(nrows)
    start, stop = row_range
    start = int(start)
    stop = nrows if stop is None else int(stop)
    if start < 0:
        raise ValueError("row_range start must be >= 0")
    if stop < 0:
        raise ValueError("row_range has a negative stop")
    stop = min(stop, nrows)
    return _Rows(max(0, stop - start), first=min(start, nrows))


def _check_extent(data: np.ndarray, row_bytes: int, nrows: int, sel: _Rows,
                  specs: Sequence[ColumnSpec]) -> None:
    if row_bytes < 0 or nrows < 0:
        raise ValueError("row_bytes and nrows must be >= 0")
    for s in specs:
        if s.offset + s.width > row_bytes:
            raise CorruptHeaderError(f"{s.describe()} ends past the {row_bytes}-byte row")
    if sel.count == 0 or row_bytes == 0:
        return
    last = int(sel.index.max()) if sel.index is not None else sel.first + sel.count - 1
    if (last + 1) * row_bytes > data.size:
        raise TruncatedFileError(
            f"table data truncated: row {last} needs {(last + 1) * row_bytes} bytes, "
            f"only {data.size} are present"
        )


# ----------------------------------------------------------------------------- column plans


@dataclass
class _Out:
    """Outputs of one projected column, allocated at final size."""

    spec: ColumnSpec
    conv: Conversion
    items: int                       # leaf values (strings count as one item)
    values: Optional[np.ndarray] = None
    valid: Optional[np.ndarray] = None
    offsets: Optional[np.ndarray] = None      # int32 string offsets
    list_offsets: Optional[np.ndarray] = None  # int64 VLA element offsets
    string_width: int = 0
    nulls: int = 0
    high: bool = False


def _empty(n: int, dtype: Any, arrow: bool) -> np.ndarray:
    """An uninitialised output of ``n`` values.

    Arrow outputs come from Arrow's memory pool: it recycles freed pages, so a stream of
    batches does not pay the kernel's page zeroing for every new output.
    """
    dtype = np.dtype(dtype)
    if not arrow:
        return np.empty(n, dtype=dtype)
    return np.frombuffer(_pa().allocate_buffer(n * dtype.itemsize), dtype=dtype)


def _zeros(n: int, dtype: Any, arrow: bool) -> np.ndarray:
    if not arrow:
        return np.zeros(n, dtype=dtype)
    out = _empty(n, dtype, arrow)
    out.fill(0)
    return out


def _bitmap(nbits: int, arrow: bool = True) -> np.ndarray:
    return _zeros((nbits + 7) // 8, np.uint8, arrow)


def _tnull_pattern(spec: ColumnSpec, conv: Conversion) -> Optional[int]:
    """The stored bit pattern of TNULL, or None when it cannot occur in this column."""
    if spec.code not in "BIJK" or not isinstance(spec.tnull, int) or conv.kind not in ("raw", "flip", "scale"):
        return None
    bits = 8 * _bintable_esize(spec.code)
    lo, hi = (0, 255) if spec.code == "B" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not lo <= spec.tnull <= hi:
        return None
    return spec.tnull & ((1 << bits) - 1)


def _bintable_esize(code: str) -> int:
    return {"L": 1, "X": 1, "B": 1, "I": 2, "J": 4, "K": 8, "A": 1, "E": 4, "D": 8, "C": 4, "M": 8}[code]


def _binary_program(out: _Out, count: int, items: int, *, arrow: bool, apply_nulls: bool,
                    decode_strings: bool, strip: int, zero_null: bool = False,
                    pooled: Optional[bool] = None) -> tuple[list[int], tuple[float, float]]:
    """Allocate the outputs of one binary-table column for ``items`` leaf values and return its
    program row. ``count`` is the per-row element count the kernel loops over; ``zero_null``
    makes an undefined (zero) logical byte null (the native mapping); ``pooled`` (default: as
    ``arrow``) allocates from Arrow's memory pool rather than NumPy's (see `_empty`)."""
    pool = arrow if pooled is None else pooled
    spec, conv = out.spec, out.conv
    prog = [0] * _bintable.P_NFIELDS
    prog[_bintable.P_SRC_OFF] = spec.offset
    prog[_bintable.P_COUNT] = count
    scale = (1.0, 0.0)
    kind = conv.kind
    if kind in ("raw", "flip", "complex"):
        esize = _bintable_esize(spec.code)
        n = items * (2 if kind == "complex" else 1)
        out.values = _empty(n, conv.dtype, pool)
        prog[_bintable.P_OP] = _bintable.OP_SWAP
        prog[_bintable.P_ESIZE] = esize
        if kind == "complex":
            prog[_bintable.P_COUNT] = 2 * count
        if kind == "flip":
            prog[_bintable.P_FLIP] = _to_int64(1 << (8 * esize - 1))
    elif kind == "scale":
        out.values = _empty(items, conv.dtype, pool)
        prog[_bintable.P_OP] = _bintable.OP_SCALE
        prog[_bintable.P_ESIZE] = _bintable_esize(spec.code)
        prog[_bintable.P_SRC_TYPE] = _SCALE_SOURCE[spec.code]
        prog[_bintable.P_DST_SIZE] = conv.dtype.itemsize  # type: ignore[union-attr]
        scale = (spec.tscal, spec.tzero)
        if spec.code == "K" and spec.tscal == 1.0 and spec.tzero == float(2**63):
            # stored + 2**63 in floating point would round twice; flip to the exact unsigned
            # value and round it once.
            prog[_bintable.P_SRC_TYPE] = _bintable.SRC_U64_FLIP
            scale = (1.0, 0.0)
    elif kind == "logical":
        if arrow:
            out.values = _bitmap(items, pool)
            prog[_bintable.P_OP] = _bintable.OP_LOGICAL
            if zero_null:
                out.valid = _bitmap(items, pool)
                prog[_bintable.P_ZERO_NULL] = 1
        else:
            out.values = _empty(items, np.uint8, pool)
            prog[_bintable.P_OP] = _bintable.OP_LOGICAL_BYTES
    elif kind == "bits":
        if arrow:
            out.values = _bitmap(items, pool)
            prog[_bintable.P_OP] = _bintable.OP_BITS
        else:
            out.values = _empty(items, np.uint8, pool)
            prog[_bintable.P_OP] = _bintable.OP_BITS_BYTES
    elif kind == "string":
        w = out.string_width
        if decode_strings:
            _check_string_bytes(out.spec, items * w)
            out.values = _empty(items * w, np.uint8, pool)
            out.offsets = _empty(items + 1, np.int32, pool)
            out.offsets[0] = 0
            prog[_bintable.P_OP] = _bintable.OP_STRING
            prog[_bintable.P_ESIZE] = w
            prog[_bintable.P_STRIP] = strip
        else:
            out.values = _empty(items * w, np.uint8, pool)
            prog[_bintable.P_OP] = _bintable.OP_COPY
            prog[_bintable.P_ESIZE] = count * w
    else:  # pragma: no cover - conversion() returns only the kinds above for binary tables
        raise AssertionError(kind)
    if kind in ("raw", "flip", "scale") and apply_nulls:
        pattern = _tnull_pattern(spec, conv)
        if pattern is not None:
            out.valid = _bitmap(items, pool)
            prog[_bintable.P_HAS_TNULL] = 1
            prog[_bintable.P_TNULL] = _to_int64(pattern)
    prog[_bintable.P_OUT] = _address(out.values)
    prog[_bintable.P_VALID] = _address(out.valid)
    prog[_bintable.P_OFFSETS] = _address(out.offsets)
    return prog, scale


def string_batch_rows(specs: Sequence[ColumnSpec], names: Any) -> Optional[int]:
    """The most rows one batch of the columns ``names`` may hold: each fixed-width string
    column decodes into one Arrow string array, whose 32-bit offsets address at most 2 GiB.
    None when no such column limits the batch."""
    wanted = set(names)
    widest = max((s.width for s in specs if s.name in wanted and s.code == "A" and not s.is_vla),
                 default=0)
    return max(1, _INT32_MAX // widest) if widest else None


def _check_string_bytes(spec: ColumnSpec, nbytes: int) -> None:
    """Refuse a batch whose strings in ``spec`` would overflow a string array's int32 offsets."""
    if nbytes > _INT32_MAX:
        raise UnsupportedColumnError(
            f"{spec.describe()}: {nbytes} bytes of strings in one batch exceed a 32-bit Arrow "
            "string array; decode fewer rows at a time"
        )


def _fixed_layout(spec: ColumnSpec, conv: Conversion, mapping: str) -> tuple[int, int]:
    """(elements per row the kernel loops over, string width) for a fixed-width column."""
    if conv.kind == "string":
        if mapping == "native" and spec.shape is not None and spec.tdim and spec.tdim[0] > 0:
            w = spec.tdim[0]
            return spec.repeat // w, w
        return 1, spec.repeat
    return spec.repeat, 0


def _run_chunked(kernel: Any, bounds: list[int], ncols: int, nstats: int, threads: int,
                 init_stats: int = 0) -> np.ndarray:
    """Run ``kernel(out_start, nrows, stats)`` over the row chunks ``bounds`` delimits and
    combine their stats: counts add up, "first bad row" columns keep the smallest."""
    def one(i: int) -> np.ndarray:
        stats = np.full((ncols, nstats), init_stats, dtype=np.int64)
        stats[:, :2] = 0
        kernel(bounds[i], bounds[i + 1] - bounds[i], stats)
        return stats

    # The shared pool (torchfits._threads) runs chunks; the kernels release the GIL.
    parts = _threads.run_shared(one, range(len(bounds) - 1), threads)
    total = np.zeros((ncols, nstats), dtype=np.int64)
    total[:, 2:] = init_stats
    for p in parts:
        total[:, :2] += p[:, :2]
        for j in range(2, nstats):
            bad = p[:, j]
            cur = total[:, j]
            take = (bad >= 0) & ((cur < 0) | (bad < cur))
            total[take, j] = bad[take]
    return total


@dataclass
class ColumnProgram:
    """The fixed-width columns that one fused kernel pass decodes.

    Each column contributes its output buffers (an `_Out`), one program row for the kernel (the
    operation, element size and source offset, and the addresses of its output buffers, which
    the `_Out` keeps alive), its ``(TSCAL, TZERO)`` and its per-row element count.
    """

    outs: list[_Out] = field(default_factory=list)
    rows: list[list[int]] = field(default_factory=list)
    scales: list[tuple[float, float]] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def add(self, out: _Out, row: list[int], scale: tuple[float, float], count: int) -> None:
        self.outs.append(out)
        self.rows.append(row)
        self.scales.append(scale)
        self.counts.append(count)

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernel's program table (int64, one row per column) and scale table (float64)."""
        n = len(self.rows)
        prog = np.array(self.rows, dtype=np.int64).reshape(n, _bintable.P_NFIELDS)
        scale = np.array(self.scales, dtype=np.float64).reshape(n, 2)
        return np.ascontiguousarray(prog), np.ascontiguousarray(scale)


def _decode_fixed(program: ColumnProgram, data: np.ndarray, row_bytes: int, sel: _Rows,
                  threads: int) -> None:
    outs, counts = program.outs, program.counts
    if not outs:
        return
    assert all(o.values is not None for o in outs)
    prog, scale = program.tables()
    bounds = _chunk_bounds(sel.count, row_bytes, threads)

    def kernel(start: int, n: int, stats: np.ndarray) -> None:
        _bintable.decode_rows(data, row_bytes, sel.first, sel.index, start, n, prog, scale, stats)

    stats = _run_chunked(kernel, bounds, len(outs), _bintable.S_NFIELDS, threads)
    for i, out in enumerate(outs):
        out.nulls = int(stats[i, _bintable.S_NULLS])
        out.high = bool(stats[i, _bintable.S_HIGH])
        if out.offsets is not None and len(bounds) > 2 and prog[i, _bintable.P_OP] == _bintable.OP_STRING:
            item_bounds = np.asarray(bounds, dtype=np.int64) * counts[i]
            _bintable.compact_strings(out.values, out.offsets, item_bounds,  # type: ignore[arg-type]
                                      out.string_width)


def _vla_error(spec: ColumnSpec, data: np.ndarray, row_bytes: int, row: int, heap_size: int) -> CorruptHeaderError:
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


def _legacy_logical_vla(spec: ColumnSpec, data: np.ndarray, heap: np.ndarray,
                        row_bytes: int, nrows: int) -> bool:
    """True when a logical variable-length column holds 0x00/0x01 bytes (astropy <= 7.2.0
    wrote booleans so) rather than the FITS ``'T'``/``'F'``/0x00.

    The rule is astropy's, over the whole column: at least one 0x01 byte and no byte above it.
    A heap of zeros only stays all-null. The scan stops at the first byte above 0x01, so a
    column written to the standard costs about one row of it.
    """
    rows = min(nrows, len(data) // row_bytes) if row_bytes else 0
    seen_one = False
    for first in range(0, rows, _LEGACY_SCAN_ROWS):
        n = min(_LEGACY_SCAN_ROWS, rows - first)
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


def _legacy_logical_values(out: _Out, heap: np.ndarray, counts: np.ndarray,
                           heap_offsets: np.ndarray, offsets: np.ndarray, arrow: bool) -> None:
    """Fill ``out`` for a legacy logical column: any non-zero byte is True, none is null."""
    total = int(offsets[-1])
    where = np.repeat(heap_offsets - offsets[:-1], counts) + np.arange(total, dtype=np.int64)
    values = heap[where] != 0
    if arrow:
        packed = np.packbits(values, bitorder="little")
        out.values = _empty(packed.size, np.uint8, True)
        out.values[:] = packed
    else:
        out.values = values.view(np.uint8)
    out.valid = None
    out.nulls = 0


def _decode_vla(out: _Out, data: np.ndarray, heap: np.ndarray, row_bytes: int, sel: _Rows,
                *, arrow: bool, apply_nulls: bool, decode_strings: bool, strip: int,
                large: bool, zero_null: bool = False, nrows: int = 0) -> None:
    spec, conv = out.spec, out.conv
    n = sel.count
    counts = np.zeros(n, dtype=np.int64)
    heap_offsets = np.zeros(n, dtype=np.int64)
    if spec.repeat and n:
        elem_bits = 1 if spec.code == "X" else 8 * {"C": 8, "M": 16}.get(spec.code, _bintable_esize(spec.code))
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
    if arrow and not large and total > _INT32_MAX:
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
            _check_string_bytes(spec, total)
            out.values = _empty(total, np.uint8, arrow)
            out.offsets = _empty(n + 1, np.int32, arrow)
            out.offsets[0] = 0
            prog = [0] * _bintable.P_NFIELDS
            prog[_bintable.P_OP] = _bintable.OP_STRING
            prog[_bintable.P_STRIP] = strip if decode_strings else _STRIP_NONE
            prog[_bintable.P_OUT] = _address(out.values)
            prog[_bintable.P_OFFSETS] = _address(out.offsets)
            scale = (1.0, 0.0)
        else:
            out.values = _empty(total, np.uint8, arrow)
            prog = [0] * _bintable.P_NFIELDS
            prog[_bintable.P_OP] = _bintable.OP_COPY
            prog[_bintable.P_ESIZE] = 1
            prog[_bintable.P_OUT] = _address(out.values)
            scale = (1.0, 0.0)
    elif conv.kind == "logical" and total and _legacy_logical_vla(spec, data, heap, row_bytes,
                                                                   max(nrows, sel.count)):
        _legacy_logical_values(out, heap, counts, heap_offsets, offsets, arrow)
        return
    else:
        prog, scale = _binary_program(out, 1, total, arrow=arrow, apply_nulls=apply_nulls,
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


# ----------------------------------------------------------------------------- Arrow assembly


def _pa() -> Any:
    import pyarrow

    return pyarrow


def _decode_non_ascii(arr: "pa.Array", encoding: str) -> "pa.Array":
    """Decode stripped string bytes that are not plain ASCII; undecodable bytes become U+FFFD."""
    pa = _pa()
    binary = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary()) \
        if not pa.types.is_binary(arr.type) and not pa.types.is_large_binary(arr.type) else arr
    target = pa.large_string() if pa.types.is_large_binary(binary.type) else pa.string()
    if codecs.lookup(encoding).name == "utf-8":
        try:
            return binary.cast(target)
        except pa.ArrowInvalid:
            pass
    values = [None if v is None else v.decode(encoding, "replace") for v in binary.to_pylist()]
    return pa.array(values, type=target)


def _leaf_array(out: _Out, leaf_type: "pa.DataType", encoding: str, decode_text: bool) -> "pa.Array":
    pa = _pa()
    kind = out.conv.kind
    items = out.items
    valid = None
    if out.valid is not None and out.nulls:
        valid = pa.py_buffer(out.valid)
    if kind == "string":
        if pa.types.is_fixed_size_binary(leaf_type):
            return pa.Array.from_buffers(leaf_type, items, [None, pa.py_buffer(out.values)])
        text = decode_text and (pa.types.is_string(leaf_type) or pa.types.is_large_string(leaf_type))
        # Built with int32 offsets; large types (QA columns) are cast afterwards.
        base_type = pa.string() if text else pa.binary()
        assert out.offsets is not None
        if text and (out.high or not _ascii_compatible(encoding)):
            raw = pa.Array.from_buffers(pa.binary(), items,
                                        [None, pa.py_buffer(out.offsets), pa.py_buffer(out.values)])
            arr = _decode_non_ascii(raw, encoding)
        else:
            arr = pa.Array.from_buffers(base_type, items,
                                        [None, pa.py_buffer(out.offsets), pa.py_buffer(out.values)])
        if arr.type != leaf_type:
            arr = arr.cast(leaf_type)
        return arr
    if kind in ("logical", "bits"):
        return pa.Array.from_buffers(pa.bool_(), items, [valid, pa.py_buffer(out.values)],
                                     null_count=out.nulls if valid is not None else 0)
    if kind == "complex":
        half = pa.from_numpy_dtype(out.conv.dtype)
        child = pa.Array.from_buffers(half, 2 * items, [None, pa.py_buffer(out.values)], null_count=0)
        return pa.Array.from_buffers(pa.list_(half, 2), items, [None], null_count=0, children=[child])
    return pa.Array.from_buffers(leaf_type, items, [valid, pa.py_buffer(out.values)],
                                 null_count=out.nulls if valid is not None else 0)


def _column_array(out: _Out, nrows: int, mapping: str, decode_bytes: bool, binary_strings: bool,
                  encoding: str) -> "pa.Array":
    pa = _pa()
    spec = out.spec
    target = arrow_type(spec, mapping, decode_bytes, binary_strings=binary_strings)  # type: ignore[arg-type]
    leaf_type = _element_arrow_type(spec, out.conv, decode_bytes, binary_strings, mapping)
    if spec.is_vla:
        if out.conv.kind == "string":
            return _leaf_array(out, target, encoding, decode_bytes and not binary_strings)
        leaf = _leaf_array(out, leaf_type, encoding, False)
        assert out.list_offsets is not None
        if pa.types.is_large_list(target):
            offs = out.list_offsets
        else:
            offs = out.list_offsets.astype(np.int32)
        return pa.Array.from_buffers(target, nrows, [None, pa.py_buffer(offs)], null_count=0,
                                     children=[leaf])
    leaf = _leaf_array(out, leaf_type, encoding, decode_bytes and not binary_strings)
    if pa.types.is_list(target):
        # A cell with no elements: every row an empty list (`arrow_type` says why not a
        # fixed_size_list of size 0); the leaf holds no values.
        return pa.Array.from_buffers(target, nrows, [None, pa.py_buffer(np.zeros(nrows + 1, np.int32))],
                                     null_count=0, children=[leaf.slice(0, 0)])
    # Fixed-size lists of size 0 cannot tell their length from the child: carry it explicitly.
    chain = []
    t = target
    while t != leaf_type:
        chain.append(t)
        t = t.value_type
    arr = leaf
    lengths = []
    length = nrows
    for t in chain:
        lengths.append(length)
        length *= t.list_size
    for t, n in zip(reversed(chain), reversed(lengths)):
        arr = pa.Array.from_buffers(t, n, [None], null_count=0, children=[arr])
    return arr


def _empty_batch(nrows: int) -> "pa.RecordBatch":
    pa = _pa()
    return pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), nrows, [None], null_count=0))


def arrow_schema(specs: Sequence[ColumnSpec], *, columns: Any = None,
                 mapping: Literal["native", "compat"] = "native", decode_bytes: bool = True,
                 binary_strings: bool = False, metadata: bool = True) -> "pa.Schema":
    """The schema `decode_table` produces for the same arguments, without decoding anything.

    Raises
    ------
    ColumnNotFoundError
        For an unknown projected column.
    UnsupportedColumnError
        For projected complex columns under ``mapping="compat"``.
    """
    pa = _pa()
    chosen = select_columns(specs, columns)
    _refuse_complex(chosen, mapping)
    fields = [pa.field(s.name, arrow_type(s, mapping, decode_bytes, binary_strings=binary_strings),
                       metadata=_field_metadata(s) if metadata else None) for s in chosen]
    return pa.schema(fields)


def _refuse_complex(chosen: Sequence[ColumnSpec], mapping: str) -> None:
    if mapping == "compat":
        bad = [s.name for s in chosen if not s.is_ascii and s.code in "CM"]
        if bad:
            raise UnsupportedColumnError(
                f"complex columns {bad} cannot be read as Arrow tables; use read_torch for them"
            )


# ----------------------------------------------------------------------------- entry points


def _strip_mode(strip: bool) -> int:
    return _STRIP_BLANK if strip else _STRIP_NUL


def _plan_binary(chosen: Sequence[ColumnSpec], n_out: int, mapping: MappingName, *, arrow: bool,
                 apply_nulls: bool, decode_strings: bool, strip: int,
                 pooled: Optional[bool] = None) -> tuple[list[_Out], ColumnProgram]:
    """Allocate every projected column's outputs; return them all and the program of the
    fixed-width ones, which the fused kernel decodes in one pass."""
    zero_null = arrow and apply_nulls and mapping == "native"
    program = ColumnProgram()
    outs: list[_Out] = []
    for spec in chosen:
        conv = conversion(spec, mapping)  # type: ignore[arg-type]
        if spec.is_vla:
            outs.append(_Out(spec, conv, 0))   # decoded from the heap by _decode_vla
            continue
        count, w = _fixed_layout(spec, conv, mapping)
        out = _Out(spec, conv, n_out * count, string_width=w)
        prog, scale = _binary_program(out, count, n_out * count, arrow=arrow, apply_nulls=apply_nulls,
                                      decode_strings=decode_strings, strip=strip,
                                      zero_null=zero_null, pooled=pooled)
        outs.append(out)
        if spec.width == 0 or n_out == 0:
            if out.offsets is not None:
                out.offsets[:] = 0
            continue  # nothing to read; the outputs are already final
        program.add(out, prog, scale, count)
    return outs, program


@dataclass(frozen=True)
class DecodeOptions:
    """How a table decode turns stored values into Arrow values.

    Attributes
    ----------
    mapping : {"native", "compat"}
        The type mapping (`torchfits.fits.columns.arrow_type`); ``"compat"`` is the 1.x one.
    decode_bytes : bool
        Character columns as strings (True) or fixed-width binary with their padding (False).
    strip : bool
        Remove trailing spaces and NULs (True) or trailing NULs only (False).
    encoding : str
        Text encoding of character columns; undecodable bytes become U+FFFD, never an error.
    apply_nulls : bool
        TNULL sentinels (and, natively, zero logical bytes) become nulls.
    binary_strings : bool
        With ``decode_bytes``, return stripped bytes (``binary``) instead of text.
    threads : int, optional
        Row chunks decoded in parallel for big tables (default: ``$TORCHFITS_THREADS`` or the
        CPU count, see `torchfits.fits.threads`).
    metadata : bool
        Attach ``fits_*`` field metadata (`torchfits.fits.columns.field_metadata`).
    """

    mapping: Literal["native", "compat"] = "native"
    decode_bytes: bool = True
    strip: bool = True
    encoding: str = "ascii"
    apply_nulls: bool = True
    binary_strings: bool = False
    threads: Optional[int] = None
    metadata: bool = True

    def __post_init__(self) -> None:
        if self.mapping not in ("native", "compat"):
            raise ValueError(f"mapping must be 'native' or 'compat', not {self.mapping!r}")
        _check_encoding(self.encoding)


DEFAULT_OPTIONS = DecodeOptions()


def decode_table(data: Buffer, heap: Buffer, specs: Sequence[ColumnSpec], row_bytes: int,
                 nrows: int, *, columns: Any = None, rows: Any = None,
                 row_range: Optional[tuple[int, int]] = None,
                 options: DecodeOptions = DEFAULT_OPTIONS) -> "pa.RecordBatch":
    """Decode rows of a FITS binary table into one Arrow record batch.

    Parameters
    ----------
    data : buffer
        The table's row bytes (``nrows * row_bytes``, e.g. a read-only memoryview of an mmap).
        Only the rows read need be present: a shorter buffer raises for rows past its end.
    heap : buffer
        The heap, starting at byte ``THEAP`` of the data unit (may be empty).
    specs : sequence of ColumnSpec
        Every column of the table, from `parse_columns` (ASCII specs are passed on to
        `decode_ascii_table`).
    row_bytes, nrows : int
        ``NAXIS1`` and ``NAXIS2``.
    columns : str, int, sequence of them, or None
        Projection (see `select_columns`); None reads every column.
    rows : array-like of int, optional
        0-based row indices, any order, duplicates kept.
    row_range : (start, stop), optional
        A 0-based half-open row range; ``stop`` past the end is clamped.
    options : DecodeOptions
        How values are decoded (type mapping, strings, nulls, threads, metadata).

    Returns
    -------
    pyarrow.RecordBatch

    Raises
    ------
    ColumnNotFoundError, IndexError, ValueError
        Bad projection or row selection.
    TruncatedFileError
        ``data`` ends before a selected row.
    CorruptHeaderError
        A heap descriptor that points outside the heap (message names column and row).
    UnsupportedColumnError
        Complex columns projected under ``mapping="compat"``.
    """
    if specs and specs[0].is_ascii:
        return decode_ascii_table(data, specs, row_bytes, nrows, columns=columns, rows=rows,
                                  row_range=row_range, options=options)
    mapping, decode_bytes, strip, encoding, apply_nulls, binary_strings, threads, metadata = (
        options.mapping, options.decode_bytes, options.strip, options.encoding, options.apply_nulls,
        options.binary_strings, options.threads, options.metadata)
    pa = _pa()
    chosen = select_columns(specs, columns)
    _refuse_complex(chosen, mapping)
    buf = _bytes_view(data, "data")
    heap_buf = _bytes_view(heap, "heap")
    sel = _plan_rows(nrows, rows, row_range)
    _check_extent(buf, row_bytes, nrows, sel, chosen)
    nthreads = _default_threads(threads)
    smode = _strip_mode(strip)
    outs, program = _plan_binary(
        chosen, sel.count, mapping, arrow=True, apply_nulls=apply_nulls,
        decode_strings=decode_bytes, strip=smode)
    _decode_fixed(program, buf, row_bytes, sel, nthreads)
    for out in outs:
        if out.spec.is_vla:
            _decode_vla(out, buf, heap_buf, row_bytes, sel, arrow=True, apply_nulls=apply_nulls,
                        decode_strings=decode_bytes, strip=smode,
                        large=out.spec.descriptor == "Q" and mapping == "native",
                        zero_null=apply_nulls and mapping == "native", nrows=nrows)
    if not outs:
        return _empty_batch(sel.count)
    arrays = [_column_array(o, sel.count, mapping, decode_bytes, binary_strings, encoding) for o in outs]
    fields = [pa.field(o.spec.name, a.type, metadata=_field_metadata(o.spec) if metadata else None)
              for o, a in zip(outs, arrays)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _out_row_bytes(spec: ColumnSpec) -> int:
    """About the bytes one row of ``spec`` takes in the outputs (for sizing planned outputs;
    text split by TDIM into many short strings takes up to 4 more bytes a string)."""
    if spec.code == "A":
        return spec.width + 4
    if spec.code in "LX":
        return 2 * spec.repeat  # values and validity, a byte each at most
    return 16 * spec.repeat if spec.code in "CM" else 8 * spec.repeat + 1


def _shrink(out: _Out, items: int, copy: bool) -> None:
    """Cut outputs planned for more values down to their first ``items`` (copied to buffers of
    their own with ``copy``, so that a sparse selection does not hold the planned size)."""
    def cut(a: Optional[np.ndarray], n: int) -> Optional[np.ndarray]:
        if a is None:
            return None
        return a[:n].copy() if copy else a[:n]

    kind = out.conv.kind
    if kind in ("logical", "bits"):
        out.values = cut(out.values, (items + 7) // 8)
    elif kind == "string" and out.offsets is not None:
        out.offsets = cut(out.offsets, items + 1)
        assert out.offsets is not None
        out.values = cut(out.values, int(out.offsets[items]))
    elif kind == "string":
        out.values = cut(out.values, items * out.string_width)
    else:
        out.values = cut(out.values, items * (2 if kind == "complex" else 1))
    out.valid = cut(out.valid, (items + 7) // 8)
    out.items = items


def decode_table_where(data: Buffer, specs: Sequence[ColumnSpec], row_bytes: int, nrows: int,
                       tests: tuple[np.ndarray, np.ndarray], *, columns: Any = None,
                       row_range: Optional[tuple[int, int]] = None,
                       options: DecodeOptions = DEFAULT_OPTIONS) -> "pa.RecordBatch":
    """Select rows with a conjunction of kernel tests and decode the projected columns of the
    rows that pass, in one pass over the row bytes (each block of rows is tested and its
    survivors decoded while it is in cache).

    ``tests`` is a planned conjunction (`torchfits.query.pushdown.FusedPredicate.conjunction`);
    the other arguments are as in `decode_table`, for binary tables without variable-length
    columns in the projection. Big ranges run in pieces on the thread pool.
    """
    pa = _pa()
    chosen = select_columns(specs, columns)
    if (specs and specs[0].is_ascii) or any(s.is_vla for s in chosen):
        raise ValueError("decode_table_where decodes fixed-width binary-table columns only")
    _refuse_complex(chosen, options.mapping)
    buf = _bytes_view(data, "data")
    sel = _plan_rows(nrows, None, row_range)
    _check_extent(buf, row_bytes, nrows, sel, chosen)
    # One piece on a pool worker: its pieces would run serially anyway. A piece plans outputs
    # for all its rows, so pieces are also cut to at most _WHERE_PIECE_BYTES of planned output.
    nthreads = 1 if _threads.in_worker() else _default_threads(options.threads)
    bounds = _chunk_bounds(sel.count, row_bytes, nthreads)
    most = max(_CHUNK_ALIGN, _WHERE_PIECE_BYTES // max(1, sum(_out_row_bytes(s) for s in chosen)))
    bounds = [r for a, b in zip(bounds, bounds[1:]) for r in range(a, b, most)] + [bounds[-1]]
    smode = _strip_mode(options.strip)
    schema = arrow_schema(specs, columns=columns, mapping=options.mapping,
                          decode_bytes=options.decode_bytes, binary_strings=options.binary_strings,
                          metadata=options.metadata)

    def piece(i: int) -> Any:  # a pyarrow.RecordBatch
        first, n = sel.first + bounds[i], bounds[i + 1] - bounds[i]
        # Outputs for every row of the piece: NumPy's lazily mapped memory, of which only the
        # pages the survivors fill are ever touched (the pool would hand over touched pages).
        outs, program = _plan_binary(chosen, n, options.mapping, arrow=True,
                                     apply_nulls=options.apply_nulls,
                                     decode_strings=options.decode_bytes, strip=smode, pooled=False)
        prog, scale = program.tables()
        stats = np.zeros((len(prog), _bintable.S_NFIELDS), np.int64)
        found = _bintable.select_decode_rows(buf, row_bytes, first, n, tests[0], tests[1], prog,
                                             scale, stats)
        for j, out in enumerate(program.outs):
            out.nulls = int(stats[j, _bintable.S_NULLS])
            out.high = bool(stats[j, _bintable.S_HIGH])
        # A sparse result gets buffers of its own size, so that a piece waiting to be joined
        # holds what it found, not what it planned.
        copy = 2 * found < n
        for out in outs:
            _shrink(out, found * (out.items // n if n else 0), copy)
        if not outs:
            return _empty_batch(found)
        arrays = [_column_array(o, found, options.mapping, options.decode_bytes,
                                options.binary_strings, options.encoding) for o in outs]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    batches = _threads.run_shared(piece, range(len(bounds) - 1), nthreads)
    if len(batches) == 1:
        return batches[0]
    if not chosen:
        return _empty_batch(sum(b.num_rows for b in batches))
    joined = pa.Table.from_batches(batches, schema=schema).combine_chunks()
    if any(c.num_chunks > 1 for c in joined.columns):
        # Over 2 GiB of text in one column: Arrow cannot hold it in one string array.
        raise ValueError("the selected rows do not fit one record batch (a string column over "
                         "2 GiB); scan with a smaller batch_size")
    return pa.RecordBatch.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                       for c in joined.columns], schema=schema)


def decode_table_numpy(data: Buffer, heap: Buffer, specs: Sequence[ColumnSpec], row_bytes: int,
                       nrows: int, *, columns: Any = None, rows: Any = None,
                       row_range: Optional[tuple[int, int]] = None,
                       threads: Optional[int] = None) -> dict[str, Union[np.ndarray, list[np.ndarray]]]:
    """Decode table rows into NumPy arrays with the tensor mapping of the 1.x API (docs/compatibility.md)

    Repeat-1 columns are ``(N,)``, vectors ``(N, r)`` (TDIM not applied), character columns
    ``uint8 (N, w)`` byte matrices with their padding, complex columns complex64/complex128,
    variable-length columns a list of 1-D arrays; TNULL is not applied. Arguments as in
    `decode_table`; ASCII-table specs are accepted too (numbers as int32 or float64, an
    undefined field as 0 or NaN).

    Returns
    -------
    dict
        Column name → array (or list of arrays), in projection order.
    """
    chosen = select_columns(specs, columns)
    buf = _bytes_view(data, "data")
    sel = _plan_rows(nrows, rows, row_range)
    _check_extent(buf, row_bytes, nrows, sel, chosen)
    nthreads = _default_threads(threads)
    n = sel.count
    result: dict[str, Union[np.ndarray, list[np.ndarray]]] = {}
    if chosen and chosen[0].is_ascii:
        outs = _decode_ascii(chosen, buf, row_bytes, sel, nthreads, mapping="torch", arrow=False,
                             apply_nulls=False, decode_strings=False, strip=_STRIP_NONE)
        for out in outs:
            if out.conv.kind == "string":
                assert out.values is not None
                result[out.spec.name] = out.values.reshape(n, out.spec.width)
            else:
                result[out.spec.name] = out.values  # type: ignore[assignment]
        return result
    heap_buf = _bytes_view(heap, "heap")
    outs, program = _plan_binary(
        chosen, n, "torch", arrow=False, apply_nulls=False, decode_strings=False, strip=_STRIP_NONE)
    _decode_fixed(program, buf, row_bytes, sel, nthreads)
    for out in outs:
        spec = out.spec
        if spec.is_vla:
            _decode_vla(out, buf, heap_buf, row_bytes, sel, arrow=False, apply_nulls=False, nrows=nrows,
                        decode_strings=False, strip=_STRIP_NONE, large=True)
            values = _numpy_values(out)
            assert out.list_offsets is not None
            result[spec.name] = [values[a:b] for a, b in zip(out.list_offsets[:-1].tolist(),
                                                             out.list_offsets[1:].tolist())]
            continue
        values = _numpy_values(out)
        if out.conv.kind == "string":
            result[spec.name] = values.reshape(n, spec.repeat)
        elif spec.repeat == 1:
            result[spec.name] = values
        else:
            result[spec.name] = values.reshape(n, spec.repeat)
    return result


def _numpy_values(out: _Out) -> np.ndarray:
    assert out.values is not None
    kind = out.conv.kind
    if kind in ("logical", "bits"):
        return out.values.view(np.bool_)
    if kind == "complex":
        return out.values.view(np.complex64 if out.conv.dtype == np.float32 else np.complex128)
    return out.values


# ----------------------------------------------------------------------------- ASCII tables


def _decode_ascii(chosen: Sequence[ColumnSpec], buf: np.ndarray, row_bytes: int, sel: _Rows,
                  threads: int, *, mapping: str, arrow: bool, apply_nulls: bool,
                  decode_strings: bool, strip: int) -> list[_Out]:
    n = sel.count
    outs: list[_Out] = []
    progs: list[list[int]] = []
    scales: list[tuple[float, float]] = []
    live: list[_Out] = []
    blob = bytearray()
    for spec in chosen:
        conv = conversion(spec, mapping)  # type: ignore[arg-type]
        out = _Out(spec, conv, n, string_width=spec.width)
        prog = [0] * _asciitable.P_NFIELDS
        prog[_asciitable.P_SRC_OFF] = spec.offset
        prog[_asciitable.P_WIDTH] = spec.width
        prog[_asciitable.P_TNULL_OFF] = -1
        scale = (1.0, 0.0)
        if conv.kind == "string":
            out.values = _empty(n * spec.width, np.uint8, arrow)
            if decode_strings:
                _check_string_bytes(spec, n * spec.width)
                out.offsets = _empty(n + 1, np.int32, arrow)
                out.offsets[0] = 0
                prog[_asciitable.P_OP] = _asciitable.OP_STRING
                prog[_asciitable.P_STRIP] = strip
            else:
                prog[_asciitable.P_OP] = _asciitable.OP_COPY
        else:
            assert conv.dtype is not None
            out.values = _empty(n, conv.dtype, arrow)
            prog[_asciitable.P_OP] = _asciitable.OP_INT if conv.kind == "ascii_int" else _asciitable.OP_FLOAT
            prog[_asciitable.P_DECIMALS] = spec.decimals or 0
            prog[_asciitable.P_DST_SIZE] = conv.dtype.itemsize
            if spec.tscal != 1.0 or spec.tzero != 0.0:
                prog[_asciitable.P_SCALED] = 1
                scale = (spec.tscal, spec.tzero)
            if isinstance(spec.tnull, str) and spec.tnull.strip():
                sentinel = spec.tnull.strip().encode("ascii", "replace")
                prog[_asciitable.P_TNULL_OFF] = len(blob)
                prog[_asciitable.P_TNULL_LEN] = len(sentinel)
                blob += sentinel
            if apply_nulls:
                out.valid = _bitmap(n, arrow)
        prog[_asciitable.P_OUT] = _address(out.values)
        prog[_asciitable.P_VALID] = _address(out.valid)
        prog[_asciitable.P_OFFSETS] = _address(out.offsets)
        outs.append(out)
        if n:
            live.append(out)
            progs.append(prog)
            scales.append(scale)
    if not live:
        return outs
    prog_arr = np.array(progs, dtype=np.int64).reshape(len(progs), _asciitable.P_NFIELDS)
    scale_arr = np.array(scales, dtype=np.float64).reshape(len(scales), 2)
    tnulls = np.frombuffer(bytes(blob) + b"\0", dtype=np.uint8)
    bounds = _chunk_bounds(n, row_bytes, threads)

    def kernel(start: int, count: int, stats: np.ndarray) -> None:
        _asciitable.decode_rows(buf, row_bytes, sel.first, sel.index, start, count, prog_arr,
                                scale_arr, tnulls, stats)

    stats = _run_chunked(kernel, bounds, len(live), _asciitable.S_NFIELDS, threads, init_stats=-1)
    for i, out in enumerate(live):
        bad = int(stats[i, _asciitable.S_BAD])
        if bad >= 0:
            row = sel.source(bad)
            p = row * row_bytes + out.spec.offset
            text = bytes(buf[p:p + out.spec.width]).decode("ascii", "replace")
            if out.conv.kind == "ascii_int" and text.strip().lstrip("+-").isdigit():
                raise UnsupportedColumnError(
                    f"{out.spec.describe()}, row {row}: {text.strip()} does not fit the "
                    f"{out.conv.dtype} this mapping reads Iw fields as"
                )
            raise CorruptHeaderError(
                f"{out.spec.describe()}, row {row}: field {text!r} is not a valid "
                f"{'integer' if out.conv.kind == 'ascii_int' else 'real number'}"
            )
        out.nulls = int(stats[i, _asciitable.S_NULLS])
        out.high = bool(stats[i, _asciitable.S_HIGH])
        if out.offsets is not None and len(bounds) > 2:
            _bintable.compact_strings(out.values, out.offsets,  # type: ignore[arg-type]
                                      np.asarray(bounds, dtype=np.int64), out.spec.width)
    return outs


def decode_ascii_table(data: Buffer, specs: Sequence[ColumnSpec], row_bytes: int, nrows: int, *,
                       columns: Any = None, rows: Any = None,
                       row_range: Optional[tuple[int, int]] = None,
                       options: DecodeOptions = DEFAULT_OPTIONS) -> "pa.RecordBatch":
    """Decode rows of a FITS ASCII table (``XTENSION='TABLE'``) into one Arrow record batch.

    Arguments as in `decode_table` (there is no heap). ``Iw`` fields become int32 (int64 for
    ``w > 9`` under the native mapping), ``Fw.d``/``Dw.d`` float64, ``Ew.d`` float64 (float32
    under ``mapping="compat"``), TSCAL/TZERO-scaled fields float64. A blank numeric field or
    one equal to TNULL is null (0 / NaN with ``apply_nulls=False``). A real without a decimal
    point takes ``d`` implied decimals (the Fortran rule).

    Raises
    ------
    CorruptHeaderError
        A numeric field that does not parse (the message names column, row and text).
    """
    mapping, decode_bytes, strip, encoding, apply_nulls, binary_strings, threads, metadata = (
        options.mapping, options.decode_bytes, options.strip, options.encoding, options.apply_nulls,
        options.binary_strings, options.threads, options.metadata)
    pa = _pa()
    chosen = select_columns(specs, columns)
    if any(not s.is_ascii for s in chosen):
        raise ValueError("decode_ascii_table needs the specs of an ASCII table (kind='table')")
    buf = _bytes_view(data, "data")
    sel = _plan_rows(nrows, rows, row_range)
    _check_extent(buf, row_bytes, nrows, sel, chosen)
    outs = _decode_ascii(chosen, buf, row_bytes, sel, _default_threads(threads), mapping=mapping,
                         arrow=True, apply_nulls=apply_nulls, decode_strings=decode_bytes,
                         strip=_strip_mode(strip))
    if not outs:
        return _empty_batch(sel.count)
    arrays = []
    for out in outs:
        target = arrow_type(out.spec, mapping, decode_bytes, binary_strings=binary_strings)
        if out.conv.kind == "string":
            arrays.append(_leaf_array(out, target, encoding, decode_bytes and not binary_strings))
        else:
            arrays.append(_leaf_array(out, target, encoding, False))
    fields = [pa.field(o.spec.name, a.type, metadata=_field_metadata(o.spec) if metadata else None)
              for o, a in zip(outs, arrays)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


# ----------------------------------------------------------------------------- data unit layout


def _size_keyword(header: Mapping[str, Any], key: str) -> int:
    value = header.get(key) or 0
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise CorruptHeaderError(f"{key} = {value!r} is not an integer")
    return int(value)


def split_data_unit(data_unit: Buffer, header: Mapping[str, Any]) -> tuple[memoryview, memoryview]:
    """Split a table's data unit into its row bytes and its heap, honouring THEAP and PCOUNT.

    Parameters
    ----------
    data_unit : buffer
        The bytes from the start of the table's data (padding after it may be included).
    header : Mapping[str, Any]
        The table header (NAXIS1, NAXIS2, PCOUNT, THEAP).

    Returns
    -------
    (rows, heap) : tuple of memoryview
        ``NAXIS1 * NAXIS2`` row bytes, and the heap from byte THEAP to the end of PCOUNT.

    Raises
    ------
    CorruptHeaderError
        Negative sizes, or THEAP outside the data area.
    TruncatedFileError
        ``data_unit`` is shorter than ``NAXIS1 * NAXIS2 + PCOUNT`` bytes.
    """
    view = memoryview(data_unit).cast("B") if not isinstance(data_unit, memoryview) else data_unit.cast("B")
    naxis1 = _size_keyword(header, "NAXIS1")
    naxis2 = _size_keyword(header, "NAXIS2")
    pcount = _size_keyword(header, "PCOUNT")
    if naxis1 < 0 or naxis2 < 0 or pcount < 0:
        raise CorruptHeaderError(f"negative table size (NAXIS1={naxis1}, NAXIS2={naxis2}, PCOUNT={pcount})")
    table = naxis1 * naxis2
    theap = table if header.get("THEAP") is None else _size_keyword(header, "THEAP")
    if theap < table or theap > table + pcount:
        raise CorruptHeaderError(
            f"THEAP = {theap} lies outside the data area ({table} table bytes + PCOUNT = {pcount})"
        )
    if len(view) < table + pcount:
        raise TruncatedFileError(
            f"table data truncated: {len(view)} bytes present, NAXIS1*NAXIS2 + PCOUNT = {table + pcount}"
        )
    return view[:table], view[theap:table + pcount]
