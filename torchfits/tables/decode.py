"""The table decode entry points: rows of a FITS binary or ASCII table → a pyarrow RecordBatch
(`decode_table`, `decode_table_where`) or NumPy arrays (`decode_table_numpy`).

Each checks the projection, rows and bounds (`selection`), plans the outputs at final size
(`column_plan`, `variable_length`, `ascii_decode`), and has the compiled kernels make one
GIL-free pass over the row bytes for all projected columns, in row chunks on a thread pool for
big tables; `arrow_assembly` wraps the outputs as Arrow arrays.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .._kernels import _bintable
from ..fits import threads as _threads
from ..fits.columns import ColumnSpec
from ..fits.columns import field_metadata as _field_metadata
from .arrow_assembly import arrow_schema, column_array, empty_batch, refuse_complex
from .column_plan import ColumnOutput, chunk_bounds, decode_fixed, default_threads, plan_binary
from .decode_options import DEFAULT_OPTIONS, STRIP_NONE, DecodeOptions, strip_mode
from .selection import Buffer, bytes_view, check_extent, plan_rows, select_columns

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyarrow as pa

__all__ = [
    "decode_table",
    "decode_table_numpy",
    "decode_table_where",
]


# Largest output a piece of a one-pass where-decode plans (for every row of the piece).
_WHERE_PIECE_BYTES = 16 << 20


def decode_table(data: Buffer, heap: Buffer, specs: Sequence[ColumnSpec], row_bytes: int,
                 nrows: int, *, columns: Any = None, rows: Any = None,
                 row_range: tuple[int, int] | None = None,
                 options: DecodeOptions = DEFAULT_OPTIONS,
                 legacy_logical: Callable[[ColumnSpec], bool] | None = None) -> pa.RecordBatch:
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
    legacy_logical : callable, optional
        ``legacy_logical(spec)``: whether a logical variable-length column holds old astropy's
        0x00/0x01 bytes, decided once per column by the caller (`TableSource.legacy_logical`);
        without it every call judges the whole column from ``data`` and ``heap``.

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
        from .ascii_decode import decode_ascii_table

        return decode_ascii_table(data, specs, row_bytes, nrows, columns=columns, rows=rows,
                                  row_range=row_range, options=options)
    mapping, decode_bytes, strip, encoding, apply_nulls, binary_strings, threads, metadata = (
        options.mapping, options.decode_bytes, options.strip, options.encoding, options.apply_nulls,
        options.binary_strings, options.threads, options.metadata)
    import pyarrow as pa
    chosen = select_columns(specs, columns)
    refuse_complex(chosen, mapping)
    buf = bytes_view(data, "data")
    heap_buf = bytes_view(heap, "heap")
    sel = plan_rows(nrows, rows, row_range)
    check_extent(buf, row_bytes, nrows, sel, chosen)
    nthreads = default_threads(threads)
    smode = strip_mode(strip)
    outs, program = plan_binary(
        chosen, sel.count, mapping, arrow=True, apply_nulls=apply_nulls,
        decode_strings=decode_bytes, strip=smode)
    decode_fixed(program, buf, row_bytes, sel, nthreads)
    for out in outs:
        if out.spec.is_vla:
            from .variable_length import decode_vla

            decode_vla(out, buf, heap_buf, row_bytes, sel, arrow=True, apply_nulls=apply_nulls,
                       decode_strings=decode_bytes, strip=smode,
                       large=out.spec.descriptor == "Q" and mapping == "native",
                       zero_null=apply_nulls and mapping == "native", nrows=nrows,
                       legacy_logical=legacy_logical)
    if not outs:
        return empty_batch(sel.count)
    arrays = [column_array(o, sel.count, mapping, decode_bytes, binary_strings, encoding) for o in outs]
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


def _shrink(out: ColumnOutput, items: int, copy: bool) -> None:
    """Cut outputs planned for more values down to their first ``items`` (copied to buffers of
    their own with ``copy``, so that a sparse selection does not hold the planned size)."""
    def cut(a: np.ndarray | None, n: int) -> np.ndarray | None:
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
                       row_range: tuple[int, int] | None = None,
                       options: DecodeOptions = DEFAULT_OPTIONS) -> pa.RecordBatch:
    """Select rows with a conjunction of kernel tests and decode the projected columns of the
    rows that pass, in one pass over the row bytes (each block of rows is tested and its
    survivors decoded while it is in cache).

    ``tests`` is a planned conjunction (the ``conjunction`` of a `torchfits.query.pushdown.FusedPredicate`);
    the other arguments are as in `decode_table`, for binary tables without variable-length
    columns in the projection. Big ranges run in pieces on the thread pool.
    """
    import pyarrow as pa
    chosen = select_columns(specs, columns)
    if (specs and specs[0].is_ascii) or any(s.is_vla for s in chosen):
        raise ValueError("decode_table_where decodes fixed-width binary-table columns only")
    refuse_complex(chosen, options.mapping)
    buf = bytes_view(data, "data")
    sel = plan_rows(nrows, None, row_range)
    check_extent(buf, row_bytes, nrows, sel, chosen)
    # One piece on a pool worker: its pieces would run serially anyway. A piece plans outputs
    # for all its rows, so pieces are also cut to at most _WHERE_PIECE_BYTES of planned output.
    nthreads = 1 if _threads.in_worker() else default_threads(options.threads)
    bounds = chunk_bounds(sel.count, row_bytes, nthreads,
                          most=_WHERE_PIECE_BYTES // max(1, sum(_out_row_bytes(s) for s in chosen)))
    smode = strip_mode(options.strip)
    schema = arrow_schema(specs, columns=columns, mapping=options.mapping,
                          decode_bytes=options.decode_bytes, binary_strings=options.binary_strings,
                          metadata=options.metadata)

    def piece(i: int) -> Any:  # a pyarrow.RecordBatch
        first, n = sel.first + bounds[i], bounds[i + 1] - bounds[i]
        # Outputs for every row of the piece: NumPy's lazily mapped memory, of which only the
        # pages the survivors fill are ever touched (the pool would hand over touched pages).
        outs, program = plan_binary(chosen, n, options.mapping, arrow=True,
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
            return empty_batch(found)
        arrays = [column_array(o, found, options.mapping, options.decode_bytes,
                               options.binary_strings, options.encoding) for o in outs]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    batches = _threads.run_shared(piece, range(len(bounds) - 1), nthreads)
    if len(batches) == 1:
        return batches[0]
    if not chosen:
        return empty_batch(sum(b.num_rows for b in batches))
    joined = pa.Table.from_batches(batches, schema=schema).combine_chunks()
    if any(c.num_chunks > 1 for c in joined.columns):
        # Over 2 GiB of text in one column: Arrow cannot hold it in one string array.
        raise ValueError("the selected rows do not fit one record batch (a string column over "
                         "2 GiB); scan with a smaller batch_size")
    return pa.RecordBatch.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                       for c in joined.columns], schema=schema)


def decode_table_numpy(data: Buffer, heap: Buffer, specs: Sequence[ColumnSpec], row_bytes: int,
                       nrows: int, *, columns: Any = None, rows: Any = None,
                       row_range: tuple[int, int] | None = None,
                       threads: int | None = None,
                       legacy_logical: Callable[[ColumnSpec], bool] | None = None,
                       pooled: bool = False) -> dict[str, np.ndarray | list[np.ndarray]]:
    """Decode table rows into NumPy arrays with the tensor mapping of the 1.x API (docs/compatibility.md)

    Repeat-1 columns are ``(N,)``, vectors ``(N, r)`` (TDIM not applied), character columns
    ``uint8 (N, w)`` byte matrices with their padding, complex columns complex64/complex128,
    variable-length columns a list of 1-D arrays; TNULL is not applied. Arguments as in
    `decode_table`; ASCII-table specs are accepted too (numbers as int32 or float64, an
    undefined field as 0 or NaN). ``pooled``: fixed-width binary columns go into memory from
    Arrow's pool, which hands freed pages back to the next decode (a stream of chunks then
    pays the kernel's page zeroing once, not per chunk); NumPy's own memory otherwise.

    Returns
    -------
    dict
        Column name → array (or list of arrays), in projection order.
    """
    chosen = select_columns(specs, columns)
    buf = bytes_view(data, "data")
    sel = plan_rows(nrows, rows, row_range)
    check_extent(buf, row_bytes, nrows, sel, chosen)
    nthreads = default_threads(threads)
    n = sel.count
    result: dict[str, np.ndarray | list[np.ndarray]] = {}
    if chosen and chosen[0].is_ascii:
        from .ascii_decode import decode_ascii_columns

        outs = decode_ascii_columns(chosen, buf, row_bytes, sel, nthreads, mapping="torch", arrow=False,
                                    apply_nulls=False, decode_strings=False, strip=STRIP_NONE)
        for out in outs:
            if out.conv.kind == "string":
                assert out.values is not None
                result[out.spec.name] = out.values.reshape(n, out.spec.width)
            else:
                result[out.spec.name] = out.values  # type: ignore[assignment]
        return result
    heap_buf = bytes_view(heap, "heap")
    outs, program = plan_binary(chosen, n, "torch", arrow=False, apply_nulls=False, decode_strings=False,
                                strip=STRIP_NONE, pooled=pooled)
    decode_fixed(program, buf, row_bytes, sel, nthreads)
    for out in outs:
        spec = out.spec
        if spec.is_vla:
            from .variable_length import decode_vla

            decode_vla(out, buf, heap_buf, row_bytes, sel, arrow=False, apply_nulls=False, nrows=nrows,
                       decode_strings=False, strip=STRIP_NONE, large=True, legacy_logical=legacy_logical)
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


def _numpy_values(out: ColumnOutput) -> np.ndarray:
    assert out.values is not None
    kind = out.conv.kind
    if kind in ("logical", "bits"):
        return out.values.view(np.bool_)
    if kind == "complex":
        return out.values.view(np.complex64 if out.conv.dtype == np.float32 else np.complex128)
    return out.values
