"""Arrow results → NumPy arrays → tensors, for the scanner's ``to_numpy``/``to_torch``, and →
pandas for every ``to_pandas``.

Fixed-size lists become N-D arrays without copying; torch is imported only in `numpy_to_torch`.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["array_to_numpy", "table_to_numpy", "numpy_to_torch", "arrow_to_pandas"]


def _fixed_shape(dtype: Any) -> tuple[tuple[int, ...], Any]:
    import pyarrow as pa

    shape = []
    while pa.types.is_fixed_size_list(dtype):
        shape.append(dtype.list_size)
        dtype = dtype.value_type
    return tuple(shape), dtype


def array_to_numpy(arr: Any) -> np.ndarray:
    """One Arrow column → NumPy (see `table_to_numpy` for the rules)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    typ = arr.type
    if pa.types.is_fixed_size_list(typ):
        shape, leaf_type = _fixed_shape(typ)
        flat = arr.flatten()
        for _ in shape[1:]:
            flat = flat.flatten()
        leaf = array_to_numpy(flat)
        out = leaf.reshape((len(arr),) + shape)
        if arr.null_count and out.dtype.kind == "f":
            out = out.copy()
            out[~np.asarray(arr.is_valid())] = np.nan
        return out
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return np.array(arr.to_pylist(), dtype=object if arr.null_count else str)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_binary(typ) \
            or pa.types.is_fixed_size_binary(typ):
        values = arr.to_pylist()
        out = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i] = None if v is None else (np.asarray(v) if isinstance(v, list) else v)
        return out
    if arr.null_count == 0:
        return arr.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(typ):
        return arr.fill_null(np.nan).to_numpy(zero_copy_only=False)
    mask = ~np.asarray(arr.is_valid())
    filled = arr.fill_null(False if pa.types.is_boolean(typ) else 0).to_numpy(zero_copy_only=False)
    return np.ma.MaskedArray(filled, mask=mask)


_ZERO_WIDTH_TFORM = re.compile(r"^\s*0+\s*[LXBIJKEDCM]\s*$")


def _zero_width_shape(field: Any) -> tuple[int, ...] | None:
    """The C-order cell shape of a zero-width column (TFORM ``0E``, read as a list of empty
    rows), or None for any other field."""
    import pyarrow as pa

    if not (pa.types.is_list(field.type) or pa.types.is_large_list(field.type)):
        return None
    meta = field.metadata or {}
    tform = meta.get(b"fits_tform", b"").decode("ascii", "replace")
    if not _ZERO_WIDTH_TFORM.match(tform):
        return None
    tdim = meta.get(b"fits_tdim", b"").decode("ascii", "replace").strip()
    if tdim.startswith("(") and tdim.endswith(")"):
        try:
            dims = tuple(int(d) for d in tdim[1:-1].split(","))
        except ValueError:
            dims = ()
        if dims and 0 in dims:
            return tuple(reversed(dims))
    return (0,)


def _empty_cells(arr: Any, shape: tuple[int, ...], value_type: Any) -> np.ndarray:
    inner, leaf = _fixed_shape(value_type)
    return np.empty((len(arr),) + shape + inner, dtype=leaf.to_pandas_dtype())


def table_to_numpy(table: Any) -> dict[str, np.ndarray]:
    """``{column: ndarray}``: fixed-size lists → (N, ...) arrays; float nulls → NaN; other
    nulls → masked arrays; strings → ``str`` arrays (object with nulls); lists → object arrays,
    except zero-width columns (``0E``), which are ``(N, 0)`` arrays as the fixed-width columns
    they are."""
    out = {}
    for field in table.schema:
        shape = _zero_width_shape(field)
        column = table.column(field.name)
        out[field.name] = array_to_numpy(column) if shape is None else \
            _empty_cells(column, shape, field.type.value_type)
    return out


def numpy_to_torch(columns: dict[str, np.ndarray], device: Any = "cpu", dtype: Any = None, *,
                   exclusive: bool = False) -> dict[str, Any]:
    """Numeric/bool columns → tensors (zero-copy on CPU); others raise with the column named.

    ``exclusive`` says the arrays view buffers nobody else holds (a table decoded just for this
    call): their read-only flag only reflects Arrow's export, so they are wrapped, not copied.
    """
    from .._torch_adapter import require_torch, to_tensor

    torch = require_torch()
    out = {}
    for name, arr in columns.items():
        if isinstance(arr, np.ma.MaskedArray):
            raise TypeError(f"column {name!r} has nulls, which tensors cannot hold: filter them "
                            "(where='... IS NOT NULL') or read with to_numpy()")
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"column {name!r} ({arr.dtype}) has no tensor form: leave it out of "
                            "columns= or read it with to_numpy()")
        arr = np.ascontiguousarray(arr)
        if exclusive and not arr.flags.writeable and device == "cpu":
            import warnings

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                t = torch.from_numpy(arr)
        else:
            t = to_tensor(arr, device)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out[name] = t
    return out


def _nullable_integer(arrow_type: Any) -> Any:
    import pandas as pd
    import pyarrow as pa

    if not pa.types.is_integer(arrow_type):
        return None
    return pd.api.types.pandas_dtype(str(arrow_type).replace("uint", "UInt").replace("int", "Int"))


def arrow_to_pandas(table: Any, **kwargs: Any) -> Any:
    """An Arrow Table or RecordBatch as a ``pandas.DataFrame``, with every integer column that
    holds a null as pandas' nullable integer dtype (``Int64`` with ``<NA>``).

    NumPy-backed pandas would give such a column as float64 with NaN, rounding values above
    2**53; the nullable dtype keeps every value exact. Columns without nulls keep their NumPy
    dtypes and float nulls stay NaN. ``kwargs`` go to pyarrow's ``to_pandas``; a
    ``types_mapper`` there decides first, and ``integer_object_nulls=True`` keeps pyarrow's
    object columns.
    """
    import pyarrow as pa

    positions = [i for i, (f, col) in enumerate(zip(table.schema, table.columns))
                 if pa.types.is_integer(f.type) and col.null_count]
    frame = table.to_pandas(**kwargs)
    if not positions or kwargs.get("integer_object_nulls"):
        return frame
    user = kwargs.get("types_mapper")

    def mapper(arrow_type: Any) -> Any:
        chosen = user(arrow_type) if user is not None else None
        return chosen if chosen is not None else _nullable_integer(arrow_type)

    same_layout = list(frame.columns) == list(table.schema.names)
    for i in positions:
        values = pa.chunked_array(table.column(i)).to_pandas(types_mapper=mapper).array
        if same_layout:
            frame.isetitem(i, values)
        elif table.schema.names[i] in frame.columns:  # pandas metadata moved columns to the index
            frame[table.schema.names[i]] = values
    return frame
