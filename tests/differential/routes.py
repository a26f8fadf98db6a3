"""Every torchfits table route, each returning ``{column: [canonical value per row]}`` (see
:func:`strategies.canon`), and the per-route rules that documented behaviour imposes."""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from .strategies import NAN, TableSpec, canon

Values = dict[str, list[Any]]


def validated(table: Any, what: str) -> Any:
    """Every Arrow array handed out must pass ``validate(full=True)`` (issue 23, item 13)."""
    for name, col in zip(table.column_names, table.columns):
        for chunk in col.chunks:
            try:
                chunk.validate(full=True)
            except Exception as exc:  # pragma: no cover - a finding
                raise AssertionError(f"{what}: column {name!r} is malformed Arrow: {exc}") from exc
    return table


def from_arrow(table: Any, what: str) -> Values:
    validated(table, what)
    return {name: [canon(v) for v in col.to_pylist()]
            for name, col in zip(table.column_names, table.columns)}


def from_pandas(df: Any) -> Values:
    return {str(name): [canon(v) for v in df[name].tolist()] for name in df.columns}


def arrow_scan(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    return from_arrow(torchfits.scan(path, 1, columns=list(columns)).to_arrow(), "scan")


def arrow_row_slice(path: Path, columns: Sequence[str]) -> Values:
    """Columns in reverse order, the rows from the second on: projection and row selection must
    not change a value."""
    import torchfits

    table = torchfits.scan(path, 1, columns=list(columns)[::-1], row_slice=slice(1, None))
    return from_arrow(table.to_arrow(), "scan(row_slice)")


def arrow_rows(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    n = torchfits.read_nrows(str(path), 1)
    table = torchfits.scan(path, 1, columns=list(columns), rows=list(range(0, n, 2)))
    return from_arrow(table.to_arrow(), "scan(rows)")


def arrow_batches(path: Path, columns: Sequence[str]) -> Values:
    import pyarrow as pa

    import torchfits

    sc = torchfits.scan(path, 1, columns=list(columns), batch_size=2)
    batches = list(sc.to_batches())
    table = pa.Table.from_batches(batches, schema=sc.schema) if batches else sc.to_arrow()
    return from_arrow(table, "scan.to_batches")


def arrow_dataset(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    return from_arrow(torchfits.dataset(path, 1).to_table(columns=list(columns)), "dataset")


def duckdb_sql(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    select = ", ".join(f'"{c}"' for c in columns)
    rel = torchfits.sql(f"SELECT {select} FROM '{path}'")
    return from_arrow(rel.to_arrow_table(), "sql")


def polars_scan(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    frame = torchfits.scan_polars(path, 1).select(list(columns)).collect()
    return from_arrow(frame.to_arrow(), "scan_polars")


def pandas_scan(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    return from_pandas(torchfits.scan(path, 1, columns=list(columns)).to_pandas())


def compat_table_read(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    return from_arrow(torchfits.table.read(path, 1, columns=list(columns)), "table.read")


def compat_to_astropy(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    return from_astropy_table(torchfits.table.to_astropy(path, hdu=1, columns=list(columns)))


def dask_table(path: Path, columns: Sequence[str]) -> Values:
    import torchfits.dask

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return from_pandas(torchfits.dask.read_table(path, 1, columns=list(columns)).compute())


def cli_parquet(path: Path, columns: Sequence[str]) -> Values:
    import pyarrow.parquet as pq

    from torchfits.cli.main import main

    out = Path(path).with_suffix(".parquet")
    rc = main(["convert", str(path), str(out), "--overwrite", "-e", "1",
               "-c", ",".join(columns)])
    assert rc == 0, f"torchfits convert {path} {out} exited {rc}"
    return from_arrow(pq.read_table(out), "CLI convert parquet")


def cli_arrow(path: Path, columns: Sequence[str]) -> Values:
    import pyarrow as pa

    from torchfits.cli.main import main

    out = Path(path).with_suffix(".arrow")
    rc = main(["convert", str(path), str(out), "--overwrite", "-e", "1",
               "-c", ",".join(columns)])
    assert rc == 0, f"torchfits convert {path} {out} exited {rc}"
    data = out.read_bytes()
    try:
        table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except pa.ArrowInvalid:
        table = pa.ipc.open_stream(pa.BufferReader(data)).read_all()
    return from_arrow(table, "CLI convert arrow")


def _torch_rows(rows: list[dict[str, Any]], columns: Sequence[str]) -> Values:
    return {c: [canon(r[c].numpy()) for r in rows] for c in columns}


def torch_map(path: Path, columns: Sequence[str]) -> Values:
    from torchfits.data import FitsTableDataset

    ds = FitsTableDataset(path, 1, columns=list(columns))
    return _torch_rows([ds[i][0] for i in range(len(ds))], columns)


def torch_iterable(path: Path, columns: Sequence[str]) -> Values:
    from torchfits.data import FitsTableIterableDataset

    return _torch_rows(list(FitsTableIterableDataset(path, 1, columns=list(columns))), columns)


def torch_batches(path: Path, columns: Sequence[str]) -> Values:
    from torchfits.data import FitsTableIterableDataset

    out: Values = {c: [] for c in columns}
    for batch in FitsTableIterableDataset(path, 1, columns=list(columns), batch_size=2,
                                          as_batches=True):
        assert set(batch) == set(columns), (
            f"as_batches gave columns {sorted(batch)} for {list(columns)}")
        for c in columns:
            value = batch[c]
            if isinstance(value, list):  # variable-length columns: one tensor per row
                out[c].extend(canon(v.numpy()) for v in value)
            else:
                out[c].extend(canon(value.numpy()))
    return out


def compat_read_tensors(path: Path, columns: Sequence[str]) -> Values:
    import torchfits

    data = torchfits.read(str(path), 1, columns=list(columns))
    if not data and torchfits.read_nrows(str(path), 1) == 0:
        return {name: [] for name in columns}  # a zero-row table reads as {}, as in 1.2.3
    out: Values = {}
    for name in columns:
        value = data[name]
        if isinstance(value, list):  # variable-length columns: one tensor per row
            out[name] = [canon(v.numpy()) for v in value]
        else:
            out[name] = [canon(v) for v in value.numpy()]
    return out


def from_astropy_table(t: Any) -> Values:
    out: Values = {}
    for name in t.colnames:
        col = t[name]
        vals = []
        for i in range(len(col)):
            v = col[i]
            if isinstance(v, np.ma.MaskedArray) and v.ndim:
                vals.append(canon(v.tolist()))
            elif np.ma.is_masked(v):
                vals.append(None)
            else:
                vals.append(canon(v))
        out[name] = vals
    return out


def astropy_oracle(path: Path) -> Values:
    """astropy's ``Table.read`` (TNULL cells masked, NaN and empty strings kept)."""
    from astropy.table import Table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_astropy_table(Table.read(path, hdu=1, mask_invalid=False))


def fitsio_oracle(path: Path) -> Values:
    """fitsio's read (no null handling: TNULL cells are the stored sentinel)."""
    import fitsio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Max size is zero" for empty variable-length columns
        data = fitsio.read(str(path), ext=1, vstorage="object")
    if data is None:
        return {}
    return {name: [canon(data[name][i]) for i in range(len(data))] for name in data.dtype.names}


#: name → (reader, applies(spec column) -> bool, rule(spec column, expected values) -> values)
Route = tuple[Callable[[Path, Sequence[str]], Values], Callable[[Any], bool],
              Optional[Callable[[Any, list[Any]], list[Any]]]]


def _null_nan(col: Any, values: list[Any]) -> list[Any]:
    """NumPy-backed pandas has no integer null: an integer column with nulls reads as float64
    with NaN (pandas' own rule), and so do the null elements of integer vector cells."""
    if col.tnull is None or col.kind != "int":
        return values

    def fix(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(fix(x) for x in v)
        return NAN if v is None else float(v)  # int64 above 2**53 rounds: finding H8-H
    return [fix(v) for v in values]


def _null_nan_elements(col: Any, values: list[Any]) -> list[Any]:
    """pandas (and Dask's partitions) keep scalar integer nulls as nullable Int (<NA>), and give
    the null elements of integer vector cells as NaN in float arrays."""
    return _null_nan(col, values) if col.is_vector else values


def _as_float_uint64(col: Any, values: list[Any]) -> list[Any]:
    """uint64 (``K`` with TZERO = 2^63) becomes float64 where the result cannot hold uint64:
    the 1.x mapping (docs/compatibility.md) and torch rows."""
    if not (col.kind == "uint" and col.code == "K"):
        return values

    def fix(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(fix(x) for x in v)
        return None if v is None else float(v)
    return [fix(v) for v in values]


def _flat(v: Any) -> Any:
    if isinstance(v, tuple) and v and isinstance(v[0], tuple):
        return tuple(x for part in v for x in _flat(part))
    return v


def _compat(col: Any, values: list[Any]) -> list[Any]:
    """The 1.x mapping: uint64 as float64, and TDIM cells as flat vectors (1.2.3 gave them flat)."""
    values = _as_float_uint64(col, values)
    if col.dim is not None:
        values = [_flat(v) for v in values]
    return values


def _compat_takes(col: Any) -> bool:
    """The 1.x mapping refuses complex columns in Arrow (read_torch takes them); a one-bit ``1X``
    column is a scalar there, as in 1.2.3 (docs/compatibility.md, test_regressions.py)."""
    return col.kind != "complex" and col.tform != "1X"


def _compat_tensors(col: Any, values: list[Any]) -> list[Any]:
    """The 1.x tensor read: the 1.x mapping, and integer nulls as the TNULL value (1.x kept the
    stored sentinel, docs/compatibility.md)."""
    values = _compat(col, values)

    def fix(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(fix(x) for x in v)
        return col.tnull if v is None else v
    return [fix(v) for v in values] if col.tnull is not None else values


def _batch_rule(col: Any, values: list[Any]) -> list[Any]:
    """Batches hold uint64 as uint64 tensors, variable-length columns (lists of tensors) as they
    are."""
    return values


def _has_nan(col: Any) -> bool:
    def any_nan(v: Any) -> bool:
        return v == NAN or (isinstance(v, tuple) and any(any_nan(x) for x in v))
    return any(any_nan(v) for v in col.values)


def _has_null(col: Any) -> bool:
    def any_none(v: Any) -> bool:
        return v is None or (isinstance(v, tuple) and any(any_none(x) for x in v))
    return any(any_none(v) for v in col.values)


def _mask_invalid(col: Any, values: list[Any]) -> list[Any]:
    """``table.to_astropy`` masks NaN floats and empty strings (docs/compatibility.md), in scalar
    and fixed-shape vector columns, as ``Table.read`` does; variable-length columns are object
    columns there, which ``Table.read`` leaves as read: their NaN elements stay NaN (H25-A)."""
    if col.kind == "vla":
        return values

    def fix(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(fix(x) for x in v)
        if v == NAN or (col.kind == "str" and v == ""):
            return None
        return v
    return [fix(v) for v in values]


def _tensor_rows(col: Any) -> bool:
    """Columns the torch datasets take here: strings are bytes tensors (not compared), integer
    nulls raise (test_torch_routes_refuse_integer_nulls)."""
    return col.kind != "str" and not _has_null(col)


ROUTES: dict[str, Route] = {
    "scan.to_arrow": (arrow_scan, lambda c: True, None),
    "scan.to_batches": (arrow_batches, lambda c: True, None),
    "scan(row_slice=1:)": (arrow_row_slice, lambda c: True, lambda c, v: v[1:]),
    "scan(rows=every other)": (arrow_rows, lambda c: True, lambda c, v: v[::2]),
    "dataset.to_table": (arrow_dataset, lambda c: True, None),
    "sql": (duckdb_sql, lambda c: True, None),
    "scan_polars": (polars_scan, lambda c: True, None),
    "scan.to_pandas": (pandas_scan, lambda c: True, _null_nan_elements),
    "table.read (1.x)": (compat_table_read, lambda c: _compat_takes(c), _compat),
    "table.to_astropy (1.x)": (compat_to_astropy,
                               lambda c: _compat_takes(c),
                               lambda c, v: _mask_invalid(c, _compat(c, v))),
    "read (1.x tensors)": (compat_read_tensors, lambda c: c.kind != "str" and c.tform != "1X",
                           _compat_tensors),
    "dask.read_table": (dask_table, lambda c: True, _null_nan_elements),
    "CLI convert parquet": (cli_parquet, lambda c: True, None),
    "CLI convert arrow": (cli_arrow, lambda c: True, None),
    "FitsTableDataset": (torch_map, _tensor_rows, _as_float_uint64),
    "FitsTableIterableDataset": (torch_iterable, _tensor_rows, _as_float_uint64),
    "FitsTableIterableDataset(as_batches)": (torch_batches, _tensor_rows, _batch_rule),
}


def expected_for(spec: TableSpec, route: str) -> tuple[list[str], Values]:
    """The columns ``route`` is asked for and the values it must give."""
    _, applies, rule = ROUTES[route]
    cols = [c for c in spec.columns if applies(c)]
    return [c.name for c in cols], {
        c.name: (rule(c, c.values) if rule else c.values) for c in cols}
