"""Table HDU objects of the torchfits 1.x object API (docs/compatibility.md).

`TableHDURef` is a file-backed table (what ``open()`` returns): it holds a path, an HDU, a
projection and a row window, and reads through `torchfits.table` on demand (reopening by path,
so it outlives its `HDUList`). `TableHDU` holds columns in memory.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .._torch_adapter import is_tensor, validate_device
from ..fits.header import Header
from ..fits.notebook_html import html_summary
from ..fits.paths import fspath
from ..fits.rows import row_window
from .common import check_mmap, hdu_name
from .tensor_columns import as_numpy, column_length, decode_byte_rows, is_byte_matrix, is_vla, vla_lengths

__all__ = ["TableHDURef", "TableHDU", "TableDataAccessor"]


def _table() -> Any:
    # torchfits.table imports pyarrow; open() on a file with tables must not.
    from . import table

    return table


def _column_list(cols: Any) -> list:
    if isinstance(cols, str):
        return [cols]
    return list(cols)


class TableDataAccessor:
    """Dict-like column access (``[]``, ``keys()``, ``columns``, ``len()``) for a table HDU.

    For an in-memory `TableHDU` a ``(N, 1)`` column reads as ``(N,)``; a `TableHDURef` returns
    the shapes of `torchfits.table.read_torch` unchanged (character columns are never squeezed).
    """

    def __init__(self, table: Any, *, squeeze: bool = True) -> None:
        self._table = table
        self._squeeze = squeeze

    def __getitem__(self, key: str) -> Any:
        value = self._table[key]
        if self._squeeze and (is_tensor(value) or isinstance(value, np.ndarray)) \
                and len(value.shape) == 2 and value.shape[1] == 1:
            return value.reshape(value.shape[0])
        return value

    def keys(self) -> list[str]:
        """Column names."""
        return list(self._table.columns)

    @property
    def columns(self) -> list[str]:
        """Column names."""
        return self.keys()

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __repr__(self) -> str:
        return f"TableDataAccessor(columns={self.keys()})"


# ============================================================================ file-backed


class TableHDURef:
    """A table HDU in a file, read on demand (what ``torchfits.open`` returns for tables).

    Parameters
    ----------
    header : Header, optional
        The HDU's header (raw card strings when built by ``open``); read from the file if None.
    source_path : str or os.PathLike
        The file.
    source_hdu : int or str
        The HDU index or EXTNAME.
    columns : sequence of str, optional
        A projection (None: every column).
    row_slice : slice or (start, stop), optional
        A 0-based half-open row window (None: every row).

    Notes
    -----
    Tensor reads follow docs/compatibility.md (TNULL never applied, strings as ``uint8 (N, w)``,
    variable-length columns as lists of tensors). There is no ``to_tensor``.
    """

    def __init__(self, *, header: Any = None, source_path: Any = None, source_hdu: Any = None,
                 columns: Any = None, row_slice: Any = None) -> None:
        self._header = header if header is None or isinstance(header, Header) else Header(header)
        # a path, or (for URLs with options, bytes and streams) the source object or its index
        self._path = None if source_path is None else (
            fspath(source_path) if isinstance(source_path, (str, os.PathLike)) else source_path)
        self._hdu = 1 if source_hdu is None else source_hdu
        self._columns = None if columns is None else list(dict.fromkeys(_column_list(columns)))
        self._row_slice = row_slice
        self._cache: tuple[Any, Any] | None = None  # (HduIndex, TableSource) it was built from

    # -- the source ------------------------------------------------------------------------------
    def _source(self) -> Any:
        """The open table HDU, rebuilt when the file changed (the index cache checks by stat)."""
        if self._path is None:
            raise ValueError("No file handle available: this TableHDURef has no source_path")
        from ..fits.hdu_index import get_index

        index = get_index(self._path)
        if self._cache is None or self._cache[0] is not index:
            self._cache = (index, _table().open_source(self._path, self._hdu))
        return self._cache[1]

    def _window(self) -> tuple[int, int]:
        return row_window(self._row_slice, self._source().nrows)

    def _projection(self) -> list[str]:
        from ..tables.selection import select_columns

        return [s.name for s in select_columns(self._source().specs, self._columns)]

    def _specs(self) -> list[Any]:
        from ..tables.selection import select_columns

        return select_columns(self._source().specs, self._columns)

    # -- description -----------------------------------------------------------------------------
    @property
    def header(self) -> Header:
        """The HDU header (raw card strings, as ``open`` gives them)."""
        if self._header is None:
            src = self._source()
            self._header = src.index.header(src.entry, raw_values=True)
        return self._header

    @property
    def source_path(self) -> str | None:
        return self._path

    @property
    def source_hdu(self) -> Any:
        return self._hdu

    @property
    def name(self) -> str:
        return hdu_name(self.header, self._hdu)

    @property
    def columns(self) -> list[str]:
        """Column names, projection applied."""
        return self._projection()

    @property
    def num_rows(self) -> int:
        """Rows in the window."""
        start, stop = self._window()
        return stop - start

    def __len__(self) -> int:
        return self.num_rows

    @property
    def string_columns(self) -> list[str]:
        """Names of the character (``A``) columns."""
        return [s.name for s in self._specs() if s.code == "A"]

    @property
    def vla_lengths(self) -> dict[str, list[int]]:
        """Variable-length column → per-row element counts."""
        return {s.name: self.get_vla_lengths(s.name) for s in self._specs() if s.is_vla}

    @property
    def schema(self) -> dict[str, Any]:
        """``{"columns": [{"name", "tform", "repeat", "code", "string", "vla", "tdim"}],
        "string_columns": [...], "vla_columns": [...]}`` from the header."""
        cols = []
        for s in self._specs():
            cols.append({"name": s.name, "tform": s.tform.strip(), "repeat": s.repeat,
                         "code": s.code, "string": s.code == "A", "vla": s.is_vla,
                         "tdim": None if s.tdim is None else tuple(s.tdim)})
        return {"columns": cols,
                "string_columns": [c["name"] for c in cols if c["string"]],
                "vla_columns": [c["name"] for c in cols if c["vla"]]}

    # -- reads -----------------------------------------------------------------------------------
    def read(self, *, columns: Any = None, row_slice: Any = None, mmap: Any = True,
             device: Any = "cpu") -> dict[str, Any]:
        """Columns as tensors (`read_torch` shapes); ``row_slice`` is 0-based within the window."""
        t = _table()
        check_mmap(mmap)
        device = validate_device(device)
        src = self._source()
        start, stop = self._window()
        a, b = row_window(row_slice, stop - start)
        cols = self._projection() if columns is None else t.columns_arg(columns)
        arrays = t.decode_numpy(src, columns=cols, row_range=(start + a, start + b))
        return t.tensor_dict(arrays, device)

    def __getitem__(self, key: str) -> Any:
        if key not in self.columns:
            from ..errors import ColumnNotFoundError

            raise ColumnNotFoundError(f"Column '{key}' not found")
        return self.read(columns=[key])[key]

    @property
    def data(self) -> TableDataAccessor:
        """``ref.data[col]`` reads one column; ``ref.data.keys()`` lists them."""
        return TableDataAccessor(self, squeeze=False)

    def _narrowed(self, *, columns: Any = None, row_slice: Any = None) -> TableHDURef:
        return TableHDURef(header=self._header, source_path=self._path, source_hdu=self._hdu,
                           columns=self._columns if columns is None else columns,
                           row_slice=self._row_slice if row_slice is None else row_slice)

    def select(self, cols: Any) -> TableHDURef:
        """A new ref projected onto ``cols`` (a name or a list; unknown → KeyError)."""
        from ..tables.selection import select_columns

        names = [s.name for s in select_columns(self._source().specs, _column_list(cols))]
        return self._narrowed(columns=names)

    def head(self, n: int = 5) -> TableHDURef:
        """A new ref on the first ``n`` rows of the window."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"head() takes a non-negative row count, not {n!r}")
        start, stop = self._window()
        return self._narrowed(row_slice=(start, min(stop, start + int(n))))

    def materialize(self, *, mmap: Any = True, device: Any = "cpu") -> TableHDU:
        """Read the window into an in-memory `TableHDU`."""
        return TableHDU(self.read(mmap=mmap, device=device), header=self.header,
                        source_path=self._path, source_hdu=self._hdu)

    def filter(self, condition: str) -> TableHDU:
        """The rows of the window matching ``condition`` (the where dialect) as a `TableHDU`."""
        t = _table()
        t.check_where(condition)
        tree = t.parse_where(condition)
        src = self._source()
        rows = t.selected_rows(src, tree, row_range=self._window())
        arrays = t.decode_numpy(src, columns=self._projection(), rows=rows)
        return TableHDU(t.tensor_dict(arrays, "cpu"), header=self.header,
                        source_path=self._path, source_hdu=self._hdu)

    def iter_rows(self, batch_size: int = 65_536, *, mmap: Any = True) -> Iterator[dict[str, Any]]:
        """Batches (not single rows, despite the name) of ``batch_size`` rows as tensor dicts."""
        return _table().scan_torch(self._path, self._hdu, columns=self._projection(),
                                   row_slice=self._window(), batch_size=batch_size, mmap=mmap)

    def _column_spec(self, name: str) -> Any:
        for s in self._source().specs:
            if s.name == name:
                return s
        from ..errors import ColumnNotFoundError

        raise ColumnNotFoundError(f"Column '{name}' not found")

    def get_string_column(self, name: str, encoding: str = "ascii", strip: bool = True) -> list[str]:
        """A character column as ``list[str]``.

        ``strip=True`` drops trailing NULs and spaces; ``strip=False`` keeps both (Arrow reads
        always drop NULs).
        """
        if self._column_spec(name).code != "A":
            raise KeyError(f"Column '{name}' is not a string column")
        return decode_byte_rows(self.read(columns=[name])[name], encoding, strip, keep_padding=True)

    def _vla(self, name: str) -> list[np.ndarray]:
        if not self._column_spec(name).is_vla:
            raise KeyError(f"Column '{name}' is not a variable-length column")
        t = _table()
        start, stop = self._window()
        return t.decode_numpy(self._source(), columns=[name], row_range=(start, stop))[name]

    def get_vla_column(self, name: str) -> list[Any]:
        """A variable-length column as one 1-D tensor per row."""
        return _table().tensor_dict({name: self._vla(name)}, "cpu")[name]

    def get_vla_lengths(self, name: str) -> list[int]:
        """Element counts of a variable-length column, per row."""
        return [len(v) for v in self._vla(name)]

    # -- Arrow -----------------------------------------------------------------------------------
    def _arrow_kwargs(self, method: str, kw: dict) -> dict:
        for owned in ("path", "hdu", "columns"):
            if owned in kw:
                raise TypeError(f"TableHDURef.{method}() got a duplicate argument {owned!r}: "
                                "it is set by the ref (use select() to change the projection)")
        if self._row_slice is not None:
            for owned in ("row_slice", "rows"):
                if owned in kw:
                    raise TypeError(f"TableHDURef.{method}() got a duplicate argument {owned!r}: "
                                    "this ref already has a row window")
            kw = dict(kw, row_slice=self._window())
        return dict(kw, columns=self._projection())

    def to_arrow(self, **kw: Any) -> Any:
        """`torchfits.table.read` on this ref's file, HDU, projection and window."""
        return _table().read(self._path, self._hdu, **self._arrow_kwargs("to_arrow", kw))

    def scan_arrow(self, **kw: Any) -> Iterator[Any]:
        """`torchfits.table.scan` on this ref's file, HDU, projection and window."""
        return _table().scan(self._path, self._hdu, **self._arrow_kwargs("scan_arrow", kw))

    def reader_arrow(self, **kw: Any) -> Any:
        """`torchfits.table.reader` on this ref's file, HDU, projection and window."""
        return _table().reader(self._path, self._hdu, **self._arrow_kwargs("reader_arrow", kw))

    # -- file mutations --------------------------------------------------------------------------
    def _refreshed(self, columns: Any = None) -> TableHDURef:
        """A new ref on the rewritten file (fresh header and layout, same selection)."""
        from ..fits.hdu_index import get_index

        index = get_index(self._path)
        entry = index.resolve(self._hdu)
        return TableHDURef(header=index.header(entry, raw_values=True), source_path=self._path,
                           source_hdu=self._hdu,
                           columns=self._columns if columns is None else columns,
                           row_slice=self._row_slice)

    def append_rows_file(self, rows: Mapping[str, Any]) -> TableHDURef:
        """`torchfits.table.append_rows` on this HDU; returns a refreshed ref."""
        _table().append_rows(self._path, rows, hdu=self._hdu)
        return self._refreshed()

    def insert_rows_file(self, rows: Mapping[str, Any], *, row: int) -> TableHDURef:
        """`torchfits.table.insert_rows` (before 0-based ``row``); returns a refreshed ref."""
        _table().insert_rows(self._path, rows, row=row, hdu=self._hdu)
        return self._refreshed()

    def update_rows_file(self, rows: Mapping[str, Any], row_slice: Any, *,
                         mmap: Any = "auto") -> TableHDURef:
        """`torchfits.table.update_rows` (0-based file rows); returns a refreshed ref."""
        _table().update_rows(self._path, rows, row_slice, hdu=self._hdu, mmap=mmap)
        return self._refreshed()

    def delete_rows_file(self, row_slice: Any) -> TableHDURef:
        """`torchfits.table.delete_rows` (0-based file rows); returns a refreshed ref."""
        _table().delete_rows(self._path, row_slice, hdu=self._hdu)
        return self._refreshed()

    def rename_columns_file(self, mapping: Mapping[str, str]) -> TableHDURef:
        """`torchfits.table.rename_columns`; the projection follows the new names."""
        _table().rename_columns(self._path, mapping, hdu=self._hdu)
        cols = None if self._columns is None else [mapping.get(c, c) for c in self._columns]
        return self._refreshed(cols)

    def drop_columns_file(self, columns: Any) -> TableHDURef:
        """`torchfits.table.drop_columns`; dropped columns leave the projection."""
        dropped = _column_list(columns)
        _table().drop_columns(self._path, columns, hdu=self._hdu)
        if self._columns is None:
            return self._refreshed()
        kept = [c for c in self._columns if c not in dropped]
        return self._refreshed(kept) if kept else self._refreshed([])

    def insert_column_file(self, name: str, values: Any, *, index: int | None = None,
                           format: str | None = None, unit: str | None = None,
                           dim: str | None = None, tnull: int | None = None,
                           tscal: float | None = None, tzero: float | None = None) -> TableHDURef:
        """`torchfits.table.insert_column`; a projected ref gains the new column."""
        _table().insert_column(self._path, name, values, hdu=self._hdu, index=index, format=format,
                               unit=unit, dim=dim, tnull=tnull, tscal=tscal, tzero=tzero)
        return self._refreshed(None if self._columns is None else self._columns + [name])

    def replace_column_file(self, name: str, values: Any, *, format: str | None = None,
                            unit: str | None = None, dim: str | None = None,
                            tnull: int | None = None, tscal: float | None = None,
                            tzero: float | None = None) -> TableHDURef:
        """`torchfits.table.replace_column`; returns a refreshed ref."""
        _table().replace_column(self._path, name, values, hdu=self._hdu, format=format, unit=unit,
                                dim=dim, tnull=tnull, tscal=tscal, tzero=tzero)
        return self._refreshed()

    def __repr__(self) -> str:
        try:
            return f"TableHDURef(name={self.name!r}, rows={self.num_rows}, cols={len(self.columns)})"
        except Exception as exc:  # a repr must not raise, even for a vanished file
            return f"TableHDURef(path={self._path!r}, hdu={self._hdu!r}, unavailable: {exc})"

    def _header_rows(self) -> int:
        """Rows in the window, from the header's NAXIS2 alone (no data read, no table opened)."""
        nrows = int(str(self.header.get("NAXIS2", 0)).strip() or 0)
        start, stop = row_window(self._row_slice, nrows)
        return stop - start

    def _repr_html_(self) -> str:
        """Class, escaped name, rows and columns as an HTML table (Jupyter), from the header only:
        showing a ref never opens the table's data."""
        try:
            ncols = (len(self._columns) if self._columns is not None
                     else int(str(self.header.get("TFIELDS", 0)).strip() or 0))
            fields: list[tuple[str, Any]] = [("name", self.name), ("type", "table"),
                                             ("rows", self._header_rows()), ("cols", ncols)]
        except Exception as exc:  # a display must not raise, even for a vanished file
            fields = [("path", self._path), ("hdu", self._hdu), ("unavailable", exc)]
        return html_summary("TableHDURef", fields)


# ============================================================================ in memory


class TableHDU:
    """A table held in memory: named columns of equal length (tensors, arrays or lists).

    Parameters
    ----------
    tensor_dict : dict
        Column name → values (kept as given).
    col_stats : dict, optional
        Free-form per-column statistics, kept as given.
    header : Header or dict, optional
        Header cards.
    source_path, source_hdu : optional
        Where the data came from, if anywhere.

    Raises
    ------
    TypeError
        ``tensor_dict`` is not a dict.
    ValueError
        Columns of different lengths (the message lists them, e.g. ``"ra=2, dec=1"``).
    """

    def __init__(self, tensor_dict: Any, col_stats: dict | None = None, header: Any = None,
                 source_path: Any = None, source_hdu: Any = None) -> None:
        if not isinstance(tensor_dict, dict):
            raise TypeError("tensor_dict must be a dictionary")
        lengths = {str(k): column_length(v) for k, v in tensor_dict.items()}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
            raise ValueError(f"All columns must have the same number of rows: {detail}")
        self._data: dict[str, Any] = dict(tensor_dict)
        self.col_stats: dict = dict(col_stats) if col_stats else {}
        self._header = header if isinstance(header, Header) else Header(header)
        self.source_path = None if source_path is None else fspath(source_path)
        self.source_hdu = source_hdu

    def _derive(self, data: dict) -> TableHDU:
        return TableHDU(data, col_stats=self.col_stats, header=self._header,
                        source_path=self.source_path, source_hdu=self.source_hdu)

    # -- description -----------------------------------------------------------------------------
    @property
    def header(self) -> Header:
        return self._header

    @property
    def name(self) -> str:
        return hdu_name(self._header, None, default="TABLE")

    @property
    def columns(self) -> list[str]:
        return list(self._data)

    col_names = columns

    @property
    def num_rows(self) -> int:
        return column_length(next(iter(self._data.values()))) if self._data else 0

    def __len__(self) -> int:
        return self.num_rows

    @property
    def data(self) -> TableDataAccessor:
        """Column access that reads ``(N, 1)`` columns as ``(N,)``."""
        return TableDataAccessor(self, squeeze=True)

    def __getitem__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"Column '{key}' not found") from None

    def __contains__(self, key: object) -> bool:
        return key in self._data

    @property
    def string_columns(self) -> list[str]:
        """Columns held as ``uint8 (N, w)`` byte matrices (character columns)."""
        return [k for k, v in self._data.items() if is_byte_matrix(v)]

    @property
    def vla_lengths(self) -> dict[str, list[int]]:
        """Variable-length column → per-row element counts."""
        return {k: vla_lengths(v) for k, v in self._data.items() if is_vla(v)}

    @property
    def feat_types(self) -> dict[str, str]:
        """Column → ``"categorical"`` (text and booleans) or ``"numerical"``."""
        out = {}
        for k, v in self._data.items():
            if is_byte_matrix(v):
                out[k] = "categorical"
            elif is_vla(v):
                out[k] = "numerical"
            else:
                out[k] = "categorical" if as_numpy(v).dtype.kind in "bUSO" else "numerical"
        return out

    @property
    def schema(self) -> dict[str, Any]:
        """``{"columns": [{"name", "dtype", "shape", "string", "vla"}], "string_columns",
        "vla_columns"}``."""
        cols = []
        strings = set(self.string_columns)
        for k, v in self._data.items():
            vla = is_vla(v)
            if vla:
                first = v[0] if isinstance(v, tuple) else next(x for x in v if x is not None)
                dtype = str(first.dtype).replace("torch.", "")
                shape: tuple = (column_length(v),)
            elif is_tensor(v) or isinstance(v, np.ndarray):
                dtype, shape = str(v.dtype).replace("torch.", ""), tuple(v.shape)
            else:
                arr = np.asarray(v)
                dtype, shape = str(arr.dtype), tuple(arr.shape)
            cols.append({"name": k, "dtype": dtype, "shape": shape, "string": k in strings,
                         "vla": vla})
        return {"columns": cols, "string_columns": [c["name"] for c in cols if c["string"]],
                "vla_columns": [c["name"] for c in cols if c["vla"]]}

    def to_tensor_dict(self) -> dict[str, Any]:
        """The columns that are torch tensors."""
        return {k: v for k, v in self._data.items() if is_tensor(v)}

    def read(self) -> dict[str, Any]:
        """Every column (a shallow copy of the dict), as writers take a table."""
        return dict(self._data)

    def get_string_column(self, name: str, encoding: str = "ascii", strip: bool = True) -> list[str]:
        """A ``uint8 (N, w)`` byte-matrix column as ``list[str]`` (KeyError for other columns)."""
        value = self._data.get(name)
        if value is None or not is_byte_matrix(value):
            raise KeyError(f"Column '{name}' is not a string (uint8 byte-matrix) column")
        return decode_byte_rows(value, encoding, strip, keep_padding=True)

    def get_vla_column(self, name: str) -> list[Any]:
        """A variable-length column (one array or tensor per row)."""
        value = self._data.get(name)
        if value is None or not isinstance(value, list):
            raise KeyError(f"Column '{name}' is not a variable-length column")
        return value

    def get_vla_lengths(self, name: str) -> list[int]:
        """Element counts of a variable-length column, per row."""
        return [column_length(v) for v in self.get_vla_column(name)]

    # -- functional updates (new objects) ------------------------------------------------------
    @staticmethod
    def _take(value: Any, index: Any) -> Any:
        """Rows ``index`` (a slice or a boolean NumPy mask) of one column."""
        if isinstance(index, slice):
            return value[index]
        if is_tensor(value):
            import torch

            return value[torch.from_numpy(index)]
        if isinstance(value, np.ndarray):
            return value[index]
        return [v for v, keep in zip(value, index) if keep]

    def head(self, n: int = 5) -> TableHDU:
        """The first ``n`` rows."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"head() takes a non-negative row count, not {n!r}")
        return self._derive({k: self._take(v, slice(0, int(n))) for k, v in self._data.items()})

    def select(self, cols: Any) -> TableHDU:
        """Only ``cols`` (in that order)."""
        names = _column_list(cols)
        missing = [c for c in names if c not in self._data]
        if missing:
            raise KeyError(f"Column '{missing[0]}' not found")
        return self._derive({c: self._data[c] for c in dict.fromkeys(names)})

    def filter(self, cond: str) -> TableHDU:
        """Rows matching a where-expression (the full dialect; character columns compare as
        stripped text)."""
        from ..query.where_compat import parse_where_expression, where_columns_from_ast
        from .where_eval import evaluate_where

        ast = parse_where_expression(cond)
        values: dict[str, Any] = {}
        for c in where_columns_from_ast(ast):
            if c in self._data:
                v = self._data[c]
                values[c] = np.array(decode_byte_rows(v, "ascii", True)) if is_byte_matrix(v) else v
        mask = np.asarray(evaluate_where(ast, values), dtype=bool)
        return self._derive({k: self._take(v, mask) for k, v in self._data.items()})

    def add_column(self, name: str, values: Any, overwrite: bool = False) -> TableHDU:
        """A new table with ``name`` added (or replaced with ``overwrite=True``)."""
        if name in self._data and not overwrite:
            raise KeyError(f"Column '{name}' already exists")
        n = column_length(values)
        if self._data and n != self.num_rows:
            raise ValueError(f"Column '{name}' has {n} rows, expected {self.num_rows}")
        data = dict(self._data)
        data[name] = values
        return self._derive(data)

    def rename_column(self, old: str, new: str) -> TableHDU:
        """A new table with column ``old`` called ``new`` (order kept)."""
        if old not in self._data:
            raise KeyError(f"Column '{old}' not found")
        if new != old and new in self._data:
            raise KeyError(f"Column '{new}' already exists")
        return self._derive({(new if k == old else k): v for k, v in self._data.items()})

    def drop_columns(self, cols: Any) -> TableHDU:
        """A new table without ``cols``."""
        names = _column_list(cols)
        missing = [c for c in names if c not in self._data]
        if missing:
            raise KeyError(f"Column '{missing[0]}' not found")
        return self._derive({k: v for k, v in self._data.items() if k not in names})

    def append_rows(self, rows: Mapping[str, Any]) -> TableHDU:
        """A new table with ``rows`` (a dict with exactly this table's columns) appended."""
        if not isinstance(rows, Mapping) or not rows:
            raise ValueError("rows must be a non-empty dictionary of columns")
        extra = sorted(set(rows) - set(self._data))
        missing = sorted(set(self._data) - set(rows))
        if extra or missing:
            raise KeyError(f"append_rows needs exactly the table's columns: extra={extra}, "
                           f"missing={missing}")
        lengths = {k: column_length(v) for k, v in rows.items()}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
            raise ValueError(f"All appended columns must have the same number of rows: {detail}")
        data: dict[str, Any] = {}
        for k, old in self._data.items():
            new = rows[k]
            if is_tensor(old):
                import torch

                data[k] = torch.cat([old, new if is_tensor(new) else torch.as_tensor(
                    np.asarray(new), dtype=old.dtype)])
            elif isinstance(old, np.ndarray):
                data[k] = np.concatenate([old, np.asarray(as_numpy(new), dtype=old.dtype)])
            else:
                data[k] = list(old) + list(new)
        return self._derive(data)

    def iter_rows(self, batch_size: int = 1000) -> Iterator[dict[str, Any]]:
        """Batches of ``batch_size`` rows as column dicts."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError("batch_size must be > 0")
        for a in range(0, self.num_rows, int(batch_size)):
            yield {k: self._take(v, slice(a, a + int(batch_size))) for k, v in self._data.items()}

    def materialize(self) -> TableHDU:
        """A new `TableHDU` over the same columns (already in memory)."""
        return self._derive(dict(self._data))

    def to_fits(self, path: Any, overwrite: bool = False) -> None:
        """Write an empty primary HDU and this table (``FileExistsError`` unless
        ``overwrite``)."""
        from ..writing.api import write

        write(path, dict(self._data), header=self._header, overwrite=overwrite)

    @classmethod
    def from_fits(cls, path: Any, hdu_index: Any = 1) -> TableHDU:
        """`torchfits.table.read_torch` of one table HDU, with its typed header."""
        data, header = _table().read_torch(path, hdu_index, return_header=True)
        return cls(data, header=header, source_path=path, source_hdu=hdu_index)

    def __repr__(self) -> str:
        return f"TableHDU(name={self.name!r}, rows={self.num_rows}, cols={len(self._data)})"

    def _repr_html_(self) -> str:
        """Class, escaped name, rows and columns as an HTML table (Jupyter)."""
        return html_summary("TableHDU", [("name", self.name), ("type", "table"),
                                         ("rows", self.num_rows), ("cols", len(self._data))])
