"""ASCII tables (``XTENSION='TABLE'``): the `_asciitable` kernel's column programs and
`decode_ascii_table`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._kernels import _asciitable, _bintable
from ..errors import CorruptHeaderError, UnsupportedColumnError
from ..fits.columns import ColumnSpec, arrow_type, conversion
from ..fits.columns import field_metadata as _field_metadata
from .arrow_assembly import empty_batch, leaf_array
from .column_plan import (
    ColumnOutput,
    address,
    allocate,
    allocate_bitmap,
    check_string_bytes,
    chunk_bounds,
    default_threads,
    run_chunked,
)
from .decode_options import DEFAULT_OPTIONS, DecodeOptions, strip_mode
from .selection import Buffer, RowSelection, bytes_view, check_extent, plan_rows, select_columns

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyarrow as pa

__all__ = [
    "decode_ascii_columns",
    "decode_ascii_table",
]


def decode_ascii_columns(chosen: Sequence[ColumnSpec], buf: np.ndarray, row_bytes: int, sel: RowSelection,
                         threads: int, *, mapping: str, arrow: bool, apply_nulls: bool,
                         decode_strings: bool, strip: int) -> list[ColumnOutput]:
    n = sel.count
    outs: list[ColumnOutput] = []
    progs: list[list[int]] = []
    scales: list[tuple[float, float]] = []
    live: list[ColumnOutput] = []
    blob = bytearray()
    for spec in chosen:
        conv = conversion(spec, mapping)  # type: ignore[arg-type]
        out = ColumnOutput(spec, conv, n, string_width=spec.width)
        prog = [0] * _asciitable.P_NFIELDS
        prog[_asciitable.P_SRC_OFF] = spec.offset
        prog[_asciitable.P_WIDTH] = spec.width
        prog[_asciitable.P_TNULL_OFF] = -1
        scale = (1.0, 0.0)
        if conv.kind == "string":
            out.values = allocate(n * spec.width, np.uint8, arrow)
            if decode_strings:
                check_string_bytes(spec, n * spec.width)
                out.offsets = allocate(n + 1, np.int32, arrow)
                out.offsets[0] = 0
                prog[_asciitable.P_OP] = _asciitable.OP_STRING
                prog[_asciitable.P_STRIP] = strip
            else:
                prog[_asciitable.P_OP] = _asciitable.OP_COPY
        else:
            assert conv.dtype is not None
            out.values = allocate(n, conv.dtype, arrow)
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
                out.valid = allocate_bitmap(n, arrow)
        prog[_asciitable.P_OUT] = address(out.values)
        prog[_asciitable.P_VALID] = address(out.valid)
        prog[_asciitable.P_OFFSETS] = address(out.offsets)
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
    bounds = chunk_bounds(n, row_bytes, threads)

    def kernel(start: int, count: int, stats: np.ndarray) -> None:
        _asciitable.decode_rows(buf, row_bytes, sel.first, sel.index, start, count, prog_arr,
                                scale_arr, tnulls, stats)

    stats = run_chunked(kernel, bounds, len(live), _asciitable.S_NFIELDS, threads, init_stats=-1)
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
                       row_range: tuple[int, int] | None = None,
                       options: DecodeOptions = DEFAULT_OPTIONS) -> pa.RecordBatch:
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
    import pyarrow as pa
    chosen = select_columns(specs, columns)
    if any(not s.is_ascii for s in chosen):
        raise ValueError("decode_ascii_table needs the specs of an ASCII table (kind='table')")
    buf = bytes_view(data, "data")
    sel = plan_rows(nrows, rows, row_range)
    check_extent(buf, row_bytes, nrows, sel, chosen)
    outs = decode_ascii_columns(chosen, buf, row_bytes, sel, default_threads(threads), mapping=mapping,
                                arrow=True, apply_nulls=apply_nulls, decode_strings=decode_bytes,
                                strip=strip_mode(strip))
    if not outs:
        return empty_batch(sel.count)
    arrays = []
    for out in outs:
        target = arrow_type(out.spec, mapping, decode_bytes, binary_strings=binary_strings)
        if out.conv.kind == "string":
            arrays.append(leaf_array(out, target, encoding, decode_bytes and not binary_strings))
        else:
            arrays.append(leaf_array(out, target, encoding, False))
    fields = [pa.field(o.spec.name, a.type, metadata=_field_metadata(o.spec) if metadata else None)
              for o, a in zip(outs, arrays)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
