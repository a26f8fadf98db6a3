"""Conversions of the 1.x API: column dicts and FITS tables → Arrow, pandas, Polars, astropy,
DuckDB, Parquet, CSV and Arrow IPC (docs/compatibility.md).

Two families share this module. The root helpers (`to_arrow`, `to_pandas`, `to_polars`,
`to_astropy`: ``torchfits.to_pandas`` ...) take a column dict such as ``torchfits.read`` /
``read_torch`` return; numeric columns reach Arrow without a copy (a later change to the source
tensor is visible). The ``torchfits.table`` conversions take a path (read with
`torchfits.compat.table.read` / ``scan``) or Arrow data; ``torchfits.table`` exports
`table_to_pandas`, `table_to_polars` and `table_to_astropy` under their 1.x names
``to_pandas``, ``to_polars`` and ``to_astropy``. pyarrow, pandas, polars, astropy and duckdb
are imported only by the function that needs them.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..fits.paths import fspath
from .common import require_module
from .table import DEFAULT_BATCH, check_where, columns_arg, compat_scan, is_path, read, scan, where_on_schema
from .tensor_columns import as_numpy, decode_byte_rows, is_vla, vla_parts

__all__ = ["to_arrow", "to_pandas", "to_polars", "to_astropy"]

#: What ``torchfits.table`` takes from here, by 1.x name.
TABLE_EXPORTS = ["FITSPolarsFrame", "duckdb_query", "read_astropy", "read_polars", "scan_polars",
                 "to_astropy", "to_duckdb", "to_pandas", "to_polars", "write_csv", "write_ipc",
                 "write_parquet"]

_ARROW_VLA = ("list", "drop")
_PANDAS_VLA = ("object", "drop")


def _check_policy(vla_policy: Any, allowed: tuple) -> None:
    if vla_policy not in allowed:
        raise ValueError(f"vla_policy must be one of {', '.join(map(repr, allowed))}, "
                         f"not {vla_policy!r}")


def _check_mapping(data: Any) -> None:
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a dict of columns, not {type(data).__name__}")


def _fixed_size_list(pa: Any, arr: np.ndarray) -> Any:
    """``(N, a, b, ...)`` → nested ``fixed_size_list`` (the leaf buffer is shared)."""
    flat = np.ascontiguousarray(arr).reshape(-1)
    out = pa.array(flat)
    if 0 in arr.shape[1:]:
        # Cells without elements: every row an empty list, as the table decoder gives them.
        return pa.ListArray.from_arrays(pa.array(np.zeros(len(arr) + 1, np.int32)), out)
    for dim in reversed(arr.shape[1:]):
        out = pa.FixedSizeListArray.from_arrays(out, int(dim))
    return out


def _arrow_column(pa: Any, name: str, value: Any, decode_bytes: bool, encoding: str,
                  strip: bool) -> Any:
    if is_vla(value):
        flat, offsets, valid = vla_parts(value)
        if flat.dtype.kind == "c":
            raise ValueError(f"column {name!r}: complex values have no Arrow type; "
                             "split them into real and imaginary columns")
        # 1.2.3 widened float32 variable-length columns to double; keep that for compatibility.
        if flat.dtype == np.float32:
            flat = flat.astype(np.float64)
        mask = None if valid.all() else pa.array(~valid)
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat), mask=mask) \
            if offsets[-1] > np.iinfo(np.int32).max else \
            pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat), mask=mask)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes)) or v is None
                                                          for v in value):
        return pa.array([v.decode(encoding, "replace") if isinstance(v, bytes) else v
                         for v in value], type=pa.string())
    arr = as_numpy(value)
    if arr.dtype.kind == "c":
        raise ValueError(f"column {name!r}: complex values have no Arrow type; "
                         "split them into real and imaginary columns")
    if arr.dtype.kind in "US":
        return pa.array(arr.astype(str).reshape(-1).tolist() if arr.ndim != 1 else arr.astype(str))
    if arr.dtype.kind == "O":
        return pa.array(arr.tolist())
    if arr.ndim == 0:
        raise ValueError(f"column {name!r}: a scalar is not a column")
    if arr.ndim == 1:
        # Contiguous numeric buffers are wrapped, not copied.
        return pa.array(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))
    if arr.ndim == 2 and arr.dtype == np.uint8 and decode_bytes:
        return pa.array(decode_byte_rows(arr, encoding, strip), type=pa.string())
    return _fixed_size_list(pa, arr)


def to_arrow(data: Mapping[str, Any], decode_bytes: bool = False, encoding: str = "ascii",
             strip: bool = True, vla_policy: str = "list") -> Any:
    """A column dict → ``pyarrow.Table``.

    Parameters
    ----------
    data : dict
        Column name → tensor, NumPy array, list, or list of per-row tensors (variable length).
    decode_bytes : bool
        Turn ``uint8 (N, w)`` byte matrices into strings (else ``fixed_size_list<uint8>[w]``).
    encoding : str
        Text encoding for ``decode_bytes``; undecodable bytes become U+FFFD.
    strip : bool
        With ``decode_bytes``, also drop trailing blanks (trailing NULs always go).
    vla_policy : {"list", "drop"}
        Variable-length columns as ``list<...>`` or left out.

    Returns
    -------
    pyarrow.Table
        Numeric columns share memory with the source.

    Raises
    ------
    ValueError
        Complex columns; an unknown ``vla_policy``.
    """
    _check_policy(vla_policy, _ARROW_VLA)
    _check_mapping(data)
    pa = require_module("pyarrow", "pyarrow", "to_arrow conversion")
    names, arrays = [], []
    for name, value in data.items():
        if vla_policy == "drop" and is_vla(value):
            continue
        names.append(str(name))
        arrays.append(_arrow_column(pa, str(name), value, decode_bytes, encoding, strip))
    return pa.Table.from_arrays(arrays, names=names)


def _pandas_column(name: str, value: Any, decode_bytes: bool, encoding: str, strip: bool) -> Any:
    if is_vla(value):
        if isinstance(value, tuple):
            flat, offsets, _valid = vla_parts(value)
            rows: list[Any] = [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        else:
            rows = [None if v is None else as_numpy(v) for v in value]
        out = np.empty(len(rows), dtype=object)
        out[:] = rows
        return out
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes)) or v is None
                                                          for v in value):
        return [v.decode(encoding, "replace") if isinstance(v, bytes) else v for v in value]
    arr = as_numpy(value)
    if arr.ndim == 2 and arr.dtype == np.uint8 and decode_bytes:
        return decode_byte_rows(arr, encoding, strip)
    if arr.ndim >= 2:
        out = np.empty(arr.shape[0], dtype=object)
        out[:] = list(arr)
        return out
    return arr


def to_pandas(data: Mapping[str, Any], decode_bytes: bool = False, encoding: str = "ascii",
              strip: bool = True, vla_policy: str = "object") -> Any:
    """A column dict → ``pandas.DataFrame``.

    Vector, byte-matrix (unless ``decode_bytes``) and variable-length cells become NumPy arrays
    in object columns; ``vla_policy="drop"`` leaves variable-length columns out.
    """
    _check_policy(vla_policy, _PANDAS_VLA)
    _check_mapping(data)
    pd = require_module("pandas", "pandas", "to_pandas conversion")
    columns = {}
    for name, value in data.items():
        if vla_policy == "drop" and is_vla(value):
            continue
        columns[str(name)] = _pandas_column(str(name), value, decode_bytes, encoding, strip)
    return pd.DataFrame(columns)


def to_polars(data: Mapping[str, Any], decode_bytes: bool = False, encoding: str = "ascii",
              strip: bool = True, vla_policy: str = "list", *, rechunk: bool = False) -> Any:
    """A column dict → ``polars.DataFrame`` (vectors as ``Array``, variable-length as ``List``)."""
    _check_policy(vla_policy, _ARROW_VLA)
    pl = require_module("polars", "polars", "to_polars conversion")
    table = to_arrow(data, decode_bytes=decode_bytes, encoding=encoding, strip=strip,
                     vla_policy=vla_policy)
    return pl.from_arrow(table, rechunk=rechunk)


def to_astropy(data: Any, decode_bytes: bool = False, encoding: str = "ascii", strip: bool = True,
               vla_policy: str = "list") -> Any:
    """A column dict (or a path) → ``astropy.table.Table``.

    A path is read with `torchfits.table.to_astropy` (TNULL masks, units). For a dict, vectors
    keep their ``(N, r)`` shape, byte matrices become strings with ``decode_bytes``, and
    variable-length columns become object columns (``vla_policy="drop"`` leaves them out).
    """
    _check_policy(vla_policy, _ARROW_VLA)
    require_module("astropy", "astropy", "to_astropy conversion")
    if isinstance(data, (str, os.PathLike)):
        return table_to_astropy(data)
    _check_mapping(data)
    from astropy.table import Column, Table

    out = Table()
    for name, value in data.items():
        if is_vla(value):
            if vla_policy == "drop":
                continue
            cells = _pandas_column(str(name), value, False, encoding, strip)
            out.add_column(Column(cells, name=str(name), dtype=object))
            continue
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes)) or v is None
                                                              for v in value):
            values: Any = np.array(["" if v is None else (v.decode(encoding, "replace")
                                                          if isinstance(v, bytes) else v)
                                    for v in value], dtype=str)
        else:
            arr = as_numpy(value)
            values = np.array(decode_byte_rows(arr, encoding, strip), dtype=str) \
                if arr.ndim == 2 and arr.dtype == np.uint8 and decode_bytes else arr
        out.add_column(Column(values, name=str(name)))
    return out


# ============================================================================ torchfits.table conversions


def _select_where(table: Any, columns: Any, where: str | None) -> Any:
    """``columns``/``where`` applied to an in-memory Arrow table (the path case reads them)."""
    if where is not None:
        check_where(where)
        table = table.filter(where_on_schema(where, table.schema))
    cols = columns_arg(columns)
    if cols is not None:
        for c in cols:
            if c not in table.column_names:
                raise KeyError(f"Column '{c}' not found")
        table = table.select(list(dict.fromkeys(cols)))
    return table


def _as_table(data: Any, **kwargs: Any) -> Any:
    """A path (read with ``kwargs``), an Arrow Table/RecordBatch/reader, or batches → Table."""
    import pyarrow as pa

    if is_path(data):
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
    import pyarrow as pa

    if is_path(data):
        plan = compat_scan(data, kwargs.pop("hdu", 1), func="table.scan", **kwargs)
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


def table_to_pandas(data: Any, stream: bool = False, **kw: Any) -> Any:
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


def table_to_polars(data: Any, stream: bool = False, *, rechunk: bool = False, **kw: Any) -> Any:
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


def _decode_meta(meta: Mapping[bytes, bytes] | None) -> dict[str, str]:
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


def scan_polars(path: Any, *, batch_size: int = DEFAULT_BATCH, rechunk: bool = False,
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


def _masked_numpy(arr: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, mask or None) of one Arrow array; fixed-size lists become ``(N, r, ...)``."""
    import pyarrow as pa

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


def table_to_astropy(data: Any, **kw: Any) -> Any:
    """An ``astropy.table.Table``: TNULL and null cells masked (``MaskedColumn``), TUNIT as
    ``.unit``, vector columns ``(N, r)``. ``data`` as in `table_to_pandas`; ``columns``/``where``
    are honoured for every kind of input."""
    require_module("astropy", "astropy", "to_astropy conversion")
    if not is_path(data):
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
    """Read a table HDU into an ``astropy.table.Table`` (see `table_to_astropy`)."""
    return table_to_astropy(path, hdu=hdu, **kw)


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


def write_parquet(dest: Any, data: Any, *, stream: bool = False, compression: str | None = "zstd",
                  row_group_size: int | None = None, **kw: Any) -> None:
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


def write_ipc(dest: Any, data: Any, *, stream: bool = False, compression: str | None = "zstd",
              **kw: Any) -> None:
    """Write as an Arrow IPC file (Feather v2); ``stream=True`` writes batch by batch."""
    import pyarrow as pa

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
