"""``torchfits.table``: the torchfits 1.2.3 table API (docs/compatibility.md) over the scanner.

Every function here is a thin layer: it checks arguments with the 1.2.3 wording and conventions,
then runs the native `torchfits.tables.scan.Scanner` / `torchfits.tables.decode` kernels with the
``"compat"`` Arrow mapping (or their NumPy "torch" mapping for tensors). Nothing decodes bytes
here. The mutating functions delegate to `torchfits.writing.table_edit`; the conversions of
``torchfits.table`` (pandas, Polars, astropy, DuckDB, Parquet, CSV, IPC) live in
`torchfits.compat.interop`, and ``torchfits.table`` re-exports both modules.

The helpers without a leading underscore (argument checks, `open_source`, `compat_scan`,
`decode_numpy`, `tensor_dict`, ...) are shared with the other 1.x modules; they are not part
of ``__all__``.
"""
from __future__ import annotations

import codecs
import importlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._torch_adapter import validate_device
from ..errors import (
    CorruptHeaderError,
    HDUNotFoundError,
    InvalidRowError,
    TruncatedFileError,
    UnsupportedColumnError,
)
from ..fits.aliases import HduArg, InputArg
from ..fits.hdu_index import check_hdu_arg, get_index
from ..fits.paths import with_storage_options
from ..fits.rows import row_window
from ..query import expr as _expr
from ..query.names import resolve_columns
from ..tables.decode import decode_table_numpy
from ..tables.decode_options import DecodeOptions
from ..tables.scan import Scanner
from ..tables.selection import select_columns
from ..tables.source import TableSource
from .common import check_mmap

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyarrow as pa
else:
    class _Pyarrow:
        """pyarrow, imported on first use: tensor reads without a where-filter (and ``open()``
        on files with tables) never need it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(importlib.import_module("pyarrow"), name)

    pa = _Pyarrow()

__all__ = [
    "TABLE_BACKENDS",
    "append_rows",
    "clear_cache",
    "dataset",
    "delete_rows",
    "drop_columns",
    "insert_column",
    "insert_rows",
    "read",
    "read_arrow",
    "read_torch",
    "reader",
    "rename_columns",
    "replace_column",
    "scan",
    "scan_torch",
    "scanner",
    "schema",
    "update_rows",
    "write",
]

#: The ``backend=`` values 1.2.3 accepted; every one runs the same engine here.
TABLE_BACKENDS = frozenset({"auto", "cpp", "torch"})

DEFAULT_BATCH = 65_536
_ROW_COLUMN = "__torchfits_row__"
_MSG_EMPTY_WHERE = "where must be a non-empty string expression"


# ============================================================================ argument checks


def _check_backend(backend: Any) -> None:
    # Case as given: 1.2.3 rejected "AUTO".
    if not isinstance(backend, str) or backend not in TABLE_BACKENDS:
        raise ValueError("backend must be one of: auto, torch, cpp")


def _check_batch_size(batch_size: Any) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError("batch_size must be > 0")
    return int(batch_size)


def _check_encoding(encoding: Any) -> None:
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise ValueError(f"unknown encoding {encoding!r}") from None


def check_where(where: Any) -> None:
    """Refuse a where that is not a non-empty string (None passes)."""
    if where is not None and (not isinstance(where, str) or not where.strip()):
        raise ValueError(_MSG_EMPTY_WHERE)


def check_table_hdu(hdu: Any, func: str) -> None:
    """Refuse ``hdu=None`` / ``"auto"``: table functions need an index or an EXTNAME."""
    # BUG-1.2.3: table.read(hdu=None) leaked an internal TypeError; say what is needed instead.
    if hdu is None or (isinstance(hdu, str) and hdu.strip().lower() == "auto"):
        raise ValueError(
            f"{func} needs an explicit table HDU (an index or an EXTNAME), not {hdu!r}"
        )
    check_hdu_arg(hdu)


def columns_arg(columns: Any) -> list | None:
    """None or ``[]`` → every column; a ``str`` is one column (BUG-1.2.3 iterated it)."""
    if columns is None:
        return None
    if isinstance(columns, (str, int, np.integer)) and not isinstance(columns, bool):
        return [columns]
    if isinstance(columns, (list, tuple, np.ndarray)):
        items = list(columns.tolist() if isinstance(columns, np.ndarray) else columns)
        return items or None
    if isinstance(columns, Iterable) and not isinstance(columns, (bytes, Mapping)):
        items = list(columns)
        return items or None
    raise TypeError(f"columns must be a list or tuple of column names, not {type(columns).__name__}")


def check_start_rows(start_row: Any, num_rows: Any) -> tuple[int, int]:
    """Check the 1-based ``start_row`` / ``num_rows`` window of the tensor reads."""
    if isinstance(start_row, bool) or not isinstance(start_row, (int, np.integer)):
        raise ValueError("start_row must be an integer >= 1 (FITS uses 1-based indexing)")
    if start_row < 1:
        raise ValueError(f"start_row must be >= 1, got {start_row} (FITS uses 1-based indexing)")
    if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)) or num_rows < -1:
        raise ValueError(f"num_rows must be > 0 or -1 (all rows), or 0 for no rows; got {num_rows!r}")
    return int(start_row), int(num_rows)


# ============================================================================ the engine, compat


def open_source(path: Any, hdu: Any) -> TableSource:
    """Open one table HDU, with the 1.2.3 error wording of ``table.read`` (docs/compatibility.md)."""
    index = get_index(path)
    try:
        return TableSource.open(index, hdu)
    except HDUNotFoundError as exc:
        if isinstance(hdu, str):
            raise HDUNotFoundError(f"Table HDU named '{hdu}' not found in '{index.path}'") from None
        raise HDUNotFoundError(
            f"{index.path}: could not move to HDU {hdu} (the file has {len(index.entries)} HDUs)"
        ) from exc


def decode_numpy(src: TableSource, *, columns: Any, rows: np.ndarray | None = None,
                  row_range: tuple[int, int] | None = None) -> dict[str, Any]:
    """The tensor mapping of the 1.x API (docs/compatibility.md) (``decode_table_numpy``) for some
    rows of ``src``."""
    data, heap = src.buffers()
    try:
        return decode_table_numpy(data, heap, src.specs, src.entry.row_bytes, src.nrows,
                                  columns=columns, rows=rows, row_range=row_range,
                                  legacy_logical=src.legacy_logical)
    except (CorruptHeaderError, TruncatedFileError) as exc:
        raise src.located(exc) from None


def parse_where(where: str) -> Any:
    """The 1.2.3 dialect only (bare words are strings, no arithmetic, column on the left)."""
    return _expr.parse(where, dialect="compat")


def _check_where_columns(src: TableSource, tree: Any) -> list[str]:
    """The table's spelling of every column ``tree`` references (names are case-insensitive;
    an unknown one raises `ColumnNotFoundError`, a ValueError, suggesting close names)."""
    resolved = resolve_columns(tree, [s.name for s in src.specs],
                               context=f"{src.path} HDU {src.entry.index}")
    return _expr.columns(resolved)


def _source_view(src: TableSource, keep: Iterable[str]) -> TableSource:
    """``src`` without the complex columns a call neither projects nor filters on.

    Complex columns have no Arrow type under the 1.2.3 mapping; 1.2.3 refused them only when
    a call touched them, while the scanner types every column of the table to plan a
    predicate. Decoding is by name and byte offset, so fewer specs describe the same rows.
    """
    wanted = set(keep)
    unused = [s for s in src.specs if not s.is_ascii and s.code in "CM" and s.name not in wanted]
    if not unused:
        return src
    return src.replace(specs=[s for s in src.specs if s not in unused])


@dataclass
class CompatScan:
    """A planned 1.2.3-style scan: the native scanner plus the compat conventions around it."""

    scanner: Scanner
    schema: Any  # the schema callers see (compat schema metadata)
    filtered: bool

    def batches(self) -> Iterator[Any]:
        """Batches carrying exactly ``schema``; a filtered scan that keeps nothing yields one
        empty batch (docs/compatibility.md)."""
        produced = False
        for batch in self.scanner.to_batches():
            produced = True
            yield pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        if self.filtered and not produced:
            yield _empty_batch(self.schema)

    def table(self) -> Any:
        # Same data, the schema (metadata) callers see; no copy.
        arrow = self.scanner.to_arrow()
        return pa.Table.from_arrays(arrow.columns, schema=self.schema)


def compat_scan(path: Any, hdu: Any, *, func: str, columns: Any = None, row_slice: Any = None,
                 rows: Any = None, where: Any = None, batch_size: Any = DEFAULT_BATCH,
                 mmap: Any = True, decode_bytes: bool = True, encoding: str = "ascii",
                 strip: bool = True, include_fits_metadata: bool = False,
                 apply_fits_nulls: bool = True, backend: str = "auto") -> CompatScan:
    """Check every argument (the cheap ones before any I/O) and plan the scan; nothing is
    decoded yet, but a projected complex column is refused now."""
    _check_backend(backend)
    check_mmap(mmap)
    batch_size = _check_batch_size(batch_size)
    _check_encoding(encoding)
    check_where(where)
    check_table_hdu(hdu, func)
    if rows is not None and row_slice is not None:
        raise ValueError("Only one of rows or row_slice may be provided")
    columns = columns_arg(columns)
    tree = None if where is None else parse_where(where)
    src = open_source(path, hdu)
    where_cols = [] if tree is None else _check_where_columns(src, tree)
    projection = [s.name for s in select_columns(src.specs, columns)]
    view = _source_view(src, projection + where_cols)
    metadata = bool(include_fits_metadata)
    sc = Scanner([view], columns=projection, rows=rows, row_slice=row_slice,
                 # The native dialect reads the compat tree back exactly (to_string round trip).
                 where=None if tree is None else _expr.to_string(tree),
                 batch_size=batch_size, schema_metadata=False,
                 options=DecodeOptions(mapping="compat", decode_bytes=bool(decode_bytes),
                                       strip=bool(strip), encoding=encoding,
                                       apply_nulls=bool(apply_fits_nulls), metadata=metadata))
    try:
        schema_ = sc.schema
    except UnsupportedColumnError as exc:  # the decoder knows the columns, not the file
        raise UnsupportedColumnError(f"{src.label}: {exc}") from None
    if metadata:
        schema_ = schema_.with_metadata({b"fits_hdu": str(src.entry.index).encode()})
    return CompatScan(sc, schema_, tree is not None)


def _empty_batch(schema_: Any) -> Any:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema_], schema=schema_)


def selected_rows(src: TableSource, tree: Any, *, row_range: tuple[int, int] | None = None,
                   batch_size: int = DEFAULT_BATCH) -> np.ndarray:
    """Absolute 0-based rows of ``row_range`` that satisfy ``tree`` (compat semantics: TNULL
    nulls and NaN never satisfy a comparison, strings compare stripped).

    Used where the caller needs row numbers rather than Arrow batches (tensor reads): the
    predicate's columns are scanned without a predicate, so every batch covers the next
    ``batch_size`` rows of the window, and filtered here.
    """
    cols = _check_where_columns(src, tree)
    view = _source_view(src, cols)
    sc = Scanner([view], columns=[], filter=tree, row_slice=row_range, batch_size=batch_size,
                 options=DecodeOptions(mapping="compat", metadata=False), schema_metadata=False)
    return sc.selected_rows()[0]


# ============================================================================ Arrow reads


def read(path: InputArg, hdu: HduArg = 1, columns: Sequence[str] | None = None,
         row_slice: slice | tuple[int, int | None] | None = None, rows: Any = None,
         where: str | None = None, batch_size: int = DEFAULT_BATCH, mmap: Any = True,
         decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
         include_fits_metadata: bool = False, apply_fits_nulls: bool = True,
         backend: str = "auto", *,
         storage_options: dict | None = None) -> pa.Table:
    """Read a FITS table HDU into a ``pyarrow.Table`` (torchfits 1.x ``table.read``).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    hdu : int or str
        Table HDU index (0-based) or EXTNAME (case-insensitive); ``None``/``"auto"`` are refused.
    columns : str or sequence of str, optional
        Projection in output order (duplicates collapsed); None or ``[]`` reads every column.
    row_slice : slice or (start, stop), optional
        0-based half-open row window; ``stop`` past the end is clamped.
    rows : sequence of int, optional
        0-based row indices (any order, duplicates kept); exclusive with ``row_slice``.
    where : str, optional
        A where-expression (docs/where.md), applied within ``rows``/``row_slice``. Columns
        it references but the projection does not are not returned.
    batch_size : int
        Rows decoded at a time (bounds memory of filtered reads).
    mmap : bool or "auto"
        Accepted for compatibility; results are the same for every value.
    decode_bytes : bool
        Character columns as ``string`` (True) or ``fixed_size_binary`` with padding (False).
    encoding : str
        Text encoding; undecodable bytes become U+FFFD.
    strip : bool
        Also remove trailing spaces (trailing NULs always go).
    include_fits_metadata : bool
        Attach ``fits_*`` field metadata and ``{b"fits_hdu": b"<index>"}`` schema metadata.
    apply_fits_nulls : bool
        Integer values equal to TNULL become nulls.
    backend : {"auto", "cpp", "torch"}
        A hint; every backend gives the same result.

    Returns
    -------
    pyarrow.Table
        A typed empty table when nothing is selected.

    Raises
    ------
    KeyError
        Unknown column or EXTNAME (``"Column 'X' not found"``, ``"Table HDU named 'X' not found"``).
    IndexError
        A ``rows`` entry past the end.
    ValueError
        Bad arguments, where-expressions, ``hdu=None``.
    NotImplementedError
        Complex (``C``/``M``) columns in the projection or the where-expression.
    OSError, RuntimeError
        Missing, non-FITS or truncated files; an image HDU ("Failed to get table dimensions").
    """
    path = with_storage_options(path, storage_options)
    plan = compat_scan(path, hdu, func="table.read", columns=columns, row_slice=row_slice,
                        rows=rows, where=where, batch_size=batch_size, mmap=mmap,
                        decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                        include_fits_metadata=include_fits_metadata,
                        apply_fits_nulls=apply_fits_nulls, backend=backend)
    return plan.table()


#: ``read_arrow is read`` (1.2.3 exported both names).
read_arrow = read


def scan(path: Any, hdu: Any = 1, columns: Any = None, row_slice: Any = None,
         where: str | None = None, batch_size: int = DEFAULT_BATCH, mmap: Any = True,
         decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
         include_fits_metadata: bool = False, apply_fits_nulls: bool = True,
         backend: str = "auto", *,
         storage_options: dict | None = None) -> Iterator[pa.RecordBatch]:
    """Stream a FITS table as ``pyarrow.RecordBatch`` objects (torchfits 1.x ``table.scan``).

    Arguments as in `read` (there is no ``rows``). Every argument is checked now, before the
    first ``next()``. Without ``where`` every batch has ``batch_size`` rows but the last;
    with ``where`` each batch is filtered as it streams, empty ones are skipped, and a scan
    that keeps nothing yields exactly one empty batch carrying the schema. A table without rows
    yields nothing.

    Returns
    -------
    iterator of pyarrow.RecordBatch
    """
    plan = _scan_plan("table.scan", path, hdu, columns, row_slice, where, batch_size, mmap,
                      decode_bytes, encoding, strip, include_fits_metadata, apply_fits_nulls,
                      backend, storage_options)
    return plan.batches()


def _scan_plan(func: str, path: Any, hdu: Any, columns: Any, row_slice: Any, where: str | None,
               batch_size: int, mmap: Any, decode_bytes: bool, encoding: str, strip: bool,
               include_fits_metadata: bool, apply_fits_nulls: bool, backend: str,
               storage_options: dict | None) -> Any:
    """The checked scan plan behind `scan` and `reader` (``func`` names the caller in errors)."""
    return compat_scan(with_storage_options(path, storage_options), hdu, func=func, columns=columns,
                       row_slice=row_slice, where=where, batch_size=batch_size, mmap=mmap,
                       decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                       include_fits_metadata=include_fits_metadata,
                       apply_fits_nulls=apply_fits_nulls, backend=backend)


def reader(path: Any, hdu: Any = 1, columns: Any = None, row_slice: Any = None,
           where: str | None = None, batch_size: int = DEFAULT_BATCH, mmap: Any = True,
           decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
           include_fits_metadata: bool = True, apply_fits_nulls: bool = True,
           backend: str = "auto", *,
           storage_options: dict | None = None) -> pa.RecordBatchReader:
    """`scan` as a ``pyarrow.RecordBatchReader`` (FITS metadata included by default).

    Empty results still carry the schema.
    """
    plan = _scan_plan("table.reader", path, hdu, columns, row_slice, where, batch_size, mmap,
                      decode_bytes, encoding, strip, include_fits_metadata, apply_fits_nulls,
                      backend, storage_options)
    return pa.RecordBatchReader.from_batches(plan.schema, plan.batches())


def schema(path: Any, hdu: Any = 1, columns: Any = None, where: str | None = None,
           decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
           include_fits_metadata: bool = False, apply_fits_nulls: bool = False,
           backend: str = "auto", *,
           storage_options: dict | None = None) -> pa.Schema:
    """The Arrow schema `read` would return, built from the header cards alone.

    ``where`` is parsed and its columns checked (``"where references unknown column 'X'"``);
    no row is read.
    """
    path = with_storage_options(path, storage_options)
    plan = compat_scan(path, hdu, func="table.schema", columns=columns, where=where,
                        decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                        include_fits_metadata=include_fits_metadata,
                        apply_fits_nulls=apply_fits_nulls, backend=backend)
    return plan.schema


def is_path(data: Any) -> bool:
    """True for a path (``str`` or ``os.PathLike``), as opposed to in-memory Arrow data."""
    return isinstance(data, (str, os.PathLike))


def dataset(data: Any, **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Dataset``: for a path, an in-memory dataset of ``reader(path,
    **kwargs)``; anything else goes to ``pyarrow.dataset.dataset(data)``."""
    import pyarrow.dataset as ds

    if is_path(data):
        return ds.dataset(reader(data, **kwargs).read_all())
    if kwargs:
        raise TypeError(f"dataset() keyword arguments {sorted(kwargs)} only apply to a path")
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    return ds.dataset(data)


def _filter_columns(expression: Any) -> list[str] | None:
    """Columns a pyarrow filter reads, or None when they cannot be told."""
    if expression is None:
        return []
    try:
        tree = _expr.from_pyarrow(expression)
    except Exception:  # an expression the tree cannot express: read every column
        return None
    return None if tree is None else _expr.columns(tree)


def scanner(data: Any, *, columns: Any = None, where: str | None = None, filter: Any = None,
            batch_size: int = DEFAULT_BATCH, use_threads: bool = True, **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Scanner`` over a path or an Arrow object.

    For a path, ``where`` and ``kwargs`` go to `reader` and ``filter`` (a
    ``pyarrow.compute.Expression``) runs in the pyarrow scanner. For other inputs ``where`` is
    applied too (BUG-1.2.3 ignored it), combined with ``filter`` by AND.
    """
    import pyarrow.dataset as ds

    batch_size = _check_batch_size(batch_size)
    cols = columns_arg(columns)
    if is_path(data):
        needed = _filter_columns(filter)
        read_cols = None
        if cols is not None and needed is not None:
            read_cols = list(dict.fromkeys(list(cols) + needed))
        rdr = reader(data, columns=read_cols, where=where, batch_size=batch_size, **kwargs)
        return ds.Scanner.from_batches(rdr, columns=cols, filter=filter, batch_size=batch_size,
                                       use_threads=use_threads)
    if kwargs:
        raise TypeError(f"scanner() keyword arguments {sorted(kwargs)} only apply to a path")
    dset = dataset(data)
    predicate = filter
    if where is not None:
        check_where(where)
        compiled = where_on_schema(where, dset.schema)
        predicate = compiled if predicate is None else (compiled & predicate)
    return dset.scanner(columns=cols, filter=predicate, batch_size=batch_size,
                        use_threads=use_threads)


def where_on_schema(where: str, schema_: Any) -> Any:
    """A where-string (1.x dialect) as a ``pyarrow.compute.Expression`` over ``schema_``."""
    tree = resolve_columns(parse_where(where), schema_.names)
    return _expr.to_pyarrow(tree, schema_)


# ============================================================================ torch reads


def tensor_dict(arrays: Mapping[str, Any], device: str, *, non_blocking: bool = False,
                 pin_memory: bool = False) -> dict[str, Any]:
    """NumPy results of the tensor mapping → tensors (zero-copy on the CPU)."""
    from .._torch_adapter import to_tensor

    pin = pin_memory and device.startswith("cuda")

    def one(arr: np.ndarray) -> Any:
        if pin:
            return to_tensor(arr, "cpu").pin_memory().to(device, non_blocking=non_blocking)
        return to_tensor(arr, device, non_blocking=non_blocking)

    out: dict[str, Any] = {}
    for name, value in arrays.items():
        if isinstance(value, list):  # variable-length column: one 1-D tensor per row
            out[name] = [one(v) for v in value]
        else:
            out[name] = one(value)
    return out


def _torch_where(where: str) -> Any:
    """Parse a read_torch where (comparisons, BETWEEN and AND only, docs/compatibility.md)."""
    tree = parse_where(where)

    def supported(node: Any) -> bool:
        if isinstance(node, _expr.And):
            return supported(node.left) and supported(node.right)
        if isinstance(node, _expr.Compare):
            return isinstance(node.left, _expr.Column) and isinstance(node.right, _expr.Literal) \
                and node.right.value is not None
        if isinstance(node, _expr.Between):
            return not node.negated and isinstance(node.operand, _expr.Column) \
                and isinstance(node.low, _expr.Literal) and isinstance(node.high, _expr.Literal)
        return False

    if not supported(tree):
        raise ValueError(f"Unsupported where expression for read_torch: '{where}'")
    return tree


def _check_torch_where_types(src: TableSource, tree: Any) -> None:
    """read_torch filters numeric and boolean columns only (1.2.3 failed on strings)."""
    by_name = {s.name: s for s in src.specs}
    for c in _expr.columns(tree):
        spec = by_name.get(c)
        if spec is not None and spec.code == "A":
            raise TypeError(
                f"read_torch where cannot compare string column '{c}': only numeric and boolean "
                "columns are supported (use table.read(where=...) for strings)"
            )


def read_torch_source(src: TableSource, *, columns: Any, start_row: int, num_rows: int,
                       device: str, where: str | None) -> dict[str, Any]:
    """The body of `read_torch` once the table HDU is open (shared with `TableReaderHandle`)."""
    chosen = [s.name for s in select_columns(src.specs, columns_arg(columns))]
    tree = None
    if where is not None:
        check_where(where)
        tree = _torch_where(where)
        _check_torch_where_types(src, tree)
    nrows = src.nrows
    if nrows == 0:
        return {}
    if start_row > nrows:
        raise InvalidRowError(
            f"{src.path}: Invalid start row {start_row} for a {nrows}-row table (rows are 1-based)"
        )
    first = start_row - 1
    stop = nrows if num_rows == -1 else min(nrows, first + num_rows)
    if tree is None:
        arrays = decode_numpy(src, columns=chosen, row_range=(first, stop))
    else:
        # The row window first, then the predicate; TNULL and NaN never satisfy it (docs/compatibility.md).
        selected = selected_rows(src, tree, row_range=(first, stop))
        arrays = decode_numpy(src, columns=chosen, rows=selected)
    return tensor_dict(arrays, device)


def read_torch(path: Any, hdu: Any = 1, columns: Any = None, start_row: int = 1,
               num_rows: int = -1, device: Any = "cpu", mmap: Any = "auto",
               cache_capacity: int = 10, handle_cache_capacity: int = 16,
               fast_header: bool = True, return_header: bool = False,
               where: str | None = None) -> Any:
    """Read a table HDU into a dict of tensors (torchfits 1.x ``table.read_torch``).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    hdu : int or str
        Table HDU index or EXTNAME; ``None``/``"auto"`` raise ValueError.
    columns : str or sequence of str, optional
        Projection (None or ``[]``: every column, in file order).
    start_row : int
        **1-based** first row.
    num_rows : int
        Rows to read; -1 reads to the end, 0 gives empty columns. Windows past the end clamp.
    device : str or torch.device
        ``"cpu"``, ``"cuda[:N]"``, ``"mps[:N]"``.
    mmap : bool or "auto"
        Accepted for compatibility.
    cache_capacity, handle_cache_capacity, fast_header
        Accepted and ignored.
    return_header : bool
        Also return the typed `Header`.
    where : str, optional
        Comparisons, ``BETWEEN`` and ``AND`` on numeric/boolean columns only, applied after the
        row window; TNULL sentinels and NaN never match but are returned verbatim.

    Returns
    -------
    dict or (dict, Header)
        Column name → tensor per docs/compatibility.md (repeat-1 ``(N,)``, vectors ``(N, r)``,
        strings ``uint8 (N, w)``, variable-length columns a list of tensors); TNULL is never
        applied. A table without rows gives ``{}``.
    """
    start_row, num_rows = check_start_rows(start_row, num_rows)
    device = validate_device(device)
    check_mmap(mmap)
    check_where(where)
    check_table_hdu(hdu, "read_torch")
    src = open_source(path, hdu)
    data = read_torch_source(src, columns=columns, start_row=start_row, num_rows=num_rows,
                              device=device, where=where)
    if return_header:
        return data, src.index.header(src.entry)
    return data


def read_torch_for_read(path: Any, hdu_index: int, *, device: Any = "cpu",
                         opts: Mapping[str, Any] | None = None,
                         return_header: bool = False) -> Any:
    """`torchfits.read` on a table HDU: `read_torch` with the table options of ``opts``."""
    opts = opts or {}
    return read_torch(path, hdu_index, columns=opts.get("columns"),
                      start_row=opts.get("start_row", 1), num_rows=opts.get("num_rows", -1),
                      device=device, return_header=return_header)


def scan_torch(path: Any, hdu: Any = 1, columns: Any = None, row_slice: Any = None,
               batch_size: int = DEFAULT_BATCH, mmap: Any = True, device: Any = "cpu",
               non_blocking: bool = True, pin_memory: bool = False) -> Iterator[dict[str, Any]]:
    """Stream a table as dicts of tensors, ``batch_size`` rows at a time.

    ``row_slice`` is 0-based half-open. Values follow the tensor mapping of `read_torch`
    (strings as ``uint8`` matrices, variable-length columns as lists of tensors, complex
    columns supported). Arguments are checked now; a table without rows yields nothing.
    """
    batch_size = _check_batch_size(batch_size)
    device = validate_device(device)
    check_mmap(mmap)
    check_table_hdu(hdu, "scan_torch")
    src = open_source(path, hdu)
    projection = [s.name for s in select_columns(src.specs, columns_arg(columns))]
    start, stop = row_window(row_slice, src.nrows)

    def batches() -> Iterator[dict[str, Any]]:
        for a in range(start, stop, batch_size):
            arrays = decode_numpy(src, columns=projection, row_range=(a, min(a + batch_size, stop)))
            src.done((a, min(a + batch_size, stop)))  # the batch's map pages may leave RSS (`residency`)
            yield tensor_dict(arrays, device, non_blocking=non_blocking, pin_memory=pin_memory)

    return batches()


def clear_cache(*, disk: bool = False) -> None:
    """Clear in-process caches (`torchfits.cache.clear_cache`); ``disk=True`` also removes the
    on-disk cache tree."""
    from .cache import clear_cache as _clear

    _clear(disk=disk)


# ============================================================================ writes and edits


def _edit() -> Any:
    from ..writing import table_edit as _table_edit

    return _table_edit


def write(path: Any, data: Any, *, schema: Mapping[str, Any] | None = None, header: Any = None,
          overwrite: bool = False, extname: str | None = None, table_type: str = "binary",
          quantize: Any = None) -> None:
    """Write ``data`` as a FITS file: an empty primary HDU and one table HDU.

    Parameters
    ----------
    path : str or os.PathLike
        Destination; an existing file needs ``overwrite=True`` (else ``FileExistsError``).
    data : dict of columns, astropy Table, pyarrow Table/RecordBatch, pandas or polars DataFrame
        Columns of equal length; an empty dict raises ValueError.
    schema : dict, optional
        Per-column overrides ``{col: {"format", "unit", "tnull", "tscal", "tzero", "dim"}}``.
    header : dict or Header, optional
        Extra cards for the table HDU.
    overwrite : bool
        Replace an existing file.
    extname : str, optional
        EXTNAME of the table HDU (wins over one in ``header``).
    table_type : {"binary", "ascii"}
        Binary (``BINTABLE``) or ASCII (``TABLE``) table.
    quantize : bool, str or dict, optional
        ``"robust"``/True quantises every float column to 16-bit integers with TSCAL/TZERO;
        a dict of options or ``{col: "robust" | options}`` limits or tunes it.
    """
    return _edit().write(path, data, schema=schema, header=header, overwrite=overwrite,
                         extname=extname, table_type=table_type, quantize=quantize)


def append_rows(path: Any, rows: Mapping[str, Any], hdu: Any = 1) -> None:
    """Append rows to a table HDU, rewriting the file in place.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    rows : dict of column → values
        Equal-length columns (NumPy, torch, lists). Omitted columns get defaults: 0, 0.0,
        ``""``, an empty VLA, or TNULL when the column has one.
    hdu : int or str
        The table HDU.
    """
    return _edit().append_rows(path, rows, hdu=hdu)


def insert_rows(path: Any, rows: Mapping[str, Any], *, row: int, hdu: Any = 1) -> None:
    """Insert rows before 0-based ``row`` (``row == num_rows`` appends); defaults as
    `append_rows`."""
    return _edit().insert_rows(path, rows, row=row, hdu=hdu)


def update_rows(path: Any, rows: Mapping[str, Any], row_slice: Any, hdu: Any = 1, *,
                mmap: Any = "auto") -> None:
    """Overwrite rows ``[start, stop)`` (0-based) with ``rows`` (physical values).

    ``row_slice`` is a slice or ``(start, stop)`` inside the table (never extends it). ``mmap``
    True forces the in-place mapped writer (a variable-length-array column raises ValueError,
    as in 1.x); ``"auto"`` falls back to a buffered rewrite.
    """
    return _edit().update_rows(path, rows, row_slice, hdu=hdu, mmap=mmap)


def delete_rows(path: Any, row_slice: Any, *, hdu: Any = 1) -> None:
    """Delete one 0-based row (an int), a slice, or ``(start, stop)``; an empty slice is a
    no-op."""
    return _edit().delete_rows(path, row_slice, hdu=hdu)


def insert_column(path: Any, name: str, values: Any, *, hdu: Any = 1, index: int | None = None,
                  format: str | None = None, unit: str | None = None,
                  dim: str | None = None, tnull: int | None = None,
                  tscal: float | None = None, tzero: float | None = None) -> None:
    """Insert a column at position ``index`` (None appends); values are written as stored codes.

    The TFORM is inferred like `write` unless ``format`` is given; ``unit``, ``dim``, ``tnull``,
    ``tscal`` and ``tzero`` write TUNIT, TDIM, TNULL, TSCAL and TZERO.
    """
    return _edit().insert_column(path, name, values, hdu=hdu, index=index, format=format,
                                 unit=unit, dim=dim, tnull=tnull, tscal=tscal, tzero=tzero)


def replace_column(path: Any, name: str, values: Any, *, hdu: Any = 1,
                   format: str | None = None, unit: str | None = None,
                   dim: str | None = None, tnull: int | None = None,
                   tscal: float | None = None, tzero: float | None = None) -> None:
    """Replace a column's data, keeping its TUNIT/TNULL/TFORM code unless overridden."""
    return _edit().replace_column(path, name, values, hdu=hdu, format=format, unit=unit, dim=dim,
                                  tnull=tnull, tscal=tscal, tzero=tzero)


def rename_columns(path: Any, mapping: Mapping[str, str], hdu: Any = 1) -> None:
    """Rename columns ``{old: new}`` (TTYPEn rewritten in place)."""
    return _edit().rename_columns(path, mapping, hdu=hdu)


def drop_columns(path: Any, columns: Any, hdu: Any = 1) -> None:
    """Remove columns (dropping all leaves a 0-column table)."""
    return _edit().drop_columns(path, columns, hdu=hdu)
