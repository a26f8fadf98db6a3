"""Binary-table column plans: each projected column's outputs allocated at final size, the
program rows of the fused kernel, and the fixed-width pass over row chunks on the thread pool.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._kernels import _bintable
from ..errors import UnsupportedColumnError
from ..fits import threads as _threads
from ..fits.columns import ColumnSpec, Conversion, MappingName, conversion
from ..fits.record import Record
from .selection import RowSelection

__all__ = [
    "ColumnOutput",
    "ColumnProgram",
    "address",
    "allocate",
    "allocate_bitmap",
    "allocate_zeros",
    "binary_program",
    "check_string_bytes",
    "chunk_bounds",
    "decode_fixed",
    "default_threads",
    "element_size",
    "plan_binary",
    "run_chunked",
    "string_batch_rows",
]


# Tables smaller than this decode on the calling thread: a pool costs more than it saves.
_PARALLEL_MIN_BYTES = 4 << 20


# Chunk starts are multiples of this many rows so that chunks never share a byte of any
# bit-packed output (bool values, validity, X bits) whatever the repeat count.
_CHUNK_ALIGN = 1024


_PIECES_PER_THREAD = 4


_INT32_MAX = 2**31 - 1


_SCALE_SOURCE = {"B": _bintable.SRC_U8, "I": _bintable.SRC_I16, "J": _bintable.SRC_I32,
                 "K": _bintable.SRC_I64, "E": _bintable.SRC_F32, "D": _bintable.SRC_F64}


def _to_int64(x: int) -> int:
    """Two's-complement view of an unsigned 64-bit pattern, as the int64 program stores it."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def address(arr: np.ndarray | None) -> int:
    return 0 if arr is None else int(arr.__array_interface__["data"][0])


def default_threads(threads: int | None) -> int:
    if threads is None:
        return _threads.default_threads()
    if int(threads) < 1:
        raise ValueError(f"threads must be >= 1, not {threads}")
    return int(threads)


def chunk_bounds(n_out: int, row_bytes: int, threads: int, most: int | None = None) -> list[int]:
    """Row chunk starts (and the end) for ``n_out`` output rows on ``threads`` threads; with
    ``most``, no chunk longer than ``max(most, 1024)`` rows."""
    if threads <= 1 or n_out * max(row_bytes, 1) < _PARALLEL_MIN_BYTES or n_out < 2 * _CHUNK_ALIGN:
        bounds = [0, n_out]
    else:
        # A few pieces per thread, taken by whichever thread is free (`run_shared`): a thread
        # that starts late on a busy machine leaves its share to the others.
        step = -(-n_out // (threads * _PIECES_PER_THREAD))
        step = -(-step // _CHUNK_ALIGN) * _CHUNK_ALIGN
        bounds = list(range(0, n_out, step)) + [n_out]
    if most is None:
        return bounds
    most = max(_CHUNK_ALIGN, most)
    return [r for a, b in zip(bounds, bounds[1:]) for r in range(a, b, most)] + [bounds[-1]]


class ColumnOutput(Record):
    """Outputs of one projected column, allocated at final size."""

    __slots__ = ("spec", "conv", "items", "values", "valid", "offsets", "list_offsets", "string_width",
                 "nulls", "high")
    spec: ColumnSpec
    conv: Conversion
    items: int                       # leaf values (strings count as one item)
    values: np.ndarray | None
    valid: np.ndarray | None
    offsets: np.ndarray | None       # int32 string offsets
    list_offsets: np.ndarray | None  # int64 VLA element offsets
    string_width: int
    nulls: int
    high: bool

    def __init__(self, spec: ColumnSpec, conv: Conversion, items: int, values: np.ndarray | None = None,
                 valid: np.ndarray | None = None, offsets: np.ndarray | None = None,
                 list_offsets: np.ndarray | None = None, string_width: int = 0, nulls: int = 0,
                 high: bool = False) -> None:
        self.spec, self.conv, self.items = spec, conv, items
        self.values, self.valid, self.offsets, self.list_offsets = values, valid, offsets, list_offsets
        self.string_width, self.nulls, self.high = string_width, nulls, high


def allocate(n: int, dtype: Any, arrow: bool) -> np.ndarray:
    """An uninitialised output of ``n`` values.

    Arrow outputs come from Arrow's memory pool: it recycles freed pages, so a stream of
    batches does not pay the kernel's page zeroing for every new output.
    """
    dtype = np.dtype(dtype)
    if not arrow:
        return np.empty(n, dtype=dtype)
    import pyarrow

    return np.frombuffer(pyarrow.allocate_buffer(n * dtype.itemsize), dtype=dtype)


def allocate_zeros(n: int, dtype: Any, arrow: bool) -> np.ndarray:
    if not arrow:
        return np.zeros(n, dtype=dtype)
    out = allocate(n, dtype, arrow)
    out.fill(0)
    return out


def allocate_bitmap(nbits: int, arrow: bool = True) -> np.ndarray:
    return allocate_zeros((nbits + 7) // 8, np.uint8, arrow)


def _tnull_pattern(spec: ColumnSpec, conv: Conversion) -> int | None:
    """The stored bit pattern of TNULL, or None when it cannot occur in this column."""
    if (spec.code not in "BIJK" or not isinstance(spec.tnull, int)
            or conv.kind not in ("raw", "flip", "scale")):
        return None
    bits = 8 * element_size(spec.code)
    lo, hi = (0, 255) if spec.code == "B" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not lo <= spec.tnull <= hi:
        return None
    return spec.tnull & ((1 << bits) - 1)


def element_size(code: str) -> int:
    return {"L": 1, "X": 1, "B": 1, "I": 2, "J": 4, "K": 8, "A": 1, "E": 4, "D": 8, "C": 4, "M": 8}[code]


def binary_program(out: ColumnOutput, count: int, items: int, *, arrow: bool, apply_nulls: bool,
                   decode_strings: bool, strip: int, zero_null: bool = False,
                   pooled: bool | None = None) -> tuple[list[int], tuple[float, float]]:
    """Allocate the outputs of one binary-table column for ``items`` leaf values and return its
    program row. ``count`` is the per-row element count the kernel loops over; ``zero_null``
    makes an undefined (zero) logical byte null (the native mapping); ``pooled`` (default: as
    ``arrow``) allocates from Arrow's memory pool rather than NumPy's (see `allocate`)."""
    pool = arrow if pooled is None else pooled
    spec, conv = out.spec, out.conv
    prog = [0] * _bintable.P_NFIELDS
    prog[_bintable.P_SRC_OFF] = spec.offset
    prog[_bintable.P_COUNT] = count
    scale = (1.0, 0.0)
    kind = conv.kind
    if kind in ("raw", "flip", "complex"):
        esize = element_size(spec.code)
        n = items * (2 if kind == "complex" else 1)
        out.values = allocate(n, conv.dtype, pool)
        prog[_bintable.P_OP] = _bintable.OP_SWAP
        prog[_bintable.P_ESIZE] = esize
        if kind == "complex":
            prog[_bintable.P_COUNT] = 2 * count
        if kind == "flip":
            prog[_bintable.P_FLIP] = _to_int64(1 << (8 * esize - 1))
    elif kind == "scale":
        out.values = allocate(items, conv.dtype, pool)
        prog[_bintable.P_OP] = _bintable.OP_SCALE
        prog[_bintable.P_ESIZE] = element_size(spec.code)
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
            out.values = allocate_bitmap(items, pool)
            prog[_bintable.P_OP] = _bintable.OP_LOGICAL
            if zero_null:
                out.valid = allocate_bitmap(items, pool)
                prog[_bintable.P_ZERO_NULL] = 1
        else:
            out.values = allocate(items, np.uint8, pool)
            prog[_bintable.P_OP] = _bintable.OP_LOGICAL_BYTES
    elif kind == "bits":
        if arrow:
            out.values = allocate_bitmap(items, pool)
            prog[_bintable.P_OP] = _bintable.OP_BITS
        else:
            out.values = allocate(items, np.uint8, pool)
            prog[_bintable.P_OP] = _bintable.OP_BITS_BYTES
    elif kind == "string":
        w = out.string_width
        if decode_strings:
            check_string_bytes(out.spec, items * w)
            out.values = allocate(items * w, np.uint8, pool)
            out.offsets = allocate(items + 1, np.int32, pool)
            out.offsets[0] = 0
            prog[_bintable.P_OP] = _bintable.OP_STRING
            prog[_bintable.P_ESIZE] = w
            prog[_bintable.P_STRIP] = strip
        else:
            out.values = allocate(items * w, np.uint8, pool)
            prog[_bintable.P_OP] = _bintable.OP_COPY
            prog[_bintable.P_ESIZE] = count * w
    else:  # pragma: no cover - conversion() returns only the kinds above for binary tables
        raise AssertionError(kind)
    if kind in ("raw", "flip", "scale") and apply_nulls:
        pattern = _tnull_pattern(spec, conv)
        if pattern is not None:
            out.valid = allocate_bitmap(items, pool)
            prog[_bintable.P_HAS_TNULL] = 1
            prog[_bintable.P_TNULL] = _to_int64(pattern)
    prog[_bintable.P_OUT] = address(out.values)
    prog[_bintable.P_VALID] = address(out.valid)
    prog[_bintable.P_OFFSETS] = address(out.offsets)
    return prog, scale


def string_batch_rows(specs: Sequence[ColumnSpec], names: Any) -> int | None:
    """The most rows one batch of the columns ``names`` may hold: each fixed-width string
    column decodes into one Arrow string array, whose 32-bit offsets address at most 2 GiB.
    None when no such column limits the batch."""
    wanted = set(names)
    widest = max((s.width for s in specs if s.name in wanted and s.code == "A" and not s.is_vla),
                 default=0)
    return max(1, _INT32_MAX // widest) if widest else None


def check_string_bytes(spec: ColumnSpec, nbytes: int) -> None:
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


def run_chunked(kernel: Any, bounds: list[int], ncols: int, nstats: int, threads: int,
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


class ColumnProgram(Record):
    """The fixed-width columns that one fused kernel pass decodes.

    Each column contributes its output buffers (an `ColumnOutput`), one program row for the kernel (the
    operation, element size and source offset, and the addresses of its output buffers, which
    the `ColumnOutput` keeps alive), its ``(TSCAL, TZERO)`` and its per-row element count.
    """

    __slots__ = ("outs", "rows", "scales", "counts")
    outs: list[ColumnOutput]
    rows: list[list[int]]
    scales: list[tuple[float, float]]
    counts: list[int]

    def __init__(self, outs: list[ColumnOutput] | None = None, rows: list[list[int]] | None = None,
                 scales: list[tuple[float, float]] | None = None, counts: list[int] | None = None) -> None:
        self.outs = [] if outs is None else outs
        self.rows = [] if rows is None else rows
        self.scales = [] if scales is None else scales
        self.counts = [] if counts is None else counts

    def add(self, out: ColumnOutput, row: list[int], scale: tuple[float, float], count: int) -> None:
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


def decode_fixed(program: ColumnProgram, data: np.ndarray, row_bytes: int, sel: RowSelection,
                 threads: int) -> None:
    outs, counts = program.outs, program.counts
    if not outs:
        return
    assert all(o.values is not None for o in outs)
    prog, scale = program.tables()
    bounds = chunk_bounds(sel.count, row_bytes, threads)

    def kernel(start: int, n: int, stats: np.ndarray) -> None:
        _bintable.decode_rows(data, row_bytes, sel.first, sel.index, start, n, prog, scale, stats)

    stats = run_chunked(kernel, bounds, len(outs), _bintable.S_NFIELDS, threads)
    for i, out in enumerate(outs):
        out.nulls = int(stats[i, _bintable.S_NULLS])
        out.high = bool(stats[i, _bintable.S_HIGH])
        if out.offsets is not None and len(bounds) > 2 and prog[i, _bintable.P_OP] == _bintable.OP_STRING:
            item_bounds = np.asarray(bounds, dtype=np.int64) * counts[i]
            _bintable.compact_strings(out.values, out.offsets, item_bounds,  # type: ignore[arg-type]
                                      out.string_width)


def plan_binary(chosen: Sequence[ColumnSpec], n_out: int, mapping: MappingName, *, arrow: bool,
                apply_nulls: bool, decode_strings: bool, strip: int,
                pooled: bool | None = None) -> tuple[list[ColumnOutput], ColumnProgram]:
    """Allocate every projected column's outputs; return them all and the program of the
    fixed-width ones, which the fused kernel decodes in one pass."""
    zero_null = arrow and apply_nulls and mapping == "native"
    program = ColumnProgram()
    outs: list[ColumnOutput] = []
    for spec in chosen:
        conv = conversion(spec, mapping)  # type: ignore[arg-type]
        if spec.is_vla:
            outs.append(ColumnOutput(spec, conv, 0))   # decoded from the heap by decode_vla
            continue
        count, w = _fixed_layout(spec, conv, mapping)
        out = ColumnOutput(spec, conv, n_out * count, string_width=w)
        prog, scale = binary_program(out, count, n_out * count, arrow=arrow, apply_nulls=apply_nulls,
                                     decode_strings=decode_strings, strip=strip,
                                     zero_null=zero_null, pooled=pooled)
        outs.append(out)
        if spec.width == 0 or n_out == 0:
            if out.offsets is not None:
                out.offsets[:] = 0
            continue  # nothing to read; the outputs are already final
        program.add(out, prog, scale, count)
    return outs, program
