"""``torchfits.table``: the torchfits 1.2.3 table API (docs/compatibility.md) over the scanner.

Every function here is a thin layer: it checks arguments with the 1.2.3 wording and conventions,
then runs the native `torchfits._scan.Scanner` / `torchfits._table_decode` kernels with the
``"compat"`` Arrow mapping (or their NumPy "torch" mapping for tensors). Nothing decodes bytes
here. The mutating functions delegate to `torchfits._table_edit`.
"""
from __future__ import annotations

import codecs
import dataclasses
import importlib
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from ..query import expr as _expr
from ..query.names import resolve_columns
from ..fits.paths import with_storage_options
from ..fits.hdu_index import check_hdu_arg, get_index
from ..fits.paths import fspath
from ..tables.scan import Scanner, TableSource, validate_row_slice
from ..tables.decode import decode_table_numpy, select_columns
from .._torch_adapter import validate_device
from ..errors import (CorruptHeaderError, HDUNotFoundError, InvalidRowError, TruncatedFileError,
                      UnsupportedColumnError)
from .common import check_mmap, require_module
from ..fits.aliases import HduArg, InputArg

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
    "FITSPolarsFrame",
    "dataset",
    "delete_rows",
    "drop_columns",
    "duckdb_query",
    "insert_column",
    "insert_rows",
    "read",
    "read_arrow",
    "read_astropy",
    "read_polars",
    "read_torch",
    "reader",
    "rename_columns",
    "replace_column",
    "scan",
    "scan_polars",
    "scan_torch",
    "scanner",
    "schema",
    "to_astropy",
    "to_duckdb",
    "to_pandas",
    "to_polars",
    "update_rows",
    "write",
    "write_csv",
    "write_ipc",
    "write_parquet",
]

#: The ``backend=`` values 1.2.3 accepted; every one runs the same engine here.
TABLE_BACKENDS = frozenset({"auto", "cpp", "torch"})

_DEFAULT_BATCH = 65_536
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


def _check_where(where: Any) -> None:
    if where is not None and (not isinstance(where, str) or not where.strip()):
        raise ValueError(_MSG_EMPTY_WHERE)


def _check_table_hdu(hdu: Any, func: str) -> None:
    # BUG-1.2.3: table.read(hdu=None) leaked an internal TypeError; say what is needed instead.
    if hdu is None or (isinstance(hdu, str) and hdu.strip().lower() == "auto"):
        raise ValueError(
            f"{func} needs an explicit table HDU (an index or an EXTNAME), not {hdu!r}"
        )
    check_hdu_arg(hdu)


def _columns_arg(columns: Any) -> Optional[list]:
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


def _check_start_rows(start_row: Any, num_rows: Any) -> tuple[int, int]:
    if isinstance(start_row, bool) or not isinstance(start_row, (int, np.integer)):
        raise ValueError("start_row must be an integer >= 1 (FITS uses 1-based indexing)")
    if start_row < 1:
        raise ValueError(f"start_row must be >= 1, got {start_row} (FITS uses 1-based indexing)")
    if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)) or num_rows < -1:
        raise ValueError(f"num_rows must be > 0 or -1 (all rows), or 0 for no rows; got {num_rows!r}")
    return int(start_row), int(num_rows)


# ============================================================================ the engine, compat


def _open_source(path: Any, hdu: Any) -> TableSource:
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


def _decode_numpy(src: TableSource, *, columns: Any, rows: Optional[np.ndarray] = None,
                  row_range: Optional[tuple[int, int]] = None) -> dict[str, Any]:
    """The tensor mapping of the 1.x API (docs/compatibility.md) (``decode_table_numpy``) for some rows of ``src``."""
    data, heap = src.buffers()
    try:
        return decode_table_numpy(data, heap, src.specs, src.entry.row_bytes, src.nrows,
                                  columns=columns, rows=rows, row_range=row_range)
    except (CorruptHeaderError, TruncatedFileError) as exc:
        raise src.located(exc) from None


def _parse_where(where: str) -> Any:
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
    return dataclasses.replace(src, specs=[s for s in src.specs if s not in unused])


@dataclass
class _CompatScan:
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


def _compat_scan(path: Any, hdu: Any, *, func: str, columns: Any = None, row_slice: Any = None,
                 rows: Any = None, where: Any = None, batch_size: Any = _DEFAULT_BATCH,
                 mmap: Any = True, decode_bytes: bool = True, encoding: str = "ascii",
                 strip: bool = True, include_fits_metadata: bool = False,
                 apply_fits_nulls: bool = True, backend: str = "auto") -> _CompatScan:
    """Check every argument (the cheap ones before any I/O) and plan the scan; nothing is
    decoded yet, but a projected complex column is refused now."""
    _check_backend(backend)
    check_mmap(mmap)
    batch_size = _check_batch_size(batch_size)
    _check_encoding(encoding)
    _check_where(where)
    _check_table_hdu(hdu, func)
    if rows is not None and row_slice is not None:
        raise ValueError("Only one of rows or row_slice may be provided")
    columns = _columns_arg(columns)
    tree = None if where is None else _parse_where(where)
    src = _open_source(path, hdu)
    where_cols = [] if tree is None else _check_where_columns(src, tree)
    projection = [s.name for s in select_columns(src.specs, columns)]
    view = _source_view(src, projection + where_cols)
    metadata = bool(include_fits_metadata)
    sc = Scanner([view], columns=projection, rows=rows, row_slice=row_slice,
                 # The native dialect reads the compat tree back exactly (to_string round trip).
                 where=None if tree is None else _expr.to_string(tree),
                 batch_size=batch_size, mapping="compat", decode_bytes=bool(decode_bytes),
                 strip=bool(strip), encoding=encoding, apply_nulls=bool(apply_fits_nulls),
                 field_metadata=metadata, schema_metadata=False)
    try:
        schema_ = sc.schema
    except UnsupportedColumnError as exc:  # the decoder knows the columns, not the file
        raise UnsupportedColumnError(f"{Scanner._label(src)}: {exc}") from None
    if metadata:
        schema_ = schema_.with_metadata({b"fits_hdu": str(src.entry.index).encode()})
    return _CompatScan(sc, schema_, tree is not None)


def _empty_batch(schema_: Any) -> Any:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema_], schema=schema_)


def _selected_rows(src: TableSource, tree: Any, *, row_range: Optional[tuple[int, int]] = None,
                   batch_size: int = _DEFAULT_BATCH) -> np.ndarray:
    """Absolute 0-based rows of ``row_range`` that satisfy ``tree`` (compat semantics: TNULL
    nulls and NaN never satisfy a comparison, strings compare stripped).

    Used where the caller needs row numbers rather than Arrow batches (tensor reads): the
    predicate's columns are scanned without a predicate, so every batch covers the next
    ``batch_size`` rows of the window, and filtered here.
    """
    cols = _check_where_columns(src, tree)
    view = _source_view(src, cols)
    sc = Scanner([view], columns=[], filter=tree, row_slice=row_range, batch_size=batch_size,
                 mapping="compat", apply_nulls=True, field_metadata=False, schema_metadata=False)
    return sc.selected_rows()[0]


def _window(row_slice: Any, nrows: int) -> tuple[int, int]:
    """Check a 0-based half-open ``row_slice`` (docs/compatibility.md) and clamp it to ``nrows``: ``(start, stop)``
    with ``start <= stop``."""
    checked = validate_row_slice(row_slice)
    if checked is None:
        return 0, nrows
    start, stop = checked
    stop = nrows if stop is None else min(stop, nrows)
    start = min(start, nrows)
    return start, max(start, stop)


# ============================================================================ Arrow reads


def read(path: InputArg, hdu: HduArg = 1, columns: Optional[Sequence[str]] = None,
         row_slice: Union[slice, tuple[int, Optional[int]], None] = None, rows: Any = None,
         where: Optional[str] = None, batch_size: int = _DEFAULT_BATCH, mmap: Any = True,
         decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
         include_fits_metadata: bool = False, apply_fits_nulls: bool = True,
         backend: str = "auto", *,
         storage_options: Optional[dict] = None) -> "pa.Table":
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
    plan = _compat_scan(path, hdu, func="table.read", columns=columns, row_slice=row_slice,
                        rows=rows, where=where, batch_size=batch_size, mmap=mmap,
                        decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                        include_fits_metadata=include_fits_metadata,
                        apply_fits_nulls=apply_fits_nulls, backend=backend)
    return plan.table()


#: ``read_arrow is read`` (1.2.3 exported both names).
read_arrow = read


def scan(path: Any, hdu: Any = 1, columns: Any = None, row_slice: Any = None,
         where: Optional[str] = None, batch_size: int = _DEFAULT_BATCH, mmap: Any = True,
         decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
         include_fits_metadata: bool = False, apply_fits_nulls: bool = True,
         backend: str = "auto", *,
         storage_options: Optional[dict] = None) -> Iterator["pa.RecordBatch"]:
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
    path = with_storage_options(path, storage_options)
    plan = _compat_scan(path, hdu, func="table.scan", columns=columns, row_slice=row_slice,
                        where=where, batch_size=batch_size, mmap=mmap, decode_bytes=decode_bytes,
                        encoding=encoding, strip=strip,
                        include_fits_metadata=include_fits_metadata,
                        apply_fits_nulls=apply_fits_nulls, backend=backend)
    return plan.batches()


def reader(path: Any, hdu: Any = 1, columns: Any = None, row_slice: Any = None,
           where: Optional[str] = None, batch_size: int = _DEFAULT_BATCH, mmap: Any = True,
           decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
           include_fits_metadata: bool = True, apply_fits_nulls: bool = True,
           backend: str = "auto", *,
           storage_options: Optional[dict] = None) -> "pa.RecordBatchReader":
    """`scan` as a ``pyarrow.RecordBatchReader`` (FITS metadata included by default).

    Empty results still carry the schema.
    """
    path = with_storage_options(path, storage_options)
    plan = _compat_scan(path, hdu, func="table.reader", columns=columns, row_slice=row_slice,
                        where=where, batch_size=batch_size, mmap=mmap, decode_bytes=decode_bytes,
                        encoding=encoding, strip=strip,
                        include_fits_metadata=include_fits_metadata,
                        apply_fits_nulls=apply_fits_nulls, backend=backend)
    return pa.RecordBatchReader.from_batches(plan.schema, plan.batches())


def schema(path: Any, hdu: Any = 1, columns: Any = None, where: Optional[str] = None,
           decode_bytes: bool = True, encoding: str = "ascii", strip: bool = True,
           include_fits_metadata: bool = False, apply_fits_nulls: bool = False,
           backend: str = "auto", *,
           storage_options: Optional[dict] = None) -> "pa.Schema":
    """The Arrow schema `read` would return, built from the header cards alone.

    ``where`` is parsed and its columns checked (``"where references unknown column 'X'"``);
    no row is read.
    """
    path = with_storage_options(path, storage_options)
    plan = _compat_scan(path, hdu, func="table.schema", columns=columns, where=where,
                        decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                        include_fits_metadata=include_fits_metadata,
                        apply_fits_nulls=apply_fits_nulls, backend=backend)
    return plan.schema


def _is_path(data: Any) -> bool:
    return isinstance(data, (str, os.PathLike))


def dataset(data: Any, **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Dataset``: for a path, an in-memory dataset of ``reader(path,
    **kwargs)``; anything else goes to ``pyarrow.dataset.dataset(data)``."""
    import pyarrow.dataset as ds

    if _is_path(data):
        return ds.dataset(reader(data, **kwargs).read_all())
    if kwargs:
        raise TypeError(f"dataset() keyword arguments {sorted(kwargs)} only apply to a path")
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    return ds.dataset(data)


def _filter_columns(expression: Any) -> Optional[list[str]]:
    """Columns a pyarrow filter reads, or None when they cannot be told."""
    if expression is None:
        return []
    try:
        tree = _expr.from_pyarrow(expression)
    except Exception:  # an expression the tree cannot express: read every column
        return None
    return None if tree is None else _expr.columns(tree)


def scanner(data: Any, *, columns: Any = None, where: Optional[str] = None, filter: Any = None,
            batch_size: int = _DEFAULT_BATCH, use_threads: bool = True, **kwargs: Any) -> Any:
    """A ``pyarrow.dataset.Scanner`` over a path or an Arrow object.

    For a path, ``where`` and ``kwargs`` go to `reader` and ``filter`` (a
    ``pyarrow.compute.Expression``) runs in the pyarrow scanner. For other inputs ``where`` is
    applied too (BUG-1.2.3 ignored it), combined with ``filter`` by AND.
    """
    import pyarrow.dataset as ds

    batch_size = _check_batch_size(batch_size)
    cols = _columns_arg(columns)
    if _is_path(data):
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
        _check_where(where)
        compiled = _where_on_schema(where, dset.schema)
        predicate = compiled if predicate is None else (compiled & predicate)
    return dset.scanner(columns=cols, filter=predicate, batch_size=batch_size,
                        use_threads=use_threads)


def _where_on_schema(where: str, schema_: Any) -> Any:
    tree = resolve_columns(_parse_where(where), schema_.names)
    return _expr.to_pyarrow(tree, schema_)


# ============================================================================ torch reads


def _tensor_dict(arrays: Mapping[str, Any], device: str, *, non_blocking: bool = False,
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
    tree = _parse_where(where)

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


def _read_torch_source(src: TableSource, *, columns: Any, start_row: int, num_rows: int,
                       device: str, where: Optional[str]) -> dict[str, Any]:
    """The body of `read_torch` once the table HDU is open (shared with `TableReaderHandle`)."""
    chosen = [s.name for s in select_columns(src.specs, _columns_arg(columns))]
    tree = None
    if where is not None:
        _check_where(where)
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
        arrays = _decode_numpy(src, columns=chosen, row_range=(first, stop))
    else:
        # The row window first, then the predicate; TNULL and NaN never satisfy it (docs/compatibility.md).
        selected = _selected_rows(src, tree, row_range=(first, stop))
        arrays = _decode_numpy(src, columns=chosen, rows=selected)
    return _tensor_dict(arrays, device)


def read_torch(path: Any, hdu: Any = 1, columns: Any = None, start_row: int = 1,
               num_rows: int = -1, device: Any = "cpu", mmap: Any = "auto",
               cache_capacity: int = 10, handle_cache_capacity: int = 16,
               fast_header: bool = True, return_header: bool = False,
               where: Optional[str] = None) -> Any:
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
    start_row, num_rows = _check_start_rows(start_row, num_rows)
    device = validate_device(device)
    check_mmap(mmap)
    _check_where(where)
    _check_table_hdu(hdu, "read_torch")
    src = _open_source(path, hdu)
    data = _read_torch_source(src, columns=columns, start_row=start_row, num_rows=num_rows,
                              device=device, where=where)
    if return_header:
        return data, src.index.header(src.entry)
    return data


def _read_torch_for_read(path: Any, hdu_index: int, *, device: Any = "cpu",
                         opts: Optional[Mapping[str, Any]] = None,
                         return_header: bool = False) -> Any:
    """`torchfits.read` on a table HDU: `read_torch` with the table options of ``opts``."""
    opts = opts or {}
    return read_torch(path, hdu_index, columns=opts.get("columns"),
                      start_row=opts.get("start_row", 1), num_rows=opts.get("num_rows", -1),
                      device=device, return_header=return_header)


def scan_torch(path: Any, hdu: Any = 1, columns: Any = None, row_slice: Any = None,
               batch_size: int = _DEFAULT_BATCH, mmap: Any = True, device: Any = "cpu",
               non_blocking: bool = True, pin_memory: bool = False) -> Iterator[dict[str, Any]]:
    """Stream a table as dicts of tensors, ``batch_size`` rows at a time.

    ``row_slice`` is 0-based half-open. Values follow the tensor mapping of `read_torch`
    (strings as ``uint8`` matrices, variable-length columns as lists of tensors, complex
    columns supported). Arguments are checked now; a table without rows yields nothing.
    """
    batch_size = _check_batch_size(batch_size)
    device = validate_device(device)
    check_mmap(mmap)
    _check_table_hdu(hdu, "scan_torch")
    src = _open_source(path, hdu)
    projection = [s.name for s in select_columns(src.specs, _columns_arg(columns))]
    start, stop = _window(row_slice, src.nrows)

    def batches() -> Iterator[dict[str, Any]]:
        for a in range(start, stop, batch_size):
            arrays = _decode_numpy(src, columns=projection, row_range=(a, min(a + batch_size, stop)))
            yield _tensor_dict(arrays, device, non_blocking=non_blocking, pin_memory=pin_memory)

    return batches()


def clear_cache(*, disk: bool = False) -> None:
    """Clear in-process caches (`torchfits.cache.clear_cache`); ``disk=True`` also removes the
    on-disk cache tree."""
    from .cache import clear_cache as _clear

    _clear(disk=disk)


# ============================================================================ interop (docs/compatibility.md)


def _select_where(table: Any, columns: Any, where: Optional[str]) -> Any:
    """``columns``/``where`` applied to an in-memory Arrow table (the path case reads them)."""
    if where is not None:
        _check_where(where)
        table = table.filter(_where_on_schema(where, table.schema))
    cols = _columns_arg(columns)
    if cols is not None:
        for c in cols:
            if c not in table.column_names:
                raise KeyError(f"Column '{c}' not found")
        table = table.select(list(dict.fromkeys(cols)))
    return table


def _as_table(data: Any, **kwargs: Any) -> Any:
    """A path (read with ``kwargs``), an Arrow Table/RecordBatch/reader, or batches → Table."""
    if _is_path(data):
        return read(data, **kwargs)
    columns = kwargs.pop("columns", None)
    where = kwargs.pop("where", None)
    if kwargs:
        raise TypeError(f"keyword arguments {sorted(kwargs)} only apply when data is a path")
    if isinstance(data, pa.Table):
        table = data
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, pa.RecordBatchReader):
        table = data.read_all()
    elif hasattr(data, "__arrow_c_stream__"):
        # Anything exporting an Arrow stream: a native Scanner, Polars or pandas frames.
        table = pa.table(data)
    elif isinstance(data, Iterable):
        batches = list(data)
        if not batches:
            raise ValueError("an empty iterable of record batches has no schema")
        table = pa.Table.from_batches(batches)
    else:
        raise TypeError(f"expected a path or Arrow data, not {type(data).__name__}")
    return _select_where(table, columns, where)


def _as_batches(data: Any, **kwargs: Any) -> tuple[Any, Iterator[Any]]:
    """(schema, batch iterator) for streaming writers and ``stream=True`` conversions."""
    if _is_path(data):
        plan = _compat_scan(data, kwargs.pop("hdu", 1), func="table.scan", **kwargs)
        return plan.schema, plan.batches()
    if isinstance(data, pa.RecordBatchReader) and not kwargs:
        return data.schema, iter(data)
    if isinstance(data, Iterable) and not hasattr(data, "__arrow_c_stream__") \
            and not isinstance(data, (pa.Table, pa.RecordBatch)) and not kwargs:
        it = iter(data)
        try:
            first = next(it)
        except StopIteration:
            raise ValueError("an empty iterable of record batches has no schema") from None

        def chain() -> Iterator[Any]:
            yield first
            yield from it

        return first.schema, chain()
    table = _as_table(data, **kwargs)
    return table.schema, iter(table.to_batches())


def to_pandas(data: Any, stream: bool = False, **kw: Any) -> Any:
    """A ``pandas.DataFrame`` (or, with ``stream=True``, an iterator of one per batch).

    ``data`` is a path (``kw`` go to `read`/`scan`), an Arrow Table, RecordBatch, reader, or an
    iterable of batches. Vector and variable-length cells become NumPy arrays; an integer
    column with nulls becomes pandas' nullable integer dtype (``Int64`` with ``<NA>``).
    """
    require_module("pandas", "pandas", "to_pandas conversion")
    from ..tables.arrow_numpy import arrow_to_pandas

    if stream:
        _schema, batches = _as_batches(data, **kw)
        return (arrow_to_pandas(b) for b in batches)
    return arrow_to_pandas(_as_table(data, **kw))


def to_polars(data: Any, stream: bool = False, *, rechunk: bool = False, **kw: Any) -> Any:
    """A ``polars.DataFrame`` (or an iterator of one per batch with ``stream=True``)."""
    pl = require_module("polars", "polars", "to_polars conversion")
    if stream:
        _schema, batches = _as_batches(data, **kw)
        return (pl.from_arrow(b, rechunk=rechunk) for b in batches)
    return pl.from_arrow(_as_table(data, **kw), rechunk=rechunk)


@dataclass
class FITSPolarsFrame:
    """A ``polars.DataFrame`` with the FITS metadata Arrow carried and Polars drops.

    Attributes
    ----------
    frame : polars.DataFrame
        The data; attribute access, ``[]`` and ``len()`` go to it.
    field_meta : dict
        Column → ``{"fits_tform": "J", "fits_tscal": "1.0", ...}`` (projected columns only).
    table_meta : dict
        ``{"fits_hdu": "1"}``.
    """

    frame: Any
    field_meta: dict = field(default_factory=dict)
    table_meta: dict = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the dataclass lacks; guard against recursion while unpickling.
        if name == "frame" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.frame, name)

    def __getitem__(self, key: Any) -> Any:
        return self.frame[key]

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        return (f"FITSPolarsFrame(frame={self.frame!r}, field_meta={self.field_meta!r}, "
                f"table_meta={self.table_meta!r})")


def _decode_meta(meta: Optional[Mapping[bytes, bytes]]) -> dict[str, str]:
    if not meta:
        return {}
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in meta.items()}


def read_polars(path: Any, *, rechunk: bool = False, **kw: Any) -> FITSPolarsFrame:
    """Read a table into a `FITSPolarsFrame` (the frame plus its FITS field/table metadata)."""
    try:
        import polars as pl
    except ImportError as exc:
        raise ImportError("polars is required for read_polars: pip install polars") from exc
    kw["include_fits_metadata"] = True
    table = read(path, **kw)
    field_meta = {f.name: _decode_meta(f.metadata) for f in table.schema}
    table_meta = _decode_meta(table.schema.metadata)
    return FITSPolarsFrame(pl.from_arrow(table, rechunk=rechunk), field_meta, table_meta)


def scan_polars(path: Any, *, batch_size: int = _DEFAULT_BATCH, rechunk: bool = False,
                **kw: Any) -> Iterator[Any]:
    """Stream a table as ``polars.DataFrame`` batches (arguments checked now)."""
    batches = scan(path, batch_size=batch_size, **kw)

    def frames() -> Iterator[Any]:
        try:
            import polars as pl
        except ImportError as exc:
            raise ImportError("polars is required for scan_polars: pip install polars") from exc
        for b in batches:
            yield pl.from_arrow(b, rechunk=rechunk)

    return frames()


def _masked_numpy(arr: Any) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """(values, mask or None) of one Arrow array; fixed-size lists become ``(N, r, ...)``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_fixed_size_list(t):
        shape = []
        leaf = arr
        while pa.types.is_fixed_size_list(leaf.type):
            shape.append(leaf.type.list_size)
            leaf = leaf.flatten()
        values, mask = _masked_numpy(leaf)
        full = (len(arr),) + tuple(shape)
        return values.reshape(full), None if mask is None else mask.reshape(full)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        out = np.empty(len(arr), dtype=object)
        for i, item in enumerate(arr):
            out[i] = None if not item.is_valid else _masked_numpy(item.values)[0]
        return out, (~np.asarray(arr.is_valid())) if arr.null_count else None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        items = arr.to_pylist()
        values = np.array(["" if v is None else v for v in items], dtype=str)
        return values, (np.array([v is None for v in items]) if arr.null_count else None)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        items = arr.to_pylist()
        values = np.array([b"" if v is None else v for v in items], dtype=bytes)
        return values, (np.array([v is None for v in items]) if arr.null_count else None)
    if arr.null_count == 0:
        return arr.to_numpy(zero_copy_only=False), None
    mask = ~np.asarray(arr.is_valid())
    filler: Any = False if pa.types.is_boolean(t) else 0
    return arr.fill_null(filler).to_numpy(zero_copy_only=False), mask


def _arrow_to_astropy(table: Any) -> Any:
    from astropy import units as u
    from astropy.table import Column, MaskedColumn, Table

    out = Table()
    for fld, col in zip(table.schema, table.columns):
        meta = fld.metadata or {}
        values, mask = _masked_numpy(col)
        unit = None
        tunit = meta.get(b"fits_tunit")
        if tunit:
            # Unknown unit strings become UnrecognizedUnit silently, as astropy.io.fits does.
            unit = u.Unit(tunit.decode("ascii", "replace"), parse_strict="silent")
        if mask is not None or b"fits_tnull" in meta:
            column: Any = MaskedColumn(values, name=fld.name, unit=unit,
                                       mask=mask if mask is not None else np.zeros(values.shape, bool))
        else:
            column = Column(values, name=fld.name, unit=unit)
        out.add_column(column)
    if table.schema.metadata:
        out.meta.update(_decode_meta(table.schema.metadata))
    return out


def to_astropy(data: Any, **kw: Any) -> Any:
    """An ``astropy.table.Table``: TNULL and null cells masked (``MaskedColumn``), TUNIT as
    ``.unit``, vector columns ``(N, r)``. ``data`` as in `to_pandas`; ``columns``/``where``
    are honoured for every kind of input."""
    require_module("astropy", "astropy", "to_astropy conversion")
    if not _is_path(data):
        return _arrow_to_astropy(_as_table(data, **kw))
    kw.setdefault("include_fits_metadata", True)
    out = _arrow_to_astropy(_as_table(data, **kw))
    _astropy_read_conventions(out, data, kw.get("hdu", 1))
    return out


_TABLE_STRUCTURAL = re.compile(r"^(XTENSION|BITPIX|NAXIS\d*|PCOUNT|GCOUNT|TFIELDS|THEAP|EXTEND|SIMPLE"
                               r"|(TTYPE|TFORM|TUNIT|TNULL|TSCAL|TZERO|TDIM|TDISP|TBCOL)\d+)$")


def _astropy_read_conventions(out: Any, path: Any, hdu: Any) -> None:
    """What ``astropy.table.Table.read`` gives for a FITS file: NaN floats and empty strings
    masked (its ``mask_invalid``), header keywords in ``meta`` with COMMENT/HISTORY lines as
    ``meta["comments"]`` / ``meta["history"]`` lists — so a table written from astropy comes
    back with its masks and meta."""
    from astropy.table import MaskedColumn

    from ..fits.metadata import read_header

    for name in out.colnames:
        col = out[name]
        kind = col.dtype.kind
        if kind not in "fU":
            continue  # vector cells too: Table.read masks their NaN and empty-string elements
        invalid = np.isnan(np.asarray(col, dtype=float)) if kind == "f" else (np.asarray(col) == "")
        if invalid.any():
            old = np.asarray(col.mask) if hasattr(col, "mask") and col.mask is not None else False
            out[name] = MaskedColumn(np.asarray(col), name=name, unit=col.unit, mask=invalid | old)
    header = read_header(fspath(path), hdu)
    for card in header.cards:
        key = card.key
        if key == "COMMENT":
            out.meta.setdefault("comments", []).append(card.value)
        elif key == "HISTORY":
            out.meta.setdefault("history", []).append(card.value)
        elif key and not _TABLE_STRUCTURAL.match(key) and key not in ("CHECKSUM", "DATASUM"):
            out.meta.setdefault(key, card.value)


def read_astropy(path: Any, hdu: Any = 1, **kw: Any) -> Any:
    """Read a table HDU into an ``astropy.table.Table`` (see `to_astropy`)."""
    return to_astropy(path, hdu=hdu, **kw)


def _duckdb_connection(duckdb: Any, connection: Any) -> Any:
    if connection is not None:
        return connection
    default = duckdb.default_connection
    return default() if callable(default) else default


def to_duckdb(data: Any, relation_name: str = "fits_table", connection: Any = None,
              **kw: Any) -> Any:
    """Register ``data`` (a path or Arrow data) on a DuckDB connection as ``relation_name``
    and return its ``DuckDBPyRelation`` (the default connection when None)."""
    try:
        import duckdb
    except ImportError as exc:
        raise ImportError("duckdb is required for to_duckdb conversion") from exc
    con = _duckdb_connection(duckdb, connection)
    table = _as_table(data, **kw)
    con.register(relation_name, table)
    return con.table(relation_name)


def duckdb_query(data: Any, query: str, relation_name: str = "fits_table",
                 connection: Any = None, return_arrow: bool = True, **kw: Any) -> Any:
    """Run ``query`` (SQL naming ``relation_name``) over ``data`` in DuckDB.

    Returns the Arrow result (a ``RecordBatchReader`` or ``Table``, as the installed DuckDB
    gives it; call ``read_all()`` when present) or, with ``return_arrow=False``, the relation.
    """
    try:
        import duckdb
    except ImportError as exc:
        raise ImportError("duckdb is required for duckdb_query") from exc
    con = _duckdb_connection(duckdb, connection)
    to_duckdb(data, relation_name=relation_name, connection=con, **kw)
    relation = con.sql(query)
    if not return_arrow or relation is None:
        return relation
    return relation.arrow()


def write_parquet(dest: Any, data: Any, *, stream: bool = False, compression: Optional[str] = "zstd",
                  row_group_size: Optional[int] = None, **kw: Any) -> None:
    """Write a path's table (``kw`` go to `read`/`scan`) or Arrow data as Parquet.

    ``stream=True`` writes batch by batch (memory bounded by the batch size).
    """
    import pyarrow.parquet as pq

    if stream:
        schema_, batches = _as_batches(data, **kw)
        with pq.ParquetWriter(dest, schema_, compression=compression) as writer:
            for batch in batches:
                writer.write_batch(batch, row_group_size=row_group_size)
        return
    pq.write_table(_as_table(data, **kw), dest, compression=compression,
                   row_group_size=row_group_size)


def write_csv(dest: Any, data: Any, *, delimiter: str = ",", stream: bool = False,
              **kw: Any) -> None:
    """Write as CSV: quoted header names and strings, nulls as empty fields, ``true``/``false``."""
    import pyarrow.csv as pacsv

    options = pacsv.WriteOptions(delimiter=delimiter)
    if stream:
        schema_, batches = _as_batches(data, **kw)
        with pacsv.CSVWriter(dest, schema_, write_options=options) as writer:
            for batch in batches:
                writer.write_batch(batch)
        return
    pacsv.write_csv(_as_table(data, **kw), dest, write_options=options)


def write_ipc(dest: Any, data: Any, *, stream: bool = False, compression: Optional[str] = "zstd",
              **kw: Any) -> None:
    """Write as an Arrow IPC file (Feather v2); ``stream=True`` writes batch by batch."""
    options = pa.ipc.IpcWriteOptions(compression=compression)
    if stream:
        schema_, batches = _as_batches(data, **kw)
        with pa.ipc.new_file(dest, schema_, options=options) as writer:
            for batch in batches:
                writer.write_batch(batch)
        return
    table = _as_table(data, **kw)
    with pa.ipc.new_file(dest, table.schema, options=options) as writer:
        writer.write_table(table)


# ============================================================================ writes and edits


def _edit() -> Any:
    from ..writing import table_edit as _table_edit

    return _table_edit


def write(path: Any, data: Any, *, schema: Optional[Mapping[str, Any]] = None, header: Any = None,
          overwrite: bool = False, extname: Optional[str] = None, table_type: str = "binary",
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


def insert_column(path: Any, name: str, values: Any, *, hdu: Any = 1, index: Optional[int] = None,
                  format: Optional[str] = None, unit: Optional[str] = None,
                  dim: Optional[str] = None, tnull: Optional[int] = None,
                  tscal: Optional[float] = None, tzero: Optional[float] = None) -> None:
    """Insert a column at position ``index`` (None appends); values are written as stored codes.

    The TFORM is inferred like `write` unless ``format`` is given; ``unit``, ``dim``, ``tnull``,
    ``tscal`` and ``tzero`` write TUNIT, TDIM, TNULL, TSCAL and TZERO.
    """
    return _edit().insert_column(path, name, values, hdu=hdu, index=index, format=format,
                                 unit=unit, dim=dim, tnull=tnull, tscal=tscal, tzero=tzero)


def replace_column(path: Any, name: str, values: Any, *, hdu: Any = 1,
                   format: Optional[str] = None, unit: Optional[str] = None,
                   dim: Optional[str] = None, tnull: Optional[int] = None,
                   tscal: Optional[float] = None, tzero: Optional[float] = None) -> None:
    """Replace a column's data, keeping its TUNIT/TNULL/TFORM code unless overridden."""
    return _edit().replace_column(path, name, values, hdu=hdu, format=format, unit=unit, dim=dim,
                                  tnull=tnull, tscal=tscal, tzero=tzero)


def rename_columns(path: Any, mapping: Mapping[str, str], hdu: Any = 1) -> None:
    """Rename columns ``{old: new}`` (TTYPEn rewritten in place)."""
    return _edit().rename_columns(path, mapping, hdu=hdu)


def drop_columns(path: Any, columns: Any, hdu: Any = 1) -> None:
    """Remove columns (dropping all leaves a 0-column table)."""
    return _edit().drop_columns(path, columns, hdu=hdu)
